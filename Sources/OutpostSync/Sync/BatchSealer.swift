import Foundation
import OutpostCore
import OutpostProtocol
import OutpostStorage

/// Seals pending local changes into the next upload batch (docs/sync.md, "Upload"), inside one write
/// transaction: the changes of each feature are coalesced (insert+update = insert, insert+delete =
/// nothing, updates merge their columns), the feature's current values are read, and the batch is
/// stored with its content hash before it is ever sent.
enum BatchSealer {
    /// The batch, nil when nothing of `tables` is pending.
    static func seal(
        _ conn: GeodatabaseConnection, state: ReplicaState, tables: [String], maxChanges: Int, rollbackOnFailure: Bool,
        conflictPolicy: ConflictPolicy.Rule? = nil
    ) throws -> (StoredBatch, UploadBatch)? {
        guard !tables.isEmpty else { return nil }
        let limit = try conn.sealLimit(maxChanges: maxChanges, tables: tables)
        // A batch also goes out, without edits, to close conflicts resolved in favour of the
        // server's values (that resolution edits nothing).
        guard try limit != nil || conn.hasUnsentResolutions() else { return nil }
        let changes = try limit.map { try conn.capturedChanges(upTo: $0, tables: tables) } ?? []
        let seq = state.lastAckedSeq + 1
        let made = try make(
            conn, state: state, seq: seq, changes: changes, covering: limit ?? 0, tables: tables, resolved: try conn.takeUnsentResolutions(seq: seq),
            rollbackOnFailure: rollbackOnFailure, conflictPolicy: conflictPolicy)
        try conn.storeSealedBatch(made.0)
        return made
    }

    /// The next batch, made from a read snapshot while batch `seq - 1` (covering change ids up
    /// to `covered`) is still in flight; nothing is stored. ``sealPrepared(_:_:state:tables:maxChanges:)``
    /// seals it after that batch's acknowledgement if it is still exactly what ``seal`` would
    /// make then. Nil when nothing is pending after `covered`, or conflict resolutions wait
    /// (they are taken when sealing).
    static func prepare(
        _ conn: GeodatabaseConnection, seq: Int64, after covered: Int64, tables: [String], maxChanges: Int, rollbackOnFailure: Bool,
        conflictPolicy: ConflictPolicy.Rule? = nil
    ) throws -> PreparedBatch? {
        guard !tables.isEmpty, let state = try conn.replicaState(), try !conn.hasUnsentResolutions(),
            let limit = try conn.sealLimit(maxChanges: maxChanges, tables: tables, after: covered)
        else { return nil }
        let changes = try conn.capturedChanges(upTo: limit, after: covered, tables: tables)
        guard let first = changes.map(\.id).min() else { return nil }
        let (stored, batch) = try make(
            conn, state: state, seq: seq, changes: changes, covering: limit, tables: tables, resolved: [], rollbackOnFailure: rollbackOnFailure,
            conflictPolicy: conflictPolicy)
        return PreparedBatch(stored: stored, batch: batch, changeCount: changes.count, firstChangeID: first, schemaVersion: state.schemaVersion)
    }

    /// Seals a prepared batch when it carries exactly the change rows ``seal`` would take now
    /// (rows are never rewritten, so the same span of ids is the same rows; the feature values
    /// it read are those of its snapshot, and any edit after that is a later row, uploaded by
    /// a later batch). Nil, storing nothing, when anything moved: then ``seal`` runs as usual.
    static func sealPrepared(
        _ prepared: PreparedBatch, _ conn: GeodatabaseConnection, state: ReplicaState, tables: [String], maxChanges: Int
    ) throws -> (StoredBatch, UploadBatch)? {
        guard prepared.batch.seq == state.lastAckedSeq + 1, prepared.schemaVersion == state.schemaVersion, prepared.stored.tables == tables,
            try !conn.hasUnsentResolutions(), try conn.sealLimit(maxChanges: maxChanges, tables: tables) == prepared.stored.coversChangeID
        else { return nil }
        let span = try conn.pendingChangeSpan(upTo: prepared.stored.coversChangeID, tables: tables)
        guard span.count == prepared.changeCount, span.first == prepared.firstChangeID else { return nil }
        try conn.storeSealedBatch(prepared.stored)
        return (prepared.stored, prepared.batch)
    }

