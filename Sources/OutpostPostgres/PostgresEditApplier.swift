import Foundation
import Logging
import OutpostCore
import OutpostProtocol
import OutpostSyncService
import OutpostStorage
import PostgresNIO

/// The changes of one generation of one layer, written to the change log, tombstones and
/// per-column generations with a handful of statements (the entries go in as parallel arrays).
struct PostgresChangeLog {
    let service: String
    let layerID: Int
    let generation: Int64
    var origin: (replica: String, seq: Int64)?
    private var globalIDs: [String] = []
    private var ops: [String] = []
    private var columns: [String] = []
    private var editedAt: [String] = []
    private var toOrigin: [String] = []
    private var rows: [String] = []

    init(service: String, layerID: Int, generation: Int64, origin: (replica: String, seq: Int64)? = nil) {
        self.service = service
        self.layerID = layerID
        self.generation = generation
        self.origin = origin
    }

    var isEmpty: Bool { globalIDs.isEmpty }

    /// One feature's change: `columns` changed (none for a delete), `row` a delete's last values
    /// (Esri JSON) for the tombstone, `editedAt` when the edit was made if not now, `toOrigin`
    /// for a resolution the uploading replica must download too (logged without origin).
    mutating func append(globalID: String, op: String, columns changed: [String], editedAt: String? = nil, toOrigin: Bool = false, row: String? = nil) {
        globalIDs.append(globalID)
        ops.append(op)
        columns.append(JSONValue.arrayText(changed))
        self.editedAt.append(editedAt ?? "")
        self.toOrigin.append(toOrigin ? "1" : "0")
        rows.append(row ?? "")
    }

    mutating func append(_ entry: ChangeLogEntry) {
        append(globalID: entry.globalID, op: entry.op, columns: entry.columns, editedAt: entry.editedAt, toOrigin: entry.toOrigin, row: entry.row)
    }

    func write(_ conn: PostgresConnection, logger: Logger) async throws {
        guard !isEmpty else { return }
        let layer = Int32(layerID)
        try await conn.query(
            """
            INSERT INTO outpost_change_log (service, generation, layer_id, globalid, op, changed_columns, origin_replica, origin_seq, edited_at)
            SELECT \(service), \(generation), \(layer), g, o, c::jsonb,
              CASE WHEN t = '1' THEN NULL ELSE \(origin?.replica)::text END, CASE WHEN t = '1' THEN NULL ELSE \(origin?.seq)::bigint END,
              NULLIF(e, '')::timestamptz
            FROM unnest(\(globalIDs), \(ops), \(columns), \(editedAt), \(toOrigin)) WITH ORDINALITY AS x (g, o, c, e, t, n) ORDER BY n
            """, logger: logger)
        try await conn.query(
            """
            INSERT INTO outpost_tombstones (service, layer_id, globalid, generation, row)
            SELECT DISTINCT ON (g) \(service), \(layer), g, \(generation), NULLIF(r, '')::jsonb
            FROM unnest(\(globalIDs), \(ops), \(rows)) WITH ORDINALITY AS x (g, o, r, n) WHERE o = 'delete' ORDER BY g, n DESC
            ON CONFLICT (service, layer_id, globalid) DO UPDATE SET generation = excluded.generation, row = coalesce(excluded.row, outpost_tombstones.row)
            """, logger: logger)
        try await conn.query(
            """
            DELETE FROM outpost_tombstones WHERE service = \(service) AND layer_id = \(layer)
              AND globalid IN (SELECT g FROM unnest(\(globalIDs), \(ops)) AS x (g, o) WHERE o = 'insert')
            """, logger: logger)
    }

    static func setGeneration(_ conn: PostgresConnection, service: String, _ generation: Int64, logger: Logger) async throws {
        try await conn.query("UPDATE outpost_services SET generation = \(generation) WHERE name = \(service)", logger: logger)
    }
}

/// Applies one applyEdits request inside the service's commit transaction, logging every change
/// under the transaction's generation. Checks are the GeoPackage backend's (``FeatureValidator``);
/// what the database itself refuses (a duplicate global id) is an invalid edit too.
struct PostgresEditApplier {
    let layer: PostgresLayer
    let service: String
    let conn: PostgresConnection
    let logger: Logger
    let rollbackOnFailure: Bool
    let generation: Int64
    private var log: PostgresChangeLog
    private var savepoints = 0

    init(layer: PostgresLayer, service: String, conn: PostgresConnection, logger: Logger, rollbackOnFailure: Bool, generation: Int64) {
        self.layer = layer
        self.service = service
        self.conn = conn
        self.logger = logger
        self.rollbackOnFailure = rollbackOnFailure
        self.generation = generation
        log = PostgresChangeLog(service: service, layerID: layer.definition.id, generation: generation)
    }

    var definition: LayerDefinition { layer.definition }

    var allColumns: [String] {
        definition.fields.filter { $0.type != .oid }.map(\.name) + (definition.isSpatial ? [definition.geometryColumn] : [])
    }

