import Foundation
import OutpostCore
import OutpostStorage

/// Draws a geodatabase's layers into images: polygons filled with an outline, lines stroked,
/// points as circles, anti-aliased, each layer in its own colour (layer order: polygons first,
/// then lines, then points, so nothing is hidden). Features stream from the R-tree query of the
/// area drawn; nothing else is held. Rows whose geometry cannot be decoded are passed over.
public struct MapRenderer: Sendable {
    /// The geodatabase drawn.
    public let geodatabase: Geodatabase
    /// The colour under the layers.
    public var background: RGBA

    /// The colours layers are drawn in, by their position among the schema's layers.
    public static let palette: [RGBA] = [
        RGBA(31, 119, 180), RGBA(214, 39, 40), RGBA(44, 160, 44), RGBA(255, 127, 14), RGBA(148, 103, 189), RGBA(140, 86, 75), RGBA(227, 119, 194),
        RGBA(23, 190, 207),
    ]

    /// A renderer of `geodatabase` on `background`.
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

    /// The colour a layer is drawn in (by its position among the schema's layers).
    public func color(ofLayer id: Int) -> RGBA? {
        geodatabase.schema.layers.firstIndex { $0.id == id }.map { Self.palette[$0 % Self.palette.count] }
    }

    /// A PNG legend swatch of a layer's symbol: a circle, a line or a filled square, as drawn.
    public func swatch(ofLayer id: Int, size: Int = 20) throws -> [UInt8] {
        guard let layer = geodatabase.schema.layer(id: id), let color = color(ofLayer: id), let type = layer.geometryType?.type else {
            throw TileCacheError(.invalidArea, "layer \(id) is not drawn")
        }
        var canvas = Canvas(width: size, height: size, background: RGBA(0, 0, 0, 0))
        let s = Double(size)
        let sample: Geometry
        switch type {
        case .point, .multiPoint: sample = .point(try Point(x: s / 2, y: s / 2))
        case .lineString, .multiLineString: sample = .lineString(try LineString([Position(x: 2, y: s - 4), Position(x: s / 2, y: 5), Position(x: s - 2, y: s - 6)]))
        default: sample = .polygon(try Polygon(rings: [[Position(x: 2, y: 2), Position(x: s - 2, y: 2), Position(x: s - 2, y: s - 2), Position(x: 2, y: s - 2), Position(x: 2, y: 2)]]))
        }
        Self.draw(sample, color: color, on: &canvas) { ($0.x, $0.y) }
        return try PNGEncoder.encode(pixels: canvas.pixels, width: size, height: size)
    }

    /// RGBA pixels of `envelope` (Web Mercator) drawn at `width`×`height`: every spatial layer,
    /// or those of `layers`; on the background colour, or transparent.
    public func render(envelope: Envelope, width: Int, height: Int, layers shown: Set<Int>? = nil, transparent: Bool = false) async throws -> [UInt8] {
        let gdb = geodatabase
        let background = transparent ? RGBA(0, 0, 0, 0) : background
        return try await gdb.read { conn in
            var canvas = Canvas(width: width, height: height, background: background)
            let sx = Double(width) / (envelope.xmax - envelope.xmin), sy = Double(height) / (envelope.ymax - envelope.ymin)
            func pixel(_ p: Position) -> Canvas.Point { ((p.x - envelope.xmin) * sx, (envelope.ymax - p.y) * sy) }
            // A margin of a few pixels, so strokes and symbols of features just outside show.
            let margin = 8 / min(sx, sy)
            let area = Envelope(xmin: envelope.xmin - margin, ymin: envelope.ymin - margin, xmax: envelope.xmax + margin, ymax: envelope.ymax + margin)
            let layers = conn.geodatabase.schema.layers.enumerated().filter { entry in
                entry.element.isSpatial && (shown?.contains(entry.element.id) ?? true)
            }
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
                // A row whose geometry cannot be decoded (another writer's degenerate ring) cannot
                // be drawn; the rest of the layer is.
                try conn.geodatabase.table(id: layer.id).forEach(matching: query, in: conn, unreadable: { _, _ in }) { feature in
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

    /// A tile of `scheme`: a PNG in the smallest lossless form (`PNGEncoder.encodeTile`; rendered
    /// maps usually have few enough colours for an indexed image), or, with `jpegQuality`, a JPEG
    /// when the tile is opaque (as basemaps on a background colour are).
    public func tile(_ key: TileKey, scheme: TilingScheme = .webMercator, level zlibLevel: Int32 = 6, jpegQuality: Int? = nil) async throws -> [UInt8] {
        guard let envelope = scheme.envelope(of: key) else { throw TileCacheError(.invalidArea, "the tiling scheme has no level \(key.level)", tile: key) }
        let size = scheme.tileSize
        let pixels = try await render(envelope: envelope, width: size, height: size)
        if let jpegQuality, Palette.isOpaque(pixels) { return try JPEGCodec.encode(rgba: pixels, width: size, height: size, quality: jpegQuality) }
        return try PNGEncoder.encodeTile(rgba: pixels, width: size, height: size, level: zlibLevel)
    }
}

/// Tiles drawn from a geodatabase (for exports and for MapServers of feature services).
public struct GeodatabaseRenderSource: TileSource {
    /// The renderer that draws the tiles.
    public let renderer: MapRenderer
    /// The finest level offered.
    public var maxLevel: Int
    /// Opaque tiles drawn as JPEG at this quality (a MIXED cache), nil for PNG only.
    public var jpegQuality: Int?

    /// A source drawing `geodatabase` in Web Mercator tiles, levels 0 to `maxLevel`.
    public init(geodatabase: Geodatabase, maxLevel: Int = 20, jpegQuality: Int? = nil) {
        renderer = MapRenderer(geodatabase: geodatabase)
        self.maxLevel = maxLevel
        self.jpegQuality = jpegQuality
    }

    public var label: String { renderer.geodatabase.url.lastPathComponent }

    public func cacheInfo() async throws -> TileCacheInfo {
        var info = TileCacheInfo(
            name: renderer.geodatabase.url.deletingPathExtension().lastPathComponent, scheme: .webMercator, minLevel: 0, maxLevel: maxLevel, format: jpegQuality == nil ? "PNG" : "MIXED",
            fullExtent: try await renderer.extent())
        info.compressionQuality = jpegQuality ?? 0
        return info
    }

    public func tile(_ key: TileKey) async throws -> [UInt8]? { try await renderer.tile(key, jpegQuality: jpegQuality) }
}
