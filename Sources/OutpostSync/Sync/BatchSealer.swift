import Foundation
import OutpostCore
import OutpostProtocol
import OutpostStorage

/// Seals pending local changes into the next upload batch (docs/sync.md, "Upload"), inside one write
/// transaction: the changes of each feature are coalesced (insert+update = insert, insert+delete =
/// nothing, updates merge their columns), the feature's current values are read, and the batch is
/// stored with its content hash before it is ever sent.
enum BatchSealer {
    /// The batch, nil when nothing of `tables` is pending. With `streaming`, a framed batch
    /// without attachment edits is handed to it frame by frame as it is written (its end mark
    /// waits for ``OutgoingBatch/release()``, after the commit); the request begins before the change
    /// rows are read, so the server is ready for the head when it comes.
    static func seal(
        _ conn: GeodatabaseConnection, state: ReplicaState, tables: [String], maxChanges: Int, rollbackOnFailure: Bool,
        conflictPolicy: ConflictPolicy.Rule? = nil, streaming: OutgoingBatch? = nil
    ) throws -> SealedBatch? {
        guard !tables.isEmpty else { return nil }
        let span = try conn.sealSpan(maxChanges: maxChanges, tables: tables)
        let limit = span?.limit
        // A batch also goes out, without edits, to close conflicts resolved in favour of the
        // server's values (that resolution edits nothing).
        guard try limit != nil || conn.hasUnsentResolutions() else { return nil }
        let seq = state.lastAckedSeq + 1, batchID = GlobalID.make()
        var stream: OutgoingBatch?
        if let streaming, let limit, sealsFramed(state),
            try !tables.contains(GeodatabaseConnection.attachmentsTable)
                || conn.pendingChangeSpan(upTo: limit, tables: [GeodatabaseConnection.attachmentsTable]).count == 0
        {
            let last = try conn.sealLimit(maxChanges: 1, tables: tables, after: limit) == nil
            streaming.begin(.init(seq: seq, batchID: batchID, last: last, edits: span?.count ?? 0))
            stream = streaming
        }
        let changes = try span.map { try conn.capturedChanges(in: $0, tables: tables) } ?? []
        let made = try make(
            conn, state: state, seq: seq, batchID: batchID, changes: changes, covering: limit ?? 0, tables: tables,
            resolved: try conn.takeUnsentResolutions(seq: seq), rollbackOnFailure: rollbackOnFailure, conflictPolicy: conflictPolicy, streaming: stream)
        try conn.storeSealedBatch(made.stored)
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
        let made = try make(
            conn, state: state, seq: seq, batchID: GlobalID.make(), changes: changes, covering: limit, tables: tables, resolved: [],
            rollbackOnFailure: rollbackOnFailure, conflictPolicy: conflictPolicy)
        return PreparedBatch(made: made, changeCount: changes.count, firstChangeID: first, schemaVersion: state.schemaVersion)
    }

    /// Seals a prepared batch when it carries exactly the change rows ``seal`` would take now
    /// (rows are never rewritten, so the same span of ids is the same rows; the feature values
    /// it read are those of its snapshot, and any edit after that is a later row, uploaded by
    /// a later batch). Nil, storing nothing, when anything moved: then ``seal`` runs as usual.
    static func sealPrepared(
        _ prepared: PreparedBatch, _ conn: GeodatabaseConnection, state: ReplicaState, tables: [String], maxChanges: Int
    ) throws -> SealedBatch? {
        let stored = prepared.made.stored
        guard stored.seq == state.lastAckedSeq + 1, prepared.schemaVersion == state.schemaVersion, stored.tables == tables,
            try !conn.hasUnsentResolutions(), try conn.sealLimit(maxChanges: maxChanges, tables: tables) == stored.coversChangeID
        else { return nil }
        let span = try conn.pendingChangeSpan(upTo: stored.coversChangeID, tables: tables)
        guard span.count == prepared.changeCount, span.first == prepared.firstChangeID else { return nil }
        try conn.storeSealedBatch(stored)
        return prepared.made
    }

