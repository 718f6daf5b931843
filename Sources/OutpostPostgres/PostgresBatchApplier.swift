import Foundation
import Logging
import OutpostCore
import OutpostProtocol
import OutpostSyncService
import OutpostStorage
import PostgresNIO

/// Applies an uploaded batch inside the service's commit transaction: the `BatchPlanner`
/// decides how each edit resolves (the same decisions as the GeoPackage backend), this reads
/// what the planner needs in a few statements per layer and runs the plans' steps.
public struct PostgresBatchApplier: BatchApplying {
    let conn: PostgresConnection
    let service: String
    let logger: Logger
    /// The service's tables as the transaction sees them (read after the commit lock).
    let layers: [Int: PostgresLayer]
    /// The batch: its generation and origin, its rules, when it is applied.
    let context: BatchContext
    public private(set) var applied = 0
    public private(set) var failed = 0
    /// Where the feature edits' time went (PostGIS keeps its spatial index itself: no pack).
    public private(set) var stages = BatchStages()
    /// With rollback on failure, edits share the transaction without savepoints: once a statement
    /// failed the transaction runs nothing more, and the remaining edits are only checked.
    private var aborted = false

    init(conn: PostgresConnection, service: String, logger: Logger, layers: [Int: PostgresLayer], context: BatchContext) {
        self.conn = conn
        self.service = service
        self.logger = logger
        self.layers = layers
        self.context = context
    }

    public mutating func apply(_ edits: BatchLayer) async throws -> [BatchEditResult] {
        guard let layer = layers[edits.id] else { throw SyncServiceError.notFound("layer \(edits.id)") }
        return try await apply(edits, layer)
    }

    public mutating func apply(_ edits: [AttachmentEdit]) async throws -> [BatchEditResult] {
        try await apply(edits, layers: layers)
    }

    private mutating func apply(_ edits: BatchLayer, _ layer: PostgresLayer) async throws -> [BatchEditResult] {
        var planner = context.planner(for: layer.definition)
        let clock = ContinuousClock()
        let started = clock.now
        try await prefetch(edits, layer, &planner)
        let read = clock.now
        var log = PostgresChangeLog(service: service, layerID: layer.definition.id, generation: context.generation, origin: context.origin)
        var results: [BatchEditResult] = []
        results.reserveCapacity(edits.edits.count)
        // With rollback on failure the row changes go out set-based (a failure rejects the whole
        // batch anyway); without it each edit stands alone under a savepoint.
        var queue: PostgresStepQueue? = context.rollbackOnFailure ? PostgresStepQueue(layer: layer, logger: logger) : nil
        var insertedAt: [Int: String] = [:]
        for (index, edit) in edits.edits.enumerated() {
            if let q = queue, q.steps.count >= 5000 || GlobalID.normalized(edit.globalId).map(q.globalIDs.contains) == true {
                try await flush(&queue, &insertedAt, &results, &planner, edits)
            }
            if queue == nil { try await conn.query("SAVEPOINT batch_edit", logger: logger) }
            let undo = planner.undoPoint(edit)
            do {
                var plan = try planner.plan(edit)
                try await run(&plan, &planner, layer, index, queue: &queue, insertedAt: &insertedAt)
                if queue == nil { try await conn.query("RELEASE SAVEPOINT batch_edit", logger: logger) }
                applied += 1
                for entry in plan.log { log.append(entry) }
                results.append(plan.result)
            } catch let error as StorageError {
                planner.undo(undo)
                if context.rollbackOnFailure { aborted = true } else { try await conn.query("ROLLBACK TO SAVEPOINT batch_edit", logger: logger) }
                failed += 1
                results.append(BatchPlanner.failure(edit, error))
            }
        }
        try await flush(&queue, &insertedAt, &results, &planner, edits)
        let written = clock.now
        if !aborted { try await log.write(conn, logger: logger) }
        stages.reading += read - started
        stages.editing += written - read
        stages.changeLog += clock.now - written
        return results
    }

