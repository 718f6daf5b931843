import Foundation
import GRDB
import OutpostCore

/// MBTiles 1.3: tiles in SQLite with TMS rows (`tile_row = 2^z − 1 − row`; the flip happens here
/// and nowhere else). Identical tiles are stored once (`images` + `map`, with the `tiles` view
/// the spec names), so readers that only know `tiles` read it.
public final class MBTilesWriter {
    public let url: URL
    private let queue: DatabaseQueue
    private var pending: [(TileKey, [UInt8])] = []
    private var known: [BundleWriter.TileFingerprint: String] = [:]
    public private(set) var tilesWritten = 0
    public private(set) var sharedTiles = 0
    private static let batch = 2000

    /// - Parameter resuming: continue a file an earlier (killed) export committed to.
    public init(at url: URL, info: TileCacheInfo, resuming: Bool = false) throws {
        self.url = url
        if !resuming { try? FileManager.default.removeItem(at: url) }
        do {
            // The default rollback journal: tiles go in as new pages, which it need not copy, so
            // each tile's bytes are written once (WAL would write them twice).
            queue = try DatabaseQueue(path: url.path)
            guard !resuming else { return }
            try queue.write { db in
                try db.execute(
                    sql: """
                        CREATE TABLE metadata (name TEXT PRIMARY KEY, value TEXT);
                        CREATE TABLE images (tile_id TEXT PRIMARY KEY, tile_data BLOB NOT NULL);
                        CREATE TABLE map (zoom_level INTEGER NOT NULL, tile_column INTEGER NOT NULL, tile_row INTEGER NOT NULL, tile_id TEXT NOT NULL,
                          PRIMARY KEY (zoom_level, tile_column, tile_row));
                        CREATE VIEW tiles AS SELECT map.zoom_level AS zoom_level, map.tile_column AS tile_column, map.tile_row AS tile_row,
                          images.tile_data AS tile_data FROM map JOIN images ON images.tile_id = map.tile_id;
                        """)
                var bounds = "-180,-85.0511,180,85.0511"
                if let e = info.fullExtent, let g = try? WebMercator.convert(e, from: info.scheme.spatialReference, to: .wgs84) {
                    bounds = "\(g.xmin),\(g.ymin),\(g.xmax),\(g.ymax)"
                }
                let format = info.format.lowercased().hasPrefix("jp") ? "jpg" : "png"
                for (name, value) in [
                    ("name", info.name), ("format", format), ("bounds", bounds), ("minzoom", String(info.minLevel)), ("maxzoom", String(info.maxLevel)),
                    ("type", "baselayer"), ("version", "1.0"), ("description", "written by outpost"),
                ] {
                    try db.execute(sql: "INSERT INTO metadata (name, value) VALUES (?, ?)", arguments: [name, value])
                }
            }
        } catch {
            throw TileCacheError(.io, "cannot create the MBTiles file: \(error)", file: url.path)
        }
    }

    public func add(_ key: TileKey, data: [UInt8]) throws {
        pending.append((key, data))
        tilesWritten += 1
        if pending.count >= Self.batch { try flush() }
    }

    /// Commits what is pending (a durable point to resume from).
    func commit() throws { try flush() }

    private func flush() throws {
        guard !pending.isEmpty else { return }
        let rows = pending
        pending.removeAll(keepingCapacity: true)
        var known = self.known
        var shared = 0
        do {
            try queue.write { db in
                let image = try db.makeStatement(sql: "INSERT OR IGNORE INTO images (tile_id, tile_data) VALUES (?, ?)")
                let map = try db.makeStatement(sql: "INSERT OR REPLACE INTO map (zoom_level, tile_column, tile_row, tile_id) VALUES (?, ?, ?, ?)")
                for (key, data) in rows {
                    let print = data.withUnsafeBytes { BundleWriter.TileFingerprint($0) }
                    let id: String
                    if let existing = known[print] {
                        id = existing
                        shared += 1
                    } else {
                        id = String(print.a, radix: 16) + String(print.b, radix: 16) + "-" + String(print.size)
                        try image.execute(arguments: [id, Data(data)])
                        known[print] = id
                    }
                    let tmsRow = (1 << key.level) - 1 - key.row
                    try map.execute(arguments: [key.level, key.col, tmsRow, id])
                }
            }
        } catch {
            throw TileCacheError(.io, "cannot write tiles: \(error)", file: url.path)
        }
        self.known = known
        sharedTiles += shared
    }

