import Foundation
import GRDB
import GRDBSQLite
import OutpostCore

/// SQLite's "copy the bytes now" destructor marker (the C macro SQLITE_TRANSIENT).
let sqliteTransient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

/// Loads many features into one table fast, inside a write transaction.
///
/// It inserts rows through one prepared statement bound with the C API, keeps each row's bounds
/// (24 bytes a feature, never the geometry), and builds the R-tree at the end: packed in one pass
/// when the index was empty (`RTreeBulkLoader`), by bulk insert otherwise. The R-tree triggers
/// are dropped for the load and re-created, unchanged, before the transaction commits. Every
/// value is checked against the schema exactly as `FeatureTable/add(_:in:)` does.
///
/// ```swift
/// try gdb.write { conn in
///     try table.importFeatures(in: conn) { importer in
///         for f in source { try importer.add(f) }
///     }
/// }
/// ```
public final class FeatureImporter {
    let table: FeatureTable
    private let db: Database
    private let handle: OpaquePointer
    private var statement: OpaquePointer?
    /// Attribute fields bound positionally by ``add(values:globalID:geometry:)``, in this order
    /// (the OID and GlobalID fields excluded).
    public let valueFields: [FieldDefinition]
    private let rules: [FieldRules]
    private let globalIDColumn: Bool
    private var entries: [RTreeEntry] = []
    private var extent = Envelope.Builder()
    private var random = FastRandomGenerator()
    /// SQL of the triggers and indexes set aside for the load, re-created by finish().
    private var savedTriggers: [String] = []
    private var bulkLoad = false
    private let silencedCapture: Bool
    /// Features added so far.
    public private(set) var count = 0

    init(table: FeatureTable, conn: GeodatabaseConnection, captureChanges: Bool) throws {
        self.table = table
        self.db = conn.db
        guard let handle = conn.db.sqliteConnection else { throw StorageError(.sqlite, "the connection is closed") }
        self.handle = handle
        let definition = table.definition
        valueFields = definition.fields.filter { $0.type != .oid && $0.type != .globalID }
        rules = valueFields.map { table.rules[$0.name.lowercased()]! }
        globalIDColumn = definition.globalIDField != nil
        silencedCapture = try !captureChanges && db.tableExists("outpost_capture")
        if silencedCapture {
            try db.execute(sql: "UPDATE outpost_capture SET silenced = 1 WHERE id = 1")
            // Rows loaded in bulk pass no hook: a replica's stored checksum of the table would not hold.
            try conn.forgetStoredChecksum(of: table.name)
        }
        // Work that would run once per row is set aside and redone once at the end, in the same
        // transaction: the R-tree triggers (the index is built in bulk), the capture insert
        // trigger while capture is off (the importer supplies every global id itself), and the
        // unique global-id index of an empty table (rebuilt sorted instead of by random inserts).
        var setAside: [String] = []
        if definition.isSpatial, try table.hasSpatialIndex(db) {
            setAside += GeoPackageDDL.spatialIndexTriggerNames(table: table.name, geometry: definition.geometryColumn)
            bulkLoad = try Int.fetchOne(db, sql: "SELECT count(*) FROM \(quoted(table.rtreeName)) LIMIT 1") == 0
        }
        if silencedCapture { setAside.append("outpost_\(table.name)_insert") }
        if try Int.fetchOne(db, sql: "SELECT count(*) FROM (SELECT 1 FROM \(quoted(table.name)) LIMIT 1)") == 0 {
            setAside.append(GeoPackageDDL.globalIDIndexName(table: table.name))
        }
        savedTriggers = try GeoPackageDDL.setAside(setAside, db)
        var columns = valueFields.map(\.name)
        if let gid = definition.globalIDField { columns.append(gid) }
        if definition.isSpatial { columns.append(definition.geometryColumn) }
        let sql = "INSERT INTO \(quoted(table.name)) (\(columns.map(quoted).joined(separator: ", "))) VALUES (\(Array(repeating: "?", count: columns.count).joined(separator: ", ")))"
        let rc = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard rc == SQLITE_OK else { throw sqliteError(rc, "cannot prepare the import statement") }
    }

    deinit {
        if let statement { sqlite3_finalize(statement) }
    }

    /// Adds one feature given by field name (unknown or non-editable fields are errors).
    /// - Returns: its object id.
    @discardableResult
    public func add(_ feature: Feature) throws -> Int64 {
        var values = [FieldValue](repeating: .null, count: valueFields.count)
        var given = Set<Int>()
        for (key, value) in feature.attributes {
            guard let index = valueFields.firstIndex(where: { $0.name == key })
                ?? valueFields.firstIndex(where: { $0.name.lowercased() == key.lowercased() })
            else {
                if let f = table.definition.field(named: key), f.type == .oid || f.type == .globalID { continue }
                throw table.editError(count, key, "\(table.name) has no field \"\(shortened(key))\"")
            }
            values[index] = value
            given.insert(index)
        }
        for (index, field) in valueFields.enumerated() where !given.contains(index) {
            if let def = field.defaultValue, let v = try? FieldValue(json: def, type: field.type) { values[index] = v }
        }
        return try add(values: values, globalID: feature.globalID, geometry: feature.geometry)
    }

