import Foundation
import GRDB
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
            let cursor = try Row.fetchCursor(statement, arguments: [globalID])
            guard let row = try cursor.next() else { return false }
            for index in fields.indices {
                values[index] = try FeatureTable.decodeValue(row, index, fields[index].type).jsonValue
            }
            if table.definition.isSpatial {
                geometry = try table.decodeGeometry(row, fields.count).map { try EsriJSON.value($0) } ?? .null
            }
            return true
        }
    }
}
