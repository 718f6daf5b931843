import COutpostSQLite
import Foundation
import GRDB
import GRDBSQLite
import OutpostCore

/// When many geometries of one table change in one transaction, packing its R-tree again from
/// the table is cheaper than keeping it current edit by edit: the GeoPackage triggers delete and
/// re-insert one entry per edit through the rtree module, rewriting several 4 KB nodes each time
/// (about 30 µs a moved point), while a packed rebuild costs under a microsecond per row of the
/// table. The triggers are set aside once enough geometries were written and re-created,
/// unchanged, in the same transaction, so a reader never sees a file without them and a rollback
/// restores everything.
enum SpatialIndexRebuild {
    /// A rebuild pays off once the geometry writes times this reach the table's rows (measured
    /// with `outpost-bench sync`: 16,000 edits of 100,000 points apply in 0.66 s through the
    /// triggers and in 0.30 s with the index packed after).
    static let writesPerRowCost: Int64 = 40
    /// Above this many rows the rebuild is not done: it holds 28 bytes per row while packing.
    static let maximumRows: Int64 = 8_000_000
    /// Below this many geometry writes the triggers always stay: they cost a few milliseconds,
    /// and setting them aside changes the schema, which makes every connection prepare its
    /// statements again.
    static let minimumWrites: Int64 = 64

    /// How many geometry writes on a table whose row ids span `span` make a rebuild cheaper
    /// (nil: never, the table is too large to pack in memory).
    static func budget(span: Int64) -> Int64? {
        guard span <= maximumRows else { return nil }
        return max(minimumWrites, span / writesPerRowCost)
    }

    /// Empties `table`'s R-tree and packs it again: from its old entries and `changes` (the new
    /// entry of each row written since the old ones were current, nil for a row gone or without
    /// geometry) when they are given and the old index holds one entry per row id as it should;
    /// otherwise from the geometry column. Whether it packed from the old index.
    @discardableResult
    static func rebuild(_ table: FeatureTable, changes: [Int64: RTreeEntry?]? = nil, _ db: Database) throws -> Bool {
        let rtree = table.rtreeName
        let node = quoted(rtree + "_node"), rowid = quoted(rtree + "_rowid"), parent = quoted(rtree + "_parent")
        guard let nodeSize = try Int.fetchOne(db, sql: "SELECT length(data) FROM \(node) WHERE nodeno = 1"), nodeSize > 28 else {
            throw StorageError(.corrupt, "R-tree \(rtree) has no root node", table: table.name)
        }
        var entries: [RTreeEntry]
        var fromChanges = false
        if let changes, let kept = try keptEntries(of: rtree, excluding: changes, db) {
            fromChanges = true
            entries = kept
            entries.reserveCapacity(kept.count + changes.count)
            for case let (_, entry?) in changes { entries.append(entry) }
        } else {
            entries = try bounds(of: table, db)
        }
        // The index's own tables are watched by no one: without the hook SQLite empties each in
        // one step (with it, row by row) and writes the new rows without calling it.
        try RowChangeTracker.suspended(on: db) {
            try db.execute(sql: "DELETE FROM \(node); DELETE FROM \(rowid); DELETE FROM \(parent)")
            try db.execute(sql: "INSERT INTO \(node) (nodeno, data) VALUES (1, zeroblob(?))", arguments: [nodeSize])
            try RTreeBulkLoader.load(&entries, into: rtree, db)
        }
        return fromChanges
    }

