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
        bindBlob(blob, statement, 2)
        try step()
    }

    /// Runs with the pairs' integers bound in order (`?1, ?2` the first pair's, and so on).
    func run(pairs: [(Int64, Int64)]) throws {
        for (k, pair) in pairs.enumerated() {
            sqlite3_bind_int64(statement, Int32(2 * k + 1), pair.0)
            sqlite3_bind_int64(statement, Int32(2 * k + 2), pair.1)
        }
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

/// Inserts (integer, integer) rows into a table through one statement of many rows (`VALUES
/// (?, ?), (?, ?), …`): a prepared statement per row costs SQLite a step and a reset each, which
/// was more than half of writing an R-tree's 100,000 `_rowid` rows (0.7 µs a row against 0.27 µs
/// for the rows of one statement).
final class PairInserter {
    /// Rows per statement: 500 rows bind 1,000 parameters, well under SQLite's limit of 32,766.
    static let rowsPerStatement = 500
    private let db: Database
    private let table: String
    private let columns: (String, String)
    private let full: RawStatement
    private var pending: [(Int64, Int64)] = []

    /// `table` and the columns are quoted by the caller.
    init(_ db: Database, table: String, columns: (String, String)) throws {
        self.db = db
        self.table = table
        self.columns = columns
        full = try RawStatement(db, Self.sql(table, columns, rows: Self.rowsPerStatement))
        pending.reserveCapacity(Self.rowsPerStatement)
    }

    private static func sql(_ table: String, _ columns: (String, String), rows: Int) -> String {
        "INSERT INTO \(table) (\(columns.0), \(columns.1)) VALUES " + Array(repeating: "(?, ?)", count: rows).joined(separator: ", ")
    }

    func add(_ a: Int64, _ b: Int64) throws {
        pending.append((a, b))
        if pending.count == Self.rowsPerStatement {
            try full.run(pairs: pending)
            pending.removeAll(keepingCapacity: true)
        }
    }

    /// Writes the rows still held; call once at the end.
    func finish() throws {
        guard !pending.isEmpty else { return }
        try RawStatement(db, Self.sql(table, columns, rows: pending.count)).run(pairs: pending)
        pending.removeAll()
    }
}
