import Foundation
import OutpostCore
import OutpostProtocol
import OutpostStorage
import OutpostSyncService
import Synchronization

/// Applies the edits of one uploaded batch inside the server's write transaction, logging each
/// change under the batch's generation with its origin (replica, seq). How each edit resolves is
/// the `BatchPlanner`'s decision; this reads what it needs and runs its steps.
public struct BatchApplier: BatchApplying {
    let conn: GeodatabaseConnection
    let schema: ServiceSchema
    /// Where uploaded attachment content waits.
    let blobs: BlobStore
    /// The batch: its generation and origin, its rules, when it is applied.
    let context: BatchContext
    public private(set) var applied = 0
    public private(set) var failed = 0
    /// Where the feature edits' time went (every layer's).
    public private(set) var stages = BatchStages()

    /// How the writer and the helper that prepares its runs ahead meet.
    let pacing: HelperPacing

    init(conn: GeodatabaseConnection, schema: ServiceSchema, context: BatchContext, blobs: BlobStore, pacing: HelperPacing = .free) {
        self.conn = conn
        self.schema = schema
        self.blobs = blobs
        self.context = context
        self.pacing = pacing
    }

    public mutating func apply(_ edits: BatchLayer) throws -> [BatchEditResult] {
        var once: [BatchEdit]? = edits.edits
        return try apply(layerID: edits.id, expectedGeometryWrites: edits.edits.count { $0.op == .delete || $0.carriesGeometry }) {
            defer { once = nil }
            return once
        }
    }

    /// Applies one layer's edits as `next` hands them over, run by run (a batch streamed in,
    /// docs/sync.md, "Framed batches"), until it answers nil: each chunk's features are read,
    /// its edits applied and logged; the layer's R-tree is packed once, after the last.
    public mutating func apply(layerID: Int, expectedGeometryWrites: Int, runs next: () throws -> [BatchEdit]?) throws -> [BatchEditResult] {
        let table = try conn.geodatabase.table(id: layerID)
        var planner = context.planner(for: table.definition)
        let clock = ContinuousClock()
        let packing = conn.spatialIndexRebuildTime
        var results: [BatchEditResult] = []
        // A batch that rewrites a large part of the layer packs its R-tree again at the end.
        var writer = FeatureTable.EditWriter(table, in: conn)
        let started = clock.now
        var logging = Duration.zero, reading = Duration.zero
        var state = PrefetchState()
        // A run's fresh edits read, planned and checked ahead, on a reader of the committed
        // data, while the run before it is written (see `readAhead`).
        let ahead = Self.readsAhead.load(ordering: .relaxed)
        var pending = try next()
        var fetched: ReadAheadTask?
        try conn.maintainingSpatialIndex(of: table.name, expectedGeometryWrites: expectedGeometryWrites) {
            try conn.deferringContentsUpdates {
                while let edits = pending {
                    let read = clock.now
                    // The edits of the run prepared ahead, by their place in it (empty: none).
                    var prepared: [PreparedEdit?] = []
                    // The chunk the helper still holds: taken at its first edit's place.
                    var held: (task: ReadAheadTask, first: Int)?
                    if let task = fetched {
                        let rest: [BatchEdit], inFlight: Int?
                        (rest, prepared, inFlight) = task.merge(into: &planner, &state)
                        held = inFlight.map { (task, $0) }
                        if !rest.isEmpty { try prefetch(BatchLayer(id: layerID, edits: rest), into: &planner, table, read: &state) }
                    } else {
                        try prefetch(BatchLayer(id: layerID, edits: edits), into: &planner, table, read: &state)
                    }
                    reading += clock.now - read
                    fetched = nil
                    if ahead {
                        pending = try next()
                        if let upcoming = pending { fetched = readAhead(upcoming, layerID: layerID, table, state: state) }
                    }
                    var log: [ServiceStore.LogEntry] = []
                    results.reserveCapacity(results.count + edits.count)
                    // Edits are read in place and prepared ones moved out of `prepared`: a copy of
                    // either retains and releases every string, array and dictionary it holds.
                    for index in edits.indices {
                        if let taken = held, taken.first == index {
                            held = nil
                            let waited = clock.now
                            let left = taken.task.takeInFlight(into: &planner, &prepared)
                            if !left.isEmpty { try prefetch(BatchLayer(id: layerID, edits: left), into: &planner, table, read: &state) }
                            reading += clock.now - waited
                        }
                        let ready = prepared.isEmpty ? nil : prepared[index].take()
                        if ready != nil { stages.preparedAhead += 1 }
                        do {
                            // With rollback on failure one bad edit rejects the batch, so edits need no
                            // savepoint of their own; without it each edit stands alone.
                            let undo = ready.map { ($0.globalID, $0.objectIDBefore) } ?? planner.undoPoint(edits[index])
                            do {
                                if let ready, case .simple(let simple) = ready.form {
                                    let result =
                                        context.rollbackOnFailure
                                        ? try run(simple, ready.globalID, &planner, &writer)
                                        : try conn.inSavepoint { try run(simple, ready.globalID, &planner, &writer) }
                                    applied += 1
                                    if let entry = simple.log { log.append(entry) }
                                    results.append(result)
                                } else {
                                    var plan =
                                        context.rollbackOnFailure
                                        ? try run(edits[index], ready, &planner, &writer)
                                        : try conn.inSavepoint { try run(edits[index], ready, &planner, &writer) }
                                    applied += 1
                                    if plan.log.count == 1 { log.append(plan.log.removeLast()) } else { log += plan.log }
                                    results.append(plan.result)
                                }
                            } catch {
                                planner.undo(undo)
                                throw error
                            }
                        } catch {
                            failed += 1
                            results.append(BatchPlanner.failure(edits[index], error))
                        }
                    }
                    let logged = clock.now
                    try ServiceStore.log(conn, generation: context.generation, layerID: layerID, log, changedAt: context.now, origin: context.origin)
                    logging += clock.now - logged
                    if !ahead { pending = try next() }
                }
                try writer.finish()
            }
        }
        let packed = conn.spatialIndexRebuildTime - packing
        stages.spatialIndex += packed
        stages.reading += reading
        stages.changeLog += logging
        stages.editing += clock.now - started - packed - logging - reading
        return results
    }

