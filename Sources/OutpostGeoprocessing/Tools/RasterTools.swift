import Foundation
import OutpostCore

/// IDW: a surface interpolated from point values by inverse distance weighting, written as a
/// GeoTIFF. Each cell's value is Σ wᵢzᵢ / Σ wᵢ with wᵢ = 1/dᵢ^power over the `Number_Of_Points`
/// nearest points to the cell's centre (all points when 0); a cell centre on a point takes the
/// point's value. The grid covers the points' extent from its north-west corner, cells of
/// `Cell_Size` (default: the shorter side of the extent / 250) in the points' system.
public struct IDWTool: GPTool {
    public static let name = "IDW"
    public static let summary = "A raster interpolated from point values by inverse distance weighting."
    public static let parameters: [GPParameterInfo] = [
        GPParameterInfo(name: "In_Features", dataType: .featureRecordSetLayer, displayName: "Input Point Features"),
        GPParameterInfo(name: "Z_Field", dataType: .string, displayName: "Z Value Field"),
        GPParameterInfo(name: "Cell_Size", dataType: .double, kind: .optional, displayName: "Output Cell Size"),
        GPParameterInfo(name: "Power", dataType: .double, kind: .optional, displayName: "Power", defaultValue: .double(2)),
        GPParameterInfo(name: "Number_Of_Points", dataType: .long, kind: .optional, displayName: "Number of Points", defaultValue: .long(12)),
        GPParameterInfo(name: "Output_Raster", dataType: .rasterDataLayer, direction: .output, kind: .derived, displayName: "Output Raster"),
    ]

    /// Most cells a surface may have.
    public static let maximumCells = 25_000_000

    /// The tool.
    public init() {}

    public func run(_ inputs: [String: GPValue], context: GPToolContext) async throws -> [String: GPValue] {
        let input = try ToolInputs.features(inputs, "In_Features")
        guard let field = ToolInputs.string(inputs, "Z_Field") else { throw GPValueError(parameter: "Z_Field", "is required") }
        guard input.fields.contains(where: { $0.name == field }) else { throw GPValueError(parameter: "Z_Field", "the input has no field \(field)") }
        var points: [(x: Double, y: Double, z: Double)] = []
        for feature in input.features {
            guard case .point(let p)? = feature.geometry, let position = p.position, let z = feature.attributes[field]?.doubleValue else { continue }
            points.append((position.x, position.y, z))
        }
        guard points.count >= 1 else { throw GPValueError(parameter: "In_Features", "no point has a numeric \(field)") }
        let power: Double = if case .double(let p)? = inputs["Power"] { p } else { 2 }
        guard power > 0, power <= 10 else { throw GPValueError(parameter: "Power", "must be between 0 and 10") }
        var k = points.count
        if case .long(let n)? = inputs["Number_Of_Points"], n > 0 { k = min(Int(n), points.count) }
        let xmin = points.map(\.x).min()!, xmax = points.map(\.x).max()!, ymin = points.map(\.y).min()!, ymax = points.map(\.y).max()!
        var cell = min(xmax - xmin, ymax - ymin) / 250
        if case .double(let c)? = inputs["Cell_Size"] { cell = c }
        guard cell > 0, cell.isFinite else { throw GPValueError(parameter: "Cell_Size", "must be positive (the points span no area; give a cell size)") }
        let width = max(1, Int(((xmax - xmin) / cell).rounded(.up))), height = max(1, Int(((ymax - ymin) / cell).rounded(.up)))
        guard width * height <= Self.maximumCells else {
            throw GPValueError(parameter: "Cell_Size", "\(width)×\(height) cells are more than the \(Self.maximumCells) allowed; give a larger cell size")
        }
        var raster = GPRaster(
            width: width, height: height, xmin: xmin, ymax: ymax, cellSize: cell, spatialReference: input.spatialReference ?? .wgs84, noData: nil,
            values: [Double](repeating: 0, count: width * height))
        var nearest = [(d2: Double, z: Double)]()
        nearest.reserveCapacity(k + 1)
        for row in 0..<height {
            if row % 256 == 0, row > 0 { context.message("Interpolated \(row) of \(height) rows") }
            for column in 0..<width {
                // Every cell: with every point used, one cell is thousands of distances, and a
                // row of a large grid takes longer than a cancel may wait (docs/geoprocessing.md).
                try context.checkCancellation()
                let c = raster.centre(row: row, column: column)
                nearest.removeAll(keepingCapacity: true)
                var exact: Double?
                for p in points {
                    let dx = p.x - c.x, dy = p.y - c.y
                    let d2 = dx * dx + dy * dy
                    if d2 == 0 {
                        exact = p.z
                        break
                    }
                    // The k nearest, kept sorted by distance.
                    if nearest.count == k, d2 >= nearest[k - 1].d2 { continue }
                    var i = nearest.count
                    while i > 0, nearest[i - 1].d2 > d2 { i -= 1 }
                    nearest.insert((d2, p.z), at: i)
                    if nearest.count > k { nearest.removeLast() }
                }
                if let exact {
                    raster.values[row * width + column] = exact
                    continue
                }
                var weighted = 0.0, weights = 0.0
                for n in nearest {
                    let w = 1 / Foundation.pow(n.d2, power / 2)
                    weighted += w * n.z
                    weights += w
                }
                raster.values[row * width + column] = weighted / weights
            }
        }
        let file = try context.outputFile("idw-\(UUID().uuidString.prefix(8).lowercased()).tif")
        try GeoTIFF.write(raster, to: file)
        context.message("Interpolated \(points.count) points onto \(width)×\(height) cells of \(cell)")
        return ["Output_Raster": .rasterDataLayer(GPFileReference(url: file.absoluteString, format: "tif"))]
    }
}