    /// Writes the queued row changes; fills in inserted features' object ids, and turns the
    /// results of edits whose rows the table refused into failures.
    private mutating func flush(
        _ queue: inout PostgresStepQueue?, _ insertedAt: inout [Int: String], _ results: inout [BatchEditResult], _ planner: inout BatchPlanner, _ edits: BatchLayer
    ) async throws {
        guard var q = queue, !q.isEmpty, !aborted else { return }
        let (inserted, refused) = try await q.flush(conn)
        queue = q
        for (index, gid) in insertedAt {
            guard let id = inserted[gid] else { continue }
            results[index].objectId = id
            planner.inserted(gid, objectID: id)
        }
        insertedAt = [:]
        for (index, error) in refused {
            results[index] = BatchPlanner.failure(edits.edits[index], error)
            applied -= 1
            failed += 1
            aborted = true
        }
    }

    /// Runs a plan's steps (or queues them) and keeps its conflict records (giving them their ids).
    private func run(
        _ plan: inout EditPlan, _ planner: inout BatchPlanner, _ layer: PostgresLayer, _ index: Int, queue: inout PostgresStepQueue?, insertedAt: inout [Int: String]
    ) async throws {
        for step in plan.steps {
            switch step {
            case .insert(let feature):
                let row = try layer.validator.add(feature, index: index)
                guard !aborted else { continue }
                if queue != nil {
                    queue!.append(.init(result: index, kind: .insert(row)), globalID: feature.globalID)
                    if let gid = feature.globalID { insertedAt[index] = gid }
                    continue
                }
                let id = try await layer.insert(row, conn, index: index, logger: logger)
                if let id, let gid = feature.globalID { planner.inserted(gid, objectID: id) }
                plan.result.objectId = id
            case .update(let objectID, let feature, let clearGeometry):
                let row = try layer.validator.update(feature, index: index)
                guard !aborted else { continue }
                if queue != nil, !clearGeometry {
                    queue!.append(.init(result: index, kind: .update(objectID, row)), globalID: plan.result.globalId)
                    continue
                }
                _ = try await layer.update(objectID: objectID, row, clearGeometry: clearGeometry, conn, index: index, logger: logger)
            case .delete(let objectID):
                guard !aborted else { continue }
                if queue != nil {
                    queue!.append(.init(result: index, kind: .delete(objectID)), globalID: plan.result.globalId)
                    continue
                }
                var binds = PostgresBindings()
                binds.append(objectID)
                _ = try await layer.delete(where: "\(layer.pk) = $1", binds, conn, index: index, logger: logger)
            }
        }
        guard !aborted, let conflicts = plan.result.conflicts else { return }
        var kept: [ConflictRecord] = []
        for conflict in conflicts { kept.append(try await record(conflict)) }
        plan.result.conflicts = kept
    }

    /// Keeps a conflict record; returns it with its id.
    private func record(_ conflict: ConflictRecord) async throws -> ConflictRecord {
        var c = conflict
        let text = try JSONValueEncoder().encode(c).jsonString
        for try await id in try await conn.query(
            """
            INSERT INTO outpost_conflicts (service, layer_id, globalid, kind, record, replica_id, seq, generation, state)
            VALUES (\(service), \(Int32(c.layerId)), \(c.globalId), \(c.kind.rawValue), \(text)::jsonb, \(context.origin.replica), \(context.origin.seq), \(context.generation), \(c.state))
            RETURNING conflict_id
            """, logger: logger
        ).decode(Int64.self) { c.id = id }
        return c
    }

