import Foundation
import GRDBSQLite

/// One SQLite connection used from one task through the C API, for bulk writers whose per-row
/// cost matters (`MBTilesWriter`): statements bind straight from the caller's buffers.
final class SQLiteFile {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    private var handle: OpaquePointer?

    init(path: String) throws {
        let rc = sqlite3_open_v2(path, &handle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nil)
        guard rc == SQLITE_OK else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "SQLite error \(rc)"
            sqlite3_close_v2(handle)
            handle = nil
            throw Failure(description: message)
        }
        sqlite3_busy_timeout(handle, 5_000)
    }

    deinit { sqlite3_close_v2(handle) }

    var changes: Int { Int(sqlite3_changes64(handle)) }

    func execute(_ sql: String) throws {
        guard sqlite3_exec(handle, sql, nil, nil, nil) == SQLITE_OK else { throw failure() }
    }

    /// The first column of the first row of `sql`, as an integer.
    func integer(_ sql: String) throws -> Int64 {
        let statement = try prepare(sql)
        guard sqlite3_step(statement.pointer) == SQLITE_ROW else { throw failure() }
        return sqlite3_column_int64(statement.pointer, 0)
    }

    func prepare(_ sql: String) throws -> Statement {
        var pointer: OpaquePointer?
        guard sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &pointer, nil) == SQLITE_OK, let pointer else { throw failure() }
        return Statement(pointer: pointer, file: self)
    }

    /// Closes the connection (statements must be gone first; `sqlite3_close_v2` waits for them).
    func close() throws {
        guard sqlite3_close_v2(handle) == SQLITE_OK else { throw failure() }
        handle = nil
    }

    fileprivate func failure() -> Failure {
        Failure(description: handle.map { String(cString: sqlite3_errmsg($0)) } ?? "the connection is closed")
    }

    /// A prepared statement: bind, then `run()`, which steps it once and clears it for the next
    /// row (blobs are bound without a copy, so they must outlive only the `run()`).
    final class Statement {
        let pointer: OpaquePointer
        private unowned let file: SQLiteFile

        fileprivate init(pointer: OpaquePointer, file: SQLiteFile) {
            self.pointer = pointer
            self.file = file
        }

        deinit { sqlite3_finalize(pointer) }

        func bind(_ index: Int32, _ value: Int64) { sqlite3_bind_int64(pointer, index, value) }

        func bind(_ index: Int32, _ value: String) { sqlite3_bind_text(pointer, index, value, -1, sqliteTransientDestructor) }

        /// Binds without copying: SQLite reads the bytes during `run()`.
        func bind(_ index: Int32, blob: UnsafeRawBufferPointer) {
            sqlite3_bind_blob(pointer, index, blob.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32(blob.count), nil)
        }

        func run() throws {
            let rc = sqlite3_step(pointer)
            sqlite3_reset(pointer)
            sqlite3_clear_bindings(pointer)
            guard rc == SQLITE_DONE else { throw file.failure() }
        }
    }
}

/// SQLITE_TRANSIENT: SQLite copies the value before the bind returns.
private let sqliteTransientDestructor = unsafeBitCast(OpaquePointer(bitPattern: -1), to: sqlite3_destructor_type.self)