    /// The batch of `changes` (sorted by table, global id, change id), encoded and hashed.
    ///
    /// Written as the binary encoding straight from each feature's current row (no edit is ever
    /// held as a value: building them was two thirds of a seal): framed when the service reads
    /// it (then `streaming` gets each frame as it is written, unless attachment edits must go
    /// first); a service that reads only JSON gets the same batch re-encoded.
    private static func make(
        _ conn: GeodatabaseConnection, state: ReplicaState, seq: Int64, batchID: String, changes: [CapturedChange], covering limit: Int64,
        tables: [String], resolved: [Int64], rollbackOnFailure: Bool, conflictPolicy: ConflictPolicy.Rule?, streaming: OutgoingBatch? = nil
    ) throws -> SealedBatch {
        let schema = conn.geodatabase.schema
        // The slices of each table's changes; attachment edits go first, in the header.
        var slices: [ArraySlice<CapturedChange>] = []
        var attachments: [AttachmentEdit] = []
        var index = 0
        while index < changes.count {
            let table = changes[index].table
            var end = index
            while end < changes.count, changes[end].table == table { end += 1 }
            if table == GeodatabaseConnection.attachmentsTable {
                attachments = try attachmentEdits(of: changes[index..<end], conn: conn)
            } else {
                slices.append(changes[index..<end])
            }
            index = end
        }
        var header = UploadBatch(
            replicaId: state.replicaID, batchId: batchID, seq: seq, schemaVersion: state.schemaVersion,
            rollbackOnFailure: rollbackOnFailure, layers: [], conflictPolicy: conflictPolicy?.rawValue, resolvedConflicts: resolved.isEmpty ? nil : resolved)
        if !attachments.isEmpty { header.attachments = attachments }
        // The replica needs only the edits with something to say, and counts (an answer of one
        // result per edit was ~1 MB of JSON for 11,000 edits, parsed and stored by the replica).
        header.compactAnswer = true
        let layers = try slices.map { slice in
            guard let layer = schema.allLayers.first(where: { $0.name == slice.first?.table }) else {
                throw SyncError(.unsupported, "pending changes name the table \(slice.first?.table ?? ""), which the replica does not have")
            }
            return (slice, layer)
        }
        let editCount: Int
        var body: Data
        let blobs = sealsGeometryBlobs(state)
        if sealsFramed(state) {
            // (Attachment content goes up before its batch: such a batch is never streamed.)
            var writer = try UploadBatch.FramedWriter(
                header: header, layers: layers.map { announce($0.0, $0.1) }, capacity: 112 * changes.count + 256, ready: streaming.map { $0.send },
                geometryBlobs: blobs)
            for (slice, layer) in layers {
                writer.beginLayer(id: layer.id)
                try writeEdits(of: slice, layer: layer, conn: conn, to: &writer)
            }
            editCount = writer.editCount
            let finished = writer.finish()
            body = finished.body
            streaming?.sealed(body: body, unsentFrom: finished.unsentFrom)
        } else {
            var writer = try UploadBatch.BinaryWriter(header: header, capacity: 112 * changes.count + 256, geometryBlobs: blobs)
            for (slice, layer) in layers {
                writer.beginLayer(id: layer.id)
                try writeEdits(of: slice, layer: layer, conn: conn, to: &writer)
                writer.endLayer(droppingEmpty: true)
            }
            editCount = writer.editCount
            body = writer.finish()
        }
        // JSON unless the service said it reads binary (docs/sync.md, "Binary batch encoding").
        if state.batchEncodings?.contains(UploadBatch.Encoding.binary.rawValue) != true {
            body = try UploadBatch.decode(body).encoded(as: .json)
        }
        let stored = StoredBatch(seq: seq, batchID: header.batchId, hash: UploadBatch.hash(body), body: body, coversChangeID: limit, tables: tables)
        return SealedBatch(stored: stored, editCount: editCount, attachments: attachments)
    }

    /// One edit per feature of a table's changes (ordered by global id, then change id), each
    /// written with the feature's current values.
    private static func writeEdits(
        of changes: ArraySlice<CapturedChange>, layer: LayerDefinition, conn: GeodatabaseConnection, to writer: inout some BatchEditWriting
    ) throws {
        var current = try FeatureTable.CurrentValuesReader(try conn.geodatabase.table(named: layer.name), in: conn, geometryBlobs: writer.geometryBlobs)
        let fields = current.fields
        // An insert carries every attribute, by name in sorted order.
        let all = fields.indices.sorted { fields[$0].name < fields[$1].name }
        let allNames = all.map { fields[$0].name }
        // An update carries its changed columns' attributes: worked out once per set of columns
        // (a batch's updates mostly share a handful).
        var plans: [[String]: UpdatePlan] = [:]
        func plan(_ changed: [String]) -> UpdatePlan {
            if let known = plans[changed] { return known }
            let picked = all.filter { changed.contains(fields[$0].name) }
            let made = UpdatePlan(
                names: picked.map { fields[$0].name }, indices: picked, changedColumns: changed.sorted(),
                geometry: layer.isSpatial && changed.contains(layer.geometryColumn))
            plans[changed] = made
            return made
        }
        var start = changes.startIndex
        while start < changes.endIndex {
            var end = start
            while end < changes.endIndex, changes[end].globalID == changes[start].globalID { end += 1 }
            let group = changes[start..<end]
            start = end
            guard let gid = group.first?.globalID, let first = group.first, let last = group.last,
                let op = CoalescedOperation.coalesce(first: first.operation.rawValue, last: last.operation.rawValue)
            else { continue }
            switch op {
            case .insert:
                // Deleted again after the changes this batch covers: the next batch says so.
                guard try current.read(gid, objectID: last.objectID) else { continue }
                writer.edit(
                    .insert, globalId: gid, attributeNames: allNames, attribute: { current.values[all[$0]] }, geometry: current.geometry,
                    geometryBlob: current.geometryBlob, changedColumns: nil, baseValues: nil, editedAt: last.editedAt, baseGeneration: nil)
            case .update:
                guard try current.read(gid, objectID: last.objectID) else { continue }
                var changed = first.changedColumns
                for change in group.dropFirst() { for c in change.changedColumns where !changed.contains(c) { changed.append(c) } }
                let update = plan(changed)
                writer.edit(
                    .update, globalId: gid, attributeNames: update.names, attribute: { current.values[update.indices[$0]] },
                    geometry: update.geometry ? current.geometry : nil, geometryBlob: update.geometry ? current.geometryBlob : nil,
                    changedColumns: update.changedColumns, baseValues: baseValues(group),
                    editedAt: last.editedAt, baseGeneration: group.compactMap(\.baseGeneration).min())
            case .delete:
                writer.edit(
                    .delete, globalId: gid, attributeNames: nil, attribute: { _ in .null }, geometry: nil, geometryBlob: nil, changedColumns: nil,
                    baseValues: baseValues(group), editedAt: last.editedAt, baseGeneration: group.compactMap(\.baseGeneration).min())
            }
        }
    }

