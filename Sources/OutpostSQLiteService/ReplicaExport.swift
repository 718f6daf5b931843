import Foundation
import OutpostCore
import OutpostProtocol
import OutpostStorage
import OutpostSyncService

/// Writes a new replica's data from one read transaction of the service: the features in its
/// scope (and their attachments when asked), streamed feature by feature.
struct ReplicaExport {
    let scope: ReplicaScope
    let request: ReplicaRequest
    let schema: ServiceSchema
    let server: GeodatabaseConnection
    let generation: Int64
    let replicaID: String

    /// A replica GeoPackage: the replica's layers with client change capture, the features in
    /// scope, and the replica state the client syncs from.
    func writeGeoPackage(serviceURL: String, to url: URL) throws {
        let synced = request.syncModel != .none
        let clientSchema = ReplicaFile.clientSchema(schema, request)
        let gdb = try Geodatabase.create(at: url, schema: clientSchema, overwrite: true, changeCapture: synced) { conn in
            for layerInfo in request.layers {
                guard let layer = schema.layer(id: layerInfo.id), let query = scope.query(layerInfo, layer: layer) else { continue }
                try copy(layer, query: query, into: conn)
            }
            guard synced else { return }
            let state = ReplicaFile.state(request, schema: schema, replicaID: replicaID, serviceURL: serviceURL, generation: generation)
            try conn.setReplicaState(state)
        }
        try gdb.close()
        // Millions of features passed through this process's heap: hand the freed memory back.
        FreedMemory.release()
    }

    private func copy(_ layer: LayerDefinition, query: FeatureQuery, into conn: GeodatabaseConnection) throws {
        let source = try server.geodatabase.table(id: layer.id)
        let target = try conn.geodatabase.table(id: layer.id)
        let attachments = request.returnAttachments && layer.hasAttachments
        // Server object id -> replica object id, for the attachments (ids only, not features).
        var objectIDs: [(Int64, Int64)] = []
        try target.importFeatures(in: conn) { importer in
            try source.forEach(matching: query, in: server) { feature in
                var copy = feature
                let serverID = copy.objectID
                copy.objectID = nil
                let id = try importer.add(copy)
                if attachments, let serverID { objectIDs.append((serverID, id)) }
            }
        }
        for (serverID, clientID) in objectIDs {
            for attachment in try source.attachments(forFeature: serverID, in: server) {
                _ = try target.addAttachment(
                    toFeature: clientID, name: attachment.name, contentType: attachment.contentType, size: attachment.size,
                    keywords: attachment.keywords, globalID: attachment.globalID, in: conn
                ) { write in
                    var offset: Int64 = 0
                    while offset < attachment.size {
                        let piece = try source.readAttachment(id: attachment.id, offset: offset, length: 1 << 20, in: server)
                        if piece.isEmpty { break }
                        try write(piece)
                        offset += Int64(piece.count)
                    }
                }
            }
        }
    }

    /// The ArcGIS JSON replica (`dataFormat=json`); with `returnAttachments`, each layer's
    /// `attachments` (`globalId`, `parentGlobalId`, `name`, `contentType`, `size`, and a `url` to
    /// the attachment resource or, without `returnAttachmentsDataByUrl`, base64 `data` written
    /// in pieces).
    func writeJSON(serviceURL: String, to url: URL) throws {
        guard FileManager.default.createFile(atPath: url.path, contents: nil), let file = FileHandle(forWritingAtPath: url.path) else {
            throw SyncServiceError(.failed, "cannot write the replica file")
        }
        defer { try? file.close() }
        var out = ReplicaFile.jsonHeader(request, replicaID: replicaID, generation: generation)
        for (index, layerInfo) in request.layers.enumerated() {
            guard let layer = schema.layer(id: layerInfo.id) else { continue }
            out += (index > 0 ? "," : "") + "{\"id\":\(layer.id),\"features\":["
            var first = true
            if let query = scope.query(layerInfo, layer: layer) {
                try server.geodatabase.table(id: layer.id).forEach(matching: query, in: server) { feature in
                    if !first { out += "," }
                    first = false
                    try FeatureJSON.writeEsri(feature, fields: layer.fields, includeGeometry: layer.isSpatial, to: &out)
                    if out.utf8.count >= 1 << 16 {
                        file.write(Data(out.utf8))
                        out = ""
                    }
                }
            }
            out += "]"
            if request.returnAttachments && layer.hasAttachments, let query = scope.query(layerInfo, layer: layer) {
                out += ",\"attachments\":["
                try writeAttachments(layer, query: query, serviceURL: serviceURL, out: &out, file: file)
                out += "]"
            }
            out += "}"
        }
        out += "]}"
        file.write(Data(out.utf8))
    }

    private func writeAttachments(_ layer: LayerDefinition, query: FeatureQuery, serviceURL: String, out: inout String, file: FileHandle) throws {
        let table = try server.geodatabase.table(id: layer.id)
        var owners: [Int64] = []
        var q = query
        q.returnGeometry = false
        q.outFields = []
        try table.forEach(matching: q, in: server) { if let id = $0.objectID { owners.append(id) } }
        var first = true
        for objectID in owners {
            for a in try table.attachments(forFeature: objectID, in: server) {
                out += (first ? "" : ",") + ReplicaFile.jsonAttachment(a, layerID: layer.id, serviceURL: serviceURL, byURL: request.returnAttachmentsDataByUrl)
                first = false
                if request.returnAttachmentsDataByUrl { continue }
                // Base64 in pieces of whole 3-byte groups, so the text never holds the file.
                file.write(Data(out.utf8))
                out = ""
                var offset: Int64 = 0
                while offset < a.size {
                    let piece = try server.attachmentBytes(id: a.id, offset: offset, length: 3 << 18)
                    if piece.isEmpty { break }
                    file.write(Data(piece.base64EncodedString().utf8))
                    offset += Int64(piece.count)
                }
                out += "\"}"
            }
        }
    }
}
