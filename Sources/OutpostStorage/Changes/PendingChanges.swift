import Foundation
import GRDB
import OutpostCore

/// Local edits not yet synced, counted per edited feature after coalescing (insert then update is
/// one insert; insert then delete is nothing; updates merge).
public struct PendingChanges: Hashable, Sendable, Codable {
    /// Features added.
    public var inserts: Int
    /// Features changed.
    public var updates: Int
    /// Features deleted.
    public var deletes: Int

    /// Counts as given.
    public init(inserts: Int = 0, updates: Int = 0, deletes: Int = 0) {
        self.inserts = inserts
        self.updates = updates
        self.deletes = deletes
    }

    /// All three together.
    public var total: Int { inserts + updates + deletes }
}

/// What a run of captured changes of one feature amounts to.
public enum CoalescedOperation: String, Sendable, Hashable, Codable {
    /// Added, changed or deleted.
    case insert, update, delete

    /// The net effect of a feature's first and last captured operations, or nil when they cancel
    /// out (added and deleted again before any sync).
    public static func coalesce(first: String, last: String) -> CoalescedOperation? {
        switch (first, last) {
        case ("insert", "delete"): nil
        case ("insert", _): .insert
        case (_, "delete"): .delete
        default: .update
        }
    }
}

extension FeatureTable {
    /// Pending local edits of this table.
    public func pendingChanges(in conn: GeodatabaseConnection) throws -> PendingChanges {
        var result = PendingChanges()
        guard definition.sync, try conn.db.tableExists(ChangeCapture.changesTable) else { return result }
        let rows = try Row.fetchAll(
            conn.db,
            sql: """
                SELECT f.op, l.op FROM (
                  SELECT min(change_id) AS first_id, max(change_id) AS last_id
                  FROM outpost_changes WHERE table_name = ? GROUP BY globalid
                ) g
                JOIN outpost_changes f ON f.change_id = g.first_id
                JOIN outpost_changes l ON l.change_id = g.last_id
                """,
            arguments: [name])
        for row in rows {
            switch CoalescedOperation.coalesce(first: row[0], last: row[1]) {
            case .insert?: result.inserts += 1
            case .update?: result.updates += 1
            case .delete?: result.deletes += 1
            case nil: break
            }
        }
        return result
    }

    /// The layer's edits waiting to sync, counted per feature after coalescing.
    public func pendingChanges() async throws -> PendingChanges {
        try await geodatabase.read { conn in try self.pendingChanges(in: conn) }
    }
}

extension GeodatabaseConnection {
    /// Runs `body` with change capture off: for applying changes downloaded from the server, which
    /// must not be echoed back as local edits. The flag is set and cleared inside the current
    /// transaction, so a crash can never leave capture off. In a replica, the layers' stored
    /// checksums are kept current through what `body` writes (`keepingStoredChecksums(_:)`).
    public func withChangeCaptureSilenced<T>(_ body: () throws -> T) throws -> T {
        guard try db.tableExists(ChangeCapture.flagTable) else { return try body() }
        guard db.isInsideTransaction else {
            throw StorageError(.transactionState, "capture can be silenced only inside a write transaction")
        }
        try db.execute(sql: "UPDATE outpost_capture SET silenced = 1 WHERE id = 1")
        defer { try? db.execute(sql: "UPDATE outpost_capture SET silenced = 0 WHERE id = 1") }
        return try keepingStoredChecksums(body)
    }

    /// Below this many rows written a table's capture triggers stay in place while silenced:
    /// setting them aside changes the schema, which makes every connection prepare its
    /// statements again.
    static let captureSetAsideMinimum = 512

    /// Runs `body`, which writes about `expectedWrites` rows of `table` inside
    /// ``withChangeCaptureSilenced(_:)``, with the table's insert, update and delete capture
    /// triggers dropped, and re-created from their stored SQL after it, in the same transaction.
    /// Silenced, they record nothing, but each written row still runs them as far as their
    /// condition, and a write that fires triggers keeps a statement journal: 1–2 µs a row of a
    /// large download. A reader never sees the file without them (the transaction commits with
    /// them back), a rollback restores them, and they are made whole even when `body` fails; the
    /// commit is refused if one is missing. With capture on, or for fewer writes than
    /// `captureSetAsideMinimum`, `body` runs with the triggers in place.
    public func withCaptureTriggersSetAside<T>(of table: String, expectedWrites: Int, _ body: () throws -> T) throws -> T {
        guard expectedWrites >= Self.captureSetAsideMinimum, try db.tableExists(ChangeCapture.flagTable),
            try Int.fetchOne(db, sql: "SELECT silenced FROM outpost_capture WHERE id = 1") == 1
        else { return try body() }
        let names = ChangeCapture.writeTriggerNames(table: table)
        let saved = try GeoPackageDDL.setAside(names, db)
        func restore() throws {
            for sql in saved { try db.execute(sql: sql) }
            let back = try Int.fetchOne(
                db, sql: "SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name IN (SELECT value FROM json_each(?))",
                arguments: [JSONValue.arrayText(names)]) ?? 0
            guard back == saved.count else {
                throw StorageError(.corrupt, "the change capture triggers of \(table) were not restored", table: table)
            }
        }
        let result: T
        do {
            result = try body()
        } catch {
            try? restore()
            throw error
        }
        try restore()
        return result
    }

