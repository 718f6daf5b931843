import Foundation
import GRDB
import GRDBSQLite

extension Statement {
    /// Binds `values` through the C API and steps the statement to completion, for per-row
    /// statements in edit loops: `execute(arguments:)` builds a `StatementArguments` per call
    /// (a key-path map over the values), which cost edits of a large apply about as much as
    /// SQLite's work on small rows. Errors are GRDB's `DatabaseError` with the extended code,
    /// as `execute(arguments:)` throws them.
    func run(_ values: [DatabaseValue]) throws {
        let stmt = sqliteStatement
        sqlite3_reset(stmt)
        guard values.count == Int(sqlite3_bind_parameter_count(stmt)) else {
            throw DatabaseError(resultCode: .SQLITE_MISUSE, message: "\(values.count) values for \(sqlite3_bind_parameter_count(stmt)) parameters", sql: sql)
        }
        for (i, value) in values.enumerated() { bindDatabaseValue(value, stmt, Int32(i + 1)) }
        try stepToEnd()
    }

    /// Steps the statement, bound through the C API, to completion and resets it; an error is
    /// GRDB's `DatabaseError` with the extended code.
    func stepToEnd() throws {
        let stmt = sqliteStatement
        var rc = sqlite3_step(stmt)
        while rc == SQLITE_ROW { rc = sqlite3_step(stmt) }
        guard rc == SQLITE_DONE else {
            let message = String(cString: sqlite3_errmsg(sqlite3_db_handle(stmt)))
            let code = sqlite3_extended_errcode(sqlite3_db_handle(stmt))
            sqlite3_reset(stmt)
            throw DatabaseError(resultCode: ResultCode(rawValue: code), message: message, sql: sql)
        }
        sqlite3_reset(stmt)
    }
}

/// Binds a GRDB value through the C API.
func bindDatabaseValue(_ value: DatabaseValue, _ stmt: OpaquePointer?, _ index: Int32) {
    switch value.storage {
    case .null: sqlite3_bind_null(stmt, index)
    case .int64(let v): sqlite3_bind_int64(stmt, index, v)
    case .double(let v): sqlite3_bind_double(stmt, index, v)
    case .string(let v): bindText(v, stmt, index)
    case .blob(let v): bindBlob(v, stmt, index)
    }
}

/// Binds bytes (nil: NULL) as a blob, copied by SQLite, without making `Data` of them first.
func bindBlob<Bytes: ContiguousBytes>(_ bytes: Bytes?, _ stmt: OpaquePointer?, _ index: Int32) {
    guard let bytes else {
        sqlite3_bind_null(stmt, index)
        return
    }
    bytes.withUnsafeBytes { _ = sqlite3_bind_blob(stmt, index, $0.baseAddress, Int32($0.count), sqliteTransient) }
}

/// Binds text without the temporary C-string copy an implicit String conversion makes.
func bindText(_ text: String, _ stmt: OpaquePointer?, _ index: Int32) {
    var text = text
    text.withUTF8 { utf8 in
        _ = sqlite3_bind_text(stmt, index, UnsafeRawPointer(utf8.baseAddress)?.assumingMemoryBound(to: CChar.self), Int32(utf8.count), sqliteTransient)
    }
}

/// Binds a field value as the GeoPackage stores it (``FeatureTable/databaseValue(_:_:)``'s
/// rules: integers in floating-point fields as doubles, GUIDs in `{UPPER}` form, dates as
/// GeoPackage text) without making a `DatabaseValue` first.
func bindFieldValue(_ value: FieldValue, _ type: FieldType, _ stmt: OpaquePointer, _ index: Int32) {
    switch value {
    case .null: sqlite3_bind_null(stmt, index)
    case .integer(let i):
        if type == .double || type == .single { sqlite3_bind_double(stmt, index, Double(i)) } else { sqlite3_bind_int64(stmt, index, i) }
    case .double(let d): sqlite3_bind_double(stmt, index, d)
    case .string(let text): bindText(type == .globalID || type == .guid ? (GlobalID.normalized(text) ?? text) : text, stmt, index)
    case .date(let d):
        let text = GeoPackageDate.format(d)
        bindText(type == .dateOnly ? String(text.prefix(10)) : text, stmt, index)
    case .blob(let b): bindBlob(b, stmt, index)
    }
}