/// Contour: lines of equal value through a raster, every `Contour_Interval` from
/// `Base_Contour`, traced between cell centres by marching squares (a saddle resolved by the
/// mean of its four corners), the segments of each level joined into lines by GEOS. Each line
/// carries its value in `Contour`.
public struct ContourTool: GPTool {
    public static let name = "Contour"
    public static let summary = "Lines of equal value through a raster."
    public static let parameters: [GPParameterInfo] = [
        GPParameterInfo(name: "In_Raster", dataType: .rasterDataLayer, displayName: "Input Raster"),
        GPParameterInfo(name: "Contour_Interval", dataType: .double, displayName: "Contour Interval"),
        GPParameterInfo(name: "Base_Contour", dataType: .double, kind: .optional, displayName: "Base Contour", defaultValue: .double(0)),
        GPParameterInfo(name: "Output_Features", dataType: .featureRecordSetLayer, direction: .output, kind: .derived, displayName: "Output Polyline Features"),
    ]

    /// Most contour levels one run may trace.
    public static let maximumLevels = 10_000

    /// The tool.
    public init() {}

    public func run(_ inputs: [String: GPValue], context: GPToolContext) async throws -> [String: GPValue] {
        guard case .rasterDataLayer(let reference)? = inputs["In_Raster"], let text = reference.url, let url = URL(string: text), url.isFileURL else {
            throw GPValueError(parameter: "In_Raster", "give a GeoTIFF as {\"url\": …} or an uploaded {\"itemID\": …}")
        }
        let raster: GPRaster
        do {
            raster = try GeoTIFF.read(url)
        } catch let error as GeoTIFFError {
            throw GPValueError(parameter: "In_Raster", error.description)
        }
        guard case .double(let interval)? = inputs["Contour_Interval"], interval > 0, interval.isFinite else {
            throw GPValueError(parameter: "Contour_Interval", "must be a positive number")
        }
        let base: Double = if case .double(let b)? = inputs["Base_Contour"] { b } else { 0 }
        let valid = raster.values.filter { $0.isFinite && $0 != raster.noData }
        guard let low = valid.min(), let high = valid.max() else { throw GPValueError(parameter: "In_Raster", "the raster has no data") }
        let first = ((low - base) / interval).rounded(.up), last = ((high - base) / interval).rounded(.down)
        guard last - first < Double(Self.maximumLevels) else {
            throw GPValueError(parameter: "Contour_Interval", "\(Int(last - first + 1)) levels are more than \(Self.maximumLevels); give a larger interval")
        }
        let engine = GeometryEngine()
        var features: [GPFeatureSet.Feature] = []
        if first <= last {
            for step in Int(first)...Int(last) {
                try context.checkCancellation()
                let level = base + Double(step) * interval
                let segments = try Self.segments(raster, level: level)
                guard !segments.isEmpty else { continue }
                let lines = try MultiLineString(segments.map { try LineString([$0.0, $0.1]) })
                guard let merged = try engine.lineMerge(.multiLineString(lines)) else { continue }
                var parts: [Geometry] = []
                switch merged {
                case .multiLineString(let m): parts = m.lineStrings.map { Geometry.lineString($0) }
                default: parts = [merged]
                }
                for part in parts { features.append(.init(geometry: part, attributes: ["OBJECTID": .integer(Int64(features.count + 1)), "Contour": .number(level)])) }
            }
        }
        context.message("Traced \(features.count) contour lines from \(low) to \(high) every \(interval)")
        return [
            "Output_Features": .featureSet(
                GPFeatureSet(
                    geometryType: "esriGeometryPolyline", spatialReference: raster.spatialReference,
                    fields: [GPField(name: "OBJECTID", type: "esriFieldTypeOID"), GPField(name: "Contour", type: "esriFieldTypeDouble")], features: features))
        ]
    }

