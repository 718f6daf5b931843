import Foundation
import GRDB
import OutpostCore

/// MBTiles 1.3: tiles in SQLite with TMS rows (`tile_row = 2^z − 1 − row`; the flip happens here
/// and nowhere else). Identical tiles are stored once (`images` + `map`, as mbutil lays them out,
/// with the `tiles` view the spec names), so readers that only know `tiles` read it.
///
/// Written for bulk loads: one SQLite connection driven through the C API (no per-row argument
/// arrays or copies), one transaction from one `commit()` (the export's checkpoint) to the next,
/// integer image ids (the rowid, no second index), and on a new file the unique index on
/// (zoom_level, tile_column, tile_row) built once in `finish()`, after duplicate keys a resumed
/// export wrote again are removed (the latest write wins, as `INSERT OR REPLACE` would).
public final class MBTilesWriter {
    /// The file written.
    public let url: URL
    private let file: SQLiteFile
    private let insertImage: SQLiteFile.Statement
    private let insertMap: SQLiteFile.Statement
    /// Fingerprints of stored tiles and their ids; bounded, as the common repeats (blank sea,
    /// empty land) show up early.
    private var known: [BundleWriter.TileFingerprint: Int64] = [:]
    private static let knownLimit = 1 << 16
    private var nextID: Int64
    private var inTransaction = false
    /// Whether an earlier process wrote to the file: only then can a key have been written twice.
    private let resumed: Bool
    /// Tiles written so far.
    public private(set) var tilesWritten = 0
    /// Tiles that reused an image stored already (identical bytes).
    public private(set) var sharedTiles = 0
    /// Tiles written in each image format, for the `format` row `finish()` writes.
    public private(set) var formats: [TileImageFormat: Int]

    /// Opens (or creates) an MBTiles file for writing.
    /// - Parameters:
    ///   - resuming: continue a file an earlier (killed) export committed to.
    ///   - formats: the tiles of each format that export committed (its checkpoint's count).
    /// - Parameter url: the MBTiles file to write.
    /// - Parameter info: the tiling scheme and levels written to the metadata table.
    /// - Parameter metadata: rows that replace the ones `info` gives or add to them (vector
    ///   tiles' `json` with `vector_layers`, say).
    public init(at url: URL, info: TileCacheInfo, resuming: Bool = false, formats: [TileImageFormat: Int] = [:], metadata: [(String, String)] = []) throws {
        self.url = url
        resumed = resuming
        self.formats = formats
        if !resuming {
            for suffix in ["", "-journal"] { try? FileManager.default.removeItem(atPath: url.path + suffix) }
        }
        do {
            // The default rollback journal: tiles go in as new pages at the end of the file, which
            // it need not copy, so each tile's bytes are written once (WAL would write them twice).
            file = try SQLiteFile(path: url.path)
            try file.execute("PRAGMA temp_store = MEMORY")
            if !resuming {
                try file.execute(
                    """
                    PRAGMA page_size = \(MBTilesLayout.pageSize);
                    BEGIN;
                    CREATE TABLE metadata (name TEXT PRIMARY KEY, value TEXT);
                    CREATE TABLE images (tile_id INTEGER PRIMARY KEY, tile_data BLOB NOT NULL);
                    CREATE TABLE map (zoom_level INTEGER NOT NULL, tile_column INTEGER NOT NULL, tile_row INTEGER NOT NULL, tile_id INTEGER NOT NULL);
                    CREATE VIEW tiles AS SELECT map.zoom_level AS zoom_level, map.tile_column AS tile_column, map.tile_row AS tile_row,
                      images.tile_data AS tile_data FROM map JOIN images ON images.tile_id = map.tile_id;
                    """)
                let insert = try file.prepare("INSERT INTO metadata (name, value) VALUES (?, ?)")
                let replaced = Set(metadata.map(\.0))
                for (name, value) in MBTilesLayout.metadata(info).filter({ !replaced.contains($0.0) }) + metadata {
                    insert.bind(1, name)
                    insert.bind(2, value)
                    try insert.run()
                }
                try file.execute("COMMIT")
            }
            nextID = try file.integer("SELECT coalesce(max(rowid), 0) + 1 FROM images")
            insertImage = try file.prepare("INSERT INTO images (tile_id, tile_data) VALUES (?, ?)")
            // Until `finish` a new file's `map` has no unique key: a plain insert (no statement
            // journal). A file that has one (finished, or written by an earlier layout) replaces.
            let keyed = try file.integer("SELECT count(*) FROM sqlite_master WHERE type = 'index' AND tbl_name = 'map'") > 0
            insertMap = try file.prepare("INSERT \(keyed ? "OR REPLACE " : "")INTO map (zoom_level, tile_column, tile_row, tile_id) VALUES (?, ?, ?, ?)")
        } catch {
            throw TileCacheError(.io, "cannot \(resuming ? "open" : "create") the MBTiles file: \(error)", file: url.path)
        }
    }

