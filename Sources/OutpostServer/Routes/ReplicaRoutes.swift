import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import OutpostCore
import OutpostDigest
import OutpostProtocol
import OutpostStorage
import OutpostSyncService

/// The ArcGIS sync operations of a FeatureServer: createReplica, synchronizeReplica,
/// unRegisterReplica, replicas, jobs and the files they hand out. They run on the same replica
/// ledger and change feed as Outpost's native batch API.
struct ReplicaRoutes {
    let backend: any FeatureServiceBackend
    let sync: any SyncBackend
    let parameters: RequestParameters
    let writing: ResponseWriting
    let request: Request
    let services: SyncServices

    /// `http://host:port/arcgis/rest/services/<name>/FeatureServer` as the client reached it
    /// (through a proxy: as the proxy says, see ``PublicURL``).
    var serviceURL: String {
        PublicURL(request, configured: services.publicURL, secure: services.secure).service(backend.name, "FeatureServer")
    }

    // MARK: - createReplica

    /// The kind under which an async createReplica is recorded, so another host of a site runs
    /// it again when its host stops (``registerResumption(services:sync:)``).
    static let resumableKind = "createReplica"

    func createReplica() async throws -> Response {
        _ = try parameters.format()
        var (replicaRequest, format) = try await Self.replicaJob(parameters, backend: backend)
        let isAsync = try parameters.bool("async", default: false)
        let embedded = try transportIsEmbedded()
        if embedded, format != .json || isAsync {
            throw ServiceError.badParameter("transportType", "esriTransportTypeEmbedded is only for dataFormat=json without async")
        }
        // An async job may run again on another host: each run registers this one replica.
        if isAsync, replicaRequest.syncModel != .none { replicaRequest.replicaID = GlobalID.make() }
        let work = Self.replicaWork(replicaRequest, format: format, sync: sync, files: services.files, serviceURL: serviceURL)
        if isAsync {
            var input: [String: JSONValue] = ["service": .string(backend.name), "serviceURL": .string(serviceURL), "parameters": parameters.recordable]
            if let id = replicaRequest.replicaID { input["replicaID"] = .string(id) }
            let id = try await services.jobs.start(
                responseType: "esriReplicaResponseTypeData", resumable: ResumableJob(kind: Self.resumableKind, input: .object(input)), work)
            return writing.json(["statusUrl": .string("\(serviceURL)/jobs/\(id)")])
        }
        let result = try await work()
        if embedded, let url = result["URL"]?.stringValue, let name = url.split(separator: "/").last.map(String.init),
            let file = services.files.file(named: name)
        {
            return try streamFile(file, contentType: "application/json; charset=utf-8", removeAfter: true)
        }
        return writing.json(result.removingKey("resultUrl"))
    }

    /// What a createReplica asks for, checked against the service: the replica and its format.
    static func replicaJob(_ parameters: RequestParameters, backend: any FeatureServiceBackend) async throws -> (ReplicaRequest, ReplicaFileFormat) {
        let schema = try await backend.schema()
        guard schema.capabilities.contains("Sync") else { throw ServiceError(400, "sync is not enabled on this service") }
        let replicaRequest = try parameters.replicaRequest(schema)
        let format: ReplicaFileFormat
        switch (parameters["dataFormat"] ?? "json").lowercased() {
        case "json": format = .json
        case "sqlite", "geopackage": format = .geopackage
        case let other: throw ServiceError.badParameter("dataFormat", "\"\(other.prefix(40))\" is not supported (json or sqlite)")
        }
        if let sr = try parameters.spatialReference("replicaSR"), sr != schema.spatialReference {
            throw ServiceError.badParameter("replicaSR", "replicas are in the service's spatial reference \(schema.spatialReference); \(sr) is not offered")
        }
        return (replicaRequest, format)
    }

    /// Registers how another host's async createReplica is run again here (see ``ServerJobs``).
    static func registerResumption(services: ServiceDirectory, sync: SyncServices) {
        sync.jobs.register(resumableKind) { input in
            guard let name = input["service"]?.stringValue, let serviceURL = input["serviceURL"]?.stringValue,
                let parameters = RequestParameters(recorded: input["parameters"])
            else { throw ServiceError(500, "the job's record is not one of a createReplica") }
            guard let backend = services.backend(named: name), let replicas = backend as? any SyncBackend else {
                throw ServiceError(500, "service \(name) is not served here")
            }
            var (request, format) = try await replicaJob(parameters, backend: backend)
            request.replicaID = input["replicaID"]?.stringValue
            return replicaWork(request, format: format, sync: replicas, files: sync.files, serviceURL: serviceURL)
        }
    }

