import Foundation
import OutpostCore
import OutpostDigest
import OutpostProtocol
import OutpostStorage
import OutpostSyncService

/// The ArcGIS synchronizeReplica edits shape, both ways:
/// `[{"id": 0, "features": {"adds": [feature], "updates": [feature], "deleteIds": ["{GlobalID}"]}}]`.
enum ArcGISEdits {
    /// Uploaded edits as one batch of the replica's ledger (seq = the next one, keyed by the
    /// request hash, so an identical retried request is recognised).
    /// Attachment content embedded in the edits (base64 `data`), by SHA-256: stored by hash before
    /// the batch applies.
    typealias Contents = [(sha256: String, bytes: Data)]

    static func batch(
        _ edits: JSONValue?, info: ReplicaInfo, schema: ServiceSchema, seq: Int64, key: String, rollback: Bool, base: [Int: Int64]
    ) throws -> (UploadBatch, Contents) {
        var layers: [BatchLayer] = []
        var attachmentEdits: [AttachmentEdit] = []
        var contents: Contents = []
        for (index, item) in (edits?.arrayValue ?? []).enumerated() {
            guard let id = item["id"]?.integerValue.map(Int.init), let layer = schema.layer(id: id) else {
                throw ServiceError.badParameter("edits", "edits[\(index)] has no id of a layer of the service")
            }
            guard let replicaLayer = info.layers.first(where: { $0.id == id }),
                replicaLayer.syncDirection == .bidirectional || replicaLayer.syncDirection == .upload
            else { throw ServiceError.badParameter("edits", "layer \(id) does not take uploads from this replica") }
            if let attachments = item["attachments"], !(attachments.objectValue?.values.allSatisfy { ($0.arrayValue ?? []).isEmpty } ?? true) {
                guard layer.hasAttachments, info.attachmentsSyncDirection == .upload || info.attachmentsSyncDirection == .bidirectional else {
                    throw ServiceError.badParameter("edits", "layer \(id) takes no attachment edits from this replica (attachmentsSyncDirection \(info.attachmentsSyncDirection.rawValue))")
                }
                let (edits, embedded) = try Self.attachmentEdits(attachments, layer: layer)
                attachmentEdits += edits
                contents += embedded
            }
            let features = item["features"] ?? item
            var out: [BatchEdit] = []
            for (i, feature) in (features["adds"]?.arrayValue ?? []).enumerated() {
                let (gid, attributes) = try split(feature, layer: layer, what: "adds[\(i)] of layer \(id)")
                out.append(BatchEdit(op: .insert, globalId: gid, attributes: attributes, geometry: layer.isSpatial ? feature["geometry"] ?? .null : nil))
            }
            for (i, feature) in (features["updates"]?.arrayValue ?? []).enumerated() {
                let (gid, attributes) = try split(feature, layer: layer, what: "updates[\(i)] of layer \(id)")
                var changed = attributes.keys.sorted()
                let geometry = feature["geometry"]
                if layer.isSpatial, geometry != nil { changed.append(layer.geometryColumn) }
                out.append(BatchEdit(op: .update, globalId: gid, attributes: attributes, geometry: geometry, changedColumns: changed, baseGeneration: base[id]))
            }
            for (i, value) in (features["deleteIds"]?.arrayValue ?? []).enumerated() {
                guard let text = value.stringValue, let gid = GlobalID.normalized(text) else {
                    throw ServiceError.badParameter("edits", "deleteIds[\(i)] of layer \(id) is not a global id")
                }
                out.append(BatchEdit(op: .delete, globalId: gid, baseGeneration: base[id]))
            }
            if !out.isEmpty { layers.append(BatchLayer(id: id, edits: out)) }
        }
        var batch = UploadBatch(replicaId: info.replicaID, batchId: key, seq: seq, schemaVersion: schema.schemaVersion, rollbackOnFailure: rollback, layers: layers)
        if !attachmentEdits.isEmpty { batch.attachments = attachmentEdits }
        return (batch, contents)
    }

    /// `{"adds": [{"globalId", "parentGlobalId", "contentType", "name", "data": base64}],
    /// "updates": [same], "deleteIds": ["{GlobalID}"]}` as attachment edits (an update replaces
    /// the attachment: a delete, then an insert under the same global id).
    private static func attachmentEdits(_ json: JSONValue, layer: LayerDefinition) throws -> ([AttachmentEdit], Contents) {
        var edits: [AttachmentEdit] = []
        var contents: Contents = []
        for (list, replacing) in [("adds", false), ("updates", true)] {
            for (i, a) in (json[list]?.arrayValue ?? []).enumerated() {
                let what = "attachments.\(list)[\(i)] of layer \(layer.id)"
                guard let gid = a["globalId"]?.stringValue.flatMap(GlobalID.normalized) else {
                    throw ServiceError.badParameter("edits", "\(what) has no valid globalId")
                }
                guard let parent = a["parentGlobalId"]?.stringValue.flatMap(GlobalID.normalized) else {
                    throw ServiceError.badParameter("edits", "\(what) has no valid parentGlobalId")
                }
                guard let text = a["data"]?.stringValue else {
                    throw ServiceError.badParameter(
                        "edits", "\(what): embed the content as base64 \"data\" (upload references are not supported; Outpost's own clients upload by hash)")
                }
                guard let bytes = Data(base64Encoded: text, options: .ignoreUnknownCharacters) else {
                    throw ServiceError.badParameter("edits", "\(what): data is not base64")
                }
                let sha = SHA256.hex(bytes)
                contents.append((sha, bytes))
                if replacing { edits.append(AttachmentEdit(op: .delete, layerId: layer.id, featureGlobalId: parent, attachment: nil, globalId: gid)) }
                let info = AttachmentInfo(
                    globalId: gid, name: a["name"]?.stringValue ?? "attachment", contentType: a["contentType"]?.stringValue ?? "application/octet-stream",
                    size: Int64(bytes.count), sha256: sha, keywords: a["keywords"]?.stringValue)
                edits.append(AttachmentEdit(op: .insert, layerId: layer.id, featureGlobalId: parent, attachment: info, globalId: gid))
            }
        }
        for (i, value) in (json["deleteIds"]?.arrayValue ?? []).enumerated() {
            guard let gid = value.stringValue.flatMap(GlobalID.normalized) else {
                throw ServiceError.badParameter("edits", "attachments.deleteIds[\(i)] of layer \(layer.id) is not a global id")
            }
            edits.append(AttachmentEdit(op: .delete, layerId: layer.id, featureGlobalId: nil, attachment: nil, globalId: gid))
        }
        return (edits, contents)
    }

