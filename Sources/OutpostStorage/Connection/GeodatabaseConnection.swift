import Foundation
import GRDB
import GRDBSQLite
import OutpostCore

/// Access to an open geodatabase inside a `Geodatabase/read(_:)` or `Geodatabase/write(_:)`
/// closure. It wraps one SQLite connection and is valid only while the closure runs.
///
/// - Important: do not store it or let it escape the closure.
public final class GeodatabaseConnection {
    let db: Database
    /// The geodatabase this connection belongs to.
    public let geodatabase: Geodatabase
    /// While ``deferringContentsUpdates(_:)`` runs: the tables edited and the extent they grew by.
    var deferredContents: [String: Envelope.Builder]?
    /// Tables inside ``maintainingSpatialIndex(of:_:)``, by name.
    var spatialIndexWatches: [String: SpatialIndexWatch] = [:]
    /// Time this connection spent packing R-trees again (``maintainingSpatialIndex(of:expectedGeometryWrites:_:)``),
    /// for a caller that reports where a transaction's time went.
    public internal(set) var spatialIndexRebuildTime: Duration = .zero
    /// How many of those packs read the old index and the rows written since (``RowChangeTracker``)
    /// rather than every geometry of the table.
    var spatialIndexPacksFromChanges = 0
    /// ``FeatureTable``'s insert and update statements, by table, columns and key: found without
    /// writing their SQL again for every edit (an update's SQL and its cache lookup were a
    /// quarter of the Swift work around SQLite's in a server's edit loop).
    var editStatements: [EditStatementKey: Statement] = [:]
    /// Prepared SELECTs of ``FeatureTable`` queries by their SQL, idle between uses: a read
    /// that asks the same shape of query again and again (a tile generator, a tile per query)
    /// prepares each once. Preparing was a fifth of a vector tile's work at deep zooms.
    var idleReadStatements: [String: [Statement]] = [:]

    struct EditStatementKey: Hashable {
        var table: String
        var columns: [String]
        /// The key column of an update (quoted), nil for an insert.
        var key: String?
    }

    init(_ db: Database, _ geodatabase: Geodatabase) {
        self.db = db
        self.geodatabase = geodatabase
    }

    /// Runs `body` with a prepared statement of `sql`: an idle one prepared earlier on this
    /// connection, else a new one, kept idle afterwards (reset). A statement still stepping in
    /// a caller is never handed out again, so queries may nest.
    func withReadStatement<T>(_ sql: String, _ body: (Statement) throws -> T) throws -> T {
        let statement = try idleReadStatements[sql]?.popLast() ?? db.makeStatement(sql: sql)
        defer {
            sqlite3_reset(statement.sqliteStatement)
            // A connection asked many shapes of query keeps only so many.
            if idleReadStatements[sql] != nil || idleReadStatements.count < 64 { idleReadStatements[sql, default: []].append(statement) }
        }
        return try body(statement)
    }

    /// Whether writes are allowed on this connection (false inside `Geodatabase/read(_:)`).
    public var isWritable: Bool { !db.configuration.readonly && !geodatabase.isReadOnly }

    /// Runs raw SQL with bound arguments. Triggers (R-tree, change capture) fire as for any
    /// writer; the schema checks of ``FeatureTable`` do not apply.
    public func execute(_ sql: String, arguments: [SQLLiteral] = []) throws {
        do {
            // One statement is prepared once per connection and reused (most SQL here runs often).
            if Self.isSingleStatement(sql) {
                try db.cachedStatement(sql: sql).run(arguments.map(\.databaseValue))
            } else {
                try db.execute(sql: sql, arguments: StatementArguments(arguments.map(\.databaseValue)))
            }
        } catch {
            throw StorageError.from(error, "SQL failed")
        }
    }

    /// Runs a raw SELECT and returns its rows (blobs as `.blob`).
    public func query(_ sql: String, arguments: [SQLLiteral] = []) throws -> [[SQLLiteral]] {
        do {
            return try Row.fetchAll(db.cachedStatement(sql: sql), arguments: StatementArguments(arguments.map(\.databaseValue))).map { row in
                row.databaseValues.map { value in
                    switch value.storage {
                    case .null: .null
                    case .int64(let i): .integer(i)
                    case .double(let d): .double(d)
                    case .string(let s): .text(s)
                    case .blob(let b): .blob([UInt8](b))
                    }
                }
            }
        } catch {
            throw StorageError.from(error, "SQL failed")
        }
    }

