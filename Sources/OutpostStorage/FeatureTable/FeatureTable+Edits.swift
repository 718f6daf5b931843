import Foundation
import GRDB
import OutpostCore

extension FeatureTable {
    // MARK: - Async edits (each its own transaction)

    /// Adds features and returns them with their new object ids and global ids.
    ///
    /// ```swift
    /// let added = try await table.add([Feature(attributes: ["status": .string("open")], geometry: point)])
    /// ```
    /// - Throws: ``StorageError/Code/invalidEdit`` (with `editIndex` and `field`) when any feature
    ///   breaks the schema; nothing is written then.
    ///
    /// - Parameter spatialReference: the spatial reference of the geometries given, when it is not
    ///   the layer's; they are projected (between 4326 and 3857) or the edit is refused.
    /// - Parameter features: the features to add; object ids and global ids given are replaced by new ones.
    public func add(_ features: [Feature], spatialReference: SpatialReference? = nil) async throws -> [Feature] {
        try await geodatabase.write { conn in try self.add(features, spatialReference: spatialReference, in: conn) }
    }

    /// Updates features found by object id (or, when it is nil, by global id). Attributes left
    /// out keep their value; a nil geometry keeps the geometry.
    /// - Throws: `.invalidEdit`, or `.notFound` for a feature that does not exist; nothing is written then.
    public func update(_ features: [Feature], spatialReference: SpatialReference? = nil) async throws {
        try await geodatabase.write { conn in try self.update(features, spatialReference: spatialReference, in: conn) }
    }

    /// Deletes features by object id.
    /// - Throws: ``StorageError/Code/notFound`` when an id does not exist; nothing is deleted then.
    public func delete(objectIDs: [Int64]) async throws {
        try await geodatabase.write { conn in try self.delete(objectIDs: objectIDs, in: conn) }
    }

    /// Deletes features by global id.
    public func delete(globalIDs: [String]) async throws {
        try await geodatabase.write { conn in try self.delete(globalIDs: globalIDs, in: conn) }
    }

    // MARK: - Edits inside a transaction

    /// Adds features inside `conn`'s write transaction; see ``add(_:spatialReference:)``.
    public func add(
        _ features: [Feature], spatialReference: SpatialReference? = nil, in conn: GeodatabaseConnection
    ) throws -> [Feature] {
        let features = try projected(features, from: spatialReference)
        let prepared = try features.enumerated().map { try prepareAdd($1, index: $0) }
        let db = conn.db
        var result: [Feature] = []
        result.reserveCapacity(features.count)
        var extent = Envelope.Builder()
        // Every prepared add binds the same columns (all attributes, then the geometry).
        let columns = prepared.first?.columns ?? []
        try conn.willWriteGeometries(of: name, prepared.filter { $0.geometry != nil }.count)
        let statement = try editStatement(conn, columns: columns, key: nil)
        for (index, row) in prepared.enumerated() {
            do {
                try statement.run(row.values)
            } catch let error as DatabaseError where error.resultCode == .SQLITE_CONSTRAINT {
                throw StorageError(.invalidEdit, "rejected by the table: \(error.message ?? "constraint failed")", table: name, editIndex: index, cause: error)
            }
            var added = features[index]
            added.objectID = db.lastInsertedRowID
            added.globalID = row.globalID
            if let g = row.geometry { added.geometry = g }
            if let e = row.geometry?.envelope { extent.add(e) }
            result.append(added)
        }
        try touchContents(conn, extent: extent.envelope)
        return result
    }

    /// Updates features by object id inside `conn`'s write transaction; see ``update(_:spatialReference:)``.
    public func update(
        _ features: [Feature], spatialReference: SpatialReference? = nil, in conn: GeodatabaseConnection
    ) throws {
        let features = try projected(features, from: spatialReference)
        let db = conn.db
        // Validate every edit before writing any; then update by key and treat "no row changed"
        // as not found (the caller's transaction rolls back the batch).
        let prepared = try features.enumerated().map { index, feature in (try updateKey(feature, index: index), try prepareUpdate(feature, index: index)) }
        var extent = Envelope.Builder()
        try conn.willWriteGeometries(of: name, prepared.count { $0.1.writesGeometry })
        for (index, (key, row)) in prepared.enumerated() {
            var values = row.values
            values.append(key.value)
            do {
                try editStatement(conn, columns: row.columns, key: key.column).run(values)
            } catch let error as DatabaseError where error.resultCode == .SQLITE_CONSTRAINT {
                throw StorageError(.invalidEdit, "rejected by the table: \(error.message ?? "constraint failed")", table: name, editIndex: index, cause: error)
            }
            guard db.changesCount > 0 else {
                throw StorageError(.notFound, "no feature with \(key.description)", table: name, editIndex: index)
            }
            if let e = row.geometry?.envelope { extent.add(e) }
        }
        try touchContents(conn, extent: extent.envelope)
    }