    /// Writes the replica's file beside its final name, renames it into place and answers with
    /// where to fetch it.
    static func replicaWork(
        _ replicaRequest: ReplicaRequest, format: ReplicaFileFormat, sync: any SyncBackend, files: ResultFiles, serviceURL: String
    ) -> ServerJobs.Work {
        return {
            let (name, url) = try files.newFile(extension: format == .json ? "json" : "gpkg")
            let partial = url.deletingPathExtension().appendingPathExtension("partial.\(url.pathExtension)")
            let info: ReplicaInfo
            do {
                info = try await sync.createReplica(replicaRequest, serviceURL: serviceURL, format: format, writingTo: partial)
                try FileManager.default.moveItem(at: partial, to: url)
            } catch {
                try? FileManager.default.removeItem(at: partial)
                throw error
            }
            var result: [String: JSONValue] = [
                "transportType": "esriTransportTypeUrl", "responseType": "esriReplicaResponseTypeData",
                "replicaName": .string(info.replicaName), "resultUrl": .string("\(serviceURL)/replicafiles/\(name)"),
                "URL": .string("\(serviceURL)/replicafiles/\(name)"),
            ]
            if replicaRequest.syncModel != .none { result["replicaID"] = .string(info.replicaID) }
            return .object(result)
        }
    }

    func transportIsEmbedded() throws -> Bool {
        switch (parameters["transportType"] ?? "esriTransportTypeUrl").lowercased() {
        case "esritransporttypeurl": return false
        case "esritransporttypeembedded": return true
        case let other: throw ServiceError.badParameter("transportType", "\"\(other.prefix(40))\" is not supported")
        }
    }

    // MARK: - synchronizeReplica

    func synchronizeReplica() async throws -> Response {
        _ = try parameters.format()
        guard let replicaID = parameters["replicaID"] else { throw ServiceError.badParameter("replicaID", "give the replica to synchronize") }
        let info = try await sync.replica(id: replicaID)
        guard info.syncModel != .none else { throw ServiceError(400, "replica \(info.replicaID) was created with syncModel none") }
        if let format = parameters["dataFormat"], format.lowercased() != "json" {
            throw ServiceError.badParameter("dataFormat", "synchronizeReplica answers in json only; Outpost clients use the batch API")
        }
        let direction = try parameters.direction("syncDirection", default: .bidirectional, allowed: [.bidirectional, .upload, .download])
        let rollback = try parameters.bool("rollbackOnFailure", default: true)
        let edits = try parameters.json("edits")
        if let edits, edits.arrayValue == nil { throw ServiceError.badParameter("edits", "expected a JSON array of per-layer edits") }
        let since = try downloadStart(info)
        let embedded = try transportIsEmbedded()
        let isAsync = try parameters.bool("async", default: false)
        let closeReplica = try parameters.bool("closeReplica", default: false)
        let returnIDs = try parameters.bool("returnIdsForAdds", default: false)
        let key = SHA256.hex(
            Array("\(info.replicaID)|\(direction.rawValue)|\(rollback)|\(since.sorted { $0.key < $1.key })|\(edits?.jsonString ?? "")|\(embedded)".utf8))
        if let stored = try await sync.replayedResponse(key: key), let json = try? JSONValue.parse(stored) {
            return try replay(json)
        }
        let schema = try await backend.schema()
        let (batch, contents) = direction == .download
            ? (nil, []) : try ArcGISEdits.batch(edits, info: info, schema: schema, seq: info.lastSeq + 1, key: key, rollback: rollback, base: since)
        let sync = self.sync, services = self.services, serviceURL = self.serviceURL
        let work: @Sendable () async throws -> JSONValue = {
            var results: [Int: BatchLayerResult] = [:]
            // Embedded attachment content goes into the store by hash first.
            for (sha, bytes) in contents {
                let status = try await sync.blobStatus(sha256: sha)
                if status.complete { continue }
                _ = try await sync.appendBlob(sha256: sha, offset: status.received, total: Int64(bytes.count), bytes: bytes.dropFirst(Int(status.received)))
            }
            if let batch, batch.editCount > 0 {
                do {
                    results = Dictionary(uniqueKeysWithValues: try await sync.applyBatch(batch, hash: key).layers.map { ($0.id, $0) })
                } catch let rejected as BatchRejected {
                    let failures = rejected.result.layers.flatMap { layer in layer.results.filter { !$0.success }.map { (layer.id, $0) } }
                        + (rejected.result.attachments ?? []).filter { !$0.success }.map { (-1, $0) }
                    throw ServiceError(
                        400, "the edits were rolled back: \(failures.count) of \(batch.editCount) failed",
                        details: failures.prefix(20).map { "layer \($0.0) \($0.1.op.rawValue) \($0.1.globalId): \($0.1.error?.description ?? "failed")" })
                }
            }
            let (name, url) = try services.files.newFile(extension: "json")
            let upto = try await sync.replica(id: info.replicaID).serviceGeneration
            var header: [String: JSONValue] = ["responseType": "esriReplicaResponseTypeEdits", "replicaID": .string(info.replicaID)]
            if info.syncModel == .perLayer {
                header["layerServerGens"] = .array(info.layers.map { ["id": .integer(Int64($0.id)), "serverGen": .integer(upto)] })
            } else {
                header["replicaServerGen"] = .integer(upto)
            }
            try await ArcGISEdits.writeResponse(
                to: url, header: header, info: info, sync: sync, since: direction == .upload ? [:] : since, upto: upto, results: results,
                returnIDs: returnIDs)
            if closeReplica { try await sync.unregisterReplica(id: info.replicaID) }
            var response = header
            response["transportType"] = .string(embedded ? "esriTransportTypeEmbedded" : "esriTransportTypeUrl")
            response["resultUrl"] = .string("\(serviceURL)/replicafiles/\(name)")
            response["file"] = .string(name)
            try await sync.storeResponse(key: key, response: JSONValue.object(response).jsonString, retention: services.replayRetention)
            return .object(response)
        }
        if isAsync {
            let id = try await services.jobs.start(responseType: "esriReplicaResponseTypeEdits", work)
            return writing.json(["statusUrl": .string("\(serviceURL)/jobs/\(id)")])
        }
        return try replay(try await work())
    }

