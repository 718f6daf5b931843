import COutpostSQLite
import Foundation
import GRDB
import GRDBSQLite
import OutpostCore

/// The rows a write transaction changes in chosen tables, with their values before and after,
/// as SQLite's pre-update hook reports them. The hook sees every row change of its connection,
/// whatever statement, trigger or conflict resolution makes it (the session extension is built
/// on it), so what is added up here holds where a caller's own bookkeeping could miss a write.
///
/// Two things are kept per table, each while a caller watches for it:
/// - **bounds**: each written row's new R-tree entry (none when the row is gone or has no
///   geometry), so ``SpatialIndexRebuild`` packs an index from its old entries and these
///   instead of reading every geometry of the table again;
/// - **digests**: the XOR of the ``FeatureDigest`` of every row image removed and added, and
///   the change of the row count, so a stored layer checksum is kept current;
/// - **rows**: the row ids written (removed, replaced or added), so a server that keeps a
///   layer's checksum hashes only those rows, before and after, off its writer's thread.
///
/// Rows a savepoint rolls back are taken out again (``mark(_:)``, ``restore(_:)``, called by the
/// savepoints of ``GeodatabaseConnection``); a transaction that rolls back discards its watchers'
/// results with it. A write the hook cannot describe (an incremental blob write, a value SQLite
/// does not hand over, a geometry that does not decode) marks the table's results unusable: the
/// caller then does the work the old way.
///
/// SQLite decides when it prepares a `DELETE` without `WHERE` whether to empty the table in one
/// step, which no hook reports, and it does so only while no hook is installed: a statement
/// prepared before the hook that empties a watched table goes unseen. Counts the caller can
/// check (``SpatialIndexRebuild`` checks the old index's size) guard that case.
///
/// One tracker per connection (the hook is per connection), used on that connection's thread
/// only: the hook runs inside the connection's statements, the watches are set by its writer.
final class RowChangeTracker: @unchecked Sendable {
    // @unchecked: used only on the thread that runs its connection (see above); the registry
    // that finds it is behind a mutex.

    /// A new R-tree entry for a row (nil: the row is gone, or has no geometry).
    struct BoundsChange {
        var id: Int64
        var entry: RTreeEntry?
    }

    /// What is watched of one table.
    final class Watch {
        let table: String
        /// The table's name as C characters, for comparing with the hook's.
        fileprivate let cName: [CChar]
        fileprivate(set) var boundsWatchers = 0
        /// The geometry column's index in the table (-1 without one).
        fileprivate var geometryColumn: Int32 = -1
        /// Written rows' new entries, in the order they were written (a later one wins).
        fileprivate(set) var bounds: [BoundsChange] = []
        fileprivate(set) var boundsUsable = true
        fileprivate var boundsLimit = Int.max
        fileprivate(set) var digestWatchers = 0
        fileprivate var digester: StoredRowDigest?
        /// The table's column index of each value the digest reads, in its order.
        fileprivate var digestColumns: [Int32] = []
        /// The XOR of the digests of the rows removed and added.
        fileprivate(set) var digest: UInt64 = 0
        /// Rows added less rows removed.
        fileprivate(set) var countChange = 0
        fileprivate(set) var digestUsable = true
        fileprivate(set) var rowWatchers = 0
        /// The ids of the rows written, in the order written (repeats kept).
        fileprivate(set) var rows: [Int64] = []
        fileprivate(set) var rowsUsable = true

        fileprivate init(table: String) {
            self.table = table
            cName = Array(table.utf8CString)
        }
    }

    /// Where a savepoint began, for ``restore(_:)``.
    struct Mark {
        fileprivate let states: [(watch: Watch, bounds: Int, boundsUsable: Bool, digest: UInt64, count: Int, digestUsable: Bool)]
    }

    private let handle: OpaquePointer
    private var watches: [Watch] = []
    private var row = CanonicalRow()
    private var values: [OpaquePointer] = []

    private init(handle: OpaquePointer) {
        self.handle = handle
    }

    // MARK: - Finding a connection's tracker

    /// Trackers with a hook installed, by connection handle.
    private static let installed = Locked<[UInt: RowChangeTracker]>([:])

