import Foundation
import OutpostTiles

/// What a set of vector tiles holds: tiles and bytes per zoom, the largest tiles, and each
/// layer's features, geometry kinds and attribute names, every tile decoded to find out.
public struct VectorTileInspection: Sendable {
    /// One zoom's tiles.
    public struct Level: Sendable {
        /// The zoom.
        public var level: Int
        /// Tiles at this zoom.
        public var tiles: Int
        /// Their bytes, as stored.
        public var bytes: Int
    }

    /// One layer over all tiles.
    public struct Layer: Sendable {
        /// The layer's name.
        public var name: String
        /// Features over all tiles (a feature cut by tile edges counts once per tile).
        public var features: Int
        /// Tiles holding the layer.
        public var tiles: Int
        /// "points", "lines", "polygons".
        public var geometryKinds: [String]
        /// Attribute names seen.
        public var fields: [String]
        /// The first zoom holding the layer.
        public var minZoom: Int
        /// The last zoom holding the layer.
        public var maxZoom: Int
    }

    /// Tiles per zoom.
    public var levels: [Level]
    /// The layers, by name.
    public var layers: [Layer]
    /// The five largest tiles, largest first.
    public var largest: [(key: TileKey, bytes: Int)]
    /// Tiles in all.
    public var tiles: Int
    /// Their bytes, as stored.
    public var bytes: Int
    /// Tiles that do not decode, with why (at most ten named).
    public var damaged: [(key: TileKey, reason: String)]

    /// Inspects every tile `forEachTile` gives (as stored: gzipped or not).
    public static func inspect(_ forEachTile: ((TileKey, [UInt8]) throws -> Void) throws -> Void) throws -> VectorTileInspection {
        var levels: [Int: Level] = [:]
        var layers: [String: Layer] = [:]
        var kinds: [String: Set<String>] = [:], fields: [String: Set<String>] = [:]
        var largest: [(key: TileKey, bytes: Int)] = []
        var damaged: [(key: TileKey, reason: String)] = []
        var tiles = 0, bytes = 0
        try forEachTile { key, stored in
            tiles += 1
            bytes += stored.count
            levels[key.level, default: Level(level: key.level, tiles: 0, bytes: 0)].tiles += 1
            levels[key.level]!.bytes += stored.count
            largest.append((key, stored.count))
            if largest.count > 20 {
                largest.sort { $0.bytes > $1.bytes }
                largest.removeLast(largest.count - 5)
            }
            let tile: VectorTile
            do {
                tile = try VectorTile(decoding: try VectorTileCompression.plain(stored))
            } catch {
                if damaged.count < 10 { damaged.append((key, String(describing: error))) }
                return
            }
            for layer in tile.layers {
                var entry = layers[layer.name] ?? Layer(name: layer.name, features: 0, tiles: 0, geometryKinds: [], fields: [], minZoom: key.level, maxZoom: key.level)
                entry.features += layer.features.count
                entry.tiles += 1
                entry.minZoom = min(entry.minZoom, key.level)
                entry.maxZoom = max(entry.maxZoom, key.level)
                layers[layer.name] = entry
                for f in layer.features {
                    switch f.geometry {
                    case .points: kinds[layer.name, default: []].insert("points")
                    case .lines: kinds[layer.name, default: []].insert("lines")
                    case .polygons: kinds[layer.name, default: []].insert("polygons")
                    }
                    fields[layer.name, default: []].formUnion(f.properties.keys)
                }
            }
        }
        for name in layers.keys {
            layers[name]!.geometryKinds = (kinds[name] ?? []).sorted()
            layers[name]!.fields = (fields[name] ?? []).sorted()
        }
        largest.sort { ($0.bytes, $1.key.level) > ($1.bytes, $0.key.level) }
        return VectorTileInspection(
            levels: levels.values.sorted { $0.level < $1.level }, layers: layers.values.sorted { $0.name < $1.name }, largest: Array(largest.prefix(5)),
            tiles: tiles, bytes: bytes, damaged: damaged)
    }
}
