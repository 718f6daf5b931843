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
        /// geometry column, or the reader keeps blobs).
        public private(set) var geometry: JSONValue?
        /// With `geometryBlobs`: the last feature read's geometry as stored, its GeoPackage blob
        /// (nil when it has none; checked readable, not converted): a buffer the next read
        /// writes over.
        public private(set) var geometryBlob: [UInt8]?
        private let keepsBlobs: Bool
        private let statement: Statement
        /// The same columns and the global id, by object id.
        private let byObjectID: Statement
        private let table: FeatureTable

        /// Runs inside `conn`'s read or write, as long as it lasts. With `geometryBlobs`, geometries
        /// are kept as their stored bytes (``geometryBlob``) instead of read into Esri JSON.
        public init(_ table: FeatureTable, in conn: GeodatabaseConnection, geometryBlobs: Bool = false) throws {
            guard let globalID = table.definition.globalIDField else {
                throw StorageError(.invalidQuery, "\(table.name) has no global ids", table: table.name)
            }
            let fields = table.definition.fields.filter { $0.type != .oid && $0.type != .globalID }
            self.fields = fields
            self.table = table
            keepsBlobs = geometryBlobs
            values = Array(repeating: .null, count: fields.count)
            statement = try conn.db.cachedStatement(
                sql: "SELECT \(table.selectList(fields, returnGeometry: true)) FROM \(quoted(table.name)) WHERE \(quoted(globalID)) = ?")
            byObjectID = try conn.db.cachedStatement(
                sql: """
                    SELECT \(table.selectList(fields, returnGeometry: true)), \(quoted(globalID)) FROM \(quoted(table.name))
                    WHERE \(quoted(table.definition.objectIDField)) = ?
                    """)
        }

        /// Reads the feature whose global id is stored as `globalID`, looked up by the object id
        /// it was captured with (the row found by its key, without a walk of the global-id
        /// index first); by its global id when that row is gone or is another feature now (an
        /// object id can be used again after a delete).
        public mutating func read(_ globalID: String, objectID: Int64) throws -> Bool {
            let stmt = byObjectID.sqliteStatement
            sqlite3_reset(stmt)
            defer { sqlite3_reset(stmt) }
            sqlite3_bind_int64(stmt, 1, objectID)
            let rc = sqlite3_step(stmt)
            guard rc == SQLITE_ROW else {
                guard rc == SQLITE_DONE else {
                    throw StorageError(.sqlite, "\(String(cString: sqlite3_errmsg(sqlite3_db_handle(stmt)))) (SQLite \(rc))", table: table.name)
                }
                return try read(globalID)
            }
            let gidColumn = Int32(fields.count + (table.definition.isSpatial ? 1 : 0))
            guard let text = ColumnValue(stmt, gidColumn).text, text.elementsEqual(globalID.utf8) else { return try read(globalID) }
            try take(stmt)
            return true
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
            try take(stmt)
            return true
        }

        /// The buffers filled from the row `stmt` stands on.
        private mutating func take(_ stmt: OpaquePointer) throws {
            for index in fields.indices {
                values[index] = FeatureTable.decodeValue(ColumnValue(stmt, Int32(index)).databaseValue, fields[index].type).jsonValue
            }
            if table.definition.isSpatial {
                let column = Int32(fields.count)
                let stored = ColumnValue(stmt, column)
                if keepsBlobs {
                    // Written over in place: the buffer is the reader's alone between reads.
                    var buffer = geometryBlob ?? []
                    geometryBlob = nil
                    buffer.removeAll(keepingCapacity: true)
                    if !stored.isNull {
                        // Read all the same, so a blob another tool damaged fails here, as it
                        // does when read into Esri JSON (a point's decode allocates nothing).
                        let bytes = stored.blob
                        _ = try table.decodeGeometry(bytes)
                        buffer.append(contentsOf: bytes)
                        geometryBlob = buffer
                    }
                } else if stored.isNull {
                    geometry = .null
                } else {
                    let bytes = stored.blob
                    geometry = try table.decodeGeometry(bytes).map { try EsriJSON.value($0) } ?? .null
                }
            }
        }
    }
}
