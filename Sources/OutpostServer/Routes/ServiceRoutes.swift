import Foundation
import Hummingbird
import NIOCore
import OutpostCore
import OutpostProtocol
import OutpostREST
import OutpostStorage
import OutpostSyncService

/// The resources of one service, for one request.
struct ServiceRoutes {
    let backend: any FeatureServiceBackend
    let parameters: RequestParameters
    let writing: ResponseWriting
    let request: Request
    let configuration: ServerConfiguration
    var metrics: ServerMetrics? = nil

    func layer(_ id: Int, in schema: ServiceSchema) throws -> LayerDefinition {
        guard let layer = schema.layer(id: id) else { throw ServiceError.notFound("layer \(id)") }
        return layer
    }

    func serviceInfo() async throws -> Response {
        _ = try parameters.format()
        let schema = try await backend.schema()
        var builder = Envelope.Builder()
        for layer in schema.layers {
            if var e = try await backend.extent(layerID: layer.id) {
                let sr = layer.spatialReference ?? schema.spatialReference
                if sr != schema.spatialReference { e = try WebMercator.convert(e, from: sr, to: schema.spatialReference) }
                builder.add(e)
            }
        }
        return writing.json(ServiceInfo.service(schema, fullExtent: builder.envelope))
    }

    func allLayers() async throws -> Response {
        _ = try parameters.format()
        let schema = try await backend.schema()
        var layers: [JSONValue] = []
        for layer in schema.layers { layers.append(ServiceInfo.layer(layer, schema: schema, extent: try await backend.extent(layerID: layer.id))) }
        let tables = schema.tables.map { ServiceInfo.layer($0, schema: schema, extent: nil) }
        return writing.json(["layers": .array(layers), "tables": .array(tables)])
    }

    func layerInfo(_ id: Int) async throws -> Response {
        _ = try parameters.format()
        let schema = try await backend.schema()
        let layer = try layer(id, in: schema)
        return writing.json(ServiceInfo.layer(layer, schema: schema, extent: try await backend.extent(layerID: id)))
    }

    // MARK: - applyEdits

    func applyEdits(_ id: Int) async throws -> Response {
        _ = try parameters.format()
        let schema = try await backend.schema()
        let layer = try layer(id, in: schema)
        guard schema.capabilities.contains(where: { ["Create", "Update", "Delete", "Editing"].contains($0) }) else {
            throw ServiceError(403, "the service does not allow edits")
        }
        let useGlobalIDs = try parameters.bool("useGlobalIds", default: false)
        let rollback = try parameters.bool("rollbackOnFailure", default: true)
        var edits = EditRequest()
        edits.adds = try features("adds", layer: layer)
        edits.updates = try features("updates", layer: layer)
        edits.deletes = try deletes(layer: layer, useGlobalIDs: useGlobalIDs)
        if !useGlobalIDs {
            for (i, f) in edits.updates.enumerated() where f.objectID == nil {
                throw ServiceError.badParameter("updates", "updates[\(i)] has no \(layer.objectIDField) (or pass useGlobalIds=true)")
            }
        }
        let limit = 10_000
        guard edits.adds.count + edits.updates.count + edits.deletes.count <= limit else {
            throw ServiceError(413, "more than \(limit) edits in one request")
        }
        let response = try await backend.applyEdits(layerID: id, edits: edits, rollbackOnFailure: rollback)
        metrics?.editsApplied((response.addResults + response.updateResults + response.deleteResults).filter(\.success).count, via: "applyEdits")
        return writing.json(try Self.json(response))
    }

    static func json(_ value: some Encodable) throws -> JSONValue {
        try JSONValueEncoder().encode(value)
    }

    private func features(_ name: String, layer: LayerDefinition) throws -> [Feature] {
        guard let json = try parameters.json(name) else { return [] }
        guard let array = json.arrayValue else { throw ServiceError.badParameter(name, "expected a JSON array of features") }
        return try array.enumerated().map { index, item in
            do {
                return try FeatureJSON.decodeEsri(item, layer: layer)
            } catch let error as StorageError {
                throw ServiceError.badParameter(name, "\(name)[\(index)]: \(error.description)")
            }
        }
    }

