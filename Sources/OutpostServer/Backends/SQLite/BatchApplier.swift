import Foundation
import OutpostCore
import OutpostProtocol
import OutpostStorage

/// Applies the edits of one uploaded batch inside the server's write transaction, logging each
/// change under the batch's generation with its origin (replica, seq).
struct BatchApplier {
    let conn: GeodatabaseConnection
    let schema: ServiceSchema
    let generation: Int64
    let origin: (replica: String, seq: Int64)
    let rollbackOnFailure: Bool
    /// The rule the sync asked for (per-field rules of the layer still apply).
    let requestedRule: ConflictPolicy.Rule?
    /// Fields dropped by migrations since the batch's schema version, by layer (lower case).
    let droppedFields: [Int: Set<String>]
    /// When the batch is applied, for edits that carry no edit time.
    let now: String
    private(set) var applied = 0
    private(set) var failed = 0

    init(
        conn: GeodatabaseConnection, schema: ServiceSchema, generation: Int64, origin: (String, Int64), rollbackOnFailure: Bool,
        requestedRule: ConflictPolicy.Rule? = nil, droppedFields: [Int: Set<String>] = [:]
    ) {
        self.droppedFields = droppedFields
        self.conn = conn
        self.schema = schema
        self.generation = generation
        self.origin = origin
        self.rollbackOnFailure = rollbackOnFailure
        self.requestedRule = requestedRule
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        now = formatter.string(from: Date())
    }

    /// What the applier knows about the batch's features before applying any edit: their object
    /// ids, and the changes others made to them since the oldest base generation in the batch.
    private var objectIDs: [String: Int64] = [:]
    private var othersChanges: [String: [(generation: Int64, columns: [String], editedAt: String)]] = [:]
    /// The applied edits' changes, in order, not yet in the change log.
    private var pendingLog: [ServiceStore.LogEntry] = []

    mutating func apply(_ edits: BatchLayer) throws -> [BatchEditResult] {
        let table = try conn.geodatabase.table(id: edits.id)
        try prefetch(edits, table.definition)
        var results: [BatchEditResult] = []
        results.reserveCapacity(edits.edits.count)
        try conn.deferringContentsUpdates {
            for edit in edits.edits {
                do {
                    // With rollback on failure one bad edit rejects the batch, so edits need no
                    // savepoint of their own; without it each edit stands alone.
                    let result = rollbackOnFailure ? try applyKeepingDropped(edit, table) : try conn.inSavepoint { try applyKeepingDropped(edit, table) }
                    if result.success { applied += 1 }
                    results.append(result)
                } catch {
                    failed += 1
                    let storage = error as? StorageError
                    let description = storage?.description ?? "\(error)"
                    results.append(BatchEditResult(
                        globalId: edit.globalId, op: edit.op, success: false,
                        error: .init(code: storage?.code == .notFound ? EditResult.Code.notFound : EditResult.Code.invalidEdit, description: description)))
                }
            }
        }
        try ServiceStore.log(conn, generation: generation, layerID: edits.id, pendingLog, origin: origin)
        pendingLog = []
        return results
    }

    /// Object ids and others' changes of the batch's features, a thousand global ids per query.
    private mutating func prefetch(_ edits: BatchLayer, _ layer: LayerDefinition) throws {
        objectIDs = [:]
        othersChanges = [:]
        guard let gidField = layer.globalIDField else { return }
        let gids = edits.edits.compactMap { GlobalID.normalized($0.globalId) }
        let base = edits.edits.compactMap(\.baseGeneration).min()
        for start in stride(from: 0, to: gids.count, by: 1000) {
            let list = SQLLiteral.text(JSONValue.array(gids[start..<min(start + 1000, gids.count)].map { .string($0) }).jsonString)
            for row in try conn.query(
                "SELECT \(quotedName(layer.objectIDField)), \(quotedName(gidField)) FROM \(quotedName(layer.name)) WHERE \(quotedName(gidField)) IN (SELECT value FROM json_each(?))",
                arguments: [list])
            {
                if let id = row[0].integerValue, let gid = row[1].textValue { objectIDs[gid] = id }
            }
            guard let base else { continue }
            for row in try conn.query(
                """
                SELECT globalid, generation, changed_columns, coalesce(edited_at, changed_at) FROM outpost_change_log
                WHERE layer_id = ? AND globalid IN (SELECT value FROM json_each(?)) AND generation > ? AND origin_replica IS NOT ?
                """,
                arguments: [.integer(Int64(layer.id)), list, .integer(base), .text(origin.replica)])
            {
                guard let gid = row[0].textValue, let generation = row[1].integerValue else { continue }
                let columns = (row[2].textValue.flatMap { try? JSONValue.parse($0).arrayValue } ?? []).compactMap(\.stringValue)
                othersChanges[gid, default: []].append((generation, columns, row[3].textValue ?? ""))
            }
        }
    }

