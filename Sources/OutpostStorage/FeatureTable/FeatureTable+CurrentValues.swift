import Foundation
import GRDB
import GRDBSQLite
import OutpostCore

extension FeatureTable {
    /// Reads features' current values one global id at a time, as the ArcGIS REST API writes them
    /// (``FieldValue/jsonValue``, geometries in Esri JSON), into buffers reused from one feature to
    /// the next: what the replica's seal writes into an upload batch, with no ``Feature`` (and
    /// its dictionary) built per row.
    public struct CurrentValuesReader {
        /// The attribute fields read, in schema order (the object id and global id left out).
        public let fields: [FieldDefinition]
        /// The last feature read: its values in ``fields`` order.
        public private(set) var values: [JSONValue]
        /// The last feature read's geometry (`null` when it has none; nil when the table has no
        /// geometry column).
        public private(set) var geometry: JSONValue?
        private let statement: Statement
        private let table: FeatureTable

        /// Runs inside `conn`'s read or write, as long as it lasts.
        public init(_ table: FeatureTable, in conn: GeodatabaseConnection) throws {
            guard let globalID = table.definition.globalIDField else {
                throw StorageError(.invalidQuery, "\(table.name) has no global ids", table: table.name)
            }
            let fields = table.definition.fields.filter { $0.type != .oid && $0.type != .globalID }
            self.fields = fields
            self.table = table
            values = Array(repeating: .null, count: fields.count)
            statement = try conn.db.cachedStatement(
                sql: "SELECT \(table.selectList(fields, returnGeometry: true)) FROM \(quoted(table.name)) WHERE \(quoted(globalID)) = ?")
        }

        /// Reads the feature whose global id is stored as `globalID`; false (the buffers left as
        /// they were) when the table holds none.
        public mutating func read(_ globalID: String) throws -> Bool {
            // Bound and stepped through the C API: a GRDB cursor and row per lookup cost about
            // what SQLite's own work on the row does.
            let stmt = statement.sqliteStatement
            sqlite3_reset(stmt)
            bindText(globalID, stmt, 1)
            let rc = sqlite3_step(stmt)
            defer { sqlite3_reset(stmt) }
            guard rc == SQLITE_ROW else {
                guard rc == SQLITE_DONE else {
                    throw StorageError(.sqlite, "\(String(cString: sqlite3_errmsg(sqlite3_db_handle(stmt)))) (SQLite \(rc))", table: table.name)
                }
                return false
            }
            for index in fields.indices {
                values[index] = FeatureTable.decodeValue(DatabaseValue(sqliteStatement: stmt, index: Int32(index)), fields[index].type).jsonValue
            }
            if table.definition.isSpatial {
                let column = Int32(fields.count)
                if sqlite3_column_type(stmt, column) == SQLITE_NULL {
                    geometry = .null
                } else {
                    let bytes = UnsafeRawBufferPointer(start: sqlite3_column_blob(stmt, column), count: Int(sqlite3_column_bytes(stmt, column)))
                    geometry = try table.decodeGeometry(bytes).map { try EsriJSON.value($0) } ?? .null
                }
            }
            return true
        }
    }
}
