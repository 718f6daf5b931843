import Foundation
import GRDB
import OutpostCore

/// The replica bookkeeping tables (extension `outpost_sync`, write-only, not in `gpkg_contents`).
enum ReplicaTables {
    static let ddl = [
        "CREATE TABLE IF NOT EXISTS outpost_replica (id INTEGER PRIMARY KEY CHECK (id = 1), state TEXT NOT NULL)",
        """
        CREATE TABLE IF NOT EXISTS outpost_batches (
          seq INTEGER PRIMARY KEY,
          batch_id TEXT NOT NULL,
          hash TEXT NOT NULL,
          body BLOB NOT NULL,
          covers_change_id INTEGER NOT NULL,
          tables TEXT NOT NULL DEFAULT '[]',
          state TEXT NOT NULL CHECK (state IN ('sealed', 'acked')),
          result TEXT,
          sealed_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
        )
        """,
        """
        CREATE TABLE IF NOT EXISTS outpost_rejected (
          rejection_id INTEGER PRIMARY KEY AUTOINCREMENT,
          table_name TEXT NOT NULL,
          globalid TEXT NOT NULL,
          op TEXT NOT NULL,
          reason TEXT NOT NULL,
          seq INTEGER NOT NULL,
          pending INTEGER NOT NULL DEFAULT 0,
          edit TEXT,
          at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
        )
        """,
        """
        CREATE TABLE IF NOT EXISTS outpost_staging (
          layer_id INTEGER NOT NULL,
          globalid TEXT NOT NULL,
          kind TEXT NOT NULL,
          generation INTEGER NOT NULL,
          row TEXT,
          PRIMARY KEY (layer_id, globalid)
        )
        """,
        """
        CREATE TABLE IF NOT EXISTS outpost_conflicts (
          conflict_id INTEGER PRIMARY KEY AUTOINCREMENT,
          server_id INTEGER,
          table_name TEXT NOT NULL,
          globalid TEXT NOT NULL,
          kind TEXT NOT NULL,
          record TEXT NOT NULL,
          seq INTEGER,
          at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
          state TEXT,
          resolution TEXT,
          resolved_at TEXT,
          sent_in_seq INTEGER
        )
        """,
    ]
    /// Columns added to the tables above since they first shipped (added when missing).
    static let addedColumns = [
        ("outpost_conflicts", "state", "TEXT"), ("outpost_conflicts", "resolution", "TEXT"), ("outpost_conflicts", "resolved_at", "TEXT"),
        ("outpost_conflicts", "sent_in_seq", "INTEGER"),
    ]
    static let names = ["outpost_replica", "outpost_batches", "outpost_rejected", "outpost_staging", "outpost_conflicts"]

    static func install(_ db: Database) throws {
        for sql in ddl { try db.execute(sql: sql) }
        for (table, column, declaration) in addedColumns where try !db.columns(in: table).contains(where: { $0.name == column }) {
            try db.execute(sql: "ALTER TABLE \(quotedIdentifier(table)) ADD COLUMN \(quotedIdentifier(column)) \(declaration)")
        }
        for name in names {
            try db.execute(
                sql: """
                    INSERT OR IGNORE INTO gpkg_extensions (table_name, column_name, extension_name, definition, scope)
                    VALUES (?, NULL, ?, ?, 'write-only')
                    """,
                arguments: [name, ChangeCapture.extensionName, ChangeCapture.extensionDefinition])
        }
    }
}

extension GeodatabaseConnection {
    /// The replica this geodatabase is, or nil for a geodatabase that is not a replica.
    public func replicaState() throws -> ReplicaState? {
        guard try db.tableExists("outpost_replica"),
            let text = try String.fetchOne(db, sql: "SELECT state FROM outpost_replica WHERE id = 1")
        else { return nil }
        return try Self.decoder.decode(ReplicaState.self, from: Data(text.utf8))
    }

