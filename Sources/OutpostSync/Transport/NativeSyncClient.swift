import Foundation
import OutpostCore
import OutpostProtocol
import OutpostStorage

/// The native sync API of one replica on its service (`…/outpost/v1/services/<name>`,
/// docs/sync.md): the one place that knows its paths and what each answer means. Each call is
/// one request; retrying is the caller's (``SyncGeodatabaseJob``), which sees network failures as
/// ``SyncError/Code/unreachable`` and 5xx answers as ``SyncError/Code/server`` with the status.
struct NativeSyncClient: Sendable {
    let connection: ServiceConnection
    let replicaID: String

    init(_ connection: ServiceConnection, replicaID: String) {
        self.connection = connection
        self.replicaID = replicaID
    }

    private func url(_ path: String, _ query: [(String, String)] = []) -> URL { connection.url(connection.nativeURL, path, query: query) }

    // MARK: - Replica

    /// The replica's registration with the service's generation and schema version now.
    func replicaInfo() async throws -> JSONValue {
        try await connection.json(.GET, url(NativeSyncRoute.replica.path(replicaID)))
    }

    /// Registers a new replica with this one's scope at `generation` (the generation of a copy of
    /// its file); its info.
    func copy(generation: Int64, name: String) async throws -> ReplicaInfo {
        let answer = try await connection.json(.POST, url(NativeSyncRoute.copies.path(replicaID)), form: [("generation", String(generation)), ("replicaName", name)])
        do {
            return try JSONValueDecoder().decode(ReplicaInfo.self, from: answer)
        } catch {
            throw SyncError(.invalidResponse, "the service's answer to a replica copy is not a replica: \(error)")
        }
    }

    /// The service's schema now (a replica behind its version migrates to it).
    func schema() async throws -> ServiceSchema {
        let answer = try await connection.json(.GET, url(NativeSyncRoute.schema.path()))
        guard let schema = answer["schema"] else { throw SyncError(.invalidResponse, "the service sent no schema") }
        do {
            return try ServiceSchema.decode(schema.jsonData)
        } catch {
            throw SyncError(.invalidResponse, "the service's schema is not readable here: \(error)")
        }
    }

    // MARK: - Upload

    /// What the server did with a batch.
    enum BatchOutcome {
        /// Applied now or before (then `replayed`); `text` is the answer as sent, which the
        /// replica keeps.
        case applied(BatchResult, text: String)
        /// Rolled back as a whole: an edit is invalid (HTTP 422); nothing was applied.
        case rejected(BatchResult)
    }

    /// `PUT replicas/{id}/batches/{seq}` with the sealed bytes.
    /// - Parameter checksums: layers whose whole checksums the server starts computing once the
    ///   batch commits (the replica's last batch, when its verify will compare whole layers).
    func putBatch(seq: Int64, batchID: String, body: Data, checksums: [Int]? = nil) async throws -> BatchOutcome {
        let target = batchURL(seq, checksums)
        let reply = try await connection.send(.PUT, target, body: body, contentType: UploadBatch.Encoding(of: body).contentType)
        return try await outcome(reply, seq: seq, batchID: batchID, target: target, body: body, checksums: checksums)
    }

    /// The same request with a batch sent while it is sealed (docs/sync.md, "Framed batches").
    func putBatch(seq: Int64, batchID: String, streaming outgoing: OutgoingBatch, checksums: [Int]? = nil) async throws -> BatchOutcome {
        let target = batchURL(seq, checksums)
        let reply = try await connection.send(.PUT, target, stream: outgoing.body, contentType: UploadBatch.Encoding.binary.contentType)
        return try await outcome(reply, seq: seq, batchID: batchID, target: target, body: outgoing.storedBody, checksums: checksums)
    }

    private func batchURL(_ seq: Int64, _ checksums: [Int]?) -> URL {
        url(NativeSyncRoute.batch.path(replicaID, String(seq)), checksums.map { [("checksums", $0.map(String.init).joined(separator: ","))] } ?? [])
    }

    /// What an answer to a batch says; `body` is the batch's stored bytes.
    private func outcome(_ reply: ServiceConnection.Reply, seq: Int64, batchID: String, target: URL, body: Data?, checksums: [Int]?) async throws -> BatchOutcome {
        switch reply.status {
        case 200:
            let result = try Self.batchResult { try JSONValue.parse(reply.body) }
            guard result.seq == seq, result.batchId == batchID else {
                throw SyncError(.ledgerConflict, "the server answered batch \(seq) with the result of batch \(result.seq) (\(result.batchId))")
            }
            return .applied(result, text: String(decoding: reply.body, as: UTF8.self))
        case 422:
            guard let json = try? reply.syncJSON(), let result = json["result"] else { throw SyncError(.invalidResponse, "HTTP 422 without the batch result") }
            return .rejected(try Self.batchResult { result })
        case let status where [400, 415].contains(status) && body.map { UploadBatch.Encoding(of: $0) == .binary } == true:
            // A server that does not read the binary encoding (replaced by an older one since
            // the replica learned it) applied nothing: the same batch goes as JSON. Its JSON is
            // canonical, so a resend of it is recognised as the same batch; the next download
            // learns what the server reads, and later batches are sealed so.
            let json = try UploadBatch.decode(body!).encoded(as: .json)
            return try await putBatch(seq: seq, batchID: batchID, body: json, checksums: checksums)
        default:
            throw ServiceConnection.failure(reply, url: target)
        }
    }

