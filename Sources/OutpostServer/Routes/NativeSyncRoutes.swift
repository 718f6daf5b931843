import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import OutpostCore
import OutpostProtocol
import Logging
import OutpostStorage
import OutpostSyncService

/// Outpost's native sync API, under `/outpost/v1/services/{service}/replicas` (docs/sync.md): the
/// exactly-once batch upload and the commit-ordered change feed.
///
/// | Method and path                              | Answer                                           |
/// |----------------------------------------------|--------------------------------------------------|
/// | `GET  replicas`, `GET replicas/{id}`         | ``ReplicaInfo`` (list)                            |
/// | `DELETE replicas/{id}`                       | unregisters                                      |
/// | `PUT  replicas/{id}/batches/{seq}[?checksums=0,1]` | ``BatchResult``; 422 rejected, 409 seq/hash; `checksums`: start those layers' checksums once it commits; a framed body is applied as it arrives |
/// | `GET  replicas/{id}/batches/{seq}`           | the stored ``BatchResult``                        |
/// | `POST replicas/{id}/copies?generation&replicaName` | ``ReplicaInfo`` of a new replica with the same scope at `generation` (a preplanned package's file) |
/// | `GET  replicas/{id}/changes?layer&since&upto&after&limit&count` | ``ChangePage``                      |
/// | `GET  replicas/{id}/snapshot?layer&after&limit` | ``ChangePage`` of every feature in scope       |
/// |   (both page answers are binary for `Accept: application/vnd.outpost.changes`)  |                      |
/// | `GET  replicas/{id}/checksums?layers=0,1[&since=G]` | ``ReplicaChecksums``                              |
/// | `GET  schema`                                | `{"schemaVersion", "schema"}`: the schema now     |
/// | `GET  blobs/{sha256}`                        | ``BlobStatus``: how much content the server has   |
/// | `PUT  blobs/{sha256}?offset&size`            | ``BlobStatus``; body: the next chunk (409: resume at `received`) |
/// | `GET  attachments/{globalId}`                | the bytes (`Range: bytes=N-M` → 206); `?f=json` → ``AttachmentInfo`` |
struct NativeSyncRoutes {
    let sync: any SyncBackend
    let parameters: RequestParameters
    let writing: ResponseWriting
    /// The `Range` header (attachment downloads resume with it).
    var range: String?
    /// The client named the binary change page in `Accept` (docs/sync.md, "Binary change pages").
    var binaryPages = false
    /// The client named the stored form of binary change pages (layout 2) in `Accept`.
    var storedPages = false
    var metrics: ServerMetrics?
    /// Where checksums asked for with a batch are held, and the service's name (their key's
    /// first part).
    var ahead: (store: ChecksumsAhead, service: String)?
    /// Where feed pages made ahead are held (their key's service is `ahead`'s).
    var pagesAhead: PagesAhead?
    /// A batch PUT's body, read as it arrives, and the most bytes it may have.
    var batchBody: (body: RequestBody, limit: Int)?
    /// Whether the caller may sync the replica: only then does reading its feed record what it
    /// holds (a viewer reading the feed changes nothing).
    var callerMaySync = true