    /// The entries of the R-tree `rtree` whose row ids `changes` does not name, read from its leaf
    /// nodes (the nodes no other node is the parent of; the root only when it is the one node):
    /// a few thousand blobs instead of every geometry of the table. Nil when the leaves do not
    /// hold one entry for each row of the index's `_rowid` table (an index edited outside the
    /// module's rules): the caller packs from the table.
    static func keptEntries(of rtree: String, excluding changes: [Int64: RTreeEntry?], _ db: Database) throws -> [RTreeEntry]? {
        let node = quoted(rtree + "_node"), rowid = quoted(rtree + "_rowid"), parent = quoted(rtree + "_parent")
        guard let rows = try Int.fetchOne(db, sql: "SELECT count(*) FROM \(rowid)") else { return nil }
        let inner = Set(try Int64.fetchAll(db, sql: "SELECT DISTINCT parentnode FROM \(parent)"))
        var kept: [RTreeEntry] = []
        kept.reserveCapacity(rows)
        var leafEntries = 0
        let statement = try db.makeStatement(sql: "SELECT nodeno, data FROM \(node)")
        // The statement is stepped through the C API: it must live until the last step.
        let complete = try withExtendedLifetime(statement) { () throws -> Bool in
            let nodes = statement.sqliteStatement
            while true {
                let rc = sqlite3_step(nodes)
                if rc == SQLITE_DONE { return true }
                guard rc == SQLITE_ROW else { throw StorageError(.sqlite, "cannot read the nodes of \(rtree): \(String(cString: sqlite3_errmsg(sqlite3_db_handle(nodes))))") }
                let nodeno = ColumnValue(nodes, 0).int64, data = ColumnValue(nodes, 1).blob
                // The root is inner when its depth (its first two bytes) is above 0.
                guard !inner.contains(nodeno), data.count >= 4, nodeno != 1 || (data[0] == 0 && data[1] == 0) else { continue }
                let found = RTreeBulkLoader.decode(data) { entry in
                    if changes.index(forKey: entry.id) == nil { kept.append(entry) }
                }
                guard found.valid else { return false }
                leafEntries += found.cells
            }
        }
        guard complete else { return nil }
        return leafEntries == rows ? kept : nil
    }

    /// The R-tree entry the GeoPackage insert trigger makes of a stored geometry blob: none for a
    /// blob that is not a GeoPackage geometry or has the empty flag (`ST_IsEmpty` null or 1),
    /// bounds from the same C routine as `ST_MinX`…`ST_MaxY`, zeros for an unreadable body.
    static func entry(id: Int64, blob bytes: UnsafeRawBufferPointer) -> RTreeEntry? {
        guard let raw = bytes.baseAddress, bytes.count >= 8 else { return nil }
        let blob = raw.assumingMemoryBound(to: UInt8.self)
        guard blob[0] == 0x47, blob[1] == 0x50, blob[3] & 0x10 == 0 else { return nil }
        var box = (0.0, 0.0, 0.0, 0.0)
        let found = withUnsafeMutableBytes(of: &box) { outpost_gpkg_bounds(blob, Int32(bytes.count), $0.baseAddress!.assumingMemoryBound(to: Double.self)) }
        let (minX, maxX, minY, maxY) = found == 1 ? box : (0, 0, 0, 0)
        return RTreeEntry(id: id, Envelope(xmin: minX, ymin: minY, xmax: maxX, ymax: maxY))
    }

    /// Every non-empty geometry's bounds, as the GeoPackage insert trigger computes them
    /// (``entry(id:blob:)``, each row read once instead of four times).
    static func bounds(of table: FeatureTable, _ db: Database) throws -> [RTreeEntry] {
        guard let handle = db.sqliteConnection else { throw StorageError(.sqlite, "the connection is closed") }
        let id = quoted(table.definition.objectIDField), g = quoted(table.definition.geometryColumn)
        let sql = "SELECT \(id), \(g) FROM \(quoted(table.name)) WHERE \(g) NOT NULL"
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(handle, sql, -1, &statement, nil) == SQLITE_OK, let statement else {
            throw StorageError(.sqlite, "cannot read the bounds of \(table.name): \(String(cString: sqlite3_errmsg(handle)))", table: table.name)
        }
        defer { sqlite3_finalize(statement) }
        // Reserved once: growing by doubling would hold the old and new arrays at once.
        var entries: [RTreeEntry] = []
        entries.reserveCapacity(try Int.fetchOne(db, sql: "SELECT count(*) FROM \(quoted(table.name))") ?? 0)
        var rc = sqlite3_step(statement)
        while rc == SQLITE_ROW {
            defer { rc = sqlite3_step(statement) }
            let stored = ColumnValue(statement, 1)
            guard stored.type == SQLITE_BLOB, let entry = entry(id: ColumnValue(statement, 0).int64, blob: stored.blob) else { continue }
            entries.append(entry)
        }
        guard rc == SQLITE_DONE else {
            throw StorageError(.sqlite, "cannot read the bounds of \(table.name): \(String(cString: sqlite3_errmsg(handle)))", table: table.name)
        }
        return entries
    }
}

/// A table's R-tree inside ``GeodatabaseConnection/maintainingSpatialIndex(of:_:)``.
final class SpatialIndexWatch {
    let table: FeatureTable
    /// Geometry writes after which the index is packed again at the end instead.
    let budget: Int64
    /// The table's row ids span this many.
    let span: Int64
    var writes: Int64 = 0
    /// The R-tree triggers' SQL, once they are set aside (the index is stale until the end).
    var savedTriggers: [String]?