    /// The connection's statement that inserts `columns` (`key` nil) or updates them in the row
    /// whose `key` column (quoted) is bound last; prepared once per connection.
    func editStatement(_ conn: GeodatabaseConnection, columns: [String], key: String?) throws -> Statement {
        let cacheKey = GeodatabaseConnection.EditStatementKey(table: name, columns: columns, key: key)
        if let cached = conn.editStatements[cacheKey] { return cached }
        let sql: String
        if let key {
            let sets = columns.isEmpty ? "\(key) = \(key)" : columns.map { "\(quoted($0)) = ?" }.joined(separator: ", ")
            sql = "UPDATE \(quoted(name)) SET \(sets) WHERE \(key) = ?"
        } else {
            sql = "INSERT INTO \(quoted(name)) (\(columns.map(quoted).joined(separator: ", "))) VALUES (\(Array(repeating: "?", count: columns.count).joined(separator: ", ")))"
        }
        let statement = try conn.db.cachedStatement(sql: sql)
        conn.editStatements[cacheKey] = statement
        return statement
    }

    /// The column and value that identify the feature an update targets.
    struct UpdateKey {
        var column: String
        var value: DatabaseValue
        /// Whether the key is the global id (else the object id).
        var byGlobalID: Bool

        /// For the error when no row has the key (made then, not for every update).
        var description: String {
            switch value.storage {
            case .int64(let id) where !byGlobalID: return "object id \(id)"
            case .string(let gid): return "global id \(gid)"
            default: return "\(byGlobalID ? "global id" : "object id") \(value)"
            }
        }
    }

    func updateKey(_ feature: Feature, index: Int) throws -> UpdateKey {
        if let oid = feature.objectID {
            return UpdateKey(column: quoted(definition.objectIDField), value: oid.databaseValue, byGlobalID: false)
        }
        guard let gidField = definition.globalIDField, let supplied = feature.globalID else {
            throw editError(index, nil, "an update needs the feature's object id\(definition.globalIDField == nil ? "" : " or global id")")
        }
        guard let gid = GlobalID.normalized(supplied) else {
            throw editError(index, gidField, "\"\(shortened(supplied))\" is not a GUID")
        }
        return UpdateKey(column: quoted(gidField), value: gid.databaseValue, byGlobalID: true)
    }

    /// Deletes features by object id inside `conn`'s write transaction.
    public func delete(objectIDs: [Int64], in conn: GeodatabaseConnection) throws {
        let db = conn.db
        let pk = quoted(definition.objectIDField)
        let exists = try db.cachedStatement(sql: "SELECT \(pk) FROM \(quoted(name)) WHERE \(pk) = ?")
        for (index, id) in objectIDs.enumerated() {
            guard try Int64.fetchOne(exists, arguments: [id]) != nil else {
                throw StorageError(.notFound, "no feature with object id \(id)", table: name, editIndex: index)
            }
        }
        try conn.willWriteGeometries(of: name, objectIDs.count)
        let statement = try db.cachedStatement(sql: "DELETE FROM \(quoted(name)) WHERE \(pk) = ?")
        for id in objectIDs { try statement.run([id.databaseValue]) }
        if !objectIDs.isEmpty { try touchContents(conn, extent: nil) }
    }

    /// Deletes features by global id inside `conn`'s write transaction.
    public func delete(globalIDs: [String], in conn: GeodatabaseConnection) throws {
        let ids = try globalIDs.enumerated().map { index, gid in
            try locate(Feature(globalID: gid), index: index, conn.db)
        }
        try delete(objectIDs: ids, in: conn)
    }

    // MARK: - Validation

    /// The features with geometries projected from `source` into the layer's spatial reference.
    func projected(_ features: [Feature], from source: SpatialReference?) throws -> [Feature] {
        try validator.projected(features, from: source)
    }

    struct PreparedRow {
        var columns: [String] = []
        var values: [DatabaseValue] = []
        var globalID: String?
        var geometry: Geometry?
        /// Whether the row sets the geometry column (its last value).
        var writesGeometry = false
    }