    public func finish() throws {
        try flush()
        do {
            try queue.close()
        } catch {
            throw TileCacheError(.io, "cannot finish the MBTiles file: \(error)", file: url.path)
        }
    }
}

/// Reads an MBTiles file (any writer's: a `tiles` table or view).
final class MBTilesReader: Sendable {
    let url: URL
    private let queue: DatabaseQueue
    let info: TileCacheInfo

    init(url: URL) throws {
        self.url = url
        var config = Configuration()
        config.readonly = true
        do {
            queue = try DatabaseQueue(path: url.path, configuration: config)
            info = try queue.read { db in
                guard try db.tableExists("tiles") || db.viewExists("tiles") else {
                    throw TileCacheError(.unsupported, "an SQLite file without a tiles table is not MBTiles", file: url.path)
                }
                var meta: [String: String] = [:]
                if try db.tableExists("metadata") {
                    for row in try Row.fetchAll(db, sql: "SELECT name, value FROM metadata") {
                        if let name = row[0] as String?, let value = row[1] as String? { meta[name] = value }
                    }
                }
                let zooms = try Row.fetchOne(db, sql: "SELECT min(zoom_level), max(zoom_level) FROM tiles")
                let minZoom = Int(meta["minzoom"] ?? "") ?? (zooms?[0] as Int?) ?? 0
                let maxZoom = Int(meta["maxzoom"] ?? "") ?? (zooms?[1] as Int?) ?? 0
                var extent: Envelope?
                let b = (meta["bounds"] ?? "").split(separator: ",").compactMap { Double($0.trimmingCharacters(in: .whitespaces)) }
                if b.count == 4 {
                    extent = try? WebMercator.convert(Envelope(xmin: b[0], ymin: b[1], xmax: b[2], ymax: b[3]), from: .wgs84, to: .webMercator)
                }
                let format = (meta["format"] ?? "png").lowercased().hasPrefix("jp") ? "JPEG" : "PNG"
                return TileCacheInfo(
                    name: meta["name"] ?? url.deletingPathExtension().lastPathComponent, scheme: .webMercator, minLevel: minZoom, maxLevel: maxZoom,
                    format: format, fullExtent: extent)
            }
        } catch let error as TileCacheError {
            throw error
        } catch {
            throw TileCacheError(.corrupt, "not a readable MBTiles file: \(error)", file: url.path)
        }
    }

    func tile(_ key: TileKey) throws -> [UInt8]? {
        let tmsRow = (1 << key.level) - 1 - key.row
        do {
            return try queue.read { db in
                try Data.fetchOne(
                    db, sql: "SELECT tile_data FROM tiles WHERE zoom_level = ? AND tile_column = ? AND tile_row = ?", arguments: [key.level, key.col, tmsRow]
                ).map { [UInt8]($0) }
            }
        } catch {
            throw TileCacheError(.corrupt, "cannot read a tile: \(error)", file: url.path, tile: key)
        }
    }

    /// SQLite's `quick_check` of the file (every page and record read, no index cross-check):
    /// nil when it passes, otherwise what SQLite reports first.
    func integrityProblem() throws -> String? {
        do {
            let report = try queue.read { db in try String.fetchAll(db, sql: "PRAGMA quick_check(1)") }
            return report == ["ok"] ? nil : "SQLite finds the file damaged: \(report.first ?? "")"
        } catch {
            return "SQLite cannot check the file: \(error)"
        }
    }

    func summary() throws -> [TileCache.LevelSummary] {
        do {
            return try queue.read { db in
                let distinctQuery = try db.tableExists("map") ? "(SELECT count(DISTINCT tile_id) FROM map m WHERE m.zoom_level = t.zoom_level)" : "count(*)"
                return try Row.fetchAll(
                    db, sql: "SELECT zoom_level, count(*), \(distinctQuery), sum(length(tile_data)) FROM tiles t GROUP BY zoom_level ORDER BY zoom_level"
                ).map { row in
                    TileCache.LevelSummary(level: row[0], tiles: row[1], distinctTiles: row[2], bundles: 0, bytes: row[3] ?? 0)
                }
            }
        } catch {
            throw TileCacheError(.corrupt, "cannot read the tiles: \(error)", file: url.path)
        }
    }
}