    /// Answers a synchronizeReplica from its stored result: the edits file itself (embedded) or
    /// its URL.
    private func replay(_ stored: JSONValue) throws -> Response {
        let name = stored["file"]?.stringValue ?? ""
        if stored["transportType"]?.stringValue == "esriTransportTypeEmbedded" {
            guard let file = services.files.file(named: name) else {
                throw ServiceError(410, "the stored answer to this request has expired; synchronize again with the latest generation")
            }
            return try streamFile(file, contentType: "application/json; charset=utf-8", removeAfter: false)
        }
        var wrapper = stored.removingKey("file").objectValue ?? [:]
        wrapper["URL"] = wrapper.removeValue(forKey: "resultUrl")
        return writing.json(.object(wrapper))
    }

    /// What the replica has received: `replicaServerGen`, or `syncLayers` per layer (perLayer).
    private func downloadStart(_ info: ReplicaInfo) throws -> [Int: Int64] {
        var since: [Int: Int64] = [:]
        // The ArcGIS API for Python sends syncLayers=perReplica (its default) with
        // replicaServerGen for a per-replica sync: the word names the model, not layers.
        let perReplicaWord = ["perReplica", "perreplica"].contains(parameters["syncLayers"] ?? "")
        if !perReplicaWord, let layers = try parameters.json("syncLayers") {
            guard let array = layers.arrayValue else { throw ServiceError.badParameter("syncLayers", "expected a JSON array") }
            for item in array {
                guard let id = item["id"]?.integerValue, let gen = item["serverGen"]?.integerValue else {
                    throw ServiceError.badParameter("syncLayers", "each layer needs id and serverGen")
                }
                guard info.layers.contains(where: { $0.id == Int(id) }) else { throw ServiceError.badParameter("syncLayers", "layer \(id) is not in the replica") }
                if let d = item["syncDirection"]?.stringValue, d == "upload" || d == "none" { continue }
                since[Int(id)] = gen
            }
            return since
        }
        guard let text = parameters["replicaServerGen"] else {
            throw ServiceError.badParameter("replicaServerGen", "give the generation the replica last received (or syncLayers)")
        }
        guard let gen = Int64(text) else { throw ServiceError.badParameter("replicaServerGen", "expected a whole number") }
        for layer in info.layers where layer.syncDirection != .upload && layer.syncDirection != .none { since[layer.id] = gen }
        return since
    }

    // MARK: - Replicas

    func unregisterReplica() async throws -> Response {
        _ = try parameters.format()
        guard let id = parameters["replicaID"] else { throw ServiceError.badParameter("replicaID", "give the replica id, or * for all") }
        if id == "*" {
            for replica in try await sync.replicas() { try await sync.unregisterReplica(id: replica.replicaID) }
        } else {
            try await sync.unregisterReplica(id: id)
        }
        return writing.json(["success": true])
    }

