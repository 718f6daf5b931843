import Foundation
import OutpostCore
import OutpostStorage

/// Draws a geodatabase's layers into images: polygons filled with an outline, lines stroked,
/// points as circles, anti-aliased, each layer in its own colour (layer order: polygons first,
/// then lines, then points, so nothing is hidden). Features stream from the R-tree query of the
/// area drawn; nothing else is held.
public struct MapRenderer: Sendable {
    public let geodatabase: Geodatabase
    public var background: RGBA

    static let palette: [RGBA] = [
        RGBA(31, 119, 180), RGBA(214, 39, 40), RGBA(44, 160, 44), RGBA(255, 127, 14), RGBA(148, 103, 189), RGBA(140, 86, 75), RGBA(227, 119, 194),
        RGBA(23, 190, 207),
    ]

    public init(geodatabase: Geodatabase, background: RGBA = RGBA(242, 239, 233)) {
        self.geodatabase = geodatabase
        self.background = background
    }

    /// The union of the spatial layers' extents, in Web Mercator.
    public func extent() async throws -> Envelope? {
        var builder = Envelope.Builder()
        for layer in geodatabase.schema.layers where layer.isSpatial {
            guard let e = try await geodatabase.table(id: layer.id).extent() else { continue }
            builder.add(try WebMercator.convert(e, from: layer.spatialReference ?? geodatabase.schema.spatialReference, to: .webMercator))
        }
        return builder.envelope
    }

    /// RGBA pixels of `envelope` (Web Mercator) drawn at `width`×`height`.
    public func render(envelope: Envelope, width: Int, height: Int) async throws -> [UInt8] {
        let gdb = geodatabase
        let background = background
        return try await gdb.read { conn in
            var canvas = Canvas(width: width, height: height, background: background)
            let sx = Double(width) / (envelope.xmax - envelope.xmin), sy = Double(height) / (envelope.ymax - envelope.ymin)
            func pixel(_ p: Position) -> Canvas.Point { ((p.x - envelope.xmin) * sx, (envelope.ymax - p.y) * sy) }
            // A margin of a few pixels, so strokes and symbols of features just outside show.
            let margin = 8 / min(sx, sy)
            let area = Envelope(xmin: envelope.xmin - margin, ymin: envelope.ymin - margin, xmax: envelope.xmax + margin, ymax: envelope.ymax + margin)
            let layers = conn.geodatabase.schema.layers.enumerated().filter { $0.element.isSpatial }
            let order: (GeometryType?) -> Int = { type in
                switch type {
                case .polygon?, .multiPolygon?: 0
                case .lineString?, .multiLineString?: 1
                default: 2
                }
            }
            for (index, layer) in layers.sorted(by: { order($0.element.geometryType?.type) < order($1.element.geometryType?.type) }) {
                let color = Self.palette[index % Self.palette.count]
                let layerSR = layer.spatialReference ?? conn.geodatabase.schema.spatialReference
                var query = FeatureQuery()
                query.envelope = try WebMercator.convert(area, from: .webMercator, to: layerSR)
                query.outFields = [layer.objectIDField]
                try conn.geodatabase.table(id: layer.id).forEach(matching: query, in: conn) { feature in
                    guard let g = feature.geometry, let projected = try? WebMercator.convert(g, from: layerSR, to: .webMercator) else { return }
                    Self.draw(projected, color: color, on: &canvas, pixel)
                }
            }
            return canvas.pixels
        }
    }

    static func draw(_ g: Geometry, color: RGBA, on canvas: inout Canvas, _ pixel: (Position) -> Canvas.Point) {
        switch g {
        case .point(let p):
            guard let position = p.position else { return }
            let c = pixel(position)
            canvas.fill([Canvas.circle(c, radius: 4.5)], color: color.darker())
            canvas.fill([Canvas.circle(c, radius: 3.5)], color: color)
        case .multiPoint(let m):
            for p in m.points { draw(.point(p), color: color, on: &canvas, pixel) }
        case .lineString(let l):
            canvas.stroke(l.positions.map(pixel), width: 2, color: color)
        case .multiLineString(let m):
            for l in m.lineStrings { canvas.stroke(l.positions.map(pixel), width: 2, color: color) }
        case .polygon(let p):
            // Exterior rings one way, holes the other, whatever the file's orientation.
            let rings = p.rings.enumerated().map { i, ring -> [Canvas.Point] in
                let points = ring.map(pixel)
                let ccw = Canvas.counterClockwise(points)
                return i == 0 ? ccw : ccw.reversed()
            }
            canvas.fill(rings, color: color.withAlpha(110))
            for ring in rings { canvas.stroke(ring + [ring[0]], width: 1.2, color: color.darker(0.75)) }
        case .multiPolygon(let m):
            for p in m.polygons { draw(.polygon(p), color: color, on: &canvas, pixel) }
        case .geometryCollection(let c):
            for part in c.geometries { draw(part, color: color, on: &canvas, pixel) }
        }
    }

    /// A PNG tile of `scheme`.
    public func tile(_ key: TileKey, scheme: TilingScheme = .webMercator, level zlibLevel: Int32 = 6) async throws -> [UInt8] {
        guard let envelope = scheme.envelope(of: key) else { throw TileCacheError(.invalidArea, "the tiling scheme has no level \(key.level)", tile: key) }
        let pixels = try await render(envelope: envelope, width: scheme.tileSize, height: scheme.tileSize)
        return try PNGEncoder.encode(pixels: pixels, width: scheme.tileSize, height: scheme.tileSize, level: zlibLevel)
    }
}

/// Tiles drawn from a geodatabase (for exports and for MapServers of feature services).
public struct GeodatabaseRenderSource: TileSource {
    public let renderer: MapRenderer
    public var maxLevel: Int

    public init(geodatabase: Geodatabase, maxLevel: Int = 20) {
        renderer = MapRenderer(geodatabase: geodatabase)
        self.maxLevel = maxLevel
    }

    public var label: String { renderer.geodatabase.url.lastPathComponent }

    public func cacheInfo() async throws -> TileCacheInfo {
        TileCacheInfo(
            name: renderer.geodatabase.url.deletingPathExtension().lastPathComponent, scheme: .webMercator, minLevel: 0, maxLevel: maxLevel, format: "PNG",
            fullExtent: try await renderer.extent())
    }

    public func tile(_ key: TileKey) async throws -> [UInt8]? { try await renderer.tile(key) }
}
