import Foundation
import Hummingbird
import MultipartKit
import NIOCore
import OutpostCore
import OutpostProtocol
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

    func addAttachment(_ id: Int, _ objectID: Int64, body: ByteBuffer?, contentType: String?) async throws -> Response {
        _ = try parameters.format()
        guard let body, let contentType, let boundary = Self.boundary(contentType) else {
            throw ServiceError.badParameter("attachment", "send the file as multipart/form-data in a part named \"attachment\"")
        }
        let part = try Self.filePart(body, boundary: boundary)
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

    static func boundary(_ contentType: String) -> String? {
        guard contentType.lowercased().hasPrefix("multipart/form-data") else { return nil }
        for piece in contentType.split(separator: ";") {
            let kv = piece.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1)
            if kv.count == 2, kv[0].lowercased() == "boundary" {
                return kv[1].trimmingCharacters(in: CharacterSet(charactersIn: "\""))
            }
        }
        return nil
    }

    struct FilePart {
        var filename: String?
        var contentType: String?
        var data: Data
    }

    /// The parts of a multipart/form-data body (RFC 7578): each part's headers and bytes.
    static func parts(_ body: ByteBuffer, boundary: String) throws -> [(headers: [(String, String)], data: Data)] {
        guard headerNamesAreASCII(body, boundary: boundary) else {
            throw ServiceError.badParameter("body", "a part's header name is not ASCII")
        }
        let parser = MultipartParser(boundary: boundary)
        var parts: [(headers: [(String, String)], data: Data)] = []
        var headers: [(String, String)] = []
        var data = Data()
        parser.onHeader = { headers.append(($0, $1)) }
        parser.onBody = { buffer in data.append(contentsOf: buffer.readBytes(length: buffer.readableBytes) ?? []) }
        parser.onPartComplete = {
            parts.append((headers, data))
            headers = []
            data = Data()
        }
        do {
            try parser.execute(body)
        } catch {
            throw ServiceError.badParameter("body", "the multipart body cannot be read")
        }
        return parts
    }

    /// Whether every header name of every part is ASCII. MultipartKit 4.7.1 looks a header
    /// name's bytes up in a 128-entry table and stops the process on any byte from 0x80 up (one
    /// request took the server down), so such a body is refused before it is parsed. Header
    /// values (a UTF-8 file name) may hold any byte.
    static func headerNamesAreASCII(_ body: ByteBuffer, boundary: String) -> Bool {
        let bytes = body.readableBytesView
        let delimiter = Array(("--" + boundary).utf8)
        guard !delimiter.isEmpty, bytes.count >= delimiter.count else { return true }
        var i = bytes.startIndex
        while let found = bytes[i...].firstRange(of: delimiter) {
            // The part's header lines follow the delimiter's line and end at an empty line.
            guard var j = bytes[found.upperBound...].firstIndex(of: UInt8(ascii: "\n")) else { break }
            var lineLength = 0, inName = true
            headers: while true {
                j += 1
                guard j < bytes.endIndex else { break headers }
                switch bytes[j] {
                case UInt8(ascii: "\n"):
                    if lineLength == 0 { break headers }
                    (lineLength, inName) = (0, true)
                    continue
                case UInt8(ascii: "\r"): continue
                case UInt8(ascii: ":"): inName = false
                case let byte where inName && byte >= 0x80: return false
                default: break
                }
                lineLength += 1
            }
            i = found.upperBound
        }
        return true
    }

    /// The text fields of a multipart/form-data body: parts with a name and no file name.
    static func formFields(_ body: ByteBuffer, boundary: String) throws -> [(String, String)] {
        try parts(body, boundary: boundary).compactMap { part in
            let disposition = part.headers.first { $0.0.lowercased() == "content-disposition" }?.1 ?? ""
            let attributes = Self.dispositionAttributes(disposition)
            guard let name = attributes["name"], attributes["filename"] == nil else { return nil }
            return (name, String(decoding: part.data, as: UTF8.self))
        }
    }

    /// The `attachment` part of a multipart/form-data body (RFC 7578).
    static func filePart(_ body: ByteBuffer, boundary: String) throws -> FilePart {
        let parts: [(headers: [(String, String)], data: Data)]
        do {
            parts = try Self.parts(body, boundary: boundary)
        } catch {
            throw ServiceError.badParameter("attachment", "the multipart body cannot be read")
        }
        for part in parts {
            let disposition = part.headers.first { $0.0.lowercased() == "content-disposition" }?.1 ?? ""
            let attributes = Self.dispositionAttributes(disposition)
            guard attributes["name"] == "attachment" else { continue }
            let type = part.headers.first { $0.0.lowercased() == "content-type" }?.1
            return FilePart(filename: attributes["filename"], contentType: type, data: part.data)
        }
        throw ServiceError.badParameter("attachment", "the body has no part named \"attachment\"")
    }

    static func dispositionAttributes(_ header: String) -> [String: String] {
        var out: [String: String] = [:]
        for piece in header.split(separator: ";").dropFirst() {
            let kv = piece.split(separator: "=", maxSplits: 1)
            guard kv.count == 2 else { continue }
            out[kv[0].trimmingCharacters(in: .whitespaces).lowercased()] = kv[1].trimmingCharacters(in: .whitespaces).trimmingCharacters(in: CharacterSet(charactersIn: "\""))
        }
        return out
    }
}