    /// Object ids, others' changes since the oldest base in the batch, then the current values
    /// and tombstones the plans will need: five statements per layer whatever the batch size.
    private func prefetch(_ edits: BatchLayer, _ layer: PostgresLayer, _ planner: inout BatchPlanner) async throws {
        guard let gidField = layer.definition.globalIDField else { return }
        let gids = BatchPlanner.globalIDs(edits)
        guard !gids.isEmpty else { return }
        let layerID = Int32(layer.definition.id)
        for try await (id, gid) in try await conn.query(
            PostgresQuery(unsafeSQL: "SELECT \(layer.pk), \(PostgresLayer.q(gidField)) FROM \(layer.table) WHERE \(PostgresLayer.q(gidField)) = ANY($1) FOR UPDATE", binds: try binds(gids)),
            logger: logger
        ).decode((Int64, String).self) { planner.objectIDs[gid] = id }
        if let base = edits.edits.compactMap(\.baseGeneration).min() {
            for try await (gid, generation, columns, editedAt) in try await conn.query(
                """
                SELECT globalid, generation, coalesce(changed_columns, '[]'::jsonb)::text, \(unescaped: Self.isoTime("coalesce(edited_at, changed_at)"))
                FROM outpost_change_log
                WHERE service = \(service) AND layer_id = \(layerID) AND globalid = ANY(\(gids)) AND generation > \(base)
                  AND origin_replica IS DISTINCT FROM \(context.origin.replica)
                """, logger: logger
            ).decode((String, Int64, String, String).self) {
                let names = ((try? JSONValue.parse(columns))?.arrayValue ?? []).compactMap(\.stringValue)
                planner.others[gid, default: []].append(OthersChange(generation: generation, columns: names, editedAt: editedAt))
            }
        }
        let current = planner.needsCurrentValues(edits)
        if !current.isEmpty {
            for try await row in try await conn.query(
                PostgresQuery(unsafeSQL: "SELECT \(layer.allColumns) FROM \(layer.table) WHERE \(PostgresLayer.q(gidField)) = ANY($1)", binds: try binds(current)), logger: logger)
            {
                let feature = try layer.decodeAll(row)
                if let gid = feature.globalID { planner.current[gid] = feature }
            }
        }
        let deleted = planner.needsTombstones(edits)
        if !deleted.isEmpty {
            for try await (gid, row, editedAt) in try await conn.query(
                """
                SELECT t.globalid, t.row::text, (SELECT \(unescaped: Self.isoTime("coalesce(c.edited_at, c.changed_at)")) FROM outpost_change_log c
                  WHERE c.service = t.service AND c.layer_id = t.layer_id AND c.globalid = t.globalid AND c.generation = t.generation AND c.op = 'delete' LIMIT 1)
                FROM outpost_tombstones t WHERE t.service = \(service) AND t.layer_id = \(layerID) AND t.globalid = ANY(\(deleted))
                """, logger: logger
            ).decode((String, String?, String?).self) {
                planner.tombstones[gid] = TombstoneInfo(row: row.flatMap { try? JSONValue.parse($0) }, editedAt: editedAt ?? "")
            }
        }
    }

    private func binds(_ gids: [String]) throws -> PostgresBindings {
        var binds = PostgresBindings()
        binds.append(gids)
        return binds
    }

    /// A timestamp as the edit times of batches are written (UTC ISO 8601 with milliseconds), so
    /// that `latestEditWins` compares like with like.
    static func isoTime(_ column: String) -> String {
        "to_char(\(column) AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"
    }

    // MARK: - Attachment edits

    /// A new attachment's content must have been uploaded (by hash) and is copied from there; a
    /// deleted one goes. Either way its feature is logged (no columns) so other replicas fetch
    /// its attachment list again. An attachment of a feature deleted meanwhile is kept in a
    /// conflict record.
    private mutating func apply(_ edits: [AttachmentEdit], layers: [Int: PostgresLayer]) async throws -> [BatchEditResult] {
        var results: [BatchEditResult] = []
        var logs: [Int: PostgresChangeLog] = [:]
        let table = "\(PostgresServiceStore.quoted(service)).outpost_attachments"
        for edit in edits {
            let op: BatchEdit.Operation = edit.op == .insert ? .insert : .delete
            if !context.rollbackOnFailure { try await conn.query("SAVEPOINT attachment_edit", logger: logger) }
            do {
                guard let layer = layers[edit.layerId] else { throw StorageError(.invalidEdit, "the service has no layer \(edit.layerId)") }
                guard layer.definition.hasAttachments else {
                    throw StorageError(.invalidEdit, "\(layer.definition.name) does not have attachments", table: layer.definition.name)
                }
                let gid = GlobalID.normalized(edit.globalId) ?? edit.globalId
                var owner: String?
                let result: BatchEditResult
                switch edit.op {
                case .delete:
                    var found = false
                    for try await fgid in try await conn.query(
                        "SELECT feature_globalid FROM \(unescaped: table) WHERE globalid = \(gid) FOR UPDATE", logger: logger
                    ).decode(String?.self) { found = true; owner = fgid }
                    if found {
                        try await conn.query("SELECT lo_unlink(content) FROM \(unescaped: table) WHERE globalid = \(gid)", logger: logger)
                        try await conn.query("DELETE FROM \(unescaped: table) WHERE globalid = \(gid)", logger: logger)
                        result = BatchEditResult(globalId: gid, op: op, success: true)
                    } else {
                        result = BatchEditResult(globalId: gid, op: op, success: true, resolution: "alreadyDeleted")
                    }
                case .insert:
                    result = try await insertAttachment(edit, gid: gid, layer, table: table, owner: &owner)
                }
                if let owner { logs[layer.definition.id, default: PostgresChangeLog(service: service, layerID: layer.definition.id, generation: context.generation, origin: context.origin)].append(globalID: owner, op: "update", columns: []) }
                if !context.rollbackOnFailure { try await conn.query("RELEASE SAVEPOINT attachment_edit", logger: logger) }
                if result.success { applied += 1 }
                results.append(result)
            } catch let error as StorageError {
                if context.rollbackOnFailure { aborted = true } else { try await conn.query("ROLLBACK TO SAVEPOINT attachment_edit", logger: logger) }
                failed += 1
                results.append(BatchPlanner.failure(globalID: edit.globalId, op: op, error))
            }
        }
        if !aborted { for log in logs.values { try await log.write(conn, logger: logger) } }
        return results
    }