    /// Whether the service reads binary batches whose geometries are GeoPackage blobs: the seal
    /// then copies each feature's stored geometry as it is, with no Esri JSON made of it (the
    /// server reads either alike).
    static func sealsGeometryBlobs(_ state: ReplicaState) -> Bool {
        let encodings = state.batchEncodings ?? []
        return encodings.contains(UploadBatch.geometryBlobEncoding) && encodings.contains(UploadBatch.Encoding.binary.rawValue)
    }

    /// Whether the service reads framed batches (and binary ones: a framed body is never
    /// re-encoded).
    static func sealsFramed(_ state: ReplicaState) -> Bool {
        let encodings = state.batchEncodings ?? []
        return encodings.contains(UploadBatch.framedEncoding) && encodings.contains(UploadBatch.Encoding.binary.rawValue)
    }

    /// What a framed batch's head announces of a table's changes: at most one edit per feature,
    /// and which of those may write a geometry (the server sizes its R-tree work by it).
    private static func announce(_ changes: ArraySlice<CapturedChange>, _ layer: LayerDefinition) -> UploadBatch.AnnouncedLayer {
        var features = 0, writes = 0
        var start = changes.startIndex
        while start < changes.endIndex {
            var end = start
            var geometry = false
            while end < changes.endIndex, changes[end].globalID == changes[start].globalID {
                let change = changes[end]
                geometry = geometry || change.operation != .update || change.changedColumns.contains(layer.geometryColumn)
                end += 1
            }
            // Added and deleted again: nothing is written.
            if CoalescedOperation.coalesce(first: changes[start].operation.rawValue, last: changes[end - 1].operation.rawValue) != nil {
                features += 1
                if geometry && layer.isSpatial { writes += 1 }
            }
            start = end
        }
        return UploadBatch.AnnouncedLayer(id: layer.id, atMost: features, geometryWrites: writes)
    }

    /// The attributes an update writes, and its changed columns as the batch lists them.
    private struct UpdatePlan {
        let names: [String]
        let indices: [Int]
        let changedColumns: [String]
        let geometry: Bool
    }

    /// The values the local edits started from: each column's oldest recorded value.
    private static func baseValues(_ group: ArraySlice<CapturedChange>) -> [String: JSONValue] {
        guard group.count > 1 else { return group.first?.oldValues ?? [:] }
        var base: [String: JSONValue] = [:]
        for change in group { for (k, v) in change.oldValues where base[k] == nil { base[k] = v } }
        return base
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
}

/// A batch made ahead from a snapshot (``BatchSealer/prepare(_:seq:after:tables:maxChanges:rollbackOnFailure:conflictPolicy:)``),
/// not stored until it is sealed.
struct PreparedBatch: Sendable {
    let made: SealedBatch
    /// The change rows it carries: how many, and the oldest id.
    let changeCount: Int
    let firstChangeID: Int64
    let schemaVersion: Int
}

/// A sealed batch: its stored bytes, and what the upload needs to know of it without decoding them.
struct SealedBatch: Sendable {
    let stored: StoredBatch
    /// Its edits, attachment edits included.
    let editCount: Int
    let attachments: [AttachmentEdit]
}

extension SealedBatch {
    /// A batch read back from its stored bytes (sealed by an earlier run).
    init(decoding stored: StoredBatch) throws {
        let batch = try UploadBatch.decode(stored.body)
        self.init(stored: stored, editCount: batch.editCount, attachments: batch.attachments ?? [])
    }
}