    func editError(_ index: Int, _ field: String?, _ message: String) -> StorageError {
        validator.error(index, field, message)
    }

    func prepareAdd(_ feature: Feature, index: Int) throws -> PreparedRow {
        prepared(try validator.add(feature, index: index))
    }

    func prepareUpdate(_ feature: Feature, index: Int) throws -> PreparedRow {
        prepared(try validator.update(feature, index: index))
    }

    /// A checked row with its values as stored in the GeoPackage.
    private func prepared(_ row: FeatureValidator.Row) -> PreparedRow {
        var out = PreparedRow(columns: row.columns, values: [], globalID: row.globalID, geometry: row.geometry, writesGeometry: row.writesGeometry)
        out.values.reserveCapacity(row.values.count)
        for (i, value) in row.values.enumerated() {
            if row.writesGeometry && i == row.values.count - 1 {
                out.values.append(row.geometry.map { Data(GeoPackageBinary.encode($0, srsID: srsID)).databaseValue } ?? .null)
            } else {
                out.values.append(databaseValue(value, row.types[i]))
            }
        }
        return out
    }

    func checkGeometry(_ geometry: Geometry?, index: Int) throws -> Geometry? {
        try validator.checkGeometry(geometry, index: index)
    }

    func databaseValue(_ value: FieldValue, _ type: FieldType) -> DatabaseValue {
        switch value {
        case .null: return .null
        case .integer(let i): return type == .double || type == .single ? Double(i).databaseValue : i.databaseValue
        case .double(let d): return d.databaseValue
        case .string(let s): return (type == .globalID || type == .guid ? (GlobalID.normalized(s) ?? s) : s).databaseValue
        case .date(let d):
            let text = GeoPackageDate.format(d)
            return (type == .dateOnly ? String(text.prefix(10)) : text).databaseValue
        case .blob(let b): return Data(b).databaseValue
        }
    }

    /// The object id of `feature` (by object id, else global id).
    func locate(_ feature: Feature, index: Int, _ db: Database) throws -> Int64 {
        let pk = quoted(definition.objectIDField)
        if let oid = feature.objectID {
            guard try Int64.fetchOne(db, sql: "SELECT \(pk) FROM \(quoted(name)) WHERE \(pk) = ?", arguments: [oid]) != nil else {
                throw StorageError(.notFound, "no feature with object id \(oid)", table: name, editIndex: index)
            }
            return oid
        }
        guard let gidField = definition.globalIDField, let supplied = feature.globalID else {
            throw editError(index, nil, "an update or delete needs the feature's object id\(definition.globalIDField == nil ? "" : " or global id")")
        }
        guard let gid = GlobalID.normalized(supplied) else {
            throw editError(index, gidField, "\"\(shortened(supplied))\" is not a GUID")
        }
        guard let oid = try Int64.fetchOne(db, sql: "SELECT \(pk) FROM \(quoted(name)) WHERE \(quoted(gidField)) = ?", arguments: [gid]) else {
            throw StorageError(.notFound, "no feature with global id \(gid)", table: name, editIndex: index)
        }
        return oid
    }

    /// Keeps `gpkg_contents` informative: last_change always, the bounding box grown to cover new
    /// geometries (GDAL maintains it the same way).
    /// Records an edit in `gpkg_contents` (now, or when a deferral by the connection ends).
    func touchContents(_ conn: GeodatabaseConnection, extent: Envelope?) throws {
        if conn.deferredContents != nil {
            var builder = conn.deferredContents?[name] ?? Envelope.Builder()
            if let extent { builder.add(extent) }
            conn.deferredContents?[name] = builder
            return
        }
        try touchContents(conn.db, extent: extent)
    }

    func touchContents(_ db: Database, extent: Envelope?) throws {
        if let e = extent {
            try db.cachedStatement(
                sql: """
                    UPDATE gpkg_contents SET last_change = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'),
                      min_x = min(coalesce(min_x, ?1), ?1), min_y = min(coalesce(min_y, ?2), ?2),
                      max_x = max(coalesce(max_x, ?3), ?3), max_y = max(coalesce(max_y, ?4), ?4)
                    WHERE table_name = ?5
                    """
            ).execute(arguments: [e.xmin, e.ymin, e.xmax, e.ymax, name])
        } else {
            try db.cachedStatement(sql: "UPDATE gpkg_contents SET last_change = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE table_name = ?")
                .execute(arguments: [name])
        }
    }
}
