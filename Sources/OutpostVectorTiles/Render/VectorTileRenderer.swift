import Foundation
import OutpostCore
import OutpostTiles

/// Draws a vector tile service into images by its style: the tiles covering the area at the
/// zoom that matches the image's scale (512-pixel tiles, as the styles' zooms are reckoned;
/// the last zoom's tiles drawn larger below it), each style layer in turn over all of them.
///
/// The style is read as Mapbox GL styles say, for what offline basemaps need: `background`,
/// `fill` (`fill-color`, `fill-opacity`, `fill-outline-color`), `line` (`line-color`,
/// `line-width`, `line-opacity`, polygons' rings stroked too) and `circle` (`circle-radius`,
/// `circle-color`, `circle-opacity`, `circle-stroke-width`, `circle-stroke-color`) layers, their
/// `minzoom`/`maxzoom` and `visibility`; values as constants, `{"stops": …}` functions or
/// `["interpolate", ["linear"], ["zoom"], …]`; colours as `#rgb`, `#rrggbb`, `#rrggbbaa`,
/// `rgb()`, `rgba()`, `hsl()`, `hsla()` or a CSS name; filters in the legacy form (`==`, `!=`,
/// `<`, `<=`, `>`, `>=`, `in`, `!in`, `has`, `!has`, `all`, `any`, `none`, with `$type` and
/// `$id`) and the expression form's `get` and `geometry-type` within them. Symbols (text,
/// icons), fill patterns and data-driven values are left out: an unknown value takes the
/// default, an unknown filter passes. Each tile's features are cut to its own square, so
/// buffers are not drawn twice.
///
/// ```swift
/// let renderer = try await VectorTileRenderer(service: try await VectorTileArchive(url: vtpk))
/// let png = try await renderer.png(envelope: area, width: 1024, height: 768)
/// ```
public struct VectorTileRenderer: Sendable {
    /// The tiles drawn.
    public let service: any VectorTileService
    /// The style they are drawn by.
    public let style: JSONValue
    /// The service's zooms.
    public let zooms: ClosedRange<Int>
    /// The most tiles one image may take (an area far below the first zoom is refused).
    public static let maxTiles = 256

    /// A renderer of `service` by `style` (the service's own when nil).
    public init(service: any VectorTileService, style: JSONValue? = nil) async throws {
        self.service = service
        var own = style
        if own == nil { own = try await service.style(with: ["type": "vector"]) }
        self.style = own ?? [:]
        zooms = try await service.zooms()
    }

    /// The style's zoom for an image of `envelope` (Web Mercator) `width` pixels wide.
    public static func zoom(of envelope: Envelope, width: Int) -> Double {
        let resolution = (envelope.xmax - envelope.xmin) / Double(max(width, 1))
        return Foundation.log2(2 * VectorTileGenerator.halfWorld / (resolution * 512))
    }