    private static func key(_ handle: OpaquePointer) -> UInt { UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(handle))) }

    /// The tracker of `db`'s connection when something is watched there.
    static func existing(on db: Database) -> RowChangeTracker? {
        guard let handle = db.sqliteConnection else { return nil }
        return installed.withLock { $0[key(handle)] }
    }

    /// The tracker of `db`'s connection, its hook installed.
    private static func attached(to db: Database) throws -> RowChangeTracker {
        guard let handle = db.sqliteConnection else { throw StorageError(.sqlite, "the connection is closed") }
        return installed.withLock { trackers in
            if let known = trackers[key(handle)] { return known }
            let tracker = RowChangeTracker(handle: handle)
            trackers[key(handle)] = tracker
            _ = outpost_preupdate_hook(UnsafeMutableRawPointer(handle), rowChangeHook, Unmanaged.passUnretained(tracker).toOpaque())
            return tracker
        }
    }

    /// Removes the hook once nothing is watched.
    private func detachIfIdle() {
        guard watches.isEmpty else { return }
        Self.installed.withLock { trackers in
            _ = outpost_preupdate_hook(UnsafeMutableRawPointer(handle), nil, nil)
            trackers[Self.key(handle)] = nil
        }
    }

    /// Runs `body` (which prepares and runs statements on no watched table) with the hook
    /// removed, so SQLite may empty whole tables in one step (the R-tree's own, say).
    static func suspended<T>(on db: Database, _ body: () throws -> T) rethrows -> T {
        guard let tracker = existing(on: db) else { return try body() }
        _ = outpost_preupdate_hook(UnsafeMutableRawPointer(tracker.handle), nil, nil)
        defer { _ = outpost_preupdate_hook(UnsafeMutableRawPointer(tracker.handle), rowChangeHook, Unmanaged.passUnretained(tracker).toOpaque()) }
        return try body()
    }

    private func watch(_ table: String) -> Watch {
        if let known = watches.first(where: { $0.table.caseInsensitiveCompare(table) == .orderedSame }) { return known }
        let made = Watch(table: table)
        watches.append(made)
        return made
    }

    private func forget(_ watch: Watch) {
        guard watch.boundsWatchers == 0, watch.digestWatchers == 0, watch.rowWatchers == 0 else { return }
        watches.removeAll { $0 === watch }
        detachIfIdle()
    }

    /// The column index of each of `names` in `table` (-1 for a name it lacks).
    private static func columnIndices(_ db: Database, table: String, _ names: [String]) throws -> [Int32] {
        let columns = try Row.fetchAll(db, sql: "SELECT cid, name FROM pragma_table_info(?)", arguments: [table]).map { (Int32($0[0] as Int64), ($0[1] as String).lowercased()) }
        return names.map { name in columns.first { $0.1 == name.lowercased() }?.0 ?? -1 }
    }

    // MARK: - Watching

    /// Starts keeping the new R-tree entries of the rows of `table` written from now on, up to
    /// `limit` writes (after them the entries are dropped and reported unusable).
    static func watchBounds(of table: FeatureTable, upTo limit: Int, _ db: Database) throws {
        let tracker = try attached(to: db)
        let watch = tracker.watch(table.name)
        if watch.boundsWatchers == 0 {
            watch.geometryColumn = try columnIndices(db, table: table.name, [table.definition.geometryColumn])[0]
            watch.bounds = []
            watch.boundsUsable = watch.geometryColumn >= 0
            watch.boundsLimit = limit
        }
        watch.boundsWatchers += 1
    }

    /// Stops keeping `table`'s bounds; the entries written since ``watchBounds(of:_:)``, by row
    /// id, or nil when they cannot be used.
    static func endBounds(of table: String, _ db: Database) -> [Int64: RTreeEntry?]? {
        guard let tracker = existing(on: db), let watch = tracker.watches.first(where: { $0.table.caseInsensitiveCompare(table) == .orderedSame }),
            watch.boundsWatchers > 0
        else { return nil }
        watch.boundsWatchers -= 1
        var changes: [Int64: RTreeEntry?]?
        if watch.boundsUsable {
            var folded: [Int64: RTreeEntry?] = [:]
            folded.reserveCapacity(watch.bounds.count)
            for change in watch.bounds { folded[change.id] = .some(change.entry) }
            changes = folded
        }
        if watch.boundsWatchers == 0 { watch.bounds = [] }
        tracker.forget(watch)
        return changes
    }

    /// Starts adding up the digests of the rows of `layer`'s table removed and added from now on.
    static func watchDigests(of layer: LayerDefinition, _ db: Database) throws {
        let tracker = try attached(to: db)
        let watch = tracker.watch(layer.name)
        if watch.digestWatchers == 0 {
            let digester = StoredRowDigest(layer)
            var names = [layer.globalIDField ?? ""] + digester.fields.map(\.name)
            if layer.isSpatial { names.append(layer.geometryColumn) }
            watch.digestColumns = try columnIndices(db, table: layer.name, names)
            watch.digester = digester
            watch.digest = 0
            watch.countChange = 0
            // Without a global id column a layer does not sync, and has no stored checksum.
            watch.digestUsable = !watch.digestColumns.contains(-1)
        }
        watch.digestWatchers += 1
    }

    /// Whether some table's digests are being added up on `db`'s connection.
    static func watchesDigests(on db: Database) -> Bool {
        existing(on: db)?.watches.contains { $0.digestWatchers > 0 } ?? false
    }

    /// Stops adding up `table`'s digests; what the rows written since ``watchDigests(of:_:)``
    /// changed (the checksum to XOR in, the count to add), or nil when it cannot be used.
    static func endDigests(of table: String, _ db: Database) -> (digest: UInt64, countChange: Int)? {
        guard let tracker = existing(on: db), let watch = tracker.watches.first(where: { $0.table.caseInsensitiveCompare(table) == .orderedSame }),
            watch.digestWatchers > 0
        else { return nil }
        watch.digestWatchers -= 1
        let result = watch.digestUsable ? (watch.digest, watch.countChange) : nil
        tracker.forget(watch)
        return result
    }

    /// Starts keeping the ids of the rows of `table` written from now on.
    static func watchRows(of table: String, _ db: Database) throws {
        let tracker = try attached(to: db)
        let watch = tracker.watch(table)
        if watch.rowWatchers == 0 {
            watch.rows = []
            watch.rowsUsable = true
        }
        watch.rowWatchers += 1
    }

    /// Stops keeping `table`'s written rows; their ids since ``watchRows(of:_:)``, sorted and
    /// each once, or nil when a write could not be followed. A row a savepoint put back is
    /// still listed (its values are as they were): a superset of the rows that changed.
    static func endRows(of table: String, _ db: Database) -> [Int64]? {
        guard let tracker = existing(on: db), let watch = tracker.watches.first(where: { $0.table.caseInsensitiveCompare(table) == .orderedSame }),
            watch.rowWatchers > 0
        else { return nil }
        watch.rowWatchers -= 1
        var rows: [Int64]?
        if watch.rowsUsable {
            var ids = watch.rows
            ids.sort()
            var unique: [Int64] = []
            unique.reserveCapacity(ids.count)
            for id in ids where unique.last != id { unique.append(id) }
            rows = unique
        }
        if watch.rowWatchers == 0 { watch.rows = [] }
        tracker.forget(watch)
        return rows
    }

    // MARK: - Savepoints

    /// Where the watches stand (nil when nothing is watched on `db`'s connection).
    static func mark(_ db: Database) -> Mark? {
        guard let tracker = existing(on: db) else { return nil }
        return Mark(states: tracker.watches.map { ($0, $0.bounds.count, $0.boundsUsable, $0.digest, $0.countChange, $0.digestUsable) })
    }

    /// Takes out what was added up since `mark`: its savepoint rolled back.
    static func restore(_ mark: Mark?) {
        for state in mark?.states ?? [] {
            let watch = state.watch
            // Entries dropped since (past their limit) stay dropped, and unusable.
            if watch.bounds.count >= state.bounds {
                watch.bounds.removeSubrange(state.bounds...)
                watch.boundsUsable = state.boundsUsable
            }
            watch.digest = state.digest
            watch.countChange = state.count
            watch.digestUsable = state.digestUsable
        }
    }

    // MARK: - The hook

    fileprivate func rowChanged(_ db: UnsafeMutableRawPointer?, _ op: Int32, _ table: UnsafePointer<CChar>, before: Int64, after: Int64) {
        guard let watch = watches.first(where: { strcasecmp($0.cName, table) == 0 }) else { return }
        if outpost_preupdate_blobwrite(db) >= 0 {
            watch.boundsUsable = false
            watch.digestUsable = false
            watch.rowsUsable = false
            return
        }
        if watch.rowWatchers > 0 {
            if op != SQLITE_INSERT { watch.rows.append(before) }
            if op != SQLITE_DELETE, op == SQLITE_INSERT || after != before { watch.rows.append(after) }
        }
        if watch.digestWatchers > 0, watch.digestUsable {
            if op != SQLITE_INSERT {
                if let d = digest(watch, db, new: false) {
                    watch.digest ^= d
                    watch.countChange -= 1
                } else {
                    watch.digestUsable = false
                }
            }
            if op != SQLITE_DELETE {
                if let d = digest(watch, db, new: true) {
                    watch.digest ^= d
                    watch.countChange += 1
                } else {
                    watch.digestUsable = false
                }
            }
        }
        if watch.boundsWatchers > 0, watch.boundsUsable {
            if watch.bounds.count >= watch.boundsLimit {
                watch.boundsUsable = false
                watch.bounds = []
                return
            }
            if op == SQLITE_DELETE {
                watch.bounds.append(BoundsChange(id: before, entry: nil))
                return
            }
            if op == SQLITE_UPDATE, before != after { watch.bounds.append(BoundsChange(id: before, entry: nil)) }
            guard let geometry = value(db, watch.geometryColumn, new: true) else {
                watch.boundsUsable = false
                return
            }
            let stored = ColumnValue(value: geometry)
            let entry = stored.type == SQLITE_BLOB ? SpatialIndexRebuild.entry(id: after, blob: stored.blob) : nil
            watch.bounds.append(BoundsChange(id: after, entry: entry))
        }
    }

    private func value(_ db: UnsafeMutableRawPointer?, _ column: Int32, new: Bool) -> OpaquePointer? {
        var out: UnsafeMutableRawPointer?
        let rc = new ? outpost_preupdate_new(db, column, &out) : outpost_preupdate_old(db, column, &out)
        guard rc == SQLITE_OK, let out else { return nil }
        return OpaquePointer(out)
    }

    /// The digest of the row before (`new` false) or after the change; nil when SQLite does not
    /// hand over a value or the geometry does not decode.
    private func digest(_ watch: Watch, _ db: UnsafeMutableRawPointer?, new: Bool) -> UInt64? {
        guard let digester = watch.digester else { return nil }
        values.removeAll(keepingCapacity: true)
        for column in watch.digestColumns {
            guard let v = value(db, column, new: new) else { return nil }
            values.append(v)
        }
        return try? digester.digest(&row) { ColumnValue(value: values[Int($0)]) }
    }
}