    /// The batch of `changes` (sorted by table, global id, change id), encoded and hashed.
    private static func make(
        _ conn: GeodatabaseConnection, state: ReplicaState, seq: Int64, changes: [CapturedChange], covering limit: Int64, tables: [String],
        resolved: [Int64], rollbackOnFailure: Bool, conflictPolicy: ConflictPolicy.Rule?
    ) throws -> (StoredBatch, UploadBatch) {
        let schema = conn.geodatabase.schema
        var layers: [BatchLayer] = []
        var attachments: [AttachmentEdit] = []
        var index = 0
        while index < changes.count {
            let table = changes[index].table
            var end = index
            while end < changes.count, changes[end].table == table { end += 1 }
            if table == GeodatabaseConnection.attachmentsTable {
                attachments = try attachmentEdits(of: changes[index..<end], conn: conn)
                index = end
                continue
            }
            guard let layer = schema.allLayers.first(where: { $0.name == table }) else {
                throw SyncError(.unsupported, "pending changes name the table \(table), which the replica does not have")
            }
            let edits = try edits(of: changes[index..<end], layer: layer, conn: conn)
            if !edits.isEmpty { layers.append(BatchLayer(id: layer.id, edits: edits)) }
            index = end
        }
        var batch = UploadBatch(
            replicaId: state.replicaID, batchId: GlobalID.make(), seq: seq, schemaVersion: state.schemaVersion,
            rollbackOnFailure: rollbackOnFailure, layers: layers, conflictPolicy: conflictPolicy?.rawValue, resolvedConflicts: resolved.isEmpty ? nil : resolved)
        if !attachments.isEmpty { batch.attachments = attachments }
        // The replica needs only the edits with something to say, and counts (an answer of one
        // result per edit was ~1 MB of JSON for 11,000 edits, parsed and stored by the replica).
        batch.compactAnswer = true
        // Binary when the service said it reads it (docs/sync.md, "Binary batch encoding").
        let body = try batch.encoded(as: state.batchEncodings?.contains(UploadBatch.Encoding.binary.rawValue) == true ? .binary : .json)
        return (StoredBatch(seq: batch.seq, batchID: batch.batchId, hash: UploadBatch.hash(body), body: body, coversChangeID: limit, tables: tables), batch)
    }

    /// One edit per feature of a table's changes (ordered by global id, then change id).
    private static func edits(of changes: ArraySlice<CapturedChange>, layer: LayerDefinition, conn: GeodatabaseConnection) throws -> [BatchEdit] {
        var groups: [(String, ArraySlice<CapturedChange>)] = []
        var start = changes.startIndex
        while start < changes.endIndex {
            var end = start
            while end < changes.endIndex, changes[end].globalID == changes[start].globalID { end += 1 }
            if let gid = changes[start].globalID { groups.append((gid, changes[start..<end])) }
            start = end
        }
        // The features' current values, read in one query per chunk.
        var current: [String: Feature] = [:]
        let table = try conn.geodatabase.table(named: layer.name)
        for chunk in stride(from: 0, to: groups.count, by: 500) {
            var query = FeatureQuery()
            query.globalIDs = groups[chunk..<min(chunk + 500, groups.count)].map(\.0)
            try table.forEach(matching: query, in: conn) { current[$0.globalID!] = $0 }
        }
        let fields = layer.fields.filter { $0.type != .oid && $0.type != .globalID }
        var edits: [BatchEdit] = []
        for (gid, group) in groups {
            guard let first = group.first, let last = group.last,
                let op = CoalescedOperation.coalesce(first: first.operation.rawValue, last: last.operation.rawValue)
            else { continue }
            var base: [String: JSONValue] = [:]
            for change in group { for (k, v) in change.oldValues where base[k] == nil { base[k] = v } }
            // The oldest state the local edits started from.
            let baseGeneration = group.compactMap(\.baseGeneration).min()
            switch op {
            case .insert:
                // Deleted again after the changes this batch covers: the next batch says so.
                guard let feature = current[gid] else { continue }
                edits.append(BatchEdit(
                    op: .insert, globalId: gid, attributes: attributes(feature, fields), geometry: layer.isSpatial ? try geometry(feature) : nil,
                    editedAt: last.editedAt))
            case .update:
                guard let feature = current[gid] else { continue }
                var changed: [String] = []
                for change in group { for c in change.changedColumns where !changed.contains(c) { changed.append(c) } }
                let changedFields = fields.filter { changed.contains($0.name) }
                let geometryChanged = layer.isSpatial && changed.contains(layer.geometryColumn)
                edits.append(BatchEdit(
                    op: .update, globalId: gid, attributes: attributes(feature, changedFields), geometry: geometryChanged ? try geometry(feature) : nil,
                    changedColumns: changed.sorted(), baseValues: base, editedAt: last.editedAt, baseGeneration: baseGeneration))
            case .delete:
                edits.append(BatchEdit(op: .delete, globalId: gid, baseValues: base, editedAt: last.editedAt, baseGeneration: baseGeneration))
            }
        }
        return edits
    }