    /// RGBA pixels of `envelope` (Web Mercator) at `width`×`height`, on the style's background
    /// or transparent.
    /// - Throws: ``VectorTileError`` `invalidArea` when the area needs more than ``maxTiles``
    ///   tiles (far below the service's first zoom); the service's errors.
    public func render(envelope: Envelope, width: Int, height: Int, transparent: Bool = false) async throws -> [UInt8] {
        guard envelope.isValid, envelope.xmax > envelope.xmin, envelope.ymax > envelope.ymin, width > 0, height > 0 else {
            throw VectorTileError(.invalidArea, "an image needs an area and a size")
        }
        let zoom = Self.zoom(of: envelope, width: width)
        let level = min(max(Int(zoom.rounded()), zooms.lowerBound), zooms.upperBound)
        let layers = style["layers"]?.arrayValue ?? []
        var background: RGBA? = nil
        if !transparent {
            background = RGBA(242, 239, 233)
            if let b = layers.last(where: { $0["type"]?.stringValue == "background" && Self.visible($0, zoom: zoom) }) {
                background = Self.color(b["paint"]?["background-color"], zoom: zoom, opacity: nil) ?? background
            }
        }
        var tiles: [(TileKey, VectorTile)] = []
        if let range = TilingScheme.webMercator.tileRange(level: level, covering: envelope) {
            guard range.count <= Self.maxTiles else {
                throw VectorTileError(.invalidArea, "the image needs \(range.count) tiles of zoom \(level) (at most \(Self.maxTiles)); draw a smaller area")
            }
            for key in range.keys {
                try Task.checkCancellation()
                guard let bytes = try await service.tile(key) else { continue }
                let tile: VectorTile
                do { tile = try VectorTile(decoding: try VectorTileCompression.plain(bytes)) } catch {
                    throw VectorTileError(.corrupt, "tile \(key.level)/\(key.col)/\(key.row) of \(service.name) does not decode: \(error)")
                }
                tiles.append((key, tile))
            }
        }
        var painter = GeometryPainter(envelope: envelope, width: width, height: height, background: background)
        for layer in layers where Self.visible(layer, zoom: zoom) {
            guard let type = layer["type"]?.stringValue, ["fill", "line", "circle"].contains(type), let sourceLayer = layer["source-layer"]?.stringValue else { continue }
            let paint = layer["paint"] ?? [:]
            // A fill layer's areas, from every tile, fill at once (no seams where tiles meet),
            // then their outlines, each tile's own edges of them.
            var areas: [[[Position]]] = [], outlines: [[Position]] = []
            for (key, tile) in tiles {
                for tileLayer in tile.layers where tileLayer.name == sourceLayer {
                    let place = Placement(key: key, extent: tileLayer.extent)
                    for feature in tileLayer.features where Self.passes(layer["filter"], feature) {
                        guard type == "fill" else {
                            Self.draw(feature.geometry, type: type, paint: paint, zoom: zoom, place: place, on: &painter)
                            continue
                        }
                        guard case .polygons(let polygons) = feature.geometry else { continue }
                        for rings in polygons { areas += place.clipper.polygon(rings.map { $0.map(Placement.coordinate) }).map { $0.map { $0.map(place.position) } } }
                        if paint["fill-outline-color"] != nil { outlines += polygons.joined().flatMap(place.outline) }
                    }
                }
            }
            if type == "fill" { Self.fill(areas, outlines: outlines, paint: paint, zoom: zoom, on: &painter) }
        }
        return painter.pixels
    }

    /// Fills `areas` in the layer's fill colour, then strokes `outlines` in its outline colour.
    static func fill(_ areas: [[[Position]]], outlines: [[Position]], paint: JSONValue, zoom: Double, on painter: inout GeometryPainter) {
        let opacity = measure(paint["fill-opacity"], zoom: zoom, default: 1, within: 0...1)
        if let color = color(paint["fill-color"], zoom: zoom, opacity: opacity) ?? (paint["fill-color"] == nil ? black(opacity) : nil) {
            painter.fill(areas, color: color)
        }
        guard let outline = color(paint["fill-outline-color"], zoom: zoom, opacity: opacity) else { return }
        for part in outlines { painter.stroke(part, width: 1, color: outline) }
    }

    /// The image of `envelope` as a PNG (see ``render(envelope:width:height:transparent:)``).
    public func png(envelope: Envelope, width: Int, height: Int, transparent: Bool = false) async throws -> [UInt8] {
        try PNGEncoder.encodeTile(rgba: try await render(envelope: envelope, width: width, height: height, transparent: transparent), width: width, height: height)
    }

    /// A tile's square in Web Mercator and its grid.
    struct Placement {
        let x0: Double, y0: Double, unit: Double
        let clipper: TileClipper

        init(key: TileKey, extent: Int) {
            let e = VectorTileGenerator.envelope(of: key)
            (x0, y0) = (e.xmin, e.ymax)
            unit = (e.xmax - e.xmin) / Double(extent)
            clipper = TileClipper(extent: extent, buffer: 0)
        }