    /// Runs the one step of an edit prepared ahead in its simple form (``SimpleEdit``), as
    /// ``run(_:_:_:_:)`` runs a plan's; the edit's result.
    private func run(
        _ edit: SimpleEdit, _ globalID: String, _ planner: inout BatchPlanner, _ writer: inout FeatureTable.EditWriter
    ) throws -> BatchEditResult {
        var result = edit.result
        switch edit.kind {
        case .insert(let row):
            let id = try writer.insert(
                layout: edit.rows.layouts[Int(row.layout)], values: edit.rows.values, from: Int(row.valueStart), geometryBlob: edit.rows.blob(row),
                envelope: row.envelope)
            planner.inserted(globalID, objectID: id)
            result.objectId = id
        case .update(let objectID, let row):
            try writer.update(
                objectID: objectID, layout: edit.rows.layouts[Int(row.layout)], values: edit.rows.values, from: Int(row.valueStart),
                geometryBlob: edit.rows.blob(row), envelope: row.envelope)
        case .delete(let objectID):
            try writer.delete(objectID: objectID)
            // As ``BatchPlanner/adopt(_:globalID:)`` does for a plan that deletes.
            planner.objectIDs[globalID] = nil
        case .nothing:
            break
        }
        return result
    }

    /// Plans one edit (or takes the plan and rows made `ready` ahead) and runs its steps; its
    /// conflict records are kept (with their ids).
    private func run(
        _ edit: BatchEdit, _ ready: consuming PreparedEdit?, _ planner: inout BatchPlanner, _ writer: inout FeatureTable.EditWriter
    ) throws -> EditPlan {
        var plan: EditPlan
        var rows: [Result<FeatureValidator.Row, any Error>?] = []
        if case let (globalID, made, checked)? = ready.take()?.generalParts() {
            plan = try made.get()
            rows = checked
            planner.adopt(plan, globalID: globalID)
        } else {
            plan = try planner.plan(edit)
        }
        for (i, step) in plan.steps.enumerated() {
            let checked = rows.isEmpty ? nil : rows[i].take()
            switch step {
            case .insert(let feature):
                let id = try checked.map { try writer.insert(checked: $0.get()) } ?? writer.insert(feature)
                if let gid = feature.globalID { planner.inserted(gid, objectID: id) }
                plan.result.objectId = id
            case .update(let objectID, let feature, let clearGeometry):
                // A step made ahead keeps no values (they are in its checked row).
                if let checked {
                    try writer.update(objectID: objectID, checked: checked.get())
                } else if !feature.attributes.isEmpty || feature.geometry != nil {
                    try writer.update(objectID: objectID, feature)
                }
                if clearGeometry {
                    let layer = writer.table.definition
                    try conn.execute(
                        "UPDATE \(quotedName(layer.name)) SET \(quotedName(layer.geometryColumn)) = NULL WHERE \(quotedName(layer.objectIDField)) = ?",
                        arguments: [.integer(objectID)])
                }
            case .delete(let objectID):
                try writer.delete(objectID: objectID)
            }
        }
        if let conflicts = plan.result.conflicts { plan.result.conflicts = try conflicts.map(record) }
        return plan
    }