    private func deletes(layer: LayerDefinition, useGlobalIDs: Bool) throws -> [Feature] {
        guard let text = parameters["deletes"] else { return [] }
        if useGlobalIDs {
            let ids: [String]
            if let json = try? JSONValue.parse(text), let array = json.arrayValue {
                ids = try array.map { v in
                    guard let s = v.stringValue else { throw ServiceError.badParameter("deletes", "expected global ids") }
                    return s
                }
            } else {
                ids = text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            }
            return try ids.map { gid in
                guard GlobalID.normalized(gid) != nil else { throw ServiceError.badParameter("deletes", "\"\(gid.prefix(40))\" is not a global id") }
                return Feature(globalID: gid)
            }
        }
        return try (parameters.integers("deletes") ?? []).map { Feature(objectID: $0) }
    }

    // MARK: - Attachments

    func attachments(_ id: Int, _ objectID: Int64) async throws -> Response {
        _ = try parameters.format()
        let layer = try layer(id, in: try await backend.schema())
        guard layer.hasAttachments else { throw ServiceError(400, "layer \(id) does not support attachments") }
        let list = try await backend.attachments(layerID: id, objectID: objectID)
        return writing.json([
            "attachmentInfos": .array(list.map { a in
                [
                    "id": .integer(a.id), "globalId": .string(a.globalID), "parentGlobalId": a.featureGlobalID.map(JSONValue.string) ?? .null,
                    "name": .string(a.name), "contentType": .string(a.contentType), "size": .integer(a.size), "keywords": .string(a.keywords ?? ""),
                ]
            })
        ])
    }

    func attachment(_ id: Int, _ objectID: Int64, _ attachmentID: Int64) async throws -> Response {
        let backend = self.backend
        // Look the attachment up first so a missing one is a clean 404, then stream its bytes.
        guard let info = try await backend.attachments(layerID: id, objectID: objectID).first(where: { $0.id == attachmentID }) else {
            throw ServiceError.notFound("attachment \(attachmentID) of feature \(objectID)")
        }
        let headers: HTTPFields = [
            .contentType: info.contentType, .contentLength: String(info.size),
            .contentDisposition: "inline; filename=\"\(info.name.replacingOccurrences(of: "\"", with: ""))\"",
        ]
        return Response(
            status: .ok, headers: headers,
            body: ResponseBody(contentLength: Int(info.size)) { writer in
                // Pulled a megabyte at a time: the next piece is read only after the last was written.
                var offset: Int64 = 0
                while offset < info.size {
                    let piece = try await backend.attachmentBytes(layerID: id, attachmentID: attachmentID, offset: offset, length: 1 << 20)
                    if piece.isEmpty { break }
                    try await writer.write(ByteBuffer(bytes: piece))
                    offset += Int64(piece.count)
                }
                try await writer.finish(nil)
            })
    }

    func addAttachment(_ id: Int, _ objectID: Int64) async throws -> Response {
        _ = try parameters.format()
        let part = try parameters.filePart(named: "attachment")
        let attachment = try await backend.addAttachment(
            layerID: id, objectID: objectID, name: part.filename ?? "attachment", contentType: part.contentType ?? "application/octet-stream",
            data: part.data)
        return writing.json(["addAttachmentResult": ["objectId": .integer(attachment.id), "globalId": .string(attachment.globalID), "success": true]])
    }

    func deleteAttachments(_ id: Int, _ objectID: Int64) async throws -> Response {
        _ = try parameters.format()
        guard let ids = try parameters.integers("attachmentIds"), !ids.isEmpty else {
            throw ServiceError.badParameter("attachmentIds", "give the ids of the attachments to delete")
        }
        let results = try await backend.deleteAttachments(layerID: id, objectID: objectID, attachmentIDs: ids)
        return writing.json(["deleteAttachmentResults": try Self.json(results)])
    }
}