    /// A feature's global id and its other attributes (the object id left out: it is local).
    private static func split(_ feature: JSONValue, layer: LayerDefinition, what: String) throws -> (String, [String: JSONValue]) {
        guard let attributes = feature["attributes"]?.objectValue, let gidField = layer.globalIDField else {
            throw ServiceError.badParameter("edits", "\(what) has no attributes")
        }
        guard let text = attributes.first(where: { $0.key.lowercased() == gidField.lowercased() })?.value.stringValue,
            let gid = GlobalID.normalized(text)
        else { throw ServiceError.badParameter("edits", "\(what) has no valid \(gidField)") }
        let rest = attributes.filter { $0.key.lowercased() != gidField.lowercased() && $0.key.lowercased() != layer.objectIDField.lowercased() }
        return (gid, rest)
    }

    /// Writes the synchronizeReplica answer: `header`, then per layer the changes since the
    /// replica's generation (adds, updates, deleteIds, read from the change feed page by page)
    /// and the results of the uploaded edits.
    static func writeResponse(
        to url: URL, header: [String: JSONValue], info: ReplicaInfo, sync: any SyncBackend, since: [Int: Int64], upto: Int64,
        results: [Int: BatchLayerResult], returnIDs: Bool
    ) async throws {
        guard FileManager.default.createFile(atPath: url.path, contents: nil), let file = FileHandle(forWritingAtPath: url.path) else {
            throw ServiceError(500, "cannot write the synchronizeReplica answer")
        }
        defer { try? file.close() }
        var out = JSONValue.object(header).jsonString
        out.removeLast()
        out += ",\"edits\":["
        var firstLayer = true
        for layer in info.layers where since[layer.id] != nil || results[layer.id] != nil {
            out += (firstLayer ? "" : ",") + "{\"id\":\(layer.id),\"features\":{"
            firstLayer = false
            for (index, kind) in ["adds", "updates", "deleteIds"].enumerated() {
                out += (index > 0 ? "," : "") + "\"\(kind)\":["
                if let from = since[layer.id], from < upto {
                    try await writeChanges(kind, layer: layer.id, replica: info.replicaID, sync: sync, since: from, upto: upto, to: &out, file: file)
                }
                out += "]"
            }
            out += "}"
            let layerResults = results[layer.id]?.results ?? []
            for (op, name) in [(BatchEdit.Operation.insert, "addResults"), (.update, "updateResults"), (.delete, "deleteResults")] {
                let items = layerResults.filter { $0.op == op }.map { r -> JSONValue in
                    var json: [String: JSONValue] = ["globalId": .string(r.globalId), "success": .bool(r.success)]
                    if op != .insert || returnIDs { json["objectId"] = r.objectId.map { .integer($0) } ?? -1 }
                    if let e = r.error { json["error"] = ["code": .integer(Int64(e.code)), "description": .string(e.description)] }
                    return .object(json)
                }
                out += ",\"\(name)\":" + JSONValue.array(items).jsonString
            }
            out += "}"
        }
        out += "]}"
        file.write(Data(out.utf8))
    }

    private static func writeChanges(
        _ kind: String, layer: Int, replica: String, sync: any SyncBackend, since: Int64, upto: Int64, to out: inout String, file: FileHandle
    ) async throws {
        var after: String?
        var first = true
        // synchronizeReplica is a sync (its caller may sync the replica): the replica's state
        // says it holds the changes up to `since`.
        try await sync.recordReceived(replicaID: replica, upTo: since)
        repeat {
            let page = try await sync.changes(replicaID: replica, layerID: layer, since: since, upto: upto, after: after, limit: 1000)
            for change in page.changes {
                let item: String
                switch (kind, change.kind, change.inserted ?? false) {
                case ("adds", .upsert, true), ("updates", .upsert, false):
                    var feature: [String: JSONValue] = ["attributes": .object(change.attributes ?? [:])]
                    if let g = change.geometry { feature["geometry"] = g }
                    item = JSONValue.object(feature).jsonString
                case ("deleteIds", .leave, _):
                    item = JSONValue.string(change.globalId).jsonString
                default:
                    continue
                }
                out += (first ? "" : ",") + item
                first = false
            }
            if out.utf8.count >= 1 << 16 {
                file.write(Data(out.utf8))
                out = ""
            }
            after = page.next
        } while after != nil
    }
}