    /// The crossing segments of one level, square by square between cell centres. The grid is
    /// padded with a ring of points on the raster's outer edge carrying the nearest cell's
    /// value, so lines run on to the edge of the raster (as `gdal_contour` draws them) instead
    /// of stopping half a cell short.
    static func segments(_ r: GPRaster, level: Double) throws -> [(Position, Position)] {
        var out: [(Position, Position)] = []
        func usable(_ v: Double) -> Bool { v.isFinite && v != r.noData }
        // Padded indices run from -1 to width (columns) and -1 to height (rows).
        func value(_ row: Int, _ column: Int) -> Double { r[min(max(row, 0), r.height - 1), min(max(column, 0), r.width - 1)] }
        func point(_ row: Int, _ column: Int) -> Position {
            let x = column < 0 ? r.xmin : column >= r.width ? r.xmin + Double(r.width) * r.cellSize : r.xmin + (Double(column) + 0.5) * r.cellSize
            let y = row < 0 ? r.ymax : row >= r.height ? r.ymax - Double(r.height) * r.cellSize : r.ymax - (Double(row) + 0.5) * r.cellSize
            return Position(x: x, y: y)
        }
        for row in -1..<r.height {
            try Task.checkCancellation()
            for column in -1..<r.width {
                let tl = value(row, column), tr = value(row, column + 1), br = value(row + 1, column + 1), bl = value(row + 1, column)
                guard usable(tl), usable(tr), usable(br), usable(bl) else { continue }
                let ptl = point(row, column), ptr = point(row, column + 1), pbr = point(row + 1, column + 1), pbl = point(row + 1, column)
                // A corner is "above" at or over the level.
                let index = (tl >= level ? 8 : 0) | (tr >= level ? 4 : 0) | (br >= level ? 2 : 0) | (bl >= level ? 1 : 0)
                if index == 0 || index == 15 { continue }
                func cross(_ a: Position, _ va: Double, _ b: Position, _ vb: Double) -> Position {
                    let t = (level - va) / (vb - va)
                    return Position(x: a.x + t * (b.x - a.x), y: a.y + t * (b.y - a.y))
                }
                let top = cross(ptl, tl, ptr, tr), right = cross(ptr, tr, pbr, br), bottom = cross(pbl, bl, pbr, br), left = cross(ptl, tl, pbl, bl)
                switch index {
                case 1, 14: out.append((left, bottom))
                case 2, 13: out.append((bottom, right))
                case 3, 12: out.append((left, right))
                case 4, 11: out.append((top, right))
                case 6, 9: out.append((top, bottom))
                case 7, 8: out.append((left, top))
                case 5, 10:
                    // A saddle: the centre's mean decides which corners connect.
                    let centreAbove = (tl + tr + br + bl) / 4 >= level
                    if (index == 5) == centreAbove {
                        out.append((left, top))
                        out.append((bottom, right))
                    } else {
                        out.append((left, bottom))
                        out.append((top, right))
                    }
                default: break
                }
            }
        }
        return out
    }
}
