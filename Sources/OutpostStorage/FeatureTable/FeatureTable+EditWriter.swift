import Foundation
import GRDB
import GRDBSQLite
import OutpostCore

extension FeatureTable {
    /// Checked edits of one feature at a time, for a loop of thousands inside the caller's
    /// transaction (a server applying an uploaded batch). Each edit passes the same
    /// ``FeatureValidator`` checks and fails with the same errors as ``add(_:spatialReference:in:)``,
    /// ``update(_:spatialReference:in:)`` and ``delete(objectIDs:in:)``; what it leaves out is
    /// their per-call work around SQLite's: arrays of one feature and their prepared rows, a
    /// statement found by hashing the column names, the added feature copied back, a lookup
    /// before each delete, and `gpkg_contents` touched per edit (here once, by ``finish()``).
    /// Statements are found by the columns' field indices and values bound through the C API.
    /// Geometries are taken as given (in the layer's spatial reference).
    public struct EditWriter {
        /// The table the writer edits.
        public let table: FeatureTable
        private let conn: GeodatabaseConnection
        private var statements: [StatementKey: Statement] = [:]
        private var deleteStatement: Statement?
        private var extent = Envelope.Builder()
        private var touched = false

        private struct StatementKey: Hashable {
            var insert: Bool
            /// The columns' indices in the layer's fields (-1 for the geometry column).
            var columns: [Int]
        }

        /// A writer for `table` inside the transaction of `conn`.
        public init(_ table: FeatureTable, in conn: GeodatabaseConnection) {
            self.table = table
            self.conn = conn
        }

        /// Adds `feature` (given values, else field defaults; a new global id unless it has
        /// one); its object id.
        public mutating func insert(_ feature: Feature) throws -> Int64 {
            try insert(checked: try table.validator.add(feature, index: 0))
        }

        /// Adds the row `table.validator.add(_:index:)` made of a feature (on any thread, ahead
        /// of the writer); its object id.
        public mutating func insert(checked row: FeatureValidator.Row) throws -> Int64 {
            try insert(layout: row, values: row.values, from: 0, geometryBlob: geometryBlob(of: row), envelope: row.geometry?.envelope)
        }

        /// Sets the attributes `feature` gives, and its geometry when it has one, in the feature
        /// `objectID`. Throws not found when the table has no such feature.
        public mutating func update(objectID: Int64, _ feature: Feature) throws {
            try update(objectID: objectID, checked: try table.validator.update(feature, index: 0))
        }

        /// Sets what the row `table.validator.update(_:index:)` made of a feature (on any
        /// thread, ahead of the writer) holds in the feature `objectID`.
        public mutating func update(objectID: Int64, checked row: FeatureValidator.Row) throws {
            try update(objectID: objectID, layout: row, values: row.values, from: 0, geometryBlob: geometryBlob(of: row), envelope: row.geometry?.envelope)
        }

        /// The GeoPackage blob of the geometry `row` writes (nil: none, or NULL).
        private func geometryBlob(of row: FeatureValidator.Row) -> ArraySlice<UInt8>? {
            guard row.writesGeometry, let geometry = row.geometry else { return nil }
            return GeoPackageBinary.encode(geometry, srsID: table.srsID)[...]
        }

        /// Adds a row checked ahead whose values lie in a buffer shared with other rows:
        /// `layout`'s columns (a row made by ``FeatureValidator`` whose values are not read),
        /// their values at `values[start...]`, the geometry column's GeoPackage blob (nil: NULL)
        /// and its envelope. Its object id.
        public mutating func insert(
            layout: FeatureValidator.Row, values: [FieldValue], from start: Int, geometryBlob: ArraySlice<UInt8>?, envelope: Envelope?
        ) throws -> Int64 {
            if geometryBlob != nil { try conn.willWriteGeometries(of: table.name, 1) }
            let statement = try statement(StatementKey(insert: true, columns: layout.fieldIndices), columns: layout.columns)
            try run(statement, layout, values: values, from: start, geometryBlob: geometryBlob, key: nil)
            if let envelope { extent.add(envelope) }
            touched = true
            return conn.db.lastInsertedRowID
        }