    /// What the planner needs about the batch's features, a thousand global ids per query: their
    /// object ids, others' changes since the oldest base in the batch, then the current values
    /// and tombstones its plans will need. `read` is what the layer's earlier chunks left.
    private func prefetch(_ edits: BatchLayer, into planner: inout BatchPlanner, _ table: FeatureTable, read: inout PrefetchState) throws {
        guard table.definition.globalIDField != nil else { return }
        let gids = BatchPlanner.globalIDs(edits)
        let base = edits.edits.compactMap(\.baseGeneration).min()
        // Others' changes are looked up feature by feature only when someone other than this
        // replica changed the layer after the base at all (one probe of the feed index; for a
        // replica alone on its layer the lookups cost 1 µs a feature for nothing), or for a
        // feature an earlier chunk of this batch already touched.
        var othersChangedLayer = false
        if let base {
            if let known = read.othersChanged[base] {
                othersChangedLayer = known
            } else {
                othersChangedLayer = try Self.othersChanged(table.definition.id, after: base, context: context, on: conn)
                read.othersChanged[base] = othersChangedLayer
            }
        }
        var repeated: [String] = []
        for gid in gids where !read.seen.insert(PrefetchState.key(gid)).inserted { repeated.append(gid) }
        try Self.read(edits, gids: gids, others: base == nil ? [] : (othersChangedLayer ? gids : repeated), after: base ?? 0, table, context: context, on: conn, into: &planner)
    }