        func position(_ c: TileCoordinate) -> Position { Position(x: x0 + c.x * unit, y: y0 - c.y * unit) }
        static func coordinate(_ p: TilePoint) -> TileCoordinate { TileCoordinate(Double(p.x), Double(p.y)) }

        /// The ring's edges inside the square, as lines (its cut along the square's edges left out).
        func outline(_ ring: [TilePoint]) -> [[Position]] {
            guard let first = ring.first else { return [] }
            return clipper.line((ring + [first]).map(Self.coordinate)).map { $0.map(position) }
        }
    }

    static func draw(_ geometry: VectorTileGeometry, type: String, paint: JSONValue, zoom: Double, place: Placement, on painter: inout GeometryPainter) {
        switch (type, geometry) {
        case ("line", .lines(let lines)):
            guard let (color, width) = stroke(paint, zoom: zoom) else { return }
            for line in lines {
                for part in place.clipper.line(line.map(Placement.coordinate)) { painter.stroke(part.map(place.position), width: width, color: color) }
            }
        case ("line", .polygons(let polygons)):
            guard let (color, width) = stroke(paint, zoom: zoom) else { return }
            for ring in polygons.joined() {
                for part in place.outline(ring) { painter.stroke(part, width: width, color: color) }
            }
        case ("circle", .points(let points)):
            let opacity = measure(paint["circle-opacity"], zoom: zoom, default: 1, within: 0...1)
            let fill = color(paint["circle-color"], zoom: zoom, opacity: opacity) ?? black(opacity)
            let radius = measure(paint["circle-radius"], zoom: zoom, default: 5, within: 0...Self.maxPixels)
            let ring = measure(paint["circle-stroke-width"], zoom: zoom, default: 0, within: 0...Self.maxPixels)
            let ringColor = color(paint["circle-stroke-color"], zoom: zoom, opacity: measure(paint["circle-stroke-opacity"], zoom: zoom, default: 1, within: 0...1)) ?? RGBA(0, 0, 0)
            for p in points {
                let c = Placement.coordinate(p)
                // A point belongs to the tile whose square holds it; a buffer's copy is its neighbour's.
                guard c.x >= 0, c.y >= 0, c.x < place.clipper.hi, c.y < place.clipper.hi else { continue }
                painter.circle(at: place.position(c), radius: radius, color: fill, strokeWidth: ring, strokeColor: ringColor)
            }
        default:
            return
        }
    }

    private static func stroke(_ paint: JSONValue, zoom: Double) -> (RGBA, Double)? {
        let opacity = measure(paint["line-opacity"], zoom: zoom, default: 1, within: 0...1)
        guard let color = color(paint["line-color"], zoom: zoom, opacity: opacity) ?? (paint["line-color"] == nil ? black(opacity) : nil) else { return nil }
        return (color, measure(paint["line-width"], zoom: zoom, default: 1, within: 0...Self.maxPixels))
    }

    /// The widest line or circle drawn, in pixels (a style may say anything).
    static let maxPixels = 256.0

    /// A paint number at `zoom` kept within `range` (opacities 0–1, sizes 0–``maxPixels``): a
    /// style's value past it is taken as the nearest end, one that is not a number as `fallback`.
    static func measure(_ value: JSONValue?, zoom: Double, default fallback: Double, within range: ClosedRange<Double>) -> Double {
        guard let v = number(value, zoom: zoom), !v.isNaN else { return fallback }
        return min(max(v, range.lowerBound), range.upperBound)
    }

    /// Black at `opacity` (0–1): Mapbox GL's colour when a layer names none.
    private static func black(_ opacity: Double) -> RGBA {
        RGBA(0, 0, 0, UInt8((min(max(opacity, 0), 1) * 255).rounded()))
    }