    /// Records the replica state (inside the caller's transaction).
    public func setReplicaState(_ state: ReplicaState) throws {
        try ReplicaTables.install(db)
        // Attachments added from now on are captured for upload when the replica sends them.
        if state.attachmentsDirection == .upload || state.attachmentsDirection == .bidirectional { try installAttachmentCapture() }
        let text = String(decoding: try Self.encoder.encode(state), as: UTF8.self)
        try db.execute(
            sql: "INSERT INTO outpost_replica (id, state) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET state = excluded.state",
            arguments: [text])
        // What the capture triggers record as an edit's base generation.
        if try db.tableExists("outpost_layer_cursor") {
            for layer in state.layers {
                try db.execute(
                    sql: "INSERT INTO outpost_layer_cursor (table_name, cursor) VALUES (?, ?) ON CONFLICT (table_name) DO UPDATE SET cursor = excluded.cursor",
                    arguments: [layer.table, state.cursor(forLayer: layer.id)])
            }
        }
    }

    static var encoder: JSONEncoder {
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys]
        e.dateEncodingStrategy = .millisecondsSince1970
        return e
    }

    static var decoder: JSONDecoder {
        let d = JSONDecoder()
        d.dateDecodingStrategy = .millisecondsSince1970
        return d
    }

    // MARK: - Batches

    /// The sealed batch waiting for its acknowledgement, if any (at most one exists).
    public func sealedBatch() throws -> StoredBatch? {
        guard try db.tableExists("outpost_batches") else { return nil }
        guard let row = try Row.fetchOne(
            db, sql: "SELECT seq, batch_id, hash, body, covers_change_id, sealed_at, tables FROM outpost_batches WHERE state = 'sealed' ORDER BY seq LIMIT 1")
        else { return nil }
        let tables = (try? JSONValue.parse(row[6] as String).arrayValue?.compactMap(\.stringValue)) ?? []
        return StoredBatch(seq: row[0], batchID: row[1], hash: row[2], body: row[3], coversChangeID: row[4], tables: tables, sealedAt: row[5])
    }

    /// Stores a newly sealed batch.
    public func storeSealedBatch(_ batch: StoredBatch) throws {
        try ReplicaTables.install(db)
        guard try sealedBatch() == nil else {
            throw StorageError(.transactionState, "a sealed batch (seq \(try sealedBatch()!.seq)) is still waiting for its acknowledgement")
        }
        try db.execute(
            sql: "INSERT INTO outpost_batches (seq, batch_id, hash, body, covers_change_id, tables, state) VALUES (?, ?, ?, ?, ?, ?, 'sealed')",
            arguments: [batch.seq, batch.batchID, batch.hash, batch.body, batch.coversChangeID, JSONValue.arrayText(batch.tables)])
    }

    /// Records the server's acknowledgement: the batch's change rows go, rejected edits are kept
    /// as rejections, the replica's last acknowledged seq advances. One transaction (invariant I2).
    public func acknowledgeBatch(seq: Int64, result: String, rejected: [RejectedEdit], conflicts: [SyncConflict] = []) throws {
        guard let batch = try sealedBatch(), batch.seq == seq else {
            throw StorageError(.transactionState, "no sealed batch \(seq) to acknowledge")
        }
        try deleteChangeRows(upTo: batch.coversChangeID, of: batch.tables)
        try db.execute(sql: "UPDATE outpost_batches SET state = 'acked', result = ?, body = x'' WHERE seq = ?", arguments: [result, seq])
        // Older acknowledged batches are no longer needed.
        try db.execute(sql: "DELETE FROM outpost_batches WHERE state = 'acked' AND seq < ?", arguments: [seq])
        try db.execute(sql: "DELETE FROM outpost_rejected WHERE pending = 1")
        try insertRejections(rejected, pending: false)
        for c in conflicts {
            try db.execute(
                sql: "INSERT INTO outpost_conflicts (server_id, table_name, globalid, kind, record, seq, state) VALUES (?, ?, ?, ?, ?, ?, ?)",
                arguments: [c.serverID, c.table, c.globalID, c.kind, c.record, seq, c.state])
        }
        if var state = try replicaState() {
            state.lastAckedSeq = seq
            try setReplicaState(state)
        }
    }

    /// Deletes the change rows of `tables` up to `changeID`, an acknowledged batch's. When they are
    /// all the table holds (the usual case: nothing was edited since the seal), the table is
    /// emptied in one step, SQLite's truncation, which frees its pages without changing them;
    /// deleted row by row, each of the ~800 leaf pages of 16,000 rows was changed and written to
    /// the WAL (a 16,000-row model of the table through the same SQLite: 13.8 ms and 944 frames,
    /// against 4.5 ms and 3). The pre-update hook is off for it, as SQLite truncates only
    /// without one. The table's `AUTOINCREMENT` sequence stays, so change ids keep growing.
    func deleteChangeRows(upTo changeID: Int64, of tables: [String]) throws {
        let list = JSONValue.arrayText(tables)
        // A row the acknowledgement does not cover: a later one, or another table's.
        let others = try Bool.fetchOne(
            db, sql: "SELECT EXISTS (SELECT 1 FROM outpost_changes WHERE change_id > ? OR table_name NOT IN (SELECT value FROM json_each(?)))",
            arguments: [changeID, list]) ?? true
        if !others {
            try RowChangeTracker.suspended(on: db) { try db.execute(sql: "DELETE FROM outpost_changes") }
        } else {
            try db.execute(
                sql: "DELETE FROM outpost_changes WHERE change_id <= ? AND table_name IN (SELECT value FROM json_each(?))", arguments: [changeID, list])
        }
    }

    /// Withdraws a sealed batch the server rejected as a whole (rollback on failure): its
    /// changes stay pending, with the reasons recorded as pending rejections.
    public func withdrawSealedBatch(seq: Int64, rejected: [RejectedEdit]) throws {
        try db.execute(sql: "DELETE FROM outpost_batches WHERE seq = ? AND state = 'sealed'", arguments: [seq])
        // Resolutions the batch carried go into the next one.
        try db.execute(sql: "UPDATE outpost_conflicts SET sent_in_seq = NULL WHERE sent_in_seq = ?", arguments: [seq])
        try db.execute(sql: "DELETE FROM outpost_rejected WHERE pending = 1")
        try insertRejections(rejected, pending: true)
    }

    private func insertRejections(_ rejected: [RejectedEdit], pending: Bool) throws {
        for r in rejected {
            try db.execute(
                sql: "INSERT INTO outpost_rejected (table_name, globalid, op, reason, seq, pending, edit) VALUES (?, ?, ?, ?, ?, ?, ?)",
                arguments: [r.layer, r.globalID, r.operation, r.reason, r.seq, pending, r.edit])
        }
    }

    /// Edits the server refused (and, with `pending`, those of a rolled-back upload).
    public func rejectedEdits() throws -> [RejectedEdit] {
        guard try db.tableExists("outpost_rejected") else { return [] }
        return try Row.fetchAll(db, sql: "SELECT table_name, globalid, op, reason, seq, pending, at, edit FROM outpost_rejected ORDER BY rejection_id").map {
            RejectedEdit(layer: $0[0], globalID: $0[1], operation: $0[2], reason: $0[3], seq: $0[4], pending: $0[5], at: $0[6], edit: $0[7])
        }
    }

    /// The highest captured change id (0 when none): what a batch sealed now would cover.
    public func lastChangeID() throws -> Int64 {
        guard try db.tableExists(ChangeCapture.changesTable) else { return 0 }
        return try Int64.fetchOne(db, sql: "SELECT coalesce(max(change_id), 0) FROM outpost_changes") ?? 0
    }

    /// The change id a batch of at most `maxChanges` change rows of `tables` would cover (the
    /// oldest rows first, those after change id `after` only), nil when nothing is pending.
    public func sealLimit(maxChanges: Int, tables: [String], after: Int64 = 0) throws -> Int64? {
        try sealSpan(maxChanges: maxChanges, tables: tables, after: after)?.limit
    }

    /// ``sealLimit(maxChanges:tables:after:)`` and how many change rows of `tables` the batch
    /// covers, from one pass over their ids (asked as two or three, a seal of 16,000 rows read
    /// them all each time before its first frame could go).
    public func sealSpan(maxChanges: Int, tables: [String], after: Int64 = 0) throws -> SealSpan? {
        guard try db.tableExists(ChangeCapture.changesTable) else { return nil }
        let row = try Row.fetchOne(
            db,
            sql: """
                SELECT count(*), max(change_id), min(change_id) FROM (SELECT change_id FROM outpost_changes
                WHERE change_id > ? AND table_name IN (SELECT value FROM json_each(?)) ORDER BY change_id LIMIT ?)
                """,
            arguments: [after, JSONValue.arrayText(tables), max(maxChanges, 1)])
        guard let row, let count = row[0] as Int?, count > 0, let limit = row[1] as Int64?, let first = row[2] as Int64? else { return nil }
        return SealSpan(limit: limit, count: count, first: first)
    }

    /// The change rows a batch covers (``sealSpan(maxChanges:tables:after:)``).
    public struct SealSpan: Equatable, Sendable {
        /// The last row's change id.
        public var limit: Int64
        /// How many rows.
        public var count: Int
        /// The first row's change id.
        public var first: Int64
    }

    /// From this many change rows a seal reads its span in two halves at once
    /// (``capturedChanges(in:tables:)``; a chosen bound, not a measured one: 16,000 rows took
    /// 20–24 ms to read in `outpost-bench sync`, a few hundred are not worth a thread).
    static let halvedReadRows = 4_000

    /// How many spans were read in halves (for tests).
    static let halvedReads = Locked(0)

    /// Captured changes of `tables` after change id `after` up to `changeID`, by table and
    /// global id, oldest first within each feature.
    public func capturedChanges(upTo changeID: Int64, after: Int64 = 0, tables: [String]) throws -> [CapturedChange] {
        // Read in change id order (a range of the key) and sorted here by short keys: SQLite's
        // sorter took ~40 ms of a 16,000-edit seal, sorting the rows themselves in Swift ~50.
        CapturedChange.sortedByFeature(try capturedChanges(after: after, upTo: changeID, tables: JSONValue.arrayText(tables)))
    }

    /// The change rows of `tables` (a JSON list) in `after < change_id ≤ upTo`, in change id order.
    private func capturedChanges(after: Int64, upTo: Int64, tables: String) throws -> [CapturedChange] {
        try capturedChanges(
            where: "change_id > ? AND change_id <= ? AND table_name IN (SELECT value FROM json_each(?))",
            arguments: [.integer(after), .integer(upTo), .text(tables)], order: "change_id")
    }

    /// The captured changes of `span` (found by ``sealSpan(maxChanges:tables:after:)`` in this
    /// transaction), as ``capturedChanges(upTo:after:tables:)`` gives them. A large span is read in
    /// two halves at once, the older one on a reader of the committed data on a second thread:
    /// a seal reads its rows before the batch's first frame can go, while the service waits.
    /// For a transaction that has not written change rows (the reader sees them as last
    /// committed; an explicit transaction reads them all here); the older half is read here
    /// instead when the reader is not to be had or found another number of rows than the span's.
    public func capturedChanges(in span: SealSpan, tables: [String]) throws -> [CapturedChange] {
        let list = JSONValue.arrayText(tables), after = span.first - 1
        guard span.count >= Self.halvedReadRows, span.limit > span.first, isWritable, !geodatabase.isInTransaction else {
            return CapturedChange.sortedByFeature(try capturedChanges(after: after, upTo: span.limit, tables: list))
        }
        let middle = span.first + (span.limit - span.first) / 2
        let geodatabase = self.geodatabase
        let older = AsideRead { try geodatabase.readCommittedBlocking { reader in try reader.capturedChanges(after: after, upTo: middle, tables: list) } }
        let newer: [CapturedChange]
        do {
            newer = try capturedChanges(after: middle, upTo: span.limit, tables: list)
        } catch {
            _ = older.wait()
            throw error
        }
        var changes: [CapturedChange]
        if case .success(let read?) = older.wait(), read.count + newer.count == span.count {
            changes = read
            Self.halvedReads.withLock { $0 += 1 }
        } else {
            changes = try capturedChanges(after: after, upTo: middle, tables: list)
        }
        changes.append(contentsOf: newer)
        return CapturedChange.sortedByFeature(consume changes)
    }

    /// How many change rows of `tables` up to `changeID` are pending, and the oldest one's id.
    /// Change ids only grow and rows go only with an acknowledgement, so equal spans are the
    /// same rows.
    public func pendingChangeSpan(upTo changeID: Int64, tables: [String]) throws -> (count: Int, first: Int64?) {
        guard try db.tableExists(ChangeCapture.changesTable) else { return (0, nil) }
        let row = try Row.fetchOne(
            db, sql: "SELECT count(*), min(change_id) FROM outpost_changes WHERE change_id <= ? AND table_name IN (SELECT value FROM json_each(?))",
            arguments: [changeID, JSONValue.arrayText(tables)])
        return (row?[0] ?? 0, row?[1])
    }

    /// Captured changes of some features of a table.
    public func capturedChanges(table: String, globalIDs: [String]) throws -> [CapturedChange] {
        guard !globalIDs.isEmpty else { return [] }
        return try capturedChanges(
            where: "table_name = ? AND globalid IN (SELECT value FROM json_each(?))",
            arguments: [.text(table), .text(JSONValue.arrayText(globalIDs))], order: "change_id")
    }

    // MARK: - Download staging

    /// Stages downloaded rows (durably) before they are applied together.
    public func stage(layerID: Int, globalID: String, kind: String, generation: Int64, row: String?) throws {
        try db.cachedStatement(
            sql: """
                INSERT INTO outpost_staging (layer_id, globalid, kind, generation, row) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT (layer_id, globalid) DO UPDATE SET kind = excluded.kind, generation = excluded.generation, row = excluded.row
                WHERE excluded.generation >= outpost_staging.generation
                """
        ).execute(arguments: [layerID, globalID, kind, generation, row])
    }

    /// How many changes of a layer are staged.
    public func stagedCount(layerID: Int) throws -> Int {
        guard try db.tableExists("outpost_staging") else { return 0 }
        return try Int.fetchOne(db, sql: "SELECT count(*) FROM outpost_staging WHERE layer_id = ?", arguments: [layerID]) ?? 0
    }

    /// A change staged by a download: the feature's global id, the kind of change, its
    /// generation, and the feed's JSON of the row (nil for a delete or a leave).
    public typealias StagedRow = (globalID: String, kind: String, generation: Int64, row: String?)

    /// Staged rows of a layer after global id `after`, at most `limit`, in global id order.
    public func stagedRows(layerID: Int, after: String = "", limit: Int = 1000) throws -> [StagedRow] {
        guard try db.tableExists("outpost_staging") else { return [] }
        return try Row.fetchAll(
            db, sql: "SELECT globalid, kind, generation, row FROM outpost_staging WHERE layer_id = ? AND globalid > ? ORDER BY globalid LIMIT ?",
            arguments: [layerID, after, limit]
        ).map { ($0[0], $0[1], $0[2], $0[3]) }
    }

    /// Staged rows of a layer whose feature `table` holds: each one's row id in the staging table
    /// and the feature's object id, for global ids after `after` in global-id order, at most
    /// `limit`; and the last global id read (nil when none is left).
    public func stagedRowsOfLocalFeatures(
        layerID: Int, table: String, globalIDField: String, objectIDField: String, after: String, limit: Int
    ) throws -> (keys: [(objectID: Int64, rowID: Int64)], last: String?) {
        guard try db.tableExists("outpost_staging") else { return ([], nil) }
        let cursor = try Row.fetchCursor(
            db,
            sql: """
                SELECT t.\(quoted(objectIDField)), s.rowid, s.globalid FROM outpost_staging s
                JOIN \(quoted(table)) t ON t.\(quoted(globalIDField)) = s.globalid
                WHERE s.layer_id = ? AND s.globalid > ? ORDER BY s.globalid LIMIT ?
                """,
            arguments: [layerID, after, limit])
        var keys: [(objectID: Int64, rowID: Int64)] = []
        var last: String?
        while let row = try cursor.next() {
            keys.append((row[0], row[1]))
            last = row[2]
        }
        return (keys, last)
    }

    /// Staged rows by their row ids in the staging table (keyed by row id).
    public func stagedRows(rowIDs: [Int64]) throws -> [Int64: StagedRow] {
        guard try db.tableExists("outpost_staging"), !rowIDs.isEmpty else { return [:] }
        var out: [Int64: StagedRow] = [:]
        out.reserveCapacity(rowIDs.count)
        for row in try Row.fetchAll(
            db, sql: "SELECT rowid, globalid, kind, generation, row FROM outpost_staging WHERE rowid IN (SELECT value FROM json_each(?))",
            arguments: [JSONValue.array(rowIDs.map { .integer($0) }).jsonString])
        {
            out[row[0]] = (row[1], row[2], row[3], row[4])
        }
        return out
    }

    /// Staged upserts of a layer whose feature `table` does not hold (new features, and features
    /// gone here), after global id `after`, at most `limit`, in global-id order. (A leave of a
    /// feature the table does not hold changes nothing, so none is read.)
    public func stagedUpsertsWithoutLocalFeature(
        layerID: Int, table: String, globalIDField: String, after: String, limit: Int
    ) throws -> [StagedRow] {
        guard try db.tableExists("outpost_staging") else { return [] }
        return try Row.fetchAll(
            db,
            sql: """
                SELECT globalid, kind, generation, row FROM outpost_staging s WHERE layer_id = ? AND globalid > ? AND kind = 'upsert'
                AND NOT EXISTS (SELECT 1 FROM \(quoted(table)) t WHERE t.\(quoted(globalIDField)) = s.globalid)
                ORDER BY globalid LIMIT ?
                """,
            arguments: [layerID, after, limit]
        ).map { ($0[0], $0[1], $0[2], $0[3]) }
    }

    /// Whether any downloaded row is staged (of one layer, or of any).
    public func hasStagedRows(layerID: Int? = nil) throws -> Bool {
        guard try db.tableExists("outpost_staging") else { return false }
        if let layerID {
            return try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM outpost_staging WHERE layer_id = ?)", arguments: [layerID]) ?? false
        }
        return try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM outpost_staging)") ?? false
    }

    /// Empties the staging table of downloaded rows (of one layer, or of all). With nothing
    /// staged it writes nothing: SQLite's `DELETE` of an empty table still writes a page, and
    /// the commit then syncs every WAL frame before it (a fresh download's clearing, right after
    /// an upload's acknowledgement, waited ~50 ms for the disk).
    public func clearStaging(layerID: Int? = nil) throws {
        guard try hasStagedRows(layerID: layerID) else { return }
        if let layerID {
            try db.execute(sql: "DELETE FROM outpost_staging WHERE layer_id = ?", arguments: [layerID])
        } else {
            try db.execute(sql: "DELETE FROM outpost_staging")
        }
    }

    /// Whether any captured change of `table` is pending (not yet acknowledged by the server).
    public func hasCapturedChanges(table: String) throws -> Bool {
        guard try db.tableExists(ChangeCapture.changesTable) else { return false }
        return try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM outpost_changes WHERE table_name = ?)", arguments: [table]) ?? false
    }

    /// Columns with pending local changes (sealed or not) of some features of a table ("*" when
    /// the feature was inserted or deleted locally): what a download must not overwrite.
    public func pendingColumns(table: String, globalIDs: [String]) throws -> [String: Set<String>] {
        var out: [String: Set<String>] = [:]
        for change in try capturedChanges(table: table, globalIDs: globalIDs) {
            guard let gid = change.globalID else { continue }
            switch change.operation {
            case .insert, .delete: out[gid, default: []].insert("*")
            case .update: out[gid, default: []].formUnion(change.changedColumns)
            }
        }
        return out
    }
}

/// Work run on a thread of its own while the caller goes on, and waited for once.
final class AsideRead<T: Sendable>: @unchecked Sendable {
    private let done = DispatchSemaphore(value: 0)
    private var result: Result<T, any Error>?

    init(_ body: @escaping @Sendable () throws -> T) {
        let thread = Thread { [self] in
            result = Result { try body() }
            done.signal()
        }
        thread.start()
    }

    /// The work's result, once it has ended.
    func wait() -> Result<T, any Error> {
        done.wait()
        return result!
    }
}
