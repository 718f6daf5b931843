import Foundation
import Logging
import OutpostCore
import OutpostProtocol
import OutpostSyncService
import OutpostStorage
import PostgresNIO

/// Writes a new replica's data from one snapshot of the database: the features in its scope a
/// page at a time (by object id), and their attachments when asked for.
struct PostgresReplicaExport: Sendable {
    let backend: PostgresServiceBackend
    let request: ReplicaRequest
    let schema: ServiceSchema
    let replicaID: String
    let serviceURL: String

    static let pageSize = 1000
    var logger: Logger { backend.logger }
    var scope: ReplicaScope { ReplicaScope(request: request, schema: schema) }

    /// The pages of a layer's features in the replica's scope, in object id order.
    private func forEachPage(_ conn: PostgresConnection, _ layerInfo: ReplicaInfo.Layer, _ body: (PostgresLayer, [Feature]) async throws -> Void) async throws {
        guard let layer = backend.layers[layerInfo.id], var query = scope.query(layerInfo, layer: layer.definition) else { return }
        query.orderBy = [.init(layer.definition.objectIDField)]
        query.limit = Self.pageSize
        while true {
            let page = try await PostgresServiceBackend.features(conn, layer, query, logger: logger)
            if !page.isEmpty { try await body(layer, page) }
            guard page.count == Self.pageSize, let last = page.last?.objectID else { return }
            query.afterObjectID = last
        }
    }