    /// One edit per attachment of the captured attachment changes: an insert (with its content
    /// hash, read from the stored bytes) unless deleted again, or a delete.
    private static func attachmentEdits(of changes: ArraySlice<CapturedChange>, conn: GeodatabaseConnection) throws -> [AttachmentEdit] {
        let schema = conn.geodatabase.schema
        var groups: [String: (first: CapturedChange, last: CapturedChange)] = [:]
        var order: [String] = []
        for change in changes {
            guard let gid = change.globalID else { continue }
            if let group = groups[gid] { groups[gid] = (group.first, change) } else { groups[gid] = (change, change); order.append(gid) }
        }
        let current = try conn.attachmentRecords(globalIDs: order)
        var edits: [AttachmentEdit] = []
        for gid in order {
            guard let (first, last) = groups[gid], let op = CoalescedOperation.coalesce(first: first.operation.rawValue, last: last.operation.rawValue) else { continue }
            switch op {
            case .insert, .update:
                guard let record = current[gid], let layer = schema.layer(named: record.layer) else { continue }
                let info = AttachmentInfo(
                    globalId: gid, name: record.name, contentType: record.contentType, size: record.size, sha256: try conn.attachmentSHA256(id: record.id),
                    keywords: record.keywords)
                edits.append(AttachmentEdit(op: .insert, layerId: layer.id, featureGlobalId: record.featureGlobalID, attachment: info, globalId: gid))
            case .delete:
                guard let name = first.oldValues["layer"]?.stringValue, let layer = schema.layer(named: name) else { continue }
                edits.append(AttachmentEdit(op: .delete, layerId: layer.id, featureGlobalId: first.oldValues["rel_globalid"]?.stringValue, attachment: nil, globalId: gid))
            }
        }
        return edits
    }

    static func attributes(_ feature: Feature, _ fields: [FieldDefinition]) -> [String: JSONValue] {
        var out: [String: JSONValue] = [:]
        out.reserveCapacity(fields.count)
        for field in fields { out[field.name] = (feature.attributes[field.name] ?? .null).jsonValue }
        return out
    }

    static func geometry(_ feature: Feature) throws -> JSONValue {
        guard let g = feature.geometry else { return .null }
        return try EsriJSON.value(g)
    }
}

/// A batch made ahead from a snapshot (``BatchSealer/prepare(_:seq:after:tables:maxChanges:rollbackOnFailure:conflictPolicy:)``),
/// not stored until it is sealed.
struct PreparedBatch: Sendable {
    let stored: StoredBatch
    let batch: UploadBatch
    /// The change rows it carries: how many, and the oldest id.
    let changeCount: Int
    let firstChangeID: Int64
    let schemaVersion: Int
}