    /// Applies a batch's attachment edits: a new attachment's content must have been uploaded
    /// (by hash) and is copied in from the blob store; a deleted one goes. Either way the
    /// feature is logged (no columns) so other replicas fetch its attachment list again. An
    /// attachment of a feature deleted meanwhile is kept in a conflict record.
    mutating func apply(_ edits: [AttachmentEdit], blobs: BlobStore) throws -> [BatchEditResult] {
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
                                ours: ["attachment": try JSONValueEncoder().encode(info)], theirs: nil, policy: "deleteWins", winner: "theirs", oursEditedAt: now))
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
                let storage = error as? StorageError
                results.append(BatchEditResult(
                    globalId: edit.globalId, op: op, success: false,
                    error: .init(code: storage?.code == .notFound ? EditResult.Code.notFound : EditResult.Code.invalidEdit, description: storage?.description ?? "\(error)")))
            }
        }
        for (layerID, entries) in logged { try ServiceStore.log(conn, generation: generation, layerID: layerID, entries, origin: origin) }
        return results
    }

    /// Applies an edit made against an older schema: values of fields dropped since go into a
    /// `schemaDropped` conflict record instead of failing the edit; the rest applies.
    private mutating func applyKeepingDropped(_ edit: BatchEdit, _ table: FeatureTable) throws -> BatchEditResult {
        let layer = table.definition
        guard let dropped = droppedFields[layer.id], edit.op != .delete,
            case let lost = (edit.attributes ?? [:]).filter({ dropped.contains($0.key.lowercased()) && layer.field(named: $0.key) == nil }), !lost.isEmpty
        else { return try apply(edit, table) }
        var kept = edit
        kept.attributes = edit.attributes?.filter { lost[$0.key] == nil }
        kept.changedColumns = edit.changedColumns?.filter { lost[$0] == nil }
        var result = try apply(kept, table)
        guard result.success else { return result }
        let gid = GlobalID.normalized(edit.globalId) ?? edit.globalId
        let archived = try record(ConflictRecord(
            layerId: layer.id, globalId: gid, kind: .schemaDropped, columns: lost.keys.sorted(), base: edit.baseValues?.filter { lost[$0.key] != nil },
            ours: lost, theirs: nil, policy: "schemaDropped", winner: "theirs", oursEditedAt: edit.editedAt ?? now))
        result.conflicts = (result.conflicts ?? []) + [archived]
        return result
    }

    private mutating func apply(_ edit: BatchEdit, _ table: FeatureTable) throws -> BatchEditResult {
        let layer = table.definition
        guard let gid = GlobalID.normalized(edit.globalId) else {
            throw StorageError(.invalidEdit, "\"\(edit.globalId.prefix(40))\" is not a global id", table: layer.name)
        }
        let existingID = objectIDs[gid]
        switch edit.op {
        case .insert:
            if let existingID {
                // A feature with this global id is already here (it can only be this very edit):
                // report it rather than duplicate it.
                return BatchEditResult(globalId: gid, op: .insert, success: true, objectId: existingID, resolution: "alreadyApplied")
            }
            var feature = Feature(globalID: gid, attributes: try values(edit.attributes ?? [:], layer))
            feature.geometry = try geometry(edit.geometry, layer)
            let added = try table.add([feature], in: conn)[0]
            objectIDs[gid] = added.objectID
            log(gid, "insert", columns: allColumns(layer), editedAt: edit.editedAt)
            return BatchEditResult(globalId: gid, op: .insert, success: true, objectId: added.objectID)
        case .update:
            guard let existingID else {
                guard let tombstone = try tombstone(gid, layer) else {
                    throw StorageError(.notFound, "no feature with global id \(gid)", table: layer.name)
                }
                return try updateOfDeleted(edit, gid: gid, tombstone: tombstone, table)
            }
            var changed = Set(edit.changedColumns ?? Array((edit.attributes ?? [:]).keys))
            changed = changed.filter { $0 == layer.geometryColumn || layer.field(named: $0) != nil }
            // Columns others changed after the client's base: where the values differ, the rule
            // of each column decides, and the discarded values go into conflict records.
            let theirsChanged = changedSince(edit.baseGeneration, gid)
            let overlapping = theirsChanged.intersection(changed)
            var conflicts: [ConflictRecord] = []
            var clientLost = Set<String>()
            if !overlapping.isEmpty, let existing = try feature(existingID, table) {
                let ours = try jsonValues(edit, layer), theirs = jsonValues(existing, layer)
                var groups: [String: (rule: ConflictPolicy.Rule, winner: String, columns: [String])] = [:]
                for column in overlapping.sorted() where ours[column] != theirs[column] {
                    let rule = layer.conflicts.rule(for: column, layerRule: requestedRule)
                    let winner: String
                    switch rule {
                    case .clientWins: winner = "ours"
                    case .serverWins, .manual: winner = "theirs"
                    case .latestEditWins: winner = (edit.editedAt ?? now) >= theirsEditedAt(edit.baseGeneration, gid, [column]) ? "ours" : "theirs"
                    }
                    if winner == "theirs" { clientLost.insert(column) }
                    groups[rule.rawValue + "/" + winner, default: (rule, winner, [])].columns.append(column)
                }
                for (_, group) in groups.sorted(by: { $0.key < $1.key }) {
                    let columns = group.columns
                    conflicts.append(try record(ConflictRecord(
                        layerId: layer.id, globalId: gid, kind: .updateUpdate, columns: columns, base: edit.baseValues?.filter { columns.contains($0.key) },
                        ours: ours.filter { columns.contains($0.key) }, theirs: theirs.filter { columns.contains($0.key) }, policy: group.rule.rawValue,
                        winner: group.winner, oursEditedAt: edit.editedAt ?? now, theirsEditedAt: theirsEditedAt(edit.baseGeneration, gid, Set(columns)),
                        state: group.rule == .manual ? "open" : nil)))
                }
            }
            let applying = changed.subtracting(clientLost)
            var update = Feature(objectID: existingID, attributes: try values((edit.attributes ?? [:]).filter { applying.contains($0.key) }, layer))
            let geometryChanged = layer.isSpatial && applying.contains(layer.geometryColumn)
            if geometryChanged { update.geometry = try geometry(edit.geometry, layer) }
            if !update.attributes.isEmpty || update.geometry != nil { try table.update([update], in: conn) }
            if geometryChanged, update.geometry == nil {
                try conn.execute(
                    "UPDATE \(quotedName(layer.name)) SET \(quotedName(layer.geometryColumn)) = NULL WHERE \(quotedName(layer.objectIDField)) = ?",
                    arguments: [.integer(existingID)])
            }
            if !applying.isEmpty { log(gid, "update", columns: applying.sorted(), editedAt: edit.editedAt) }
            // The replica holds its own values for the columns it lost: it must download the
            // server's.
            if !clientLost.isEmpty { logForOrigin(gid) }
            let merged = !theirsChanged.subtracting(changed).isEmpty
            return BatchEditResult(
                globalId: gid, op: .update, success: true, objectId: existingID, resolution: !conflicts.isEmpty ? "conflict" : merged ? "merged" : nil,
                conflicts: conflicts.isEmpty ? nil : conflicts)
        case .delete:
            guard let existingID else {
                return BatchEditResult(globalId: gid, op: .delete, success: true, resolution: "alreadyDeleted")
            }
            // Deleted here, changed on the server meanwhile: by default the delete wins and the
            // server's newer values are kept in a conflict record; `keepServer` keeps the feature
            // and records the discarded delete.
            let changedThere = changedSince(edit.baseGeneration, gid)
            if !changedThere.isEmpty, let existing = try feature(existingID, table) {
                let theirs = jsonValues(existing, layer).filter { changedThere.contains($0.key) }
                let keep = layer.conflicts.deleteUpdate == .keepServer
                let conflict = try record(ConflictRecord(
                    layerId: layer.id, globalId: gid, kind: .deleteUpdate, columns: changedThere.sorted(), base: edit.baseValues?.filter { changedThere.contains($0.key) },
                    ours: nil, theirs: theirs, policy: layer.conflicts.deleteUpdate.rawValue, winner: keep ? "theirs" : "ours", oursEditedAt: edit.editedAt ?? now,
                    theirsEditedAt: theirsEditedAt(edit.baseGeneration, gid, changedThere)))
                if keep {
                    logForOrigin(gid)
                    return BatchEditResult(globalId: gid, op: .delete, success: true, objectId: existingID, resolution: "conflict", conflicts: [conflict])
                }
                try delete(existingID, existing, gid: gid, table, editedAt: edit.editedAt)
                return BatchEditResult(globalId: gid, op: .delete, success: true, objectId: existingID, resolution: "conflict", conflicts: [conflict])
            }
            try delete(existingID, try feature(existingID, table), gid: gid, table, editedAt: edit.editedAt)
            return BatchEditResult(globalId: gid, op: .delete, success: true, objectId: existingID)
        }
    }

    /// The client updated a feature the server deleted since: `deleteWins` keeps it deleted and
    /// records the update's values; `updateResurrects` brings it back with its last values and
    /// the update applied, and records the discarded delete.
    private mutating func updateOfDeleted(_ edit: BatchEdit, gid: String, tombstone: Tombstone, _ table: FeatureTable) throws -> BatchEditResult {
        let layer = table.definition
        let ours = try jsonValues(edit, layer)
        let resurrect = layer.conflicts.updateDelete == .updateResurrects && tombstone.row != nil
        let conflict = try record(ConflictRecord(
            layerId: layer.id, globalId: gid, kind: .updateDelete, columns: ours.keys.sorted(), base: edit.baseValues, ours: ours, theirs: nil,
            policy: resurrect ? "updateResurrects" : "deleteWins", winner: resurrect ? "ours" : "theirs", oursEditedAt: edit.editedAt ?? now,
            theirsEditedAt: tombstone.editedAt))
        guard resurrect, let row = tombstone.row else {
            // The replica still holds the feature: it must download the delete.
            logForOrigin(gid)
            return BatchEditResult(globalId: gid, op: .update, success: true, resolution: "conflict", conflicts: [conflict])
        }
        var attributes = row["attributes"]?.objectValue ?? [:]
        for (name, value) in edit.attributes ?? [:] where (edit.changedColumns ?? Array(ours.keys)).contains(name) { attributes[name] = value }
        var feature = Feature(globalID: gid, attributes: try values(attributes.filter { layer.field(named: $0.key).map { $0.type != .globalID && $0.type != .oid } ?? false }, layer))
        let geometryChanged = layer.isSpatial && (edit.changedColumns ?? []).contains(layer.geometryColumn)
        feature.geometry = try geometry(geometryChanged ? edit.geometry : row["geometry"], layer)
        let added = try table.add([feature], in: conn)[0]
        objectIDs[gid] = added.objectID
        log(gid, "insert", columns: allColumns(layer), editedAt: edit.editedAt)
        logForOrigin(gid)
        return BatchEditResult(globalId: gid, op: .update, success: true, objectId: added.objectID, resolution: "conflict", conflicts: [conflict])
    }

    private mutating func delete(_ objectID: Int64, _ existing: Feature?, gid: String, _ table: FeatureTable, editedAt: String?) throws {
        let row = try existing.map { try ReplicaRows.tombstoneJSON($0, table.definition) }
        try table.delete(objectIDs: [objectID], in: conn)
        objectIDs[gid] = nil
        pendingLog.append(ServiceStore.LogEntry(globalID: gid, op: "delete", columns: [], editedAt: editedAt, row: row))
    }

    /// A feature's current values (read only when a conflict needs them).
    private func feature(_ objectID: Int64, _ table: FeatureTable) throws -> Feature? {
        var found: Feature?
        try table.forEach(matching: FeatureQuery(objectIDs: [objectID]), in: conn) { found = $0 }
        return found
    }

    /// Columns others changed after generation `base` (none without a base).
    private func changedSince(_ base: Int64?, _ gid: String) -> Set<String> {
        guard let base else { return [] }
        return Set((othersChanges[gid] ?? []).filter { $0.generation > base }.flatMap(\.columns))
    }

    /// When others last edited any of `columns` after `base` ("" when they did not).
    private func theirsEditedAt(_ base: Int64?, _ gid: String, _ columns: Set<String>) -> String {
        guard let base else { return "" }
        return (othersChanges[gid] ?? []).filter { $0.generation > base && !columns.isDisjoint(with: $0.columns) }.map(\.editedAt).max() ?? ""
    }

    /// The values an edit sets, normalised as the server stores them (dates in epoch ms, the
    /// geometry as Esri JSON), by column.
    private func jsonValues(_ edit: BatchEdit, _ layer: LayerDefinition) throws -> [String: JSONValue] {
        let changed = edit.changedColumns.map(Set.init)
        var out: [String: JSONValue] = [:]
        for (name, value) in try values(edit.attributes ?? [:], layer) where changed?.contains(name) ?? true { out[name] = value.jsonValue }
        if layer.isSpatial, changed?.contains(layer.geometryColumn) ?? (edit.op == .insert) {
            out[layer.geometryColumn] = try geometry(edit.geometry, layer).map { try JSONValue.parse(try EsriJSON.encode($0)) } ?? .null
        }
        return out
    }

    private func jsonValues(_ feature: Feature, _ layer: LayerDefinition) -> [String: JSONValue] {
        var out: [String: JSONValue] = [:]
        for field in layer.fields where field.type != .oid && field.type != .globalID { out[field.name] = (feature.attributes[field.name] ?? .null).jsonValue }
        if layer.isSpatial { out[layer.geometryColumn] = feature.geometry.flatMap { try? JSONValue.parse(try EsriJSON.encode($0)) } ?? .null }
        return out
    }

    /// Keeps a conflict record on the server; returns it with its id.
    private func record(_ conflict: ConflictRecord) throws -> ConflictRecord {
        var c = conflict
        c.replicaId = origin.replica
        c.seq = origin.seq
        c.generation = generation
        c.id = try conn.query("SELECT coalesce(max(conflict_id), 0) + 1 FROM outpost_conflicts").first?[0].integerValue
        try conn.execute(
            "INSERT INTO outpost_conflicts (conflict_id, layer_id, globalid, kind, record, replica_id, seq, generation, state) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            arguments: [
                c.id.map { .integer($0) } ?? .null, .integer(Int64(c.layerId)), .text(c.globalId), .text(c.kind.rawValue),
                .text(try JSONValueEncoder().encode(c).jsonString), .text(origin.replica), .integer(origin.seq), .integer(generation),
                c.state.map { .text($0) } ?? .null,
            ])
        return c
    }

    struct Tombstone {
        var row: JSONValue?
        var editedAt: String
    }

    /// A deleted feature's tombstone (with its last values when they were kept).
    private func tombstone(_ gid: String, _ layer: LayerDefinition) throws -> Tombstone? {
        guard let found = try conn.query(
            """
            SELECT t.row, (SELECT coalesce(edited_at, changed_at) FROM outpost_change_log c
              WHERE c.layer_id = t.layer_id AND c.globalid = t.globalid AND c.generation = t.generation AND c.op = 'delete' LIMIT 1)
            FROM outpost_tombstones t WHERE t.layer_id = ? AND t.globalid = ?
            """,
            arguments: [.integer(Int64(layer.id)), .text(gid)]).first
        else { return nil }
        return Tombstone(row: found[0].textValue.flatMap { try? JSONValue.parse($0) }, editedAt: found[1].textValue ?? "")
    }

    private func values(_ attributes: [String: JSONValue], _ layer: LayerDefinition) throws -> [String: FieldValue] {
        var out: [String: FieldValue] = [:]
        for (name, json) in attributes {
            guard let field = layer.field(named: name) else {
                throw StorageError(.invalidEdit, "\(layer.name) has no field \"\(name.prefix(60))\"", table: layer.name, field: name)
            }
            if field.type == .oid || field.type == .globalID { continue }
            do {
                out[field.name] = try FieldValue(json: json, type: field.type)
            } catch var error as StorageError {
                error.field = field.name
                error.table = layer.name
                throw error
            }
        }
        return out
    }

    private func geometry(_ json: JSONValue?, _ layer: LayerDefinition) throws -> Geometry? {
        guard let json, !json.isNull else { return nil }
        guard layer.isSpatial else { throw StorageError(.invalidEdit, "\(layer.name) is a table without geometry", table: layer.name) }
        do {
            return try EsriJSON.decodeGeometry(json)
        } catch let error as GeometryError {
            throw StorageError(.invalidEdit, "invalid geometry: \(error)", table: layer.name, field: layer.geometryColumn, cause: error)
        }
    }

    private func allColumns(_ layer: LayerDefinition) -> [String] {
        layer.fields.filter { $0.type != .oid }.map(\.name) + (layer.isSpatial ? [layer.geometryColumn] : [])
    }

    /// Queues a change for the log; ``apply(_:)`` writes the layer's changes together.
    private mutating func log(_ gid: String, _ op: String, columns: [String], editedAt: String?) {
        pendingLog.append(ServiceStore.LogEntry(globalID: gid, op: op, columns: columns, editedAt: editedAt))
    }

    /// Queues a resolution the uploading replica must download (see ``ServiceStore/LogEntry``).
    private mutating func logForOrigin(_ gid: String) {
        pendingLog.append(ServiceStore.LogEntry(globalID: gid, op: "update", columns: [], toOrigin: true))
    }
}
