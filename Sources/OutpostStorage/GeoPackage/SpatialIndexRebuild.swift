import Foundation
import GRDB
import GRDBSQLite
import OutpostCore

/// When many geometries of one table change in one transaction, packing its R-tree again from
/// the table is cheaper than keeping it current edit by edit: the GeoPackage triggers delete and
/// re-insert one entry per edit through the rtree module, rewriting several 4 KB nodes each time
/// (about 30 µs a moved point), while a packed rebuild costs under a microsecond per row of the
/// table. The triggers are set aside while the edits run and re-created, unchanged, in the same
/// transaction, so a reader never sees a file without them and a rollback restores everything.
enum SpatialIndexRebuild {
    /// A rebuild pays off once the edits times this exceed the table's rows (measured with
    /// `outpost-bench rtree`: incremental upkeep and packed rebuild per row, 100k and 6.25M rows).
    static let editsPerRowCost = 40
    /// Above this many rows the rebuild is not done: it holds 28 bytes per row while packing.
    static let maximumRows: Int64 = 8_000_000

    /// Whether `edits` geometry writes on a table whose row ids span `span` should rebuild.
    static func pays(edits: Int, span: Int64) -> Bool {
        span > 0 && span <= maximumRows && Int64(edits) * Int64(editsPerRowCost) >= span
    }

    /// Empties the R-tree `rtree` of `table` and packs it again from the geometry column.
    static func rebuild(_ table: FeatureTable, _ db: Database) throws {
        let rtree = table.rtreeName
        let node = quoted(rtree + "_node"), rowid = quoted(rtree + "_rowid"), parent = quoted(rtree + "_parent")
        guard let nodeSize = try Int.fetchOne(db, sql: "SELECT length(data) FROM \(node) WHERE nodeno = 1"), nodeSize > 28 else {
            throw StorageError(.corrupt, "R-tree \(rtree) has no root node", table: table.name)
        }
        try db.execute(sql: "DELETE FROM \(node); DELETE FROM \(rowid); DELETE FROM \(parent)")
        try db.execute(sql: "INSERT INTO \(node) (nodeno, data) VALUES (1, zeroblob(?))", arguments: [nodeSize])
        var entries = try bounds(of: table, db)
        try RTreeBulkLoader.load(&entries, into: rtree, db)
    }

    /// Every non-empty geometry's bounds, as the GeoPackage insert trigger computes them.
    static func bounds(of table: FeatureTable, _ db: Database) throws -> [RTreeEntry] {
        guard let handle = db.sqliteConnection else { throw StorageError(.sqlite, "the connection is closed") }
        let id = quoted(table.definition.objectIDField), g = quoted(table.definition.geometryColumn)
        let sql = "SELECT \(id), ST_MinX(\(g)), ST_MaxX(\(g)), ST_MinY(\(g)), ST_MaxY(\(g)) FROM \(quoted(table.name)) WHERE \(g) NOT NULL AND NOT ST_IsEmpty(\(g))"
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(handle, sql, -1, &statement, nil) == SQLITE_OK, let statement else {
            throw StorageError(.sqlite, "cannot read the bounds of \(table.name): \(String(cString: sqlite3_errmsg(handle)))", table: table.name)
        }
        defer { sqlite3_finalize(statement) }
        var entries: [RTreeEntry] = []
        var rc = sqlite3_step(statement)
        while rc == SQLITE_ROW {
            let envelope = Envelope(
                xmin: sqlite3_column_double(statement, 1), ymin: sqlite3_column_double(statement, 3),
                xmax: sqlite3_column_double(statement, 2), ymax: sqlite3_column_double(statement, 4))
            entries.append(RTreeEntry(id: sqlite3_column_int64(statement, 0), envelope))
            rc = sqlite3_step(statement)
        }
        guard rc == SQLITE_DONE else {
            throw StorageError(.sqlite, "cannot read the bounds of \(table.name): \(String(cString: sqlite3_errmsg(handle)))", table: table.name)
        }
        return entries
    }
}

extension GeodatabaseConnection {
    /// Runs `body`, which is about to write about `edits` geometries of `tableName`, with that
    /// table's R-tree maintained once at the end when that is cheaper than edit by edit
    /// (``SpatialIndexRebuild``): its triggers are set aside, and after `body` the index is
    /// packed again and the triggers re-created. Inside `body` envelope queries on the table do
    /// not use the index (it is stale until the end). Needs the write transaction; a table
    /// without a spatial index, or too few edits, runs `body` as it is.
    public func maintainingSpatialIndex<T>(of tableName: String, edits: Int, _ body: () throws -> T) throws -> T {
        guard isWritable, !deferredSpatialIndexes.contains(tableName) else { return try body() }
        let table = try geodatabase.table(named: tableName)
        guard table.definition.isSpatial, try table.hasSpatialIndex(db) else { return try body() }
        let pk = quoted(table.definition.objectIDField)
        let span = try Int64.fetchOne(db, sql: "SELECT max(\(pk)) - min(\(pk)) + 1 FROM \(quoted(tableName))") ?? 0
        guard SpatialIndexRebuild.pays(edits: edits, span: span) else { return try body() }
        var saved: [String] = []
        for name in GeoPackageDDL.spatialIndexTriggerNames(table: tableName, geometry: table.definition.geometryColumn) {
            guard let sql = try String.fetchOne(db, sql: "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = ?", arguments: [name]) else { continue }
            saved.append(sql)
            try db.execute(sql: "DROP TRIGGER \(quoted(name))")
        }
        deferredSpatialIndexes.insert(tableName)
        func finish() throws {
            deferredSpatialIndexes.remove(tableName)
            try SpatialIndexRebuild.rebuild(table, db)
            for sql in saved { try db.execute(sql: sql) }
            FreedMemory.release()
        }
        let result: T
        do {
            result = try body()
        } catch {
            // The index and triggers are made whole even so: the caller may commit what `body`
            // wrote before it failed.
            try? finish()
            throw error
        }
        do {
            try finish()
        } catch {
            throw StorageError.from(error, "cannot rebuild the spatial index of \(tableName)")
        }
        return result
    }
}