    /// Reads, on `c`, the object ids of `gids`, others' changes after `base` to `others`, then
    /// the current values and tombstones the plans of `edits` need.
    static func read(
        _ edits: BatchLayer, gids: [String], others: [String], after base: Int64, _ table: FeatureTable, context: BatchContext, on c: GeodatabaseConnection,
        into planner: inout BatchPlanner
    ) throws {
        let layer = table.definition
        guard let gidField = layer.globalIDField else { return }
        for chunk in Self.chunks(gids) {
            let list = Self.list(chunk)
            try c.forEachRow(
                "SELECT \(quotedName(layer.objectIDField)), \(quotedName(gidField)) FROM \(quotedName(layer.name)) WHERE \(quotedName(gidField)) IN (SELECT value FROM json_each(?))",
                arguments: [list]
            ) { row in
                if let id = row.integer(0), let gid = row.text(1) { planner.objectIDs[gid] = id }
            }
        }
        for chunk in Self.chunks(others) {
            try c.forEachRow(
                """
                SELECT globalid, generation, changed_columns, coalesce(edited_at, changed_at) FROM outpost_change_log
                WHERE layer_id = ? AND globalid IN (SELECT value FROM json_each(?)) AND generation > ? AND origin_replica IS NOT ?
                """,
                arguments: [.integer(Int64(layer.id)), Self.list(chunk), .integer(base), .text(context.origin.replica)]
            ) { row in
                guard let gid = row.text(0), let generation = row.integer(1) else { return }
                let columns = (row.text(2).flatMap { try? JSONValue.parse($0).arrayValue } ?? []).compactMap(\.stringValue)
                planner.others[gid, default: []].append(OthersChange(generation: generation, columns: columns, editedAt: row.text(3) ?? ""))
            }
        }
        for chunk in Self.chunks(planner.needsCurrentValues(edits)) {
            var query = FeatureQuery()
            query.globalIDs = chunk
            try table.forEach(matching: query, in: c) { if let gid = $0.globalID { planner.current[gid] = $0 } }
        }
        for chunk in Self.chunks(planner.needsTombstones(edits)) {
            for row in try c.query(
                """
                SELECT t.globalid, t.row, (SELECT coalesce(edited_at, changed_at) FROM outpost_change_log c
                  WHERE c.layer_id = t.layer_id AND c.globalid = t.globalid AND c.generation = t.generation AND c.op = 'delete' LIMIT 1)
                FROM outpost_tombstones t WHERE t.layer_id = ? AND t.globalid IN (SELECT value FROM json_each(?))
                """,
                arguments: [.integer(Int64(layer.id)), Self.list(chunk)])
            {
                guard let gid = row[0].textValue else { continue }
                planner.tombstones[gid] = TombstoneInfo(row: row[1].textValue.flatMap { try? JSONValue.parse($0) }, editedAt: row[2].textValue ?? "")
            }
        }
    }

    /// What ``prefetch(_:into:_:read:)`` keeps from one chunk of a layer to the next.
    struct PrefetchState {
        /// The global ids of the chunks read so far, as 64-bit hashes (hashing the strings
        /// themselves cost up to 2 ms a chunk of 1,900): a collision only reads a feature's
        /// others' changes where they were not needed.
        var seen = Set<UInt64>()
        /// Whether others changed the layer after a base generation (it cannot change while the
        /// batch holds the write lock).
        var othersChanged: [Int64: Bool] = [:]

        static func key(_ globalID: String) -> UInt64 {
            var gid = globalID
            return gid.withUTF8 { FastHash.hash64(UnsafeRawBufferPointer($0)) }
        }
    }

    /// Whether anyone but the uploading replica changed layer `layerID` after generation `base`
    /// and before this batch (whose own log entries carry the batch's generation).
    static func othersChanged(_ layerID: Int, after base: Int64, context: BatchContext, on c: GeodatabaseConnection) throws -> Bool {
        try c.query(
            """
            SELECT EXISTS (SELECT 1 FROM outpost_change_log INDEXED BY outpost_change_log_feed
              WHERE layer_id = ? AND generation > ? AND generation < ? AND origin_replica IS NOT ?)
            """, arguments: [.integer(Int64(layerID)), .integer(base), .integer(context.generation), .text(context.origin.replica)]
        ).first?[0].integerValue == 1
    }

    private static func chunks(_ gids: [String]) -> [[String]] {
        stride(from: 0, to: gids.count, by: 1000).map { Array(gids[$0..<min($0 + 1000, gids.count)]) }
    }

    private static func list(_ gids: [String]) -> SQLLiteral { .text(JSONValue.arrayText(gids)) }