    /// Captured change rows, oldest first (for inspection and for sealing upload batches).
    public func capturedChanges(table: String? = nil) throws -> [CapturedChange] {
        if let table { return try capturedChanges(where: "table_name = ?", arguments: [.text(table)], order: "change_id") }
        return try capturedChanges(where: nil, arguments: [], order: "change_id")
    }

    func capturedChanges(where condition: String?, arguments: [SQLLiteral], order: String) throws -> [CapturedChange] {
        guard try db.tableExists(ChangeCapture.changesTable) else { return [] }
        var sql = "SELECT change_id, table_name, fid, globalid, op, changed_columns, old_values, old_geometry, edited_at, base_gen FROM outpost_changes"
        if let condition { sql += " WHERE " + condition }
        sql += " ORDER BY " + order
        // Rows read in place through the C API (a seal reads thousands): the table name and
        // each distinct column list made once (a batch's updates mostly share a handful of
        // them), the operation told by its bytes.
        var table = ""
        var columnLists: [[UInt8]: [String]] = [:]
        var lastColumns: (text: [UInt8], names: [String]) = ([], [])
        var changes: [CapturedChange] = []
        try forEachRow(sql, arguments: arguments) { row in
            if !row.withText(1, { $0?.elementsEqual(table.utf8) ?? false }) { table = row.text(1) ?? "" }
            var columns: [String] = []
            row.withText(5) { text in
                guard let text else { return }
                if text.elementsEqual(lastColumns.text) {
                    columns = lastColumns.names
                    return
                }
                let key = [UInt8](text)
                if let known = columnLists[key] {
                    columns = known
                } else {
                    columns = (try? JSONValue.parse(text).arrayValue?.compactMap(\.stringValue)) ?? []
                    columnLists[key] = columns
                }
                lastColumns = (key, columns)
            }
            let operation = row.withText(4) { text -> CoalescedOperation in
                guard let text, let first = text.first else { return .update }
                return first == UInt8(ascii: "i") && text.elementsEqual("insert".utf8) ? .insert : first == UInt8(ascii: "d") && text.elementsEqual("delete".utf8) ? .delete : .update
            }
            changes.append(CapturedChange(
                id: row.integer(0) ?? 0, table: table, objectID: row.integer(2) ?? 0, globalID: row.text(3), operation: operation,
                changedColumns: columns, oldValuesJSON: row.text(6), oldGeometry: row.bytes(7), editedAt: row.text(8) ?? "",
                baseGeneration: row.integer(9)))
        }
        return changes
    }
}

/// One row of `outpost_changes`: a committed local edit as the capture triggers recorded it.
public struct CapturedChange: Hashable, Sendable {
    /// The change's sequence number in the change log.
    public var id: Int64
    /// The table of the feature changed.
    public var table: String
    /// The feature's object id.
    public var objectID: Int64
    /// The feature's global id.
    public var globalID: String?
    /// Added, changed or deleted.
    public var operation: CoalescedOperation
    /// Columns an update changed (the geometry column included when it changed).
    public var changedColumns: [String]
    /// Values before the edit: the changed columns of an update, every attribute of a delete.
    /// Blob values are `"base16:<hex>"`. Read from ``oldValuesJSON`` when asked: a seal asks
    /// for them feature by feature as it writes the batch (parsing them all before its first
    /// edit was half of reading a 16,000-edit batch's change rows).
    public var oldValues: [String: JSONValue] { oldValuesJSON.flatMap { try? JSONValue.parse($0).objectValue } ?? [:] }
    /// The old values as the capture trigger wrote them (a JSON object).
    public var oldValuesJSON: String?
    /// The GeoPackage geometry blob before the edit, when the geometry changed or the row was deleted.
    public var oldGeometry: [UInt8]?
    /// When the edit was made (UTC, GeoPackage DATETIME text).
    public var editedAt: String
    /// The server generation the table had been downloaded up to when the edit was made.
    public var baseGeneration: Int64?

