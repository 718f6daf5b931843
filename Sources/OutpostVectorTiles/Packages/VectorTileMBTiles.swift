import Foundation
import GRDB
import OutpostCore
import OutpostTiles

/// Vector tiles in MBTiles 1.3: gzipped tiles, `format` `pbf`, and the `json` row listing the
/// layers with their fields and zooms (`vector_layers`), as GDAL, QGIS, MapLibre and tileserver
/// read them.
public enum VectorTileMBTiles {
    /// Writes the tiles `generator` makes over `area` (the data's extent when nil) to `url`. The
    /// file appears only when complete: it is written beside under a `.partial` name and renamed.
    @discardableResult
    public static func export(_ generator: VectorTileGenerator, area: Envelope? = nil, to url: URL, name: String? = nil) async throws -> VectorTileGenerator.Summary {
        try await VectorTileOutput.export(generator, area: area, to: url, format: .mbtiles, name: name)
    }

    static func write(_ spool: TileSpool, _ d: TileSetDescription, to url: URL) throws {
        let info = TileCacheInfo(name: d.name, scheme: .webMercator, minLevel: d.minZoom, maxLevel: d.maxZoom, format: "PBF", fullExtent: d.bounds)
        let writer = try MBTilesWriter(at: url, info: info, metadata: metadata(d))
        for e in spool.entries { try writer.add(e.key, data: [UInt8](try spool.read(offset: e.offset, length: e.length))) }
        try writer.finish()
    }

    /// The metadata rows for vector tiles: `format`, `type`, `json` with `vector_layers`, `center`.
    static func metadata(_ d: TileSetDescription) -> [(String, String)] {
        var rows: [(String, String)] = [("format", "pbf"), ("type", "overlay"), ("json", d.vectorLayers.jsonString)]
        if let b = d.bounds, let g = try? WebMercator.convert(b, from: .webMercator, to: .wgs84) {
            let zoom = max(d.minZoom, min(d.maxZoom, 12))
            rows.append(("center", "\((g.xmin + g.xmax) / 2),\((g.ymin + g.ymax) / 2),\(zoom)"))
        }
        return rows
    }

    /// `{"vector_layers": [{"id", "fields": {name: "String" | "Number" | "Boolean"}, "minzoom", "maxzoom"}]}`.
    public static func vectorLayersJSON(_ layers: [TileLayerInfo]) -> String {
        let entries: [JSONValue] = layers.map { l in
            var fields: [String: JSONValue] = [:]
            for (name, type) in l.fields {
                switch type {
                case .smallInteger, .integer, .bigInteger, .double, .single, .oid: fields[name] = "Number"
                default: fields[name] = "String"
                }
            }
            return [
                "id": .string(l.name), "description": .string("\(l.source) (\(l.geometryType))"), "minzoom": .integer(Int64(l.minZoom)),
                "maxzoom": .integer(Int64(l.maxZoom)), "fields": .object(fields),
            ]
        }
        return String(decoding: JSONValue.object(["vector_layers": .array(entries)]).jsonData, as: UTF8.self)
    }
}

/// Reads the tiles of a vector tile MBTiles file, any writer's.
public final class VectorTileMBTilesReader: Sendable {
    /// The file read.
    public let url: URL
    private let queue: DatabaseQueue

    /// Opens `url` for reading.
    /// - Throws: ``VectorTileError`` `corrupt` when the file is not MBTiles of vector tiles.
    public init(url: URL) throws {
        self.url = url
        var config = Configuration()
        config.readonly = true
        do {
            queue = try DatabaseQueue(path: url.path, configuration: config)
            let format = try queue.read { db -> String? in
                guard try db.tableExists("tiles") || db.viewExists("tiles") else { return nil }
                return try String.fetchOne(db, sql: "SELECT value FROM metadata WHERE name = 'format'") ?? ""
            }
            guard let format else { throw VectorTileError(.corrupt, "\(url.lastPathComponent) has no tiles table: not MBTiles") }
            guard format == "pbf" || format == "mvt" else { throw VectorTileError(.corrupt, "\(url.lastPathComponent) holds \(format) tiles, not vector tiles (pbf)") }
        } catch let error as VectorTileError {
            throw error
        } catch {
            throw VectorTileError(.corrupt, "\(url.lastPathComponent) is not a readable MBTiles file: \(error)")
        }
    }

    /// The metadata rows.
    public func metadata() throws -> [String: String] {
        try queue.read { db in
            var out: [String: String] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT name, value FROM metadata") {
                if let n = row[0] as String?, let v = row[1] as String? { out[n] = v }
            }
            return out
        }
    }

    /// One tile as stored (usually gzipped), nil when absent; `key` in XYZ rows.
    public func tile(_ key: TileKey) throws -> [UInt8]? {
        try queue.read { db in
            try Data.fetchOne(
                db, sql: "SELECT tile_data FROM tiles WHERE zoom_level = ? AND tile_column = ? AND tile_row = ?",
                arguments: [key.level, key.col, (1 << key.level) - 1 - key.row]).map { [UInt8]($0) }
        }
    }

    /// Every tile's address (XYZ rows), no tile read.
    public func forEachKey(_ body: (TileKey) throws -> Void) throws {
        try rows(withData: false) { key, _ in try body(key) }
    }

    /// Every tile, one at a time (XYZ rows).
    public func forEachTile(_ body: (TileKey, [UInt8]) throws -> Void) throws {
        try rows(withData: true, body)
    }

    /// The tiles table's rows through a cursor, TMS rows turned to XYZ (the data empty when not read).
    private func rows(withData: Bool, _ body: (TileKey, [UInt8]) throws -> Void) throws {
        try queue.read { db in
            let cursor = try Row.fetchCursor(db, sql: "SELECT zoom_level, tile_column, tile_row\(withData ? ", tile_data" : "") FROM tiles")
            while let row = try cursor.next() {
                let z: Int = row[0], col: Int = row[1], tmsRow: Int = row[2]
                let data: Data? = withData ? row[3] : nil
                try body(TileKey(level: z, row: (1 << z) - 1 - tmsRow, col: col), data.map { [UInt8]($0) } ?? [])
            }
        }
    }
}