    private func insertAttachment(_ edit: AttachmentEdit, gid: String, _ layer: PostgresLayer, table: String, owner: inout String?) async throws -> BatchEditResult {
        let name = layer.definition.name
        guard let info = edit.attachment, let featureGID = edit.featureGlobalId.flatMap(GlobalID.normalized), let gidField = layer.definition.globalIDField else {
            throw StorageError(.invalidEdit, "an attachment insert needs the attachment and its feature's global id", table: name)
        }
        for try await _ in try await conn.query("SELECT 1 FROM \(unescaped: table) WHERE globalid = \(gid)", logger: logger) {
            return BatchEditResult(globalId: gid, op: .insert, success: true, resolution: "alreadyApplied")
        }
        var binds = PostgresBindings()
        binds.append(featureGID)
        var objectID: Int64?
        for try await id in try await conn.query(
            PostgresQuery(unsafeSQL: "SELECT \(layer.pk) FROM \(layer.table) WHERE \(PostgresLayer.q(gidField)) = $1", binds: binds), logger: logger
        ).decode(Int64.self) { objectID = id }
        guard let objectID else {
            // The feature was deleted on the server: the delete wins, the attachment is kept on record.
            var conflict = ConflictRecord(
                layerId: layer.definition.id, globalId: featureGID, kind: .updateDelete, columns: ["attachments"], base: nil,
                ours: ["attachment": try JSONValueEncoder().encode(info)], theirs: nil, policy: "deleteWins", winner: "theirs", oursEditedAt: context.now)
            conflict.replicaId = context.origin.replica
            conflict.seq = context.origin.seq
            conflict.generation = context.generation
            let kept = aborted ? conflict : try await record(conflict)
            return BatchEditResult(globalId: gid, op: .insert, success: true, resolution: "conflict", conflicts: [kept])
        }
        var complete = false
        for try await (received, done) in try await conn.query(
            "SELECT received, complete FROM outpost_blobs WHERE service = \(service) AND sha256 = \(info.sha256)", logger: logger
        ).decode((Int64, Bool).self) { complete = done && received == info.size }
        guard complete else {
            throw StorageError(.invalidEdit, "the content of attachment \(gid) (\(info.sha256.prefix(12))…) has not been uploaded", table: name)
        }
        guard !aborted else { return BatchEditResult(globalId: gid, op: .insert, success: true) }
        try await conn.query(
            """
            INSERT INTO \(unescaped: table) (layer_id, feature_oid, feature_globalid, globalid, name, content_type, size, sha256, keywords, content)
            SELECT \(Int32(layer.definition.id)), \(objectID), \(featureGID), \(gid), \(info.name), \(info.contentType), \(info.size), \(info.sha256), \(info.keywords),
              lo_from_bytea(0, lo_get(content))
            FROM outpost_blobs WHERE service = \(service) AND sha256 = \(info.sha256)
            """, logger: logger)
        owner = featureGID
        return BatchEditResult(globalId: gid, op: .insert, success: true)
    }
}