    /// Runs `body` in a savepoint: if it throws, only its changes are undone and the error is
    /// rethrown; the surrounding transaction goes on.
    public func inSavepoint<T>(_ body: () throws -> T) throws -> T {
        var result: T?
        do {
            try Self.inSavepoint(db) { result = try body() }
        } catch {
            throw StorageError.from(error, "savepoint failed")
        }
        return result!
    }

    /// GRDB's savepoint, with the rows watched by a ``RowChangeTracker`` since it began taken
    /// out again when it rolls back.
    static func inSavepoint(_ db: Database, _ body: () throws -> Void) throws {
        let mark = RowChangeTracker.mark(db)
        do {
            try db.inSavepoint {
                try body()
                return .commit
            }
        } catch {
            RowChangeTracker.restore(mark)
            throw error
        }
    }

    static func isSingleStatement(_ sql: String) -> Bool {
        let utf8 = sql.utf8
        guard let semicolon = utf8.firstIndex(of: UInt8(ascii: ";")) else { return true }
        return utf8[utf8.index(after: semicolon)...].allSatisfy { $0 == 32 || (9...13).contains($0) }
    }

    /// Runs `body` with the `gpkg_contents` bookkeeping of feature edits (last change, extent)
    /// done once at the end instead of after every edit: for applying many single edits in one
    /// transaction.
    public func deferringContentsUpdates<T>(_ body: () throws -> T) throws -> T {
        guard deferredContents == nil else { return try body() }
        deferredContents = [:]
        defer { deferredContents = nil }
        let result = try body()
        let pending = deferredContents ?? [:]
        deferredContents = nil
        for (name, extent) in pending.sorted(by: { $0.key < $1.key }) {
            try geodatabase.table(named: name).touchContents(db, extent: extent.envelope)
        }
        return result
    }

    /// A prepared statement for running the same raw SQL many times in this closure.
    public func statement(_ sql: String) throws -> SQLStatement {
        do {
            return SQLStatement(statement: try db.cachedStatement(sql: sql))
        } catch {
            throw StorageError.from(error, "cannot prepare SQL")
        }
    }
}

/// A prepared raw statement, valid inside the closure that made it.
public final class SQLStatement {
    let statement: Statement

    init(statement: Statement) { self.statement = statement }

    /// Runs the statement once with `arguments` bound in order.
    public func execute(_ arguments: [SQLLiteral]) throws {
        do {
            try statement.run(arguments.map(\.databaseValue))
        } catch {
            throw StorageError.from(error, "SQL failed")
        }
    }

    /// Runs the statement once with the values `bind` gives, in order, bound through the C API
    /// as they come: for statements of many rows in a write's hot loop, where an array of
    /// ``SQLLiteral`` per run (and its conversion) cost more than SQLite's work on the rows.
    /// - Throws: `StorageError` when `bind` gave fewer or more values than the statement takes,
    ///   or SQLite's error.
    public func execute(binding bind: (inout SQLParameters) throws -> Void) throws {
        let stmt = statement.sqliteStatement
        sqlite3_reset(stmt)
        var parameters = SQLParameters(stmt: stmt, count: sqlite3_bind_parameter_count(stmt))
        try bind(&parameters)
        guard parameters.next == parameters.count + 1 else {
            throw StorageError(.sqlite, "\(parameters.next - 1) values for \(parameters.count) parameters of \(statement.sql)")
        }
        do {
            try statement.stepToEnd()
        } catch {
            throw StorageError.from(error, "SQL failed")
        }
    }
}

/// The parameters of a ``SQLStatement`` run, bound in order (``SQLStatement/execute(binding:)``).
public struct SQLParameters: ~Copyable {
    fileprivate let stmt: OpaquePointer?
    fileprivate let count: Int32
    fileprivate var next: Int32 = 1

    fileprivate init(stmt: OpaquePointer?, count: Int32) {
        self.stmt = stmt
        self.count = count
    }

    /// The next parameter's index, checked (a value past the last is counted, not bound).
    private mutating func take() -> Int32? {
        defer { next += 1 }
        return next <= count ? next : nil
    }

    /// Binds text, or NULL for nil.
    public mutating func bind(_ value: String?) {
        guard let i = take() else { return }
        if let value { bindText(value, stmt, i) } else { sqlite3_bind_null(stmt, i) }
    }

    /// Binds an integer, or NULL for nil.
    public mutating func bind(_ value: Int64?) {
        guard let i = take() else { return }
        if let value { sqlite3_bind_int64(stmt, i, value) } else { sqlite3_bind_null(stmt, i) }
    }
}

@available(*, unavailable)
extension SQLStatement: Sendable {}

// The connection must be used on the serial queue of its `Database`.
@available(*, unavailable)
extension GeodatabaseConnection: Sendable {}