    mutating func apply(_ edits: EditRequest) async throws -> ApplyEditsResponse {
        var response = ApplyEditsResponse()
        for (index, feature) in edits.adds.enumerated() {
            response.addResults.append(try await attempt("adds", index, feature) { this in try await this.add(feature, index) })
        }
        for (index, feature) in edits.updates.enumerated() {
            response.updateResults.append(try await attempt("updates", index, feature) { this in try await this.update(feature, index) })
        }
        for (index, feature) in edits.deletes.enumerated() {
            response.deleteResults.append(try await attempt("deletes", index, feature) { this in try await this.delete(feature, index) })
        }
        return response
    }

    /// Writes the log and moves the service to this generation when anything changed.
    func finish() async throws {
        guard !log.isEmpty else { return }
        try await log.write(conn, logger: logger)
        try await PostgresChangeLog.setGeneration(conn, service: service, generation, logger: logger)
    }

    private mutating func add(_ feature: Feature, _ index: Int) async throws -> EditResult {
        let row = try layer.validator.add(feature, index: index)
        let objectID = try await layer.insert(row, conn, index: index, logger: logger)
        if let gid = row.globalID { log.append(globalID: gid, op: "insert", columns: allColumns) }
        return EditResult(objectId: objectID, globalId: row.globalID, success: true)
    }

    private mutating func update(_ feature: Feature, _ index: Int) async throws -> EditResult {
        let row = try layer.validator.update(feature, index: index)
        var binds = PostgresBindings()
        let key = try self.key(feature, index, &binds)
        guard let before = try await existing(key, binds, index, lock: true) else { throw notFound(feature, index) }
        guard !row.columns.isEmpty else { return EditResult(objectId: before.objectID, globalId: before.globalID, success: true) }
        guard let after = try await layer.update(objectID: before.objectID!, row, conn, index: index, logger: logger) else { throw notFound(feature, index) }
        let columns = changedColumns(before, after)
        if let gid = after.globalID, !columns.isEmpty { log.append(globalID: gid, op: "update", columns: columns) }
        return EditResult(objectId: after.objectID, globalId: after.globalID, success: true)
    }

    private mutating func delete(_ feature: Feature, _ index: Int) async throws -> EditResult {
        var binds = PostgresBindings()
        let key = try self.key(feature, index, &binds)
        guard let before = try await layer.delete(where: key, binds, conn, index: index, logger: logger).first else { throw notFound(feature, index) }
        if let gid = before.globalID {
            log.append(globalID: gid, op: "delete", columns: [], row: try ReplicaRows.tombstoneJSON(before, definition))
        }
        return EditResult(objectId: before.objectID, globalId: before.globalID, success: true)
    }

    /// The condition naming the edited feature (object id, else global id), its value bound.
    private func key(_ feature: Feature, _ index: Int, _ binds: inout PostgresBindings) throws -> String {
        if let oid = feature.objectID {
            binds.append(oid)
            return "\(layer.pk) = $\(binds.count)"
        }
        guard let field = definition.globalIDField, feature.globalID != nil else {
            throw StorageError(.invalidEdit, "the edit names no feature (objectId or globalId)", table: definition.name, editIndex: index)
        }
        binds.append(try layer.validator.globalID(of: feature, index: index))
        return "\(PostgresLayer.q(field)) = $\(binds.count)"
    }

    private func existing(_ key: String, _ binds: PostgresBindings, _ index: Int, lock: Bool) async throws -> Feature? {
        var found: Feature?
        for try await r in try await run("SELECT \(layer.allColumns) FROM \(layer.table) WHERE \(key)\(lock ? " FOR UPDATE" : "")", binds, index) {
            found = try layer.decodeAll(r)
        }
        return found
    }

    private func notFound(_ feature: Feature, _ index: Int) -> StorageError {
        StorageError(
            .notFound, "no feature with \(feature.objectID.map { "object id \($0)" } ?? "global id \(feature.globalID ?? "")")", table: definition.name, editIndex: index)
    }

    private func run(_ sql: String, _ binds: PostgresBindings, _ index: Int) async throws -> PostgresRowSequence {
        try await layer.execute(conn, sql, binds, index: index, logger: logger)
    }

    /// Runs one edit. With rollbackOnFailure a failure ends the request (the transaction rolls
    /// back); without, a savepoint undoes the edit's own changes and its result says why.
    private mutating func attempt(
        _ list: String, _ index: Int, _ feature: Feature, _ body: (inout PostgresEditApplier) async throws -> EditResult
    ) async throws -> EditResult {
        let savepoint = "edit_\(savepoints)"
        if !rollbackOnFailure {
            savepoints += 1
            try await conn.query(PostgresQuery(unsafeSQL: "SAVEPOINT \(savepoint)"), logger: logger)
        }
        let logged = log
        do {
            let result = try await body(&self)
            if !rollbackOnFailure { try await conn.query(PostgresQuery(unsafeSQL: "RELEASE SAVEPOINT \(savepoint)"), logger: logger) }
            return result
        } catch let error as StorageError {
            log = logged
            let result = try EditFailure.result(error, layer: definition, list: list, index: index, feature: feature, rollbackOnFailure: rollbackOnFailure)
            try await conn.query(PostgresQuery(unsafeSQL: "ROLLBACK TO SAVEPOINT \(savepoint)"), logger: logger)
            return result
        }
    }

    private func changedColumns(_ before: Feature, _ after: Feature) -> [String] {
        EditFailure.changedColumns(before, after, definition)
    }
}