    func replicas() async throws -> Response {
        _ = try parameters.format()
        return writing.json(.array(try await sync.replicas().map { ["replicaName": .string($0.replicaName), "replicaID": .string($0.replicaID)] }))
    }

    func replica(_ id: String) async throws -> Response {
        _ = try parameters.format()
        let info = try await sync.replica(id: id)
        let schema = try await backend.schema()
        var json: [String: JSONValue] = [
            "replicaName": .string(info.replicaName), "replicaID": .string(info.replicaID), "replicaOwner": "",
            "syncModel": .string(info.syncModel.rawValue), "targetType": "client", "syncDirection": "bidirectional",
            "creationDate": .integer(info.creationDate), "lastSyncDate": info.lastSyncDate.map { .integer($0) } ?? .null,
            "replicaServerGen": .integer(info.replicaServerGen), "spatialReference": ServiceInfo.spatialReference(schema.spatialReference),
            "returnsAttachments": .bool(info.returnAttachments), "attachmentsSyncDirection": .string(info.attachmentsSyncDirection.rawValue),
            "layers": .array(info.layers.map { l in
                [
                    "id": .integer(Int64(l.id)), "serverGen": .integer(l.serverGen), "serverSibGen": -1,
                    "syncDirection": .string(l.syncDirection.rawValue), "queryOption": .string(l.queryOption),
                    "useGeometry": .bool(l.useGeometry), "where": .string(l.where ?? ""),
                ]
            }),
            "geometry": info.geometry ?? .null, "lastBatchSeq": .integer(info.lastSeq),
        ]
        if info.syncModel == .perLayer {
            json["layerServerGens"] = .array(info.layers.map { ["id": .integer(Int64($0.id)), "serverGen": .integer($0.serverGen)] })
        }
        return writing.json(.object(json))
    }

    // MARK: - Jobs and files

    func job(_ id: String) async throws -> Response {
        _ = try parameters.format()
        guard let status = try await services.jobs.status(id) else { throw ServiceError.notFound("job \(id)") }
        return writing.json(status)
    }

    func cancelJob(_ id: String) async throws -> Response {
        guard try await services.jobs.cancel(id) else { throw ServiceError.notFound("job \(id)") }
        return writing.json(["success": true])
    }

    func resultFile(_ name: String) throws -> Response {
        guard let file = services.files.file(named: name) else { throw ServiceError.notFound("file \(name) (files are kept for a limited time)") }
        let type = name.hasSuffix(".gpkg") ? "application/geopackage+sqlite3" : "application/json; charset=utf-8"
        return try Self.streamFile(file, contentType: type, removeAfter: false, range: request.headers[.range], ifRange: request.headers[.ifRange])
    }

    /// A file's bytes, read a megabyte at a time as the client takes them.
    func streamFile(_ url: URL, contentType: String, removeAfter: Bool) throws -> Response {
        try Self.streamFile(url, contentType: contentType, removeAfter: removeAfter)
    }

    /// With `range` (a request's `Range: bytes=N-`), the bytes from N on (206), so an interrupted
    /// download continues where it broke off; 416 when N is past the end. Every answer carries an
    /// `ETag` (size and modification time); with `ifRange` (the request's `If-Range`) that is not
    /// the file's tag any more, the whole file comes back (200), so a client never splices two
    /// versions of a file.
    static func streamFile(_ url: URL, contentType: String, removeAfter: Bool, range: String? = nil, ifRange: String? = nil) throws -> Response {
        let attributes = try? FileManager.default.attributesOfItem(atPath: url.path)
        guard let handle = FileHandle(forReadingAtPath: url.path), let total = (attributes?[.size] as? NSNumber)?.intValue else {
            throw ServiceError.notFound("file \(url.lastPathComponent)")
        }
        let modified = ((attributes?[.modificationDate] as? Date)?.timeIntervalSince1970 ?? 0) * 1_000_000
        let tag = "\"\(total)-\(Int64(modified))\""
        var start = 0
        if let range, ifRange == nil || ifRange == tag, range.hasPrefix("bytes="), range.hasSuffix("-"), let from = Int(range.dropFirst(6).dropLast()), from >= 0 {
            guard from < total else {
                try? handle.close()
                return Response(status: .rangeNotSatisfiable, headers: [.contentRange: "bytes */\(total)", .eTag: tag])
            }
            start = from
            try handle.seek(toOffset: UInt64(from))
        }
        let size = total - start
        var headers: HTTPFields = [.contentType: contentType, .contentLength: String(size), .acceptRanges: "bytes", .eTag: tag]
        if start > 0 { headers[.contentRange] = "bytes \(start)-\(total - 1)/\(total)" }
        return Response(
            status: start > 0 ? .partialContent : .ok, headers: headers,
            body: ResponseBody(contentLength: size) { writer in
                defer {
                    try? handle.close()
                    if removeAfter { try? FileManager.default.removeItem(at: url) }
                }
                while let chunk = try handle.read(upToCount: 1 << 20), !chunk.isEmpty {
                    try await writer.write(ByteBuffer(bytes: chunk))
                }
                try await writer.finish(nil)
            })
    }
}