    /// Whether a style layer shows at `zoom` (its `minzoom` ≤ zoom < `maxzoom`, not hidden).
    static func visible(_ layer: JSONValue, zoom: Double) -> Bool {
        if layer["layout"]?["visibility"]?.stringValue == "none" { return false }
        if let lo = layer["minzoom"]?.doubleValue, zoom < lo { return false }
        if let hi = layer["maxzoom"]?.doubleValue, zoom >= hi { return false }
        return true
    }

    // MARK: Values

    /// A number: a constant, `{"stops": [[z, v], …]}` (linear between stops), or
    /// `["interpolate", [kind], ["zoom"], z, v, …]` / `["step", ["zoom"], v, z, v, …]`.
    static func number(_ value: JSONValue?, zoom: Double) -> Double? {
        guard let value else { return nil }
        if let d = value.doubleValue { return d }
        let stops = zoomStops(value).compactMap { z, v in v.doubleValue.map { (z, $0) } }
        guard let first = stops.first else { return nil }
        if zoom <= first.0 { return first.1 }
        if isStep(value) { return stops.last { $0.0 <= zoom }?.1 ?? first.1 }
        for (a, b) in zip(stops, stops.dropFirst()) where zoom < b.0 {
            return a.1 + (b.1 - a.1) * (zoom - a.0) / (b.0 - a.0)
        }
        return stops.last!.1
    }

    /// A colour (`opacity` multiplied into its alpha): a constant or the stop at or below `zoom`.
    static func color(_ value: JSONValue?, zoom: Double, opacity: Double?) -> RGBA? {
        guard let value else { return nil }
        var text = value.stringValue
        if text == nil {
            let stops = zoomStops(value)
            text = (stops.last { $0.0 <= zoom } ?? stops.first)?.1.stringValue
        }
        guard let text, var c = parseColor(text) else { return nil }
        if let opacity { c.a = UInt8(max(0, min(255, (Double(c.a) * opacity).rounded()))) }
        return c
    }

    private static func isStep(_ value: JSONValue) -> Bool { value.arrayValue?.first?.stringValue == "step" }

    /// The (zoom, value) pairs of a zoom function, in either form.
    private static func zoomStops(_ value: JSONValue) -> [(Double, JSONValue)] {
        if let stops = value["stops"]?.arrayValue {
            return stops.compactMap { s in s.arrayValue.flatMap { $0.count == 2 ? $0[0].doubleValue.map { z in (z, s.arrayValue![1]) } : nil } }
        }
        guard let a = value.arrayValue, let op = a.first?.stringValue else { return [] }
        let rest: ArraySlice<JSONValue>
        switch op {
        case "interpolate", "interpolate-hcl", "interpolate-lab":
            guard a.count >= 5, a[2].arrayValue?.first?.stringValue == "zoom" else { return [] }
            rest = a[3...]
        case "step":
            guard a.count >= 3, a[1].arrayValue?.first?.stringValue == "zoom" else { return [] }
            // The value below the first stop counts from zoom 0.
            return [(0, a[2])] + pairs(a[3...])
        default: return []
        }
        return pairs(rest)
    }

    private static func pairs(_ flat: ArraySlice<JSONValue>) -> [(Double, JSONValue)] {
        let items = Array(flat)
        return stride(from: 0, to: items.count - 1, by: 2).compactMap { i in items[i].doubleValue.map { ($0, items[i + 1]) } }
    }

    static let named: [String: RGBA] = [
        "black": RGBA(0, 0, 0), "white": RGBA(255, 255, 255), "red": RGBA(255, 0, 0), "green": RGBA(0, 128, 0), "blue": RGBA(0, 0, 255),
        "yellow": RGBA(255, 255, 0), "orange": RGBA(255, 165, 0), "gray": RGBA(128, 128, 128), "grey": RGBA(128, 128, 128),
        "transparent": RGBA(0, 0, 0, 0),
    ]