    /// Adds a tile.
    public func add(_ key: TileKey, data: [UInt8]) throws {
        try data.withUnsafeBytes { try add(key, bytes: $0) }
    }

    /// Adds a tile from bytes borrowed from elsewhere.
    public func add(_ key: TileKey, bytes: UnsafeRawBufferPointer) throws {
        do {
            if !inTransaction {
                try file.execute("BEGIN")
                inTransaction = true
            }
            let print = BundleWriter.TileFingerprint(bytes)
            let id: Int64
            if let existing = known[print] {
                id = existing
                sharedTiles += 1
            } else {
                id = nextID
                nextID += 1
                insertImage.bind(1, id)
                insertImage.bind(2, blob: bytes)
                try insertImage.run()
                if known.count < Self.knownLimit { known[print] = id }
            }
            insertMap.bind(1, Int64(key.level))
            insertMap.bind(2, Int64(key.col))
            insertMap.bind(3, Int64((1 << key.level) - 1 - key.row))
            insertMap.bind(4, id)
            try insertMap.run()
            tilesWritten += 1
            if let format = TileImageFormat(sniffing: bytes) { formats[format, default: 0] += 1 }
        } catch {
            throw TileCacheError(.io, "cannot write a tile: \(error)", file: url.path, tile: key)
        }
    }

    /// Commits what is pending (a durable point to resume from).
    func commit() throws {
        guard inTransaction else { return }
        do {
            try file.execute("COMMIT")
            inTransaction = false
        } catch {
            throw TileCacheError(.io, "cannot commit tiles: \(error)", file: url.path)
        }
    }

    /// Commits, then gives `map` its unique key (dropping keys written twice, the latest kept,
    /// and the images only they used) and closes the file.
    public func finish() throws {
        try commit()
        do {
            try file.execute("BEGIN")
            if try file.integer("SELECT count(*) FROM sqlite_master WHERE type = 'index' AND tbl_name = 'map'") == 0 {
                if resumed {
                    try file.execute("DELETE FROM map WHERE rowid NOT IN (SELECT max(rowid) FROM map GROUP BY zoom_level, tile_column, tile_row)")
                }
                if resumed, file.changes > 0 {
                    try file.execute("DELETE FROM images WHERE tile_id NOT IN (SELECT tile_id FROM map)")
                }
                try file.execute("CREATE UNIQUE INDEX map_index ON map (zoom_level, tile_column, tile_row)")
            }
            if let format = MBTilesLayout.format(of: formats) {
                let update = try file.prepare("UPDATE metadata SET value = ? WHERE name = 'format'")
                update.bind(1, format)
                try update.run()
            }
            try file.execute("COMMIT")
            try file.close()
        } catch {
            throw TileCacheError(.io, "cannot finish the MBTiles file: \(error)", file: url.path)
        }
    }
}

/// What MBTiles files Outpost writes hold besides tiles.
enum MBTilesLayout {
    /// 64 KB pages: a ~10 KB tile sits inside a leaf page instead of a chain of overflow pages,
    /// and the file is written in 64 KB pieces. `outpost-bench tiles` measured 4 KB and 16 KB pages
    /// at 1.4–1.6× the time, and a larger page cache (8–16 MB) as no faster.
    static let pageSize = 65_536