    init(
        id: Int64, table: String, objectID: Int64, globalID: String?, operation: CoalescedOperation, changedColumns: [String], oldValuesJSON: String?,
        oldGeometry: [UInt8]?, editedAt: String, baseGeneration: Int64?
    ) {
        self.id = id
        self.table = table
        self.objectID = objectID
        self.globalID = globalID
        self.operation = operation
        self.changedColumns = changedColumns
        self.oldValuesJSON = oldValuesJSON
        self.oldGeometry = oldGeometry
        self.editedAt = editedAt
        self.baseGeneration = baseGeneration
    }

    init(
        id: Int64, table: String, objectID: Int64, globalID: String?, operation: CoalescedOperation, changedColumns: [String], oldValues: [String: JSONValue],
        oldGeometry: [UInt8]?, editedAt: String, baseGeneration: Int64?
    ) {
        self.init(
            id: id, table: table, objectID: objectID, globalID: globalID, operation: operation, changedColumns: changedColumns,
            oldValuesJSON: oldValues.isEmpty ? nil : JSONValue.object(oldValues).jsonString, oldGeometry: oldGeometry, editedAt: editedAt,
            baseGeneration: baseGeneration)
    }

    /// `changes` (read in change id order) in the order of SQLite's `ORDER BY table_name,
    /// globalid, change_id` (text by its bytes, a null global id first): each feature's changes
    /// together, oldest first. Sorted by short keys — a table's rank, a global id's first 16
    /// bytes, the row's place — and only runs of keys that tie on those (global ids that share
    /// their first 16 bytes) are sorted again by the rows themselves.
    static func sortedByFeature(_ changes: consuming [CapturedChange]) -> [CapturedChange] {
        var sorted = consume changes
        let tables = Set(sorted.map(\.table)).sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        let rank = Dictionary(uniqueKeysWithValues: tables.enumerated().map { ($1, $0) })
        var keys: [SortKey] = []
        keys.reserveCapacity(sorted.count)
        // The rows are looked at in place and moved, never copied: a copy retains and releases
        // each of a row's strings and arrays (7 ms of a 16,000-row seal, before its first frame).
        sorted.withUnsafeBufferPointer { rows in
            for index in rows.indices {
                let (high, low) = rows[index].globalID.map(Self.prefixKey) ?? (0, 0)
                keys.append(SortKey(table: rank[rows[index].table] ?? 0, high: high, low: low, index: index))
            }
        }
        keys.sort()
        // Row keys[i].index belongs at i.
        var placed = [Bool](repeating: false, count: keys.count)
        sorted.withUnsafeMutableBufferPointer { rows in
            rows.moveIntoOrder(source: { keys[$0].index }, isPlaced: { placed[$0] }, markPlaced: { placed[$0] = true })
        }
        var start = 0
        while start < keys.count {
            var end = start + 1
            while end < keys.count, keys[end].sameGroup(keys[start]) { end += 1 }
            if end - start > 1 { sorted[start..<end].sort(by: precedesByFeature) }
            start = end
        }
        return sorted
    }

    /// A global id's first 16 bytes as two big-endian integers (zeros past its end).
    private static func prefixKey(_ gid: String) -> (UInt64, UInt64) {
        func key(_ bytes: UnsafeBufferPointer<UInt8>) -> (UInt64, UInt64) {
            var high: UInt64 = 0, low: UInt64 = 0
            for i in 0..<min(16, bytes.count) {
                if i < 8 { high |= UInt64(bytes[i]) << (56 - 8 * i) } else { low |= UInt64(bytes[i]) << (56 - 8 * (i - 8)) }
            }
            return (high, low)
        }
        if let found = gid.utf8.withContiguousStorageIfAvailable(key) { return found }
        var copy = gid
        return copy.withUTF8(key)
    }

    private struct SortKey: Comparable {
        var table: Int
        var high: UInt64
        var low: UInt64
        var index: Int

        static func < (a: SortKey, b: SortKey) -> Bool { (a.table, a.high, a.low, a.index) < (b.table, b.high, b.low, b.index) }

        func sameGroup(_ other: SortKey) -> Bool { table == other.table && high == other.high && low == other.low }
    }

    /// The order of SQLite's `ORDER BY table_name, globalid, change_id`.
    static func precedesByFeature(_ a: CapturedChange, _ b: CapturedChange) -> Bool {
        if a.table != b.table { return a.table.utf8.lexicographicallyPrecedes(b.table.utf8) }
        switch (a.globalID, b.globalID) {
        case (nil, nil): break
        case (nil, _): return true
        case (_, nil): return false
        case (let x?, let y?): if x != y { return x.utf8.lexicographicallyPrecedes(y.utf8) }
        }
        return a.id < b.id
    }
}