    init(table: FeatureTable, budget: Int64, span: Int64) {
        self.table = table
        self.budget = budget
        self.span = span
    }
}

extension GeodatabaseConnection {
    /// Runs `body`, which may write many geometries of `tableName`, keeping that table's R-tree
    /// the cheaper way (`SpatialIndexRebuild`): through the GeoPackage triggers as usual, until
    /// ``FeatureTable`` has written as many geometries as make a packed rebuild cheaper; then the
    /// triggers are set aside, and after `body` the index is packed again from the table and
    /// the triggers re-created. Until then envelope queries on the table do not use the index.
    /// Raw SQL writes are kept by the triggers while they are in place and by the rebuild after.
    /// A table without a spatial index runs `body` as it is.
    ///
    /// - Parameter expectedGeometryWrites: how many geometries the caller is about to write, when
    ///   it knows (a batch's edits, a download's staged changes): once that reaches the budget
    ///   the triggers are set aside before the first write, so no edit pays for both the
    ///   triggers and the rebuild. Otherwise the writes are counted as they happen.
    /// - Parameter tableName: the feature table about to be written.
    /// - Parameter body: the writes.
    public func maintainingSpatialIndex<T>(of tableName: String, expectedGeometryWrites: Int? = nil, _ body: () throws -> T) throws -> T {
        guard isWritable, spatialIndexWatches[tableName] == nil else { return try body() }
        let table = try geodatabase.table(named: tableName)
        guard table.definition.isSpatial, try table.hasSpatialIndex(db) else { return try body() }
        let pk = quoted(table.definition.objectIDField)
        // Two subqueries: SQLite answers a lone min() or max() from the key, but scans the whole
        // table for an expression that uses both.
        let t = quoted(tableName)
        let span = try Int64.fetchOne(db, sql: "SELECT (SELECT max(\(pk)) FROM \(t)) - (SELECT min(\(pk)) FROM \(t)) + 1") ?? 0
        guard let budget = SpatialIndexRebuild.budget(span: span) else { return try body() }
        let watch = SpatialIndexWatch(table: table, budget: budget, span: span)
        spatialIndexWatches[tableName] = watch
        if let expected = expectedGeometryWrites, Int64(expected) >= budget {
            do {
                try setAsideSpatialIndexTriggers(watch)
            } catch {
                spatialIndexWatches[tableName] = nil
                throw error
            }
        }
        func finish() throws {
            spatialIndexWatches[tableName] = nil
            guard let saved = watch.savedTriggers else { return }
            let started = ContinuousClock.now
            defer { spatialIndexRebuildTime += ContinuousClock.now - started }
            if try SpatialIndexRebuild.rebuild(table, changes: RowChangeTracker.endBounds(of: tableName, db), db) { spatialIndexPacksFromChanges += 1 }
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

    /// Whether `table`'s R-tree is stale until the end of ``maintainingSpatialIndex(of:_:)``.
    func spatialIndexIsStale(_ table: String) -> Bool {
        spatialIndexWatches[table]?.savedTriggers != nil
    }

    /// Counts geometry writes about to happen on `table` (`count` is evaluated only inside
    /// ``maintainingSpatialIndex(of:_:)``); sets its R-tree triggers aside once they make a
    /// packed rebuild cheaper.
    func willWriteGeometries(of table: String, _ count: @autoclosure () -> Int) throws {
        guard let watch = spatialIndexWatches[table], watch.savedTriggers == nil else { return }
        watch.writes += Int64(count())
        guard watch.writes >= watch.budget else { return }
        try setAsideSpatialIndexTriggers(watch)
    }

    /// Sets the R-tree triggers aside; from then on the rows written are watched
    /// (``RowChangeTracker``), so the pack at the end reads the old index and these.
    private func setAsideSpatialIndexTriggers(_ watch: SpatialIndexWatch) throws {
        let definition = watch.table.definition
        watch.savedTriggers = try GeoPackageDDL.setAside(
            GeoPackageDDL.spatialIndexTriggerNames(table: definition.name, geometry: definition.geometryColumn), db)
        // Once half the rows were written the old index has little to give: the rows written
        // are no longer kept (memory), and the pack reads the table.
        try RowChangeTracker.watchBounds(of: watch.table, upTo: Int(max(1_000, watch.span / 2)), db)
    }
}
