import Foundation
import OutpostCore
import OutpostTiles

/// A VectorTileServer's tiles for an export: its levels and extent, the tiles its tile map
/// names within the area and zooms (every tile of the grid there when it has no tile map),
/// fetched eight at a time, and a description of them for the file (its style, its layers).
struct ServiceTiles: Sendable {
    let http: HTTPTileSource
    let info: TileCacheInfo
    let minZoom: Int
    let maxZoom: Int
    let area: Envelope?
    /// An export is refused above this many tiles.
    static let maxTiles = 200_000

    init(_ http: HTTPTileSource, parameters: ExportVectorTilesParameters, area: Envelope?) async throws {
        self.http = http
        do { info = try await http.cacheInfo() } catch let error as TileCacheError { throw VectorTileError(.io, error.message) }
        minZoom = max(parameters.minZoom ?? info.minLevel, info.minLevel)
        maxZoom = min(parameters.maxZoom ?? info.maxLevel, info.maxLevel)
        guard minZoom <= maxZoom else {
            throw VectorTileError(.invalidArea, "the service has zooms \(info.minLevel)–\(info.maxLevel); none of them is asked for")
        }
        self.area = area ?? info.fullExtent
    }

    private func resource(_ path: String) async throws -> [UInt8]? {
        do { return try await http.resource(path) } catch let error as TileCacheError { throw VectorTileError(.io, error.message) }
    }

    /// The tiles to fetch.
    func keys() async throws -> [TileKey] { try await mappedKeys().keys }

    /// The tiles to fetch, and whether the service's tile map named them (else they are the
    /// grid's over the area, some perhaps empty).
    func mappedKeys() async throws -> (keys: [TileKey], mapped: Bool) {
        var keys: [TileKey] = []
        func wanted(_ key: TileKey) -> Bool { area.map { VectorTileGenerator.envelope(of: key).intersects($0) } ?? true }
        if let bytes = try await resource("tilemap"), let index = (try? JSONValue.parse(Data(bytes)))?["index"]?.arrayValue {
            func visit(_ node: JSONValue, _ key: TileKey) throws {
                guard node.integerValue != 0, wanted(key) else { return }
                if key.level >= minZoom { keys.append(key) }
                guard let children = node.arrayValue, key.level < maxZoom else { return }
                guard children.count == 4 else { throw VectorTileError(.corrupt, "the service's tile map has a node of \(children.count) children") }
                for (i, child) in children.enumerated() { try visit(child, TileKey(level: key.level + 1, row: 2 * key.row + i / 2, col: 2 * key.col + i % 2)) }
                guard keys.count <= Self.maxTiles else { throw VectorTileError(.invalidArea, "the export needs more than \(Self.maxTiles) tiles; choose fewer zooms or a smaller area") }
            }
            try visit(.array(index), TileKey(level: 0, row: 0, col: 0))
            return (keys, true)
        }
        // No tile map: every tile of the grid over the area.
        let half = VectorTileGenerator.halfWorld
        let e = area ?? Envelope(xmin: -half, ymin: -half, xmax: half, ymax: half)
        for z in minZoom...maxZoom {
            guard let range = TilingScheme.webMercator.tileRange(level: z, covering: e) else { continue }
            guard keys.count + range.count <= Self.maxTiles else {
                throw VectorTileError(.invalidArea, "the export needs more than \(Self.maxTiles) tiles; choose fewer zooms or a smaller area")
            }
            keys.append(contentsOf: range.keys)
        }
        return (keys, false)
    }

    /// Fetches the tiles `skip` does not name into the spool (gzipped), eight at a time.
    func fetch(into spool: LockedSpool, skip: @escaping @Sendable (TileKey) -> Bool) async throws -> VectorTileGenerator.Summary {
        let keys = try await keys().filter { !skip($0) }
        var summary = VectorTileGenerator.Summary()
        let http = self.http
        try await withThrowingTaskGroup(of: (TileKey, [UInt8]?).self) { group in
            var next = keys.makeIterator()
            func launch() {
                guard let key = next.next() else { return }
                group.addTask {
                    do { return (key, try await http.tile(key)) } catch let error as TileCacheError { throw VectorTileError(.io, error.message) }
                }
            }
            for _ in 0..<8 { launch() }
            while let (key, bytes) = try await group.next() {
                launch()
                guard let bytes, !bytes.isEmpty else { continue }
                let gzipped = bytes.starts(with: [0x1F, 0x8B]) ? bytes : VectorTileCompression.gzip(bytes)
                try spool.add(key, gzipped)
                summary.tiles += 1
                summary.bytes += gzipped.count
            }
        }
        return summary
    }

    /// The file's description: the service's style with the file as its source (each layer's
    /// source made the one source), its layers from the style, the export's zooms and area.
    func description(name: String) async throws -> TileSetDescription {
        var style: [String: JSONValue] = ["version": 8, "name": .string(name), "layers": []]
        if let bytes = try await resource("resources/styles/root.json"), let parsed = (try? JSONValue.parse(Data(bytes)))?.objectValue {
            style = parsed
        }
        style["sources"] = .object([VectorTileStyle.sourceName: ["type": "vector", "url": "../../"]])
        let layers = (style["layers"]?.arrayValue ?? []).map { layer -> JSONValue in
            guard var l = layer.objectValue, l["source"] != nil else { return layer }
            l["source"] = .string(VectorTileStyle.sourceName)
            return .object(l)
        }
        style["layers"] = .array(layers)
        var seen = Set<String>()
        let names = layers.compactMap { $0["source-layer"]?.stringValue }.filter { seen.insert($0).inserted }
        let vectorLayers: JSONValue = [
            "vector_layers": .array(names.map { ["id": .string($0), "fields": [:], "minzoom": .integer(Int64(minZoom)), "maxzoom": .integer(Int64(maxZoom))] })
        ]
        return TileSetDescription(name: name, minZoom: minZoom, maxZoom: maxZoom, bounds: area, vectorLayers: vectorLayers, style: .object(style))
    }
}