/// SQLite's pre-update hook: hands the change to the tracker it was installed with.
private let rowChangeHook: outpost_preupdate_callback = { context, db, op, database, table, before, after in
    guard let context, let table, let database, strcmp(database, "main") == 0 else { return }
    Unmanaged<RowChangeTracker>.fromOpaque(context).takeUnretainedValue().rowChanged(db, op, table, before: before, after: after)
}

extension GeodatabaseConnection {
    /// Runs `body` (in this connection's write transaction) and lists, for each of `tables`,
    /// the ids of the rows it removed, replaced or added, sorted, each once: SQLite's pre-update
    /// hook shows every such row whatever statement or trigger writes it (`RowChangeTracker`).
    /// A table whose writes the hook could not follow (an incremental blob write) is listed as
    /// nil. Rows a savepoint put back may be listed: their values are as they were. A server
    /// that keeps a layer's whole checksum hashes just these rows, before the commit on a reader
    /// of the data the transaction started from and after it, instead of the whole layer.
    public func trackingWrittenRows<T>(of tables: [String], _ body: () throws -> T) throws -> (result: T, rows: [String: [Int64]?]) {
        var started: [String] = []
        let result: T
        do {
            for table in tables {
                try RowChangeTracker.watchRows(of: table, db)
                started.append(table)
            }
            result = try body()
        } catch {
            for table in started { _ = RowChangeTracker.endRows(of: table, db) }
            throw error
        }
        var rows: [String: [Int64]?] = [:]
        for table in tables { rows[table] = .some(RowChangeTracker.endRows(of: table, db)) }
        return (result, rows)
    }
}
