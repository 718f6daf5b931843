import GRDB
import GRDBSQLite

extension GeodatabaseConnection {
    /// A row of ``forEachRow(_:arguments:_:)``, read in place: valid only inside the call that
    /// gets it.
    public struct SteppedRow: ~Copyable {
        fileprivate let statement: OpaquePointer

        /// Whether the value in `column` (0-based) is NULL.
        public func isNull(_ column: Int32) -> Bool { ColumnValue(statement, column).isNull }

        /// The column as an integer (nil when null or not an integer).
        public func integer(_ column: Int32) -> Int64? {
            let value = ColumnValue(statement, column)
            return value.type == SQLITE_INTEGER ? value.int64 : nil
        }

        /// The column as text (nil when null).
        public func text(_ column: Int32) -> String? {
            ColumnValue(statement, column).text.map { String(decoding: $0, as: UTF8.self) }
        }

        /// The column's text as SQLite holds it (nil when null), for `body` to read without
        /// making a string.
        public func withText<T>(_ column: Int32, _ body: (UnsafeBufferPointer<UInt8>?) throws -> T) rethrows -> T {
            try body(ColumnValue(statement, column).text)
        }

        /// The column as bytes (nil when null; text columns give their UTF-8).
        public func bytes(_ column: Int32) -> [UInt8]? {
            let value = ColumnValue(statement, column)
            guard !value.isNull else { return nil }
            return [UInt8](value.blob)
        }
    }

    /// Runs a raw SELECT and hands each row to `body` as SQLite holds it, through the C API: for
    /// reads of thousands of rows in a hot path, where ``query(_:arguments:)`` makes a GRDB row,
    /// its values and an array of literals per row (more than SQLite's own work on a lookup by
    /// key). The statement is cached on the connection, so `body` must not run the same SQL
    /// again while it steps.
    public func forEachRow(_ sql: String, arguments: [SQLLiteral] = [], _ body: (borrowing SteppedRow) throws -> Void) throws {
        let statement: Statement
        do {
            statement = try db.cachedStatement(sql: sql)
        } catch {
            throw StorageError.from(error, "SQL failed")
        }
        let s = statement.sqliteStatement
        sqlite3_reset(s)
        sqlite3_clear_bindings(s)
        defer { sqlite3_reset(s) }
        for (i, argument) in arguments.enumerated() {
            let index = Int32(i + 1)
            switch argument {
            case .null: sqlite3_bind_null(s, index)
            case .integer(let v): sqlite3_bind_int64(s, index, v)
            case .double(let v): sqlite3_bind_double(s, index, v)
            case .text(let v): bindText(v, s, index)
            case .blob(let v): bindBlob(v, s, index)
            }
        }
        while true {
            let rc = sqlite3_step(s)
            if rc == SQLITE_DONE { return }
            guard rc == SQLITE_ROW else {
                let message = String(cString: sqlite3_errmsg(sqlite3_db_handle(s)))
                throw StorageError(.sqlite, "SQL failed: \(message) (SQLite \(rc))")
            }
            try body(SteppedRow(statement: s))
        }
    }
}
