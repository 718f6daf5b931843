import Foundation
import GRDB
import GRDBSQLite
import OutpostCore

/// Writes rows as the service holds them — a download's changes — straight into a feature
/// table, inside the caller's transaction: one prepared statement per set of columns, values
/// bound as stored, and an unchanged geometry left out by comparing stored bytes. None of an
/// edit's checks run (field rules, editability: the service applied them when the row was
/// written there); geometries are still brought to the layer's type and layout as an edit's
/// are, SQLite's own constraints still hold, and the R-tree watch and `gpkg_contents` are kept
/// as ``FeatureTable``'s edits keep them. Through ``FeatureTable``'s `add`/`update` a downloaded
/// change cost about 26 µs (a `Feature`, the validator, an SQL string per row); here it is the
/// binding and SQLite's work.
public struct ServiceRowWriter {
    /// What a write does to the geometry column.
    public enum GeometryWrite: Sendable {
        /// Leave the stored geometry as it is.
        case keep
        /// Store this geometry.
        case set(Geometry)
        /// Store NULL.
        case clear
    }

    /// A feature found by global id: its object id and stored geometry blob.
    public struct Located: Sendable {
        /// The feature's object id.
        public let objectID: Int64
        /// Its stored geometry blob (GeoPackage binary), nil when NULL.
        public let geometry: [UInt8]?
    }

    /// The table written.
    public let table: FeatureTable
    private let conn: GeodatabaseConnection
    /// The columns written by value, in table order: every attribute field but the object id
    /// and the global id.
    public let fields: [FieldDefinition]
    private let lookup: FieldLookup
    /// Each field's default, as an insert without the value stores it (read once, not per row).
    private let defaults: [DatabaseValue]
    private let globalIDField: String?
    private var statements: [StatementKey: Statement] = [:]
    /// The statement used last, with its key.
    private var current: (key: StatementKey, statement: Statement)?
    /// The columns of the row being written (kept between rows: no array made per row).
    private var columns: [Int] = []
    private var extent = Envelope.Builder()
    private var touched = false

    private struct StatementKey: Hashable {
        var insert: Bool
        var columns: [Int]
        var geometry: Bool
    }

    /// A writer for `table` inside the transaction of `conn`.
    public init(table: FeatureTable, conn: GeodatabaseConnection) {
        self.table = table
        self.conn = conn
        fields = table.attributeFields.filter { $0.type != .globalID }
        lookup = FieldLookup(fields)
        defaults = fields.map { field in
            field.defaultValue.flatMap { try? FieldValue(json: $0, type: field.type) }.map { table.databaseValue($0, field.type) } ?? .null
        }
        globalIDField = table.definition.globalIDField
    }

    /// The index in ``fields`` of the field called `name` (any case).
    public func fieldIndex(named name: String) -> Int? {
        lookup.index(of: name)
    }

    /// The features of `globalIDs` the table holds, by global id.
    public func locate(globalIDs: [String]) throws -> [String: Located] {
        guard let gidField = globalIDField, !globalIDs.isEmpty else { return [:] }
        let layer = table.definition
        let geometry = layer.isSpatial ? quoted(layer.geometryColumn) : "NULL"
        let sql = """
            SELECT \(quoted(layer.objectIDField)), \(quoted(gidField)), \(geometry) FROM \(quoted(table.name))
            WHERE \(quoted(gidField)) IN (SELECT value FROM json_each(?))
            """
        let list = JSONValue.arrayText(globalIDs)
        var found: [String: Located] = [:]
        found.reserveCapacity(globalIDs.count)
        // Stepped through the C API: a chunk's rows are read without a GRDB row each, and the
        // stored blob is copied once (not into a `Data` and again into the array).
        let s = try conn.db.cachedStatement(sql: sql).sqliteStatement
        sqlite3_reset(s)
        bindText(list, s, 1)
        defer { sqlite3_reset(s) }
        while true {
            let rc = sqlite3_step(s)
            if rc == SQLITE_DONE { break }
            guard rc == SQLITE_ROW else {
                throw StorageError(.sqlite, "cannot find features of \(table.name): \(String(cString: sqlite3_errmsg(sqlite3_db_handle(s))))", table: table.name)
            }
            let objectID = ColumnValue(s, 0)
            guard objectID.type == SQLITE_INTEGER, let gid = ColumnValue(s, 1).string else { continue }
            var geometry: [UInt8]?
            let stored = ColumnValue(s, 2)
            if stored.type == SQLITE_BLOB { geometry = [UInt8](stored.blob) }
            found[gid] = Located(objectID: objectID.int64, geometry: geometry)
        }
        return found
    }

