import GRDB
import GRDBSQLite

/// A statement bound and stepped through the SQLite C API, for hot loops where building
/// argument arrays per row would dominate (bulk loads). Valid inside the closure that owns `db`.
final class RawStatement {
    private let handle: OpaquePointer
    private var statement: OpaquePointer?

    init(_ db: Database, _ sql: String) throws {
        guard let handle = db.sqliteConnection else { throw StorageError(.sqlite, "the connection is closed") }
        self.handle = handle
        let rc = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard rc == SQLITE_OK else {
            throw StorageError(.sqlite, "cannot prepare \(sql): \(String(cString: sqlite3_errmsg(handle)))")
        }
    }

    deinit { sqlite3_finalize(statement) }

    /// Runs with two integers.
    func run(_ a: Int64, _ b: Int64) throws {
        sqlite3_bind_int64(statement, 1, a)
        sqlite3_bind_int64(statement, 2, b)
        try step()
    }

    /// Runs with an integer and a blob.
    func run(_ a: Int64, _ blob: [UInt8]) throws {
        sqlite3_bind_int64(statement, 1, a)
        blob.withUnsafeBytes { _ = sqlite3_bind_blob(statement, 2, $0.baseAddress, Int32($0.count), sqliteTransient) }
        try step()
    }

    private func step() throws {
        let rc = sqlite3_step(statement)
        sqlite3_reset(statement)
        guard rc == SQLITE_DONE else {
            throw StorageError(.sqlite, "\(String(cString: sqlite3_errmsg(handle))) (SQLite \(rc))")
        }
    }
}
