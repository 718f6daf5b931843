import Foundation
import GRDB
import OutpostCore

/// Local edits not yet synced, counted per edited feature after coalescing (insert then update is
/// one insert; insert then delete is nothing; updates merge).
public struct PendingChanges: Hashable, Sendable, Codable {
    public var inserts: Int
    public var updates: Int
    public var deletes: Int

    public init(inserts: Int = 0, updates: Int = 0, deletes: Int = 0) {
        self.inserts = inserts
        self.updates = updates
        self.deletes = deletes
    }

    public var total: Int { inserts + updates + deletes }
}

/// What a run of captured changes of one feature amounts to.
public enum CoalescedOperation: String, Sendable, Hashable, Codable {
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

    public func pendingChanges() async throws -> PendingChanges {
        try await geodatabase.read { conn in try self.pendingChanges(in: conn) }
    }
}

extension GeodatabaseConnection {
    /// Runs `body` with change capture off: for applying changes downloaded from the server, which
    /// must not be echoed back as local edits. The flag is set and cleared inside the current
    /// transaction, so a crash can never leave capture off.
    public func withChangeCaptureSilenced<T>(_ body: () throws -> T) throws -> T {
        guard try db.tableExists(ChangeCapture.flagTable) else { return try body() }
        guard db.isInsideTransaction else {
            throw StorageError(.transactionState, "capture can be silenced only inside a write transaction")
        }
        try db.execute(sql: "UPDATE outpost_capture SET silenced = 1 WHERE id = 1")
        defer { try? db.execute(sql: "UPDATE outpost_capture SET silenced = 0 WHERE id = 1") }
        return try body()
    }

    /// Captured change rows, oldest first (for inspection and for sealing upload batches).
    public func capturedChanges(table: String? = nil) throws -> [CapturedChange] {
        if let table { return try capturedChanges(where: "table_name = ?", arguments: [table], order: "change_id") }
        return try capturedChanges(where: nil, arguments: [], order: "change_id")
    }

    func capturedChanges(where condition: String?, arguments: StatementArguments, order: String) throws -> [CapturedChange] {
        guard try db.tableExists(ChangeCapture.changesTable) else { return [] }
        var sql = "SELECT change_id, table_name, fid, globalid, op, changed_columns, old_values, old_geometry, edited_at, base_gen FROM outpost_changes"
        if let condition { sql += " WHERE " + condition }
        sql += " ORDER BY " + order
        // Rows read through a cursor (not copied first), and each distinct column list parsed
        // once: a batch's updates mostly share a handful of them.
        var columnLists: [String: [String]] = [:]
        var changes: [CapturedChange] = []
        let rows = try Row.fetchCursor(db, sql: sql, arguments: arguments)
        while let row = try rows.next() {
            var columns: [String] = []
            if let text = row[5] as String? {
                if let known = columnLists[text] {
                    columns = known
                } else {
                    columns = (try? JSONValue.parse(text).arrayValue?.compactMap(\.stringValue)) ?? []
                    columnLists[text] = columns
                }
            }
            changes.append(CapturedChange(
                id: row[0], table: row[1], objectID: row[2], globalID: row[3],
                operation: CoalescedOperation(rawValue: row[4]) ?? .update,
                changedColumns: columns,
                oldValues: (row[6] as String?).flatMap { try? JSONValue.parse($0).objectValue } ?? [:],
                oldGeometry: (row[7] as Data?).map { [UInt8]($0) },
                editedAt: row[8], baseGeneration: row[9]))
        }
        return changes
    }
}

/// One row of `outpost_changes`: a committed local edit as the capture triggers recorded it.
public struct CapturedChange: Hashable, Sendable {
    public var id: Int64
    public var table: String
    public var objectID: Int64
    public var globalID: String?
    public var operation: CoalescedOperation
    /// Columns an update changed (the geometry column included when it changed).
    public var changedColumns: [String]
    /// Values before the edit: the changed columns of an update, every attribute of a delete.
    /// Blob values are `"base16:<hex>"`.
    public var oldValues: [String: JSONValue]
    /// The GeoPackage geometry blob before the edit, when the geometry changed or the row was deleted.
    public var oldGeometry: [UInt8]?
    /// When the edit was made (UTC, GeoPackage DATETIME text).
    public var editedAt: String
    /// The server generation the table had been downloaded up to when the edit was made.
    public var baseGeneration: Int64?
}