    /// A replica GeoPackage, built under a temporary name beside `url` and renamed into place
    /// when complete.
    func writeGeoPackage(_ conn: PostgresConnection, generation: Int64, to url: URL) async throws {
        let synced = request.syncModel != .none
        let building = url.deletingLastPathComponent().appendingPathComponent(".\(url.deletingPathExtension().lastPathComponent)-\(UUID().uuidString.prefix(8)).gpkg")
        let gdb = try Geodatabase.create(at: building, schema: ReplicaFile.clientSchema(schema, request), overwrite: true, changeCapture: synced)
        do {
            for layerInfo in request.layers {
                try await forEachPage(conn, layerInfo) { layer, page in
                    let target = try gdb.table(id: layer.definition.id)
                    let objectIDs = try await gdb.write { db in
                        var ids: [Int64: Int64] = [:]
                        try target.importFeatures(in: db) { importer in
                            for feature in page {
                                var copy = feature
                                copy.objectID = nil
                                let id = try importer.add(copy)
                                if let serverID = feature.objectID { ids[serverID] = id }
                            }
                        }
                        return ids
                    }
                    if request.returnAttachments && layer.definition.hasAttachments {
                        try await copyAttachments(conn, layer, objectIDs: objectIDs, into: target, gdb)
                    }
                }
            }
            if synced {
                let state = ReplicaFile.state(request, schema: schema, replicaID: replicaID, serviceURL: serviceURL, generation: generation)
                try await gdb.write { db in try db.setReplicaState(state) }
            }
            try gdb.close()
            // Millions of features passed through this process's heap: hand the freed memory back.
            FreedMemory.release()
            if FileManager.default.fileExists(atPath: url.path) { try FileManager.default.removeItem(at: url) }
            try FileManager.default.moveItem(at: building, to: url)
        } catch {
            try? gdb.close()
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: building.path + suffix) }
            throw error
        }
    }

    /// The attachments of a page of features (server object id → replica object id), each
    /// written with its content read a megabyte at a time.
    private func copyAttachments(_ conn: PostgresConnection, _ layer: PostgresLayer, objectIDs: [Int64: Int64], into target: FeatureTable, _ gdb: Geodatabase) async throws {
        for attachment in try await attachments(conn, layer, owners: Array(objectIDs.keys)) {
            guard let clientID = objectIDs[attachment.featureObjectID] else { continue }
            var content = Data()
            var offset: Int64 = 0
            while offset < attachment.size {
                let piece = try await bytes(conn, attachment.id, offset: offset, length: 1 << 20)
                if piece.isEmpty { break }
                content.append(piece)
                offset += Int64(piece.count)
            }
            let data = content
            _ = try await gdb.write { db in
                try target.addAttachment(
                    toFeature: clientID, name: attachment.name, contentType: attachment.contentType, size: attachment.size, keywords: attachment.keywords,
                    globalID: attachment.globalID, in: db
                ) { write in try write(data) }
            }
        }
    }

    private func attachments(_ conn: PostgresConnection, _ layer: PostgresLayer, owners: [Int64]) async throws -> [Attachment] {
        guard !owners.isEmpty else { return [] }
        var out: [Attachment] = []
        for try await (id, gid, oid, fgid, name, type, size, keywords) in try await conn.query(
            """
            SELECT attachment_id, globalid, feature_oid, feature_globalid, name, content_type, size, keywords FROM \(unescaped: backend.attachmentTable)
            WHERE layer_id = \(Int32(layer.definition.id)) AND feature_oid = ANY(\(owners)) ORDER BY feature_oid, attachment_id
            """, logger: logger
        ).decode((Int64, String, Int64, String?, String, String, Int64, String?).self) {
            out.append(Attachment(id: id, globalID: gid, featureObjectID: oid, featureGlobalID: fgid, name: name, contentType: type, size: size, keywords: keywords))
        }
        return out
    }

    private func bytes(_ conn: PostgresConnection, _ attachmentID: Int64, offset: Int64, length: Int32) async throws -> Data {
        for try await buffer in try await conn.query(
            "SELECT lo_get(content, \(offset), \(length)) FROM \(unescaped: backend.attachmentTable) WHERE attachment_id = \(attachmentID)", logger: logger
        ).decode(ByteBuffer.self) {
            var b = buffer
            return Data(b.readBytes(length: b.readableBytes) ?? [])
        }
        return Data()
    }

    /// The ArcGIS JSON replica (`dataFormat=json`), written as it is read; attachments by URL or,
    /// without `returnAttachmentsDataByUrl`, as base64 written in pieces.
    func writeJSON(_ conn: PostgresConnection, generation: Int64, to url: URL) async throws {
        guard FileManager.default.createFile(atPath: url.path, contents: nil), let file = FileHandle(forWritingAtPath: url.path) else {
            throw SyncServiceError(.failed, "cannot write the replica file")
        }
        defer { try? file.close() }
        var out = ReplicaFile.jsonHeader(request, replicaID: replicaID, generation: generation)
        for (index, layerInfo) in request.layers.enumerated() {
            guard let layer = backend.layers[layerInfo.id] else { continue }
            out += (index > 0 ? "," : "") + "{\"id\":\(layer.definition.id),\"features\":["
            var first = true
            var owners: [Int64] = []
            let withAttachments = request.returnAttachments && layer.definition.hasAttachments
            try await forEachPage(conn, layerInfo) { layer, page in
                for feature in page {
                    if !first { out += "," }
                    first = false
                    try FeatureJSON.writeEsri(feature, fields: layer.definition.fields, includeGeometry: layer.definition.isSpatial, to: &out)
                    if withAttachments, let id = feature.objectID { owners.append(id) }
                }
                file.write(Data(out.utf8))
                out = ""
            }
            out += "]"
            if withAttachments {
                out += ",\"attachments\":["
                var firstAttachment = true
                for start in stride(from: 0, to: owners.count, by: Self.pageSize) {
                    for a in try await attachments(conn, layer, owners: Array(owners[start..<min(start + Self.pageSize, owners.count)])) {
                        out += (firstAttachment ? "" : ",")
                            + ReplicaFile.jsonAttachment(a, layerID: layer.definition.id, serviceURL: serviceURL, byURL: request.returnAttachmentsDataByUrl)
                        firstAttachment = false
                        if request.returnAttachmentsDataByUrl { continue }
                        file.write(Data(out.utf8))
                        out = ""
                        var offset: Int64 = 0
                        while offset < a.size {
                            let piece = try await bytes(conn, a.id, offset: offset, length: 3 << 18)
                            if piece.isEmpty { break }
                            file.write(Data(piece.base64EncodedString().utf8))
                            offset += Int64(piece.count)
                        }
                        out += "\"}"
                    }
                }
                out += "]"
            }
            out += "}"
        }
        out += "]}"
        file.write(Data(out.utf8))
    }
}