        /// Sets a row checked ahead, as ``insert(layout:values:from:geometryBlob:envelope:)``
        /// takes one, in the feature `objectID`. Throws not found when the table has no such
        /// feature.
        public mutating func update(
            objectID: Int64, layout: FeatureValidator.Row, values: [FieldValue], from start: Int, geometryBlob: ArraySlice<UInt8>?, envelope: Envelope?
        ) throws {
            if layout.writesGeometry { try conn.willWriteGeometries(of: table.name, 1) }
            let statement = try statement(StatementKey(insert: false, columns: layout.fieldIndices), columns: layout.columns)
            try run(statement, layout, values: values, from: start, geometryBlob: geometryBlob, key: objectID)
            guard conn.db.changesCount > 0 else {
                throw StorageError(.notFound, "no feature with object id \(objectID)", table: table.name, editIndex: 0)
            }
            if let envelope { extent.add(envelope) }
            touched = true
        }

        /// Deletes the feature `objectID`. Throws not found when the table has no such feature.
        public mutating func delete(objectID: Int64) throws {
            try conn.willWriteGeometries(of: table.name, 1)
            let statement = try deleteStatement ?? conn.db.cachedStatement(sql: "DELETE FROM \(quoted(table.name)) WHERE \(quoted(table.definition.objectIDField)) = ?")
            deleteStatement = statement
            try statement.run([objectID.databaseValue])
            guard conn.db.changesCount > 0 else {
                throw StorageError(.notFound, "no feature with object id \(objectID)", table: table.name, editIndex: 0)
            }
            touched = true
        }

        /// Records the edits in `gpkg_contents` (its time and extent), once for all of them.
        public mutating func finish() throws {
            guard touched else { return }
            try table.touchContents(conn, extent: extent.envelope)
            touched = false
            extent = Envelope.Builder()
        }

        /// The statement of `key`: found by the columns' indices, and on the first use of a set of
        /// columns taken from ``FeatureTable``'s own (prepared once per connection, so a sync of
        /// ten edits does not prepare them and the triggers they fire for every batch).
        private mutating func statement(_ key: StatementKey, columns: [String]) throws -> Statement {
            if let known = statements[key] { return known }
            let made = try table.editStatement(conn, columns: columns, key: key.insert ? nil : quoted(table.definition.objectIDField))
            statements[key] = made
            return made
        }

        /// Binds `layout`'s values from `values[start...]` (the geometry column's from
        /// `geometryBlob`), the object id of an update last, and steps the statement; a
        /// constraint of the table is an edit error, as through ``FeatureTable``'s edits.
        private func run(
            _ statement: Statement, _ layout: FeatureValidator.Row, values: [FieldValue], from start: Int, geometryBlob: ArraySlice<UInt8>?, key: Int64?
        ) throws {
            let s = statement.sqliteStatement
            sqlite3_reset(s)
            let count = layout.types.count
            for i in 0..<count {
                let index = Int32(i + 1)
                if layout.writesGeometry && i == count - 1 {
                    bindBlob(geometryBlob, s, index)
                    continue
                }
                bindFieldValue(values[start + i], layout.types[i], s, index)
            }
            if let key { sqlite3_bind_int64(s, Int32(count + 1), key) }
            do {
                try statement.stepToEnd()
            } catch let error as DatabaseError where error.resultCode == .SQLITE_CONSTRAINT {
                throw StorageError(.invalidEdit, "rejected by the table: \(error.message ?? "constraint failed")", table: table.name, editIndex: 0, cause: error)
            } catch {
                throw StorageError.from(error, "cannot write a feature of \(table.name)")
            }
        }
    }
}