    /// Adds one feature from values in ``valueFields`` order: the fast path for bulk sources.
    @discardableResult
    public func add(values: [FieldValue], globalID: String? = nil, geometry: Geometry?) throws -> Int64 {
        guard values.count == valueFields.count else {
            throw table.editError(count, nil, "expected \(valueFields.count) values, got \(values.count)")
        }
        let stmt = statement!
        var index: Int32 = 1
        for (i, value) in values.enumerated() {
            if let problem = rules[i].problem(with: value) {
                throw table.editError(count, valueFields[i].name, "\(valueFields[i].name): \(problem)")
            }
            bindFieldValue(value, valueFields[i].type, stmt, index)
            index += 1
        }
        if globalIDColumn {
            let gid: String
            if let globalID {
                guard let normalized = GlobalID.normalized(globalID) else {
                    throw table.editError(count, table.definition.globalIDField, "\"\(shortened(globalID))\" is not a GUID")
                }
                gid = normalized
            } else {
                gid = GlobalID.make(using: &random)
            }
            bindText(gid, stmt, index)
            index += 1
        }
        var envelope: Envelope?
        if table.definition.isSpatial {
            let g = try table.checkGeometry(geometry, index: count)
            bindBlob(g.map { GeoPackageBinary.encode($0, srsID: table.srsID) }, stmt, index)
            envelope = g?.envelope
        }
        let rc = sqlite3_step(stmt)
        sqlite3_reset(stmt)
        guard rc == SQLITE_DONE else {
            if rc == SQLITE_CONSTRAINT || rc & 0xff == SQLITE_CONSTRAINT {
                throw table.editError(count, nil, "rejected by the table: \(String(cString: sqlite3_errmsg(handle)))")
            }
            throw sqliteError(rc, "insert failed")
        }
        let id = sqlite3_last_insert_rowid(handle)
        if let envelope {
            extent.add(envelope)
            entries.append(RTreeEntry(id: id, envelope))
        }
        count += 1
        return id
    }

    /// Builds the index, restores the triggers and the capture flag, updates `gpkg_contents`.
    func finish() throws {
        if let statement {
            sqlite3_finalize(statement)
            self.statement = nil
        }
        if table.definition.isSpatial, try table.hasSpatialIndex(db) {
            if bulkLoad {
                try RTreeBulkLoader.load(&entries, into: table.rtreeName, db)
            } else {
                let insert = try db.makeStatement(sql: "INSERT OR REPLACE INTO \(quoted(table.rtreeName)) VALUES (?, ?, ?, ?, ?)")
                for e in entries {
                    try insert.execute(arguments: [e.id, Double(e.minX), Double(e.maxX), Double(e.minY), Double(e.maxY)])
                }
            }
        }
        entries = []
        FreedMemory.release()
        try withSorterSpillingToDisk(db) {
            for sql in savedTriggers {
                do {
                    try db.execute(sql: sql)
                } catch let error as DatabaseError where error.resultCode == .SQLITE_CONSTRAINT {
                    throw StorageError(.invalidEdit, "two imported features have the same global id", table: table.name, cause: error)
                }
            }
        }
        savedTriggers = []
        if silencedCapture {
            try db.execute(sql: "UPDATE outpost_capture SET silenced = 0 WHERE id = 1")
        }
        try table.touchContents(db, extent: extent.envelope)
    }

    /// Runs `body` (which builds an index) with SQLite's temporary files on disk. Connections
    /// keep them in memory for statement journals (see `Geodatabase.configuration`), but then
    /// the sorter that builds an index never spills: indexing the global ids of 6.25 million
    /// features held 300 MB. On disk it sorts runs of the cache size and merges them. SQLite
    /// refuses the switch inside a transaction once the connection has used its temporary
    /// schema; the index is then built in memory as before.
    private func withSorterSpillingToDisk<T>(_ db: Database, _ body: () throws -> T) throws -> T {
        let switched = (try? db.execute(sql: "PRAGMA temp_store = FILE")) != nil
        defer { if switched { try? db.execute(sql: "PRAGMA temp_store = MEMORY") } }
        return try body()
    }

    private func sqliteError(_ rc: Int32, _ context: String) -> StorageError {
        StorageError(.sqlite, "\(context): \(String(cString: sqlite3_errmsg(handle))) (SQLite \(rc))", table: table.name)
    }
}

extension FeatureTable {
    /// Bulk-loads features inside `conn`'s write transaction; see ``FeatureImporter``.
    ///
    /// - Parameter captureChanges: record the rows as local edits to sync (off by default: an
    ///   import is base data, not edits).
    /// - Parameter conn: a connection inside a write transaction.
    /// - Parameter body: adds the features through the importer it is handed.
    /// - Returns: the number of features added.
    @discardableResult
    public func importFeatures(
        in conn: GeodatabaseConnection, captureChanges: Bool = false, _ body: (FeatureImporter) throws -> Void
    ) throws -> Int {
        guard conn.isWritable else { throw StorageError(.readOnly, "\(geodatabase.url.lastPathComponent) is open read-only") }
        let importer = try FeatureImporter(table: self, conn: conn, captureChanges: captureChanges)
        do {
            try body(importer)
        } catch {
            // Index what was inserted and restore triggers even on failure, so the file stays
            // consistent if the caller decides to commit the rows loaded so far.
            try importer.finish()
            throw error
        }
        try importer.finish()
        return importer.count
    }
}