    /// The native routes below `…/outpost/v1/services/{service}/`: each of the table's
    /// (``NativeSyncRoute``) with its handlers, a method the table does not list a 405, another
    /// path a 404. Reading (GET) needs `query` on the service, anything else `sync`.
    static func table(_ responder: FeatureServerResponder) -> RouteTable {
        var table = RouteTable()
        table.refusal = { method, _, pattern in "\(method) is not allowed on \(pattern)" }
        /// Registers `route`'s handlers: every method of the table's and only those (checked as
        /// the server's router is built).
        func serve(_ route: NativeSyncRoute, _ handlers: [HTTPRequest.Method: @Sendable (NativeSyncRoutes, RoutedRequest) async throws -> Response]) {
            precondition(Set(handlers.keys.map(\.rawValue)) == route.methods, "\(route.pattern) serves \(handlers.keys), the table says \(route.methods)")
            for (method, handler) in handlers.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
                // A batch's body is read as it arrives (docs/sync.md, "Framed batches").
                let streams = route == .batch && method == .put
                table.on(RouterPath(route.pattern), [method], access: .readOrSync, streamsBody: streams) { call in
                    try await handler(try responder.nativeRoutes(call, streamedBody: streams), call)
                }
            }
        }
        // Every route of the table, served: a route added there and not here does not compile.
        for route in NativeSyncRoute.allCases {
            switch route {
            case .blob:
                serve(route, [
                    .get: { r, c in try r.json(try await r.sync.blobStatus(sha256: try c.value("sha256"))) },
                    .put: { r, c in try await r.appendBlob(try c.value("sha256")) },
                ])
            case .attachment: serve(route, [.get: { r, c in try await r.attachment(try c.value("globalId")) }])
            case .schema: serve(route, [.get: { r, _ in try await r.schema() }])
            case .replicas: serve(route, [.get: { r, _ in try r.json(try await r.sync.replicas()) }])
            case .replica:
                serve(route, [
                    .get: { r, c in
                        var info = try await r.sync.replica(id: try c.value("replica"))
                        info.batchEncodings = UploadBatch.acceptedEncodings
                        return try r.json(info)
                    },
                    .delete: { r, c in
                        try await r.sync.unregisterReplica(id: try c.value("replica"))
                        return r.writing.json(["success": true])
                    },
                ])
            case .batch:
                serve(route, [
                    .put: { r, c in try await r.putBatch(replica: try c.value("replica"), seq: try seq(try c.value("seq"))) },
                    .get: { r, c in try await r.storedBatch(replica: try c.value("replica"), seq: try seq(try c.value("seq"))) },
                ])
            case .copies: serve(route, [.post: { r, c in try await r.copy(replica: try c.value("replica")) }])
            case .changes: serve(route, [.get: { r, c in try await r.changes(replica: try c.value("replica")) }])
            case .snapshot: serve(route, [.get: { r, c in try await r.snapshot(replica: try c.value("replica")) }])
            case .checksums: serve(route, [.get: { r, c in try await r.checksums(replica: try c.value("replica")) }])
            }
        }
        // Another path below a served service: its route is what is missing.
        table.on("**", RouteTable.allMethods, access: .readOrSync) { call in
            _ = try responder.nativeRoutes(call, streamedBody: false)
            throw ServiceError.notFound(call.rest.joined(separator: "/"))
        }
        return table
    }

    private func appendBlob(_ sha256: String) async throws -> Response {
        guard let offset = try parameters.int("offset"), let size = try parameters.int("size") else {
            throw ServiceError.badParameter("offset", "give offset and size (the content's whole size)")
        }
        var body = parameters.rawBody ?? ByteBuffer()
        let bytes = Data(body.readBytes(length: body.readableBytes) ?? [])
        do {
            return try json(try await sync.appendBlob(sha256: sha256, offset: Int64(offset), total: Int64(size), bytes: bytes))
        } catch let error as SyncServiceError where error.code == .conflict {
            // Say where to continue, in the status shape.
            let status = try await sync.blobStatus(sha256: sha256)
            return writing.json(["error": ["code": 409, "message": .string(error.message)], "received": .integer(status.received)], status: .conflict)
        }
    }

    private func copy(replica: String) async throws -> Response {
        guard let generation = parameters["generation"].flatMap({ Int64($0) }) else { throw ServiceError(400, "copies needs generation, the generation of the copied file") }
        let name = parameters["replicaName"].flatMap { $0.isEmpty ? nil : $0 } ?? "copy of \(replica)"
        return try json(try await sync.copyReplica(id: replica, name: name, generation: generation))
    }

    private func schema() async throws -> Response {
        let schema = try await sync.schema()
        return writing.json(["schemaVersion": .integer(Int64(schema.schemaVersion)), "schema": try JSONValue.parse(try schema.encoded())])
    }

    private func storedBatch(replica: String, seq: Int64) async throws -> Response {
        guard let result = try await sync.batchResult(replicaID: replica, seq: seq) else {
            throw ServiceError.notFound("batch \(seq) of replica \(replica)")
        }
        return writing.json(result.json)
    }

    private func changes(replica: String) async throws -> Response {
        guard let layer = try parameters.int("layer") else { throw ServiceError.badParameter("layer", "give the layer id") }
        guard let since = try parameters.int("since") else { throw ServiceError.badParameter("since", "give the generation received up to") }
        guard let upto = try parameters.int("upto"), upto >= since else {
            throw ServiceError.badParameter("upto", "give the generation to read up to (at least since)")
        }
        let after = parameters["after"]
        let count = try parameters.int("count", range: 0...ChangePage.maxCount)
        let limit = try parameters.int("limit", range: 1...10_000) ?? 1000
        // Made ahead only for an answer as the feed's client takes it (not a page shown in a
        // browser or indented).
        let key: PagesAhead.Key? =
            if let ahead, pagesAhead != nil, writesPageAsItIs {
                PagesAhead.Key(
                    service: ahead.service, replica: replica, layer: layer, since: Int64(since), upto: Int64(upto), after: after ?? "", limit: limit,
                    binary: binaryPages, stored: storesPages, gzip: writing.gzip)
            } else {
                nil
            }
        if after != nil, let key, let made = await pagesAhead?.take(key) {
            metrics?.feedPage("ahead")
            makeAhead(key, after: made.next)
            return Self.response(made.body, made.headers)
        }
        // A window past the service's generation would hand a client that keeps `upto` as its
        // cursor a gap: every later change skipped (pages made ahead continue a window this
        // check passed).
        let generation = try await sync.generation()
        guard Int64(since) <= generation else {
            throw ServiceError.badParameter("since", "generation \(since) is past the service's generation \(generation)")
        }
        guard Int64(upto) <= generation else {
            throw ServiceError.badParameter("upto", "generation \(upto) is past the service's generation \(generation)")
        }
        var page = try await sync.feedPage(
            replicaID: replica, layerID: layer, since: Int64(since), upto: Int64(upto), after: after, limit: limit, stored: storesPages)
        // The replica asked from `since`: it holds everything up to there.
        if after == nil, callerMaySync { try await sync.recordReceived(replicaID: replica, upTo: Int64(since)) }
        if after != nil { metrics?.feedPage("asked") }
        // A first page asked with `count` says how large the window is (counted up to one past
        // it), unless it is also the last page and so holds the whole window.
        if after == nil, page.next != nil, let cap = count {
            page.windowRows = try await sync.windowRows(layerID: layer, since: Int64(since), upto: Int64(upto), cap: cap + 1)
        }
        if let key { makeAhead(key, after: page.next) }
        return answer(page)
    }

    /// Starts making the page after `after` (when there is one) for the request `key` describes.
    private func makeAhead(_ key: PagesAhead.Key, after: String?) {
        guard let store = pagesAhead, let after else { return }
        let sync = self.sync, next = key.continuing(after: after)
        store.start(next) {
            let page = try await sync.feedPage(
                replicaID: next.replica, layerID: next.layer, since: next.since, upto: next.upto, after: after, limit: next.limit, stored: next.stored)
            let (body, headers) = Self.encoded(page, binary: next.binary, gzip: next.gzip)
            return PagesAhead.Answer(body: body, headers: headers, next: page.next)
        }
    }

    /// A page in the encoding the client asked for, saying that the answer varies with `Accept`.
    private func answer(_ page: ChangePage) -> Response {
        guard writesPageAsItIs else { return Self.varying(writing.json(page.json)) }
        let (body, headers) = Self.encoded(page, binary: binaryPages, gzip: writing.gzip)
        return Self.response(body, headers)
    }

    /// Whether a page goes out as bytes made from it alone: binary (unless shown in a browser),
    /// or compact JSON (neither shown in a browser nor indented).
    private var writesPageAsItIs: Bool { writing.directory == nil && (binaryPages || !writing.pretty) }

    /// Whether pages are made in the stored form: asked for, and written as binary bytes.
    private var storesPages: Bool { storedPages && binaryPages && writesPageAsItIs }

    /// A page's body and headers: binary or JSON, gzipped when the client accepts it.
    private static func encoded(_ page: ChangePage, binary: Bool, gzip: Bool) -> (ByteBuffer, HTTPFields) {
        binary
            ? ResponseWriting.encoded(
                ByteBuffer(bytes: page.binaryEncoded()), contentType: page.isStoredForm ? ChangePage.storedContentType : ChangePage.binaryContentType,
                gzip: gzip, level: Gzip.binaryLevel)
            : ResponseWriting.encoded(ByteBuffer(bytes: page.json.jsonBytes), contentType: ResponseWriting.jsonContentType, gzip: gzip)
    }

    private static func response(_ body: ByteBuffer, _ headers: HTTPFields) -> Response {
        varying(Response(status: .ok, headers: headers, body: .init(byteBuffer: body)))
    }

    private static func varying(_ response: Response) -> Response {
        var response = response
        response.headers[.vary] = "Accept"
        return response
    }

    private func snapshot(replica: String) async throws -> Response {
        guard let layer = try parameters.int("layer") else { throw ServiceError.badParameter("layer", "give the layer id") }
        let page = try await sync.snapshot(replicaID: replica, layerID: layer, after: parameters["after"], limit: try parameters.int("limit", range: 1...10_000) ?? 1000)
        return answer(page)
    }

    private func checksums(replica: String) async throws -> Response {
        let info = try await sync.replica(id: replica)
        let layers = try parameters.integers("layers")?.map { Int($0) } ?? info.layers.map(\.id)
        let since = try parameters.int("since").map { Int64($0) }
        // Asked for with the replica's last batch and still of the generation now: the same answer.
        if since == nil, let ahead, let made = await ahead.store.take(Self.aheadKey(ahead.service, info.replicaID), layers: layers, generation: info.serviceGeneration) {
            metrics?.checksums("ahead")
            return try json(made)
        }
        // Answered to a replica of the same scope at the generation now (whole scopes only).
        let scope = since == nil ? ahead.map { ChecksumsAhead.scopeKey(service: $0.service, info: info, layers: layers) } : nil
        if let ahead, let scope, let known = ahead.store.answer(scope, generation: info.serviceGeneration) {
            metrics?.checksums("shared")
            return try json(known)
        }
        let answer = try await sync.checksums(replicaID: replica, layerIDs: layers, since: since)
        if let ahead, let scope { ahead.store.remember(scope, answer) }
        metrics?.checksums("computed")
        return try json(answer)
    }

    private static func aheadKey(_ service: String, _ replica: String) -> String {
        service + "/" + ReplicaID.normalized(replica)
    }

    /// Starts the checksums a batch asked for (`checksums=0,1`), once it is applied (or replayed):
    /// the replica's `GET …/checksums` that follows takes them (``ChecksumsAhead``).
    private func startChecksums(replica: String, layers: [Int]?) {
        guard let layers, !layers.isEmpty, let ahead else { return }
        let sync = self.sync, store = ahead.store, service = ahead.service
        store.start(Self.aheadKey(service, replica), layers: layers) {
            let info = try await sync.replica(id: replica)
            let answer = try await sync.checksums(replicaID: replica, layerIDs: layers, since: nil)
            store.remember(ChecksumsAhead.scopeKey(service: service, info: info, layers: layers), answer)
            return answer
        }
    }

    /// An attachment's bytes, streamed a megabyte at a time; `Range: bytes=N-` or `bytes=N-M`
    /// answers 206 with that part (a download that dropped resumes).
    private func attachment(_ globalID: String) async throws -> Response {
        let info = try await sync.attachmentInfo(globalID: globalID)
        if (parameters["f"] ?? "").lowercased() == "json" { return try json(info) }
        var start: Int64 = 0, end = info.size - 1
        var status = HTTPResponse.Status.ok
        if let range, range.hasPrefix("bytes=") {
            let bounds = range.dropFirst(6).split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false).map { Int64($0.trimmingCharacters(in: .whitespaces)) }
            guard let first = bounds.first ?? nil, first >= 0, first < max(info.size, 1) else {
                throw ServiceError(416, "range \(range) is outside the attachment's \(info.size) bytes")
            }
            start = first
            if bounds.count > 1, let last = bounds[1] { end = min(last, info.size - 1) }
            guard end >= start else { throw ServiceError(416, "range \(range) is empty") }
            status = .partialContent
        }
        var headers: HTTPFields = [.contentType: info.contentType, .contentLength: String(max(0, end - start + 1))]
        headers[HTTPField.Name("X-Content-SHA256")!] = info.sha256
        if status == .partialContent { headers[.contentRange] = "bytes \(start)-\(end)/\(info.size)" }
        let sync = self.sync, gid = info.globalId, first = start, last = end
        return Response(
            status: status, headers: headers,
            body: ResponseBody(contentLength: Int(max(0, last - first + 1))) { writer in
                var offset = first
                while offset <= last {
                    let piece = try await sync.attachmentBytes(globalID: gid, offset: offset, length: Int(min(1 << 20, last - offset + 1)))
                    if piece.isEmpty { break }
                    try await writer.write(ByteBuffer(bytes: piece))
                    offset += Int64(piece.count)
                }
                try await writer.finish(nil)
            })
    }

    private static func seq(_ text: String) throws -> Int64 {
        guard let seq = Int64(text), seq > 0 else { throw ServiceError.notFound("batch \(text)") }
        return seq
    }

    private func json(_ value: some Encodable) throws -> Response {
        writing.json(try ServiceRoutes.json(value))
    }

    /// Applies an upload batch exactly once. The content hash is taken over the body bytes as
    /// sent: a client resends the identical bytes, so a replay is recognised. A framed batch is
    /// applied as its frames arrive (docs/sync.md, "Framed batches"); any other whole.
    private func putBatch(replica: String, seq: Int64) async throws -> Response {
        guard let (body, limit) = batchBody else {
            guard var raw = parameters.rawBody else { throw Self.noBatch }
            return try await putWholeBatch(Data(raw.readBytes(length: raw.readableBytes) ?? []), replica: replica, seq: seq)
        }
        let streamed = StreamedBatch(limit: limit)
        // The body is read to its end whatever the answer, so the connection stays usable.
        async let pumped: Void = streamed.pump(body)
        do {
            let response = try await putStreamedBatch(streamed, replica: replica, seq: seq)
            await pumped
            return response
        } catch {
            await pumped
            throw Self.requestError(error)
        }
    }

    private func putStreamedBatch(_ streamed: StreamedBatch, replica: String, seq: Int64) async throws -> Response {
        switch try await streamed.kind() {
        case .empty: throw Self.noBatch
        case .other: return try await putWholeBatch(try await streamed.whole(), replica: replica, seq: seq)
        case .framed: break
        }
        let head = try await streamed.head()
        try Self.check(head.batch, replica: replica, seq: seq)
        guard head.layers.reduce(0, { $0 + $1.atMost }) >= StreamedBatch.minimumStreamedEdits else {
            metrics?.framedBatch(applied: "whole")
            return try await putWholeBatch(try await streamed.whole(), replica: replica, seq: seq)
        }
        try await streamed.firstFrame()
        do {
            let response = try await answer(seq: seq, replica: replica) { try await sync.applyStreamedBatch(head, from: streamed) }
            metrics?.framedBatch(applied: "streaming")
            return response
        } catch is StreamedBatch.WholeBodyNeeded {
            metrics?.framedBatch(applied: "whole")
            return try await putWholeBatch(try await streamed.whole(), replica: replica, seq: seq)
        }
    }

    private static let noBatch = ServiceError.badParameter(
        "body", "send the batch as \(UploadBatch.Encoding.json.contentType) or \(UploadBatch.Encoding.binary.contentType)")

    /// A body that could not be read as a batch: 400 with where it went wrong, 413 when too large.
    private static func requestError(_ error: any Error) -> any Error {
        switch error {
        case let large as StreamedBatch.TooLarge: ServiceError(413, "the request body is larger than the \(large.limit >> 20) MB limit")
        case is DecodingError: ServiceError.badParameter("body", "not an upload batch: \(describe(error))")
        default: error
        }
    }

    private func putWholeBatch(_ bytes: Data, replica: String, seq: Int64) async throws -> Response {
        guard !bytes.isEmpty else { throw Self.noBatch }
        let batch: UploadBatch
        do {
            batch = try UploadBatch.decode(bytes)
        } catch {
            throw ServiceError.badParameter("body", "not an upload batch: \(Self.describe(error))")
        }
        try Self.check(batch, replica: replica, seq: seq)
        let response = try await answer(seq: seq, replica: replica) { try await sync.applyBatchAnswering(batch, hash: UploadBatch.hash(bytes)) }
        // The decoded edits are freed while the answer goes out.
        BackgroundRelease.release(consume batch)
        return response
    }

    /// Refuses a batch sent to another seq or replica than it names, or in a newer format.
    private static func check(_ batch: UploadBatch, replica: String, seq: Int64) throws {
        guard batch.seq == seq, GlobalID.normalized(batch.replicaId) == ReplicaID.normalized(replica) else {
            throw ServiceError.badParameter("body", "the batch is seq \(batch.seq) of replica \(batch.replicaId), not \(seq) of \(replica)")
        }
        guard batch.formatVersion <= UploadBatch.currentFormatVersion else {
            throw ServiceError.badParameter("body", "batch format \(batch.formatVersion) is newer than this server's \(UploadBatch.currentFormatVersion)")
        }
    }

    /// The answer to a batch `apply` applies (or replays): its result, 422 when rolled back, the
    /// refusals' statuses; the checksums asked for start once it committed.
    private func answer(seq: Int64, replica: String, _ apply: () async throws -> BatchAnswer) async throws -> Response {
        let checksumLayers = try parameters.integers("checksums", limit: 1000)?.map { Int($0) }
        let answer: BatchAnswer
        do {
            answer = try await apply()
        } catch let refusal as BatchRefusal {
            metrics?.batch("refused")
            throw ServiceError(refusal: refusal)
        } catch let rejected as BatchRejected {
            metrics?.batch("rejected")
            // A rolled-back batch's result lists every edit.
            let failures = rejected.result.rejected
            let editCount = rejected.result.layers.reduce(rejected.result.attachments?.count ?? 0) { $0 + $1.results.count }
            let error = ServiceError(
                422, "batch \(seq) was rolled back: \(failures.count) of \(editCount) edits are invalid",
                details: failures.prefix(20).map { "\($0.op.rawValue) \($0.globalId): \($0.error?.description ?? "failed")" })
            var body = FeatureServerResponder.errorJSON(error).objectValue ?? [:]
            body["result"] = try ServiceRoutes.json(rejected.result)
            return writing.json(.object(body), status: .init(code: 422, reasonPhrase: "Unprocessable Content"))
        }
        if answer.result.replayed == true {
            metrics?.batch("replayed")
        } else {
            metrics?.batch("applied")
            if let stages = answer.stages { metrics?.batchStages(stages) }
            metrics?.editsApplied(answer.result.appliedEditCount, via: "batch")
        }
        startChecksums(replica: replica, layers: checksumLayers)
        let response = writing.bytes(ByteBuffer(string: answer.json), contentType: "application/json; charset=utf-8")
        BackgroundRelease.release(consume answer)
        return response
    }

    static func describe(_ error: any Error) -> String {
        switch error {
        case DecodingError.keyNotFound(let key, _): return "missing \"\(key.stringValue)\""
        case DecodingError.typeMismatch(_, let c), DecodingError.valueNotFound(_, let c):
            return "wrong type at \(c.codingPath.map(\.stringValue).joined(separator: "."))"
        case DecodingError.dataCorrupted(let c): return c.debugDescription
        default: return "\(error)"
        }
    }
}