    /// Applies a batch's attachment edits: a new attachment's content must have been uploaded
    /// (by hash) and is copied in from the blob store; a deleted one goes. Either way the
    /// feature is logged (no columns) so other replicas fetch its attachment list again. An
    /// attachment of a feature deleted meanwhile is kept in a conflict record.
    public mutating func apply(_ edits: [AttachmentEdit]) throws -> [BatchEditResult] {
        var results: [BatchEditResult] = []
        var logged: [Int: [ServiceStore.LogEntry]] = [:]
        for edit in edits {
            let op: BatchEdit.Operation = edit.op == .insert ? .insert : .delete
            do {
                let result = try conn.inSavepoint { () throws -> BatchEditResult in
                    let table = try conn.geodatabase.table(id: edit.layerId)
                    let layer = table.definition
                    guard layer.hasAttachments else { throw StorageError(.invalidEdit, "\(layer.name) does not have attachments", table: layer.name) }
                    let gid = GlobalID.normalized(edit.globalId) ?? edit.globalId
                    switch edit.op {
                    case .delete:
                        let owner = try conn.attachmentRecords(globalIDs: [gid]).values.first?.featureGlobalID
                        guard try conn.deleteAttachment(globalID: gid) else {
                            return BatchEditResult(globalId: gid, op: op, success: true, resolution: "alreadyDeleted")
                        }
                        if let owner { logged[layer.id, default: []].append(.init(globalID: owner, op: "update", columns: [], editedAt: nil)) }
                        return BatchEditResult(globalId: gid, op: op, success: true)
                    case .insert:
                        guard let info = edit.attachment, let featureGID = edit.featureGlobalId.flatMap(GlobalID.normalized) else {
                            throw StorageError(.invalidEdit, "an attachment insert needs the attachment and its feature's global id", table: layer.name)
                        }
                        if try !conn.attachmentRecords(globalIDs: [gid]).isEmpty {
                            return BatchEditResult(globalId: gid, op: op, success: true, resolution: "alreadyApplied")
                        }
                        var query = FeatureQuery(returnGeometry: false)
                        query.globalIDs = [featureGID]
                        query.outFields = []
                        var objectID: Int64?
                        try table.forEach(matching: query, in: conn) { objectID = $0.objectID }
                        guard let objectID else {
                            // The feature was deleted on the server: the delete wins, the attachment is kept on record.
                            let conflict = try record(ConflictRecord(
                                layerId: layer.id, globalId: featureGID, kind: .updateDelete, columns: ["attachments"], base: nil,
                                ours: ["attachment": try JSONValueEncoder().encode(info)], theirs: nil, policy: "deleteWins", winner: "theirs", oursEditedAt: context.now))
                            return BatchEditResult(globalId: gid, op: op, success: true, resolution: "conflict", conflicts: [conflict])
                        }
                        let status = try blobs.status(info.sha256)
                        guard status.complete, status.received == info.size else {
                            throw StorageError(.invalidEdit, "the content of attachment \(gid) (\(info.sha256.prefix(12))…) has not been uploaded", table: layer.name)
                        }
                        _ = try table.addAttachment(
                            toFeature: objectID, name: info.name, contentType: info.contentType, keywords: info.keywords, globalID: gid,
                            fromFile: blobs.url(info.sha256), in: conn)
                        try conn.execute(
                            "INSERT OR REPLACE INTO outpost_attachment_hashes (globalid, sha256) VALUES (?, ?)", arguments: [.text(gid), .text(info.sha256)])
                        logged[layer.id, default: []].append(.init(globalID: featureGID, op: "update", columns: [], editedAt: nil))
                        return BatchEditResult(globalId: gid, op: op, success: true)
                    }
                }
                if result.success { applied += 1 }
                results.append(result)
            } catch {
                failed += 1
                results.append(BatchPlanner.failure(globalID: edit.globalId, op: op, error))
            }
        }
        for (layerID, entries) in logged { try ServiceStore.log(conn, generation: context.generation, layerID: layerID, entries, changedAt: context.now, origin: context.origin) }
        return results
    }

    /// Keeps a conflict record on the server; returns it with its id.
    private func record(_ conflict: ConflictRecord) throws -> ConflictRecord {
        var c = conflict
        c.replicaId = context.origin.replica
        c.seq = context.origin.seq
        c.generation = context.generation
        c.id = try conn.query("SELECT coalesce(max(conflict_id), 0) + 1 FROM outpost_conflicts").first?[0].integerValue
        try conn.execute(
            "INSERT INTO outpost_conflicts (conflict_id, layer_id, globalid, kind, record, replica_id, seq, generation, state) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            arguments: [
                c.id.map { .integer($0) } ?? .null, .integer(Int64(c.layerId)), .text(c.globalId), .text(c.kind.rawValue),
                .text(try JSONValueEncoder().encode(c).jsonString), .text(context.origin.replica), .integer(context.origin.seq), .integer(context.generation),
                c.state.map { .text($0) } ?? .null,
            ])
        return c
    }
}