extension JSONValue {
    func removingKey(_ key: String) -> JSONValue {
        guard var object = objectValue else { return self }
        object[key] = nil
        return .object(object)
    }
}

extension RequestParameters {
    /// The createReplica parameters as a ``ReplicaRequest`` (filter geometry in the service's
    /// spatial reference).
    func replicaRequest(_ schema: ServiceSchema) throws -> ReplicaRequest {
        let ids = try layerIDs(schema)
        let queries = try self.json("layerQueries")
        if let queries, queries.objectValue == nil { throw ServiceError.badParameter("layerQueries", "expected a JSON object keyed by layer id") }
        let syncModel: ReplicaInfo.SyncModel
        switch self["syncModel"] ?? "perReplica" {
        case "perReplica": syncModel = .perReplica
        case "perLayer": syncModel = .perLayer
        case "none": syncModel = .none
        case let other: throw ServiceError.badParameter("syncModel", "\"\(other.prefix(40))\" is not one of perReplica, perLayer, none")
        }
        let editable = schema.capabilities.contains { ["Create", "Update", "Delete", "Editing"].contains($0) }
        let attachmentsDirection = try direction("attachmentsSyncDirection", default: .none, allowed: [.none, .upload, .bidirectional])
        var layers: [ReplicaInfo.Layer] = []
        for id in ids {
            let options = queries?[String(id)]
            var layer = ReplicaInfo.Layer(id: id, serverGen: 0, syncDirection: editable ? .bidirectional : .download)
            if let options {
                layer.where = options["where"]?.stringValue.flatMap { $0.trimmingCharacters(in: .whitespaces).isEmpty ? nil : $0 }
                layer.useGeometry = options["useGeometry"]?.boolValue ?? true
                let option = options["queryOption"]?.stringValue ?? "useFilter"
                guard ["all", "none", "useFilter"].contains(option) else {
                    throw ServiceError.badParameter("layerQueries", "queryOption of layer \(id) must be all, none or useFilter")
                }
                layer.queryOption = option
            }
            if let clause = layer.where, let definition = schema.layer(id: id) {
                do {
                    _ = try WhereClause(clause, layer: definition)
                } catch let error as StorageError {
                    throw ServiceError.badParameter("layerQueries", "layer \(id): \(error.message)")
                }
            }
            layers.append(layer)
        }
        var request = ReplicaRequest(
            name: self["replicaName"] ?? "replica", layers: layers, geometry: try self.filterGeometry(in: schema.spatialReference),
            syncModel: syncModel, returnAttachments: try self.bool("returnAttachments", default: false),
            attachmentsSyncDirection: attachmentsDirection)
        request.returnAttachmentsDataByUrl = try self.bool("returnAttachmentsDataByUrl", default: true)
        return request
    }

    /// `layers`: `0,1`, `[0,1]` or `[{"id":0},…]`.
    fileprivate func layerIDs(_ schema: ServiceSchema) throws -> [Int] {
        guard let text = self["layers"] else { throw ServiceError.badParameter("layers", "give the layer ids to take offline") }
        var ids: [Int] = []
        if let json = try? JSONValue.parse(text), let array = json.arrayValue {
            for item in array {
                guard let id = item.integerValue ?? item["id"]?.integerValue else { throw ServiceError.badParameter("layers", "expected layer ids") }
                ids.append(Int(id))
            }
        } else {
            ids = try (self.integers("layers") ?? []).map { Int($0) }
        }
        guard !ids.isEmpty else { throw ServiceError.badParameter("layers", "give the layer ids to take offline") }
        for id in ids where schema.layer(id: id) == nil { throw ServiceError.badParameter("layers", "the service has no layer \(id)") }
        return Array(Set(ids)).sorted()
    }

    func direction(_ name: String, default value: ReplicaInfo.Direction, allowed: Set<ReplicaInfo.Direction>) throws -> ReplicaInfo.Direction {
        guard let text = self[name] else { return value }
        guard let d = ReplicaInfo.Direction(rawValue: text), allowed.contains(d) else {
            throw ServiceError.badParameter(name, "expected one of \(allowed.map(\.rawValue).sorted().joined(separator: ", "))")
        }
        return d
    }
}