    /// MBTiles' `format` for the tiles written, told by their first bytes: the one format they
    /// all have. MBTiles has no mixed format; readers take the format as the image's kind (GDAL
    /// exposes RGBA for `png`, RGB for `jpg`) and read each tile by its own bytes, so a file with
    /// PNG tiles among others (a MIXED cache: JPEG, with PNG where there is transparency) says
    /// `png`, which keeps the transparency; JPEG and WebP without PNG say what most tiles are.
    /// Nil when no tile was a PNG, JPEG or WebP image: the source's declared format stands.
    static func format(of counts: [TileImageFormat: Int]) -> String? {
        let present = counts.filter { $0.value > 0 }
        if present.count > 1, present[.png] != nil { return name(.png) }
        return present.max { ($0.value, $0.key.rawValue) < ($1.value, $1.key.rawValue) }.map { name($0.key) }
    }

    /// MBTiles' name of an image format.
    static func name(_ format: TileImageFormat) -> String {
        switch format {
        case .png: "png"
        case .jpeg: "jpg"
        case .webp: "webp"
        }
    }

    /// MBTiles' `format` for a `CacheTileFormat`, written when the file is created (and kept
    /// when no tile tells otherwise).
    static func format(_ cacheFormat: String) -> String {
        switch cacheFormat.uppercased() {
        case "JPEG", "JPG", "MIXED": "jpg"
        case "WEBP": "webp"
        case "PBF", "MVT": "pbf"
        default: "png"
        }
    }

    /// The CacheTileFormat of an MBTiles `format`.
    static func cacheFormat(_ format: String) -> String {
        switch format.lowercased() {
        case "jpg", "jpeg": "JPEG"
        case "webp": "WEBP"
        default: "PNG"
        }
    }

    /// The metadata rows MBTiles 1.3 asks for (name, format, bounds, minzoom, maxzoom) and more.
    static func metadata(_ info: TileCacheInfo) -> [(String, String)] {
        var bounds = "-180,-85.0511,180,85.0511"
        if let e = info.fullExtent, let g = try? WebMercator.convert(e, from: info.scheme.spatialReference, to: .wgs84) {
            bounds = "\(g.xmin),\(g.ymin),\(g.xmax),\(g.ymax)"
        }
        return [
            ("name", info.name), ("format", format(info.format)), ("bounds", bounds), ("minzoom", String(info.minLevel)), ("maxzoom", String(info.maxLevel)),
            ("type", "baselayer"), ("version", "1.0"), ("description", "written by outpost"),
        ]
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
                let format = MBTilesLayout.cacheFormat(meta["format"] ?? "png")
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

    func tileCount() throws -> Int {
        do {
            return try queue.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM \(try db.tableExists("map") ? "map" : "tiles")") ?? 0 }
        } catch {
            throw TileCacheError(.corrupt, "cannot count the tiles: \(error)", file: url.path)
        }
    }

    func summary() throws -> [TileCache.LevelSummary] {
        do {
            return try queue.read { db in
                guard try db.tableExists("map"), try db.tableExists("images") else {
                    return try Row.fetchAll(db, sql: "SELECT zoom_level, count(*), sum(length(tile_data)) FROM tiles GROUP BY zoom_level ORDER BY zoom_level").map { row in
                        TileCache.LevelSummary(level: row[0], tiles: row[1], distinctTiles: row[1], bundles: 0, bytes: row[2] ?? 0)
                    }
                }
                // The bytes of a level's distinct images, read in image order (a join in key
                // order would visit the images' pages at random).
                return try Row.fetchAll(db, sql: "SELECT zoom_level, count(*), count(DISTINCT tile_id) FROM map GROUP BY zoom_level ORDER BY zoom_level").map { row in
                    let level: Int = row[0]
                    let bytes = try Int64.fetchOne(
                        db, sql: "SELECT sum(length(tile_data)) FROM images WHERE tile_id IN (SELECT tile_id FROM map WHERE zoom_level = ?)", arguments: [level])
                    return TileCache.LevelSummary(level: level, tiles: row[1], distinctTiles: row[2], bundles: 0, bytes: bytes ?? 0)
                }
            }
        } catch {
            throw TileCacheError(.corrupt, "cannot read the tiles: \(error)", file: url.path)
        }
    }
}