    /// A CSS colour: `#rgb`, `#rrggbb`, `#rrggbbaa`, `rgb()`, `rgba()`, `hsl()`, `hsla()`, a name.
    static func parseColor(_ text: String) -> RGBA? {
        let s = text.trimmingCharacters(in: .whitespaces).lowercased()
        if let c = named[s] { return c }
        if s.hasPrefix("#") {
            var hex = String(s.dropFirst())
            if hex.count == 3 || hex.count == 4 { hex = hex.map { "\($0)\($0)" }.joined() }
            guard hex.count == 6 || hex.count == 8, let v = UInt32(hex, radix: 16) else { return nil }
            return hex.count == 6
                ? RGBA(UInt8(v >> 16 & 255), UInt8(v >> 8 & 255), UInt8(v & 255))
                : RGBA(UInt8(v >> 24 & 255), UInt8(v >> 16 & 255), UInt8(v >> 8 & 255), UInt8(v & 255))
        }
        guard let open = s.firstIndex(of: "("), s.hasSuffix(")") else { return nil }
        let kind = s[..<open]
        let parts = s[s.index(after: open)..<s.index(before: s.endIndex)].split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        func number(_ p: String) -> Double? { Double(p.hasSuffix("%") ? String(p.dropLast()) : p) }
        guard parts.count >= 3, let a = number(parts[0]), let b = number(parts[1]), let c = number(parts[2]) else { return nil }
        let alpha = parts.count >= 4 ? number(parts[3]) ?? 1 : 1
        func byte(_ v: Double) -> UInt8 { UInt8(max(0, min(255, v.rounded()))) }
        switch kind {
        case "rgb", "rgba": return RGBA(byte(a), byte(b), byte(c), byte(alpha * 255))
        case "hsl", "hsla":
            // CSS hsl(): hue in degrees, saturation and lightness in percent.
            let h = a.truncatingRemainder(dividingBy: 360) / 360, sat = b / 100, l = c / 100
            let q = l < 0.5 ? l * (1 + sat) : l + sat - l * sat, p = 2 * l - q
            func channel(_ t0: Double) -> Double {
                let t = t0 < 0 ? t0 + 1 : (t0 > 1 ? t0 - 1 : t0)
                if t < 1 / 6 { return p + (q - p) * 6 * t }
                if t < 1 / 2 { return q }
                if t < 2 / 3 { return p + (q - p) * (2 / 3 - t) * 6 }
                return p
            }
            return RGBA(byte(channel(h + 1 / 3) * 255), byte(channel(h) * 255), byte(channel(h - 1 / 3) * 255), byte(alpha * 255))
        default: return nil
        }
    }

    // MARK: Filters

    /// Whether `feature` passes `filter` (none passes all; a form not known passes).
    static func passes(_ filter: JSONValue?, _ feature: VectorTileFeature) -> Bool {
        guard let items = filter?.arrayValue, let op = items.first?.stringValue else { return true }
        let args = Array(items.dropFirst())
        switch op {
        case "all": return args.allSatisfy { passes($0, feature) }
        case "any": return args.contains { passes($0, feature) }
        case "none": return !args.contains { passes($0, feature) }
        case "has", "!has":
            guard let key = args.first.flatMap(key) else { return true }
            return (value(of: key, feature) != nil) == (op == "has")
        case "in", "!in":
            guard let key = args.first.flatMap(key) else { return true }
            let v = value(of: key, feature)
            let found = args.dropFirst().contains { equal(v, $0) }
            return found == (op == "in")
        case "==", "!=":
            guard args.count == 2, let key = key(args[0]) else { return true }
            return equal(value(of: key, feature), args[1]) == (op == "==")
        case "<", "<=", ">", ">=":
            guard args.count == 2, let key = key(args[0]) else { return true }
            guard let order = compare(value(of: key, feature), args[1]) else { return false }
            switch op {
            case "<": return order < 0
            case "<=": return order <= 0
            case ">": return order > 0
            default: return order >= 0
            }
        default: return true
        }
    }

