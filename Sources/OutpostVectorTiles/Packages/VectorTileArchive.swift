import Foundation
import OutpostCore
import OutpostTiles

/// A file of vector tiles to serve, whichever kind: a vector tile package (`.vtpk`), a PMTiles
/// archive of MVT, or MBTiles whose format is `pbf`. Gives what a VectorTileServer answers: the
/// zooms and bounds, each tile gzipped, a style, and the tile map.
public final class VectorTileArchive: Sendable {
    /// The file.
    public let url: URL
    /// The service's name: the file's name without its extension.
    public let name: String
    /// The first zoom with tiles.
    public let minZoom: Int
    /// The last zoom with tiles.
    public let maxZoom: Int
    /// The tiles' bounds in Web Mercator, when the file says.
    public let bounds: Envelope?
    /// The tile layers' names and first zooms, as the file lists them.
    public let layers: [(name: String, minZoom: Int)]
    private let source: Source
    private let computedTileMap = Locked<String?>(nil)

    private enum Source: Sendable {
        case package(VectorTilePackageReader)
        case pmtiles(PMTilesReader)
        case mbtiles(VectorTileMBTilesReader)
    }

    /// Whether `url` is MBTiles of vector tiles (its `format` is `pbf`), which a VectorTileServer
    /// serves rather than a MapServer.
    public static func holdsVectorTiles(mbtiles url: URL) -> Bool {
        (try? VectorTileMBTilesReader(url: url)) != nil
    }

    /// Opens `url` by its extension (`.vtpk`, `.pmtiles`, `.mbtiles`).
    /// - Throws: ``VectorTileError`` `corrupt` when it is not vector tiles of that kind.
    public init(url: URL) async throws {
        self.url = url
        name = url.deletingPathExtension().lastPathComponent
        func layerList(_ json: JSONValue?) -> [(name: String, minZoom: Int)] {
            (json?["vector_layers"]?.arrayValue ?? []).compactMap { l in
                l["id"]?.stringValue.map { ($0, Int(l["minzoom"]?.integerValue ?? 0)) }
            }
        }
        func mercator(_ e: Envelope?) -> Envelope? {
            guard let e else { return nil }
            let clamped = Envelope(xmin: max(-180, e.xmin), ymin: max(-85.0511, e.ymin), xmax: min(180, e.xmax), ymax: min(85.0511, e.ymax))
            return try? WebMercator.convert(clamped, from: .wgs84, to: .webMercator)
        }
        switch url.pathExtension.lowercased() {
        case "vtpk":
            let reader = try await VectorTilePackageReader(url: url)
            source = .package(reader)
            (minZoom, maxZoom) = (reader.minZoom, reader.maxZoom)
            let e = reader.root["fullExtent"]
            if let x0 = e?["xmin"]?.doubleValue, let y0 = e?["ymin"]?.doubleValue, let x1 = e?["xmax"]?.doubleValue, let y1 = e?["ymax"]?.doubleValue {
                bounds = Envelope(xmin: x0, ymin: y0, xmax: x1, ymax: y1)
            } else {
                bounds = nil
            }
            let style = try reader.json("p12/resources/styles/root.json")
            var seen = Set<String>()
            layers = (style?["layers"]?.arrayValue ?? []).compactMap { l in
                guard let n = l["source-layer"]?.stringValue, seen.insert(n).inserted else { return nil }
                return (n, Int(l["minzoom"]?.integerValue ?? 0))
            }
        case "pmtiles":
            let reader = try PMTilesReader(url: url)
            guard reader.tileType == .mvt else { throw VectorTileError(.corrupt, "\(url.lastPathComponent) holds \(reader.tileType) tiles, not vector tiles") }
            source = .pmtiles(reader)
            (minZoom, maxZoom) = (reader.minZoom, reader.maxZoom)
            bounds = mercator(reader.bounds)
            layers = layerList(try? reader.metadata())
        default:
            let reader = try VectorTileMBTilesReader(url: url)
            source = .mbtiles(reader)
            let metadata = try reader.metadata()
            minZoom = Int(metadata["minzoom"] ?? "") ?? 0
            maxZoom = Int(metadata["maxzoom"] ?? "") ?? 14
            let b = (metadata["bounds"] ?? "").split(separator: ",").compactMap { Double($0.trimmingCharacters(in: .whitespaces)) }
            bounds = b.count == 4 ? mercator(Envelope(xmin: b[0], ymin: b[1], xmax: b[2], ymax: b[3])) : nil
            layers = layerList(metadata["json"].flatMap { try? JSONValue.parse(Data($0.utf8)) })
        }
    }

    /// The tile at `key` (XYZ rows), gzipped; nil when there is none.
    /// - Throws: ``VectorTileError`` when the file is damaged there.
    public func tile(_ key: TileKey) throws -> [UInt8]? {
        guard key.level >= 0, key.level < 31, key.row >= 0, key.col >= 0, key.row < 1 << key.level, key.col < 1 << key.level else { return nil }
        let stored: [UInt8]?
        switch source {
        case .package(let reader): stored = try reader.tile(key)
        case .pmtiles(let reader): stored = try reader.tile(key)
        case .mbtiles(let reader): stored = try reader.tile(key)
        }
        guard let stored, !stored.isEmpty else { return nil }
        return stored.starts(with: [0x1F, 0x8B]) ? stored : VectorTileCompression.gzip(stored)
    }

    /// The style: a package's own; for the others, each layer drawn as areas, lines and points
    /// (by the features' geometry type) in the renderer's colours. Its one source is
    /// `sourceValue` (a Mapbox GL source object).
    public func style(with sourceValue: JSONValue) throws -> JSONValue {
        if case .package(let reader) = self.source, var style = try reader.json("p12/resources/styles/root.json")?.objectValue {
            style["sources"] = .object([VectorTileStyle.sourceName: sourceValue])
            return .object(style)
        }
        return VectorTileStyle.make(layers: layers, name: name, source: sourceValue)
    }

    /// The tile map (`{"index": …}`, see ``VectorTilePackage``): a package's own, else made once
    /// from the tiles present. Never nil: every file of tiles has one.
    public func tileMap() throws -> String? {
        if case .package(let reader) = source, let stored = try reader.resource("p12/tilemap/root.json") { return String(decoding: stored, as: UTF8.self) }
        if let known = computedTileMap.withLock({ $0 }) { return known }
        var keys: [TileKey] = []
        switch source {
        case .package(let reader): try reader.forEachTile { key, _ in keys.append(key) }
        case .pmtiles(let reader): try reader.forEachKey { keys.append($0) }
        case .mbtiles(let reader): try reader.forEachKey { keys.append($0) }
        }
        let map = VectorTilePackage.tileMap(keys)
        computedTileMap.withLock { $0 = map }
        return map
    }
}
