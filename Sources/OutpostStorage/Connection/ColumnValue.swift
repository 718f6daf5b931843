import Foundation
import GRDB
import GRDBSQLite
import OutpostCore

/// Reads of a stepped row's columns through each column's `sqlite3_value`. The system SQLite is
/// built serialized: every `sqlite3_column_*` call enters and leaves the connection's mutex
/// (three times for a text or blob: its type, its bytes, its length), the `sqlite3_value_*`
/// calls do not. A layer checksum of 100,000 rows took 58 ms through the column calls and 41
/// ms through the values (`outpost-bench codec`). The value `sqlite3_column_value` returns is
/// "unprotected": it may be read so only while no other thread uses the connection, which holds
/// for every connection here (GRDB runs each on one queue at a time). It is valid until the
/// statement steps, is reset or finalized.
struct ColumnValue {
    let value: OpaquePointer?

    @inline(__always) init(_ statement: OpaquePointer?, _ column: Int32) {
        value = sqlite3_column_value(statement, column)
    }

    /// A value SQLite handed over as it is (never nil: SQLite's accessors do not take one).
    @inline(__always) init(value: OpaquePointer) {
        self.value = value
    }

    @inline(__always) var type: Int32 { sqlite3_value_type(value) }
    @inline(__always) var isNull: Bool { type == SQLITE_NULL }
    @inline(__always) var int64: Int64 { sqlite3_value_int64(value) }
    @inline(__always) var double: Double { sqlite3_value_double(value) }

    /// The text's UTF-8 bytes (nil when null).
    @inline(__always) var text: UnsafeBufferPointer<UInt8>? {
        guard let bytes = sqlite3_value_text(value) else { return nil }
        return UnsafeBufferPointer(start: bytes, count: Int(sqlite3_value_bytes(value)))
    }

    /// The text as a string, up to its first NUL as GRDB reads it (nil when null).
    var string: String? { sqlite3_value_text(value).map { String(cString: $0) } }

    /// The bytes of a blob (or of a text's UTF-8); empty when there are none.
    @inline(__always) var blob: UnsafeRawBufferPointer {
        let bytes = sqlite3_value_blob(value)
        return UnsafeRawBufferPointer(start: bytes, count: bytes == nil ? 0 : Int(sqlite3_value_bytes(value)))
    }

    /// The value in its storage class (text up to its first NUL, as ``databaseValue`` reads it).
    var storedValue: StoredValue {
        switch type {
        case SQLITE_INTEGER: return .integer(int64)
        case SQLITE_FLOAT: return .real(double)
        case SQLITE_TEXT: return string.map(StoredValue.text) ?? .null
        case SQLITE_BLOB: return .blob([UInt8](blob))
        default: return .null
        }
    }

    /// As GRDB's `DatabaseValue(sqliteStatement:index:)` reads it.
    var databaseValue: DatabaseValue {
        switch type {
        case SQLITE_INTEGER: return int64.databaseValue
        case SQLITE_FLOAT: return double.databaseValue
        case SQLITE_TEXT: return string?.databaseValue ?? .null
        case SQLITE_BLOB:
            let raw = blob
            return (raw.count == 0 ? Data() : Data(raw)).databaseValue
        default: return .null
        }
    }
}