    /// Writes `values` (aligned with ``fields``; nil leaves a column as it is) and the geometry
    /// into the feature `objectID`, whose stored geometry is `stored`. Whether it wrote the
    /// geometry (an equal one is left out: writing it again would move its R-tree entry for
    /// nothing).
    @discardableResult
    public mutating func update(objectID: Int64, values: [FieldValue?], geometry: GeometryWrite, stored: [UInt8]?) throws -> Bool {
        var blob: [UInt8]?
        var clears = false
        switch geometry {
        case .keep: break
        case .clear: clears = stored != nil
        case .set(let g):
            let encoded = try encode(g)
            if encoded != stored { blob = encoded }
        }
        let writesGeometry = blob != nil || clears
        columns.removeAll(keepingCapacity: true)
        for (i, value) in values.enumerated() where value != nil { columns.append(i) }
        guard !columns.isEmpty || writesGeometry else { return false }
        if writesGeometry { try conn.willWriteGeometries(of: table.name, 1) }
        let written = try statement(insert: false, geometry: writesGeometry)
        let s = written.sqliteStatement
        sqlite3_reset(s)
        var index: Int32 = 1
        for i in columns {
            bindFieldValue(values[i]!, fields[i].type, s, index)
            index += 1
        }
        if writesGeometry {
            bindBlob(blob, s, index)
            index += 1
        }
        sqlite3_bind_int64(s, index, objectID)
        try step(written)
        touched = true
        return writesGeometry
    }

    /// Inserts the feature `globalID` with `values` (aligned with ``fields``; nil takes the
    /// field's default) and geometry; its new object id.
    public mutating func insert(globalID: String, values: [FieldValue?], geometry: Geometry?) throws -> Int64 {
        var gid: String?
        if let gidField = globalIDField {
            guard let normalized = GlobalID.normalized(globalID) else {
                throw StorageError(.invalidEdit, "\"\(shortened(globalID))\" is not a GUID", table: table.name, field: gidField)
            }
            gid = normalized
        }
        let withGeometry = table.definition.isSpatial
        let blob = withGeometry ? try geometry.map { try encode($0) } : nil
        if withGeometry, blob != nil { try conn.willWriteGeometries(of: table.name, 1) }
        columns.removeAll(keepingCapacity: true)
        columns.append(contentsOf: fields.indices)
        let written = try statement(insert: true, geometry: withGeometry)
        let s = written.sqliteStatement
        sqlite3_reset(s)
        var index: Int32 = 1
        for (i, field) in fields.enumerated() {
            if let value = values[i] { bindFieldValue(value, field.type, s, index) } else { bindDatabaseValue(defaults[i], s, index) }
            index += 1
        }
        if withGeometry {
            bindBlob(blob, s, index)
            index += 1
        }
        if let gid { bindText(gid, s, index) }
        try step(written)
        touched = true
        return conn.db.lastInsertedRowID
    }

    /// Deletes the feature `objectID`.
    public mutating func delete(objectID: Int64) throws {
        try table.delete(objectIDs: [objectID], in: conn)
    }

    /// Records the writes in `gpkg_contents` (its time and extent), once for all of them.
    public mutating func finish() throws {
        guard touched else { return }
        try table.touchContents(conn, extent: extent.envelope)
        touched = false
        extent = Envelope.Builder()
    }

    /// The geometry as the table stores it: brought to the layer's type and layout, encoded
    /// with the table's spatial reference (its envelope joins the contents' extent).
    private mutating func encode(_ geometry: Geometry) throws -> [UInt8] {
        guard let g = try table.checkGeometry(geometry, index: 0) else {
            throw StorageError(.invalidEdit, "\(table.name) is a table without geometry", table: table.name)
        }
        if let e = g.envelope { extent.add(e) }
        return GeoPackageBinary.encode(g, srsID: table.srsID)
    }

    /// Steps `statement`, bound; a constraint of the table is an edit error, as through the
    /// edit API.
    private func step(_ statement: Statement) throws {
        do {
            try statement.stepToEnd()
        } catch let error as DatabaseError where error.resultCode == .SQLITE_CONSTRAINT {
            throw StorageError(.invalidEdit, "rejected by the table: \(error.message ?? "constraint failed")", table: table.name, cause: error)
        }
    }

    /// The statement that writes ``columns`` (and the geometry when `geometry`), made once per
    /// set of columns. A download writes most rows with the statement of the row before: that
    /// one is checked first, without hashing the key.
    private mutating func statement(insert: Bool, geometry: Bool) throws -> Statement {
        if let current, current.key.insert == insert, current.key.geometry == geometry, current.key.columns == columns { return current.statement }
        let key = StatementKey(insert: insert, columns: columns, geometry: geometry)
        let found: Statement
        if let cached = statements[key] {
            found = cached
        } else {
            found = try makeStatement(key)
            statements[key] = found
        }
        current = (key, found)
        return found
    }

    private func makeStatement(_ key: StatementKey) throws -> Statement {
        let layer = table.definition
        var names = key.columns.map { quoted(fields[$0].name) }
        if key.geometry { names.append(quoted(layer.geometryColumn)) }
        let sql: String
        if key.insert {
            if let gid = globalIDField { names.append(quoted(gid)) }
            sql = "INSERT INTO \(quoted(table.name)) (\(names.joined(separator: ", "))) VALUES (\(Array(repeating: "?", count: names.count).joined(separator: ", ")))"
        } else {
            sql = "UPDATE \(quoted(table.name)) SET \(names.map { "\($0) = ?" }.joined(separator: ", ")) WHERE \(quoted(layer.objectIDField)) = ?"
        }
        return try conn.db.makeStatement(sql: sql)
    }
}