    /// A filter's key: a name, `["get", name]`, or `["geometry-type"]` (as `$type`).
    private static func key(_ v: JSONValue) -> String? {
        if let s = v.stringValue { return s }
        guard let a = v.arrayValue, let op = a.first?.stringValue else { return nil }
        if op == "get", a.count == 2 { return a[1].stringValue }
        if op == "geometry-type" { return "$type" }
        if op == "id" { return "$id" }
        return nil
    }

    private enum Scalar {
        case text(String), number(Double), flag(Bool)
    }

    private static func value(of key: String, _ feature: VectorTileFeature) -> Scalar? {
        switch key {
        case "$type":
            switch feature.geometry {
            case .points: return .text("Point")
            case .lines: return .text("LineString")
            case .polygons: return .text("Polygon")
            }
        case "$id": return feature.id.map { .number(Double($0)) }
        default:
            switch feature.properties[key] {
            case .string(let s)?: return .text(s)
            case .double(let d)?: return .number(d)
            case .int(let i)?: return .number(Double(i))
            case .bool(let b)?: return .flag(b)
            case nil: return nil
            }
        }
    }

    private static func scalar(_ v: JSONValue) -> Scalar? {
        if let s = v.stringValue { return .text(s) }
        if let d = v.doubleValue { return .number(d) }
        if let b = v.boolValue { return .flag(b) }
        return nil
    }

    private static func equal(_ a: Scalar?, _ b: JSONValue) -> Bool {
        switch (a, scalar(b)) {
        case (.text(let x)?, .text(let y)?): x == y
        case (.number(let x)?, .number(let y)?): x == y
        case (.flag(let x)?, .flag(let y)?): x == y
        default: false
        }
    }

    private static func compare(_ a: Scalar?, _ b: JSONValue) -> Int? {
        switch (a, scalar(b)) {
        case (.text(let x)?, .text(let y)?): x < y ? -1 : (x == y ? 0 : 1)
        case (.number(let x)?, .number(let y)?): x < y ? -1 : (x == y ? 0 : 1)
        default: nil
        }
    }
}

/// Raster tiles drawn from a vector tile service by its style (``VectorTileRenderer``): the
/// MapServer face of a vector basemap, and a source for raster exports of it (`exportTiles`).
/// 256-pixel PNG tiles of the Web Mercator grid, from the first zoom to `maxLevel`.
public struct VectorTileRenderSource: TileSource {
    /// What draws the tiles.
    public let renderer: VectorTileRenderer
    /// The last level offered (the vector tiles' last zoom plus two by default: drawn finer,
    /// they stay sharp).
    public let maxLevel: Int

    /// A source drawing `renderer`'s service down to `maxLevel`.
    public init(renderer: VectorTileRenderer, maxLevel: Int? = nil) {
        self.renderer = renderer
        self.maxLevel = min(maxLevel ?? renderer.zooms.upperBound + 2, 22)
    }

    public var label: String { renderer.service.name }

    /// The grid, from the vector tiles' first zoom to ``maxLevel``, PNG, over the service's extent.
    public func cacheInfo() async throws -> TileCacheInfo {
        TileCacheInfo(
            name: renderer.service.name, scheme: .webMercator, minLevel: min(renderer.zooms.lowerBound, maxLevel), maxLevel: maxLevel, format: "PNG",
            fullExtent: try await renderer.service.extent())
    }

    /// The tile drawn (a PNG); nil outside the levels (above the vector tiles' first zoom, or
    /// past ``maxLevel``) or the grid.
    public func tile(_ key: TileKey) async throws -> [UInt8]? {
        guard key.level <= maxLevel, key.level >= renderer.zooms.lowerBound, key.row >= 0, key.col >= 0, key.row < 1 << key.level, key.col < 1 << key.level,
            let envelope = TilingScheme.webMercator.envelope(of: key)
        else { return nil }
        let size = TilingScheme.webMercator.tileSize
        return try PNGEncoder.encodeTile(rgba: try await renderer.render(envelope: envelope, width: size, height: size), width: size, height: size)
    }
}