    /// How much of some attachment content the server has.
    func blobStatus(_ sha256: String) async throws -> BlobStatus {
        let target = url(NativeSyncRoute.blob.path(sha256))
        let reply = try await connection.send(.GET, target)
        guard reply.status == 200 else { throw ServiceConnection.failure(reply, url: target) }
        return try Self.decode(BlobStatus.self, reply.body)
    }

    /// Appends a chunk of content at `offset` (`total`: its whole size). When someone else's
    /// upload of the same content moved on meanwhile (409), the answer is where it stands now.
    func appendBlob(_ sha256: String, offset: Int64, total: Int64, bytes: Data) async throws -> BlobStatus {
        let target = url(NativeSyncRoute.blob.path(sha256), [("offset", String(offset)), ("size", String(total))])
        let reply = try await connection.send(.PUT, target, body: bytes, contentType: "application/octet-stream")
        switch reply.status {
        case 200: return try Self.decode(BlobStatus.self, reply.body)
        case 409: return try await blobStatus(sha256)
        default: throw ServiceConnection.failure(reply, url: target)
        }
    }

    // MARK: - Download

    /// One page of a layer's changes in the window (`since`, `upto`], after the global id `after`.
    /// - Parameter countUpTo: on a first page, also count the window's rows (up to one past this).
    func changes(layer: Int, since: Int64, upto: Int64, after: String?, limit: Int = 1000, countUpTo: Int? = nil) async throws -> ChangePage {
        var query = [("layer", String(layer)), ("since", String(since)), ("upto", String(upto)), ("limit", String(limit))]
        if let after { query.append(("after", after)) }
        if let countUpTo, after == nil { query.append(("count", String(countUpTo))) }
        return try await page(url(NativeSyncRoute.changes.path(replicaID), query), stored: true)
    }

    /// One page of every feature of a layer in the replica's scope (fetching a layer again).
    func snapshot(layer: Int, after: String?, limit: Int = 1000) async throws -> ChangePage {
        var query = [("layer", String(layer)), ("limit", String(limit))]
        if let after { query.append(("after", after)) }
        return try await page(url(NativeSyncRoute.snapshot.path(replicaID), query))
    }

    /// A page, binary from a server that writes it (one that does not answers JSON); with
    /// `stored`, in the stored form from a server that writes that (one that does not answers
    /// the first binary layout).
    private func page(_ target: URL, stored: Bool = false) async throws -> ChangePage {
        let accept = stored ? "\(ChangePage.storedContentType), \(ChangePage.binaryContentType), application/json" : "\(ChangePage.binaryContentType), application/json"
        let reply = try await connection.send(.GET, target, accept: accept)
        guard reply.status == 200 else { throw ServiceConnection.failure(reply, url: target) }
        do {
            return try ChangePage.decode(reply.body)
        } catch {
            throw SyncError(.invalidResponse, "the server's change page is not readable: \(error)")
        }
    }

    /// Bytes `from`…`through` of an attachment's content.
    func attachmentBytes(_ globalID: String, from: Int64, through: Int64) async throws -> Data {
        let target = url(NativeSyncRoute.attachment.path(globalID))
        let reply = try await connection.send(.GET, target, range: "bytes=\(from)-\(through)")
        guard reply.status == 206 || (reply.status == 200 && from == 0) else { throw ServiceConnection.failure(reply, url: target) }
        guard !reply.body.isEmpty else { throw SyncError(.invalidResponse, "the server sent no bytes of attachment \(globalID) from \(from)") }
        return reply.body
    }

    // MARK: - Verify

    /// The server's count and checksum of each layer in the replica's scope.
    /// - Parameter since: ask for the checksums of only the features changed after this generation
    ///   (the server answers so for layers where they are few).
    func checksums(layers: [Int], since: Int64? = nil) async throws -> ReplicaChecksums {
        var query = [("layers", layers.map(String.init).joined(separator: ","))]
        if let since { query.append(("since", String(since))) }
        let target = url(NativeSyncRoute.checksums.path(replicaID), query)
        let reply = try await connection.send(.GET, target)
        guard reply.status == 200 else { throw ServiceConnection.failure(reply, url: target) }
        return try Self.decode(ReplicaChecksums.self, reply.body)
    }

    // MARK: - Decoding

    /// A batch's result, read without the generic decoder.
    static func batchResult(_ json: () throws -> JSONValue) throws -> BatchResult {
        do {
            return try BatchResult(json: json())
        } catch {
            throw SyncError(.invalidResponse, "the server's answer is not a batch result: \(error)")
        }
    }

    static func decode<T: Decodable>(_ type: T.Type, _ data: Data) throws -> T {
        do {
            return try JSONValueDecoder().decode(type, from: data)
        } catch {
            throw SyncError(.invalidResponse, "the server's answer is not a \(type): \(error)")
        }
    }
}
