import Foundation
import OutpostCore
import OutpostProtocol
import OutpostStorage

/// Syncs a replica geodatabase with its service (docs/sync.md), in three steps:
///
/// 1. `upload`: seal pending edits into the next numbered batch (stored before it is sent),
///    PUT it until the server answers, and record the answer in the same transaction that
///    deletes the change rows it carried. A resent batch is applied once: the server replays
///    its stored answer. Repeats while edits are pending (large backlogs go in several batches).
/// 2. `download`: read the server's changes since the replica's generation up to the service's
///    latest, page by page into a staging table, then apply them all and advance the generation
///    in one transaction.
/// 3. `verify`: compare each layer's checksum with the server's; a layer that differs is
///    fetched again (and reported).
///
/// Every step is restartable: the durable state lives in the geodatabase (the sealed batch, the
/// staging table) and in the checkpoints, so a job resumed from JSON after a kill, or simply a
/// new sync, reaches the same end as an uninterrupted one. One sync per geodatabase runs at a
/// time; edits made meanwhile go into the next batch.
public struct SyncGeodatabaseJob: JobDefinition {
    public static let jobType = "outpost.syncGeodatabase"
    public typealias Output = [SyncLayerResult]

    public let geodatabase: Geodatabase
    public var syncParameters: SyncGeodatabaseParameters
    /// The FeatureServer to sync with; nil for the one the replica was made from (a service
    /// that moved, or a proxy in front of it, is given here).
    public var serviceURL: URL?
    let environment: SyncJobEnvironment

    public init(
        parameters: SyncGeodatabaseParameters, geodatabase: Geodatabase, serviceURL: URL? = nil, environment: SyncJobEnvironment = SyncJobEnvironment()
    ) {
        self.syncParameters = parameters
        self.geodatabase = geodatabase
        self.serviceURL = serviceURL
        self.environment = environment
    }

    public var parameters: JSONValue {
        var p: [String: JSONValue] = [
            "geodatabase": .string(geodatabase.url.path), "sync": (try? JSONValueEncoder().encode(syncParameters)) ?? .null,
        ]
        if let serviceURL { p["serviceUrl"] = .string(serviceURL.absoluteString) }
        return .object(p)
    }

    public init(parameters: JSONValue, environment: JobEnvironment) throws {
        guard let path = parameters["geodatabase"]?.stringValue, let sync = parameters["sync"], !sync.isNull else {
            throw JobError(.invalidJSON, "a sync job needs geodatabase and sync")
        }
        let url = URL(fileURLWithPath: path)
        let open = environment[Geodatabase.self].flatMap { $0.url.standardizedFileURL == url.standardizedFileURL ? $0 : nil }
        self.init(
            parameters: try JSONValueDecoder().decode(SyncGeodatabaseParameters.self, from: sync),
            geodatabase: try open ?? Geodatabase.open(at: url), serviceURL: parameters["serviceUrl"]?.stringValue.flatMap(URL.init(string:)),
            environment: environment[SyncJobEnvironment.self] ?? SyncJobEnvironment())
    }

    public var stepNames: [String] { ["upload", "download", "verify"] }

    var faults: FaultInjector { environment.faults }

    public func run(step: Int, context: JobContext) async throws {
        let lock = try SyncLock.acquire(for: geodatabase.url)
        context.onCleanup { lock.release() }
        let state = try await replicaState()
        let connection = try ServiceConnection(featureServerURL: try serviceURL(state), token: environment.token)
        switch step {
        case 0: try await upload(state, connection, context)
        case 1: try await download(state, connection, context)
        default: try await verify(state, connection, context)
        }
    }

    public func output(context: JobContext) async throws -> [SyncLayerResult] {
        Self.results(context).values.sorted { $0.layerId < $1.layerId }
    }

    // MARK: - State

    func replicaState() async throws -> ReplicaState {
        guard let state = try await geodatabase.read({ try $0.replicaState() }) else {
            throw SyncError(.notAReplica, "\(geodatabase.url.lastPathComponent) is not a replica of a feature service")
        }
        guard !state.unregistered else {
            throw SyncError(.notRegistered, "replica \(state.replicaID) was unregistered; it can no longer sync (its local edits stay in the file)")
        }
        return state
    }

    func serviceURL(_ state: ReplicaState) throws -> URL {
        if let serviceURL { return serviceURL }
        guard let url = URL(string: state.serviceURL) else { throw SyncError(.notAReplica, "the replica's service URL \(state.serviceURL) is not valid") }
        return url
    }

    static func results(_ context: JobContext) -> [Int: SyncLayerResult] {
        guard let json = context.recorded("layers"), let list = try? JSONValueDecoder().decode([SyncLayerResult].self, from: json) else {
            return [:]
        }
        return Dictionary(uniqueKeysWithValues: list.map { ($0.layerId, $0) })
    }

    static func save(_ results: [Int: SyncLayerResult], _ context: JobContext) {
        let list = results.values.sorted { $0.layerId < $1.layerId }
        context.record("layers", (try? JSONValueEncoder().encode(list)) ?? .null)
    }

    static func update(_ context: JobContext, layer: ReplicaState.Layer, _ change: (inout SyncLayerResult) -> Void) {
        var results = results(context)
        var r = results[layer.id] ?? SyncLayerResult(layerId: layer.id, tableName: layer.table)
        change(&r)
        results[layer.id] = r
        save(results, context)
    }

    // MARK: - Upload

    private enum Outcome {
        case applied(BatchResult, String)
        case rejected(BatchResult)
    }

    private func upload(_ state: ReplicaState, _ connection: ServiceConnection, _ context: JobContext) async throws {
        let layers = state.layers.filter { syncParameters.uploads($0, model: state.syncModel) }
        var tables = layers.map(\.table)
        guard !tables.isEmpty else { return }
        if state.attachmentsDirection == .upload || state.attachmentsDirection == .bidirectional {
            try await geodatabase.write { conn in try conn.installAttachmentCapture() }
            tables.append(GeodatabaseConnection.attachmentsTable)
        }
        let uploadTables = tables
        let maxChanges = syncParameters.maxChangesPerBatch, rollback = syncParameters.shouldRollbackOnFailure, policy = syncParameters.conflictPolicy
        var sent = 0
        // The next batch, made while the server applies the current one (see below).
        var prepared: PreparedBatch?
        while true {
            try await context.checkpoint(["batchesSent": .integer(Int64(sent))])
            let ahead = prepared
            prepared = nil
            let sealed = try await geodatabase.write { conn -> (StoredBatch, UploadBatch?, Bool)? in
                if let pending = try conn.sealedBatch() { return (pending, nil, false) }
                guard let current = try conn.replicaState() else { return nil }
                if let ahead, let (stored, batch) = try BatchSealer.sealPrepared(ahead, conn, state: current, tables: uploadTables, maxChanges: maxChanges) {
                    return (stored, batch, true)
                }
                return try BatchSealer.seal(conn, state: current, tables: uploadTables, maxChanges: maxChanges, rollbackOnFailure: rollback, conflictPolicy: policy)
                    .map { ($0.0, $0.1, false) }
            }
            guard let (stored, fresh, madeAhead) = sealed else { break }
            if madeAhead { context.log("batch \(stored.seq) was made while batch \(stored.seq - 1) was applied") }
            try faults.check("client.afterSeal")
            // A batch sealed by an earlier run is read back from its stored bytes.
            let batch = try fresh ?? UploadBatch.decode(stored.body)
            // Attachment content first, by hash: what the server has is not sent again, and an
            // upload that dropped continues where the server's copy ends.
            try await uploadContent(of: batch, connection, context)
            context.log("sending batch \(stored.seq) (\(batch.editCount) edits, \(stored.body.count >> 10) KB)")
            // While the server applies this batch, the next one is made from a snapshot of the
            // replica (nothing is stored: at most one batch is ever sealed and unacknowledged).
            // After the acknowledgement it is sealed as it is if it still carries exactly the
            // change rows a fresh seal would take; otherwise it is dropped and sealed afresh.
            let gdb = geodatabase, covered = stored.coversChangeID, nextSeq = stored.seq + 1
            async let next = gdb.readCommitted { conn in
                try BatchSealer.prepare(
                    conn, seq: nextSeq, after: covered, tables: uploadTables, maxChanges: maxChanges, rollbackOnFailure: rollback, conflictPolicy: policy)
            }
            let outcome = try await send(stored, replicaID: state.replicaID, connection, context)
            context.log("batch \(stored.seq) answered")
            // A failed preparation costs nothing but the fresh seal.
            prepared = (try? await next) ?? nil
            try faults.check("client.afterSend")
            switch outcome {
            case .applied(let result, let text):
                let rejected = Self.rejections(result, batch, state: state, pending: false)
                let conflicts = Self.conflicts(result, state: state)
                try await geodatabase.write { conn in try conn.acknowledgeBatch(seq: stored.seq, result: text, rejected: rejected, conflicts: conflicts) }
                try faults.check("client.afterAck")
                record(result, of: batch, state: state, context)
                if result.replayed == true { context.log("batch \(stored.seq) had already been applied; the server replayed its answer") }
                if !rejected.isEmpty { context.log("\(rejected.count) edits of batch \(stored.seq) were rejected", severity: .warning) }
            case .rejected(let result):
                let rejected = Self.rejections(result, batch, state: state, pending: true)
                try await geodatabase.write { conn in try conn.withdrawSealedBatch(seq: stored.seq, rejected: rejected) }
                record(result, of: batch, state: state, context)
                let first = rejected.first.map { " (first: \($0.layer) \($0.globalID): \($0.reason))" } ?? ""
                throw SyncError(
                    .rejected,
                    "the server rolled back the upload: \(rejected.count) of \(batch.editCount) edits are invalid\(first); nothing was applied and the edits are still pending")
            }
            sent += 1
            context.reportProgress("batches uploaded", done: Int64(sent), total: nil)
        }
    }

    /// Uploads the content of the batch's new attachments the server does not have yet, in
    /// chunks read from the replica (never a whole attachment in memory).
    private func uploadContent(of batch: UploadBatch, _ connection: ServiceConnection, _ context: JobContext) async throws {
        var seen = Set<String>()
        for edit in batch.attachments ?? [] where edit.op == .insert {
            guard let info = edit.attachment, seen.insert(info.sha256).inserted else { continue }
            let url = connection.url(connection.nativeURL, "blobs/\(info.sha256)")
            var status = try decode(BlobStatus.self, try await withRetries(context, url) { try await connection.send(.GET, url) }.body)
            if status.complete { continue }
            context.log("uploading attachment \(info.name) (\(info.size >> 10) KB) from byte \(status.received)")
            let chunk = syncParameters.attachmentChunkSize
            while !status.complete {
                let offset = status.received
                let gid = edit.globalId
                let read = try await geodatabase.read { conn -> Data? in
                    guard let record = try conn.attachmentRecords(globalIDs: [gid]).values.first else { return nil }
                    return try conn.attachmentBytes(id: record.id, offset: offset, length: chunk)
                }
                guard let bytes = read else {
                    // Deleted here after the batch was sealed: the server refuses the insert (no
                    // content), and the next batch carries the delete.
                    context.log("attachment \(info.name) was deleted before its content went up", severity: .warning)
                    break
                }
                let put = connection.url(url, "", query: [("offset", String(offset)), ("size", String(info.size))])
                let reply = try await withRetries(context, put) { try await connection.send(.PUT, put, body: bytes, contentType: "application/octet-stream") }
                switch reply.status {
                case 200: status = try decode(BlobStatus.self, reply.body)
                case 409:
                    // Someone else's upload of the same content moved on: continue from there.
                    status = try decode(BlobStatus.self, try await connection.send(.GET, url).body)
                default: throw ServiceConnection.failure(reply, url: put)
                }
                try faults.check("client.afterContentChunk")
                context.reportProgress("attachment bytes", done: status.received, total: info.size)
            }
        }
    }

    /// `body` again after a network error or a 5xx answer, up to `attempts` times.
    private func withRetries(_ context: JobContext, _ url: URL, _ body: () async throws -> ServiceConnection.Reply) async throws -> ServiceConnection.Reply {
        var attempt = 0
        while true {
            do {
                let reply = try await body()
                if reply.status >= 500 { throw ServiceConnection.failure(reply, url: url) }
                return reply
            } catch let error as SyncError where error.code == .unreachable || (error.code == .server && (error.status ?? 0) >= 500) {
                attempt += 1
                guard attempt < syncParameters.attempts else { throw error }
                context.log("\(error); trying again", severity: .warning)
                try await Task.sleep(for: .milliseconds(200 << min(attempt, 5)))
            }
        }
    }

    /// PUTs a sealed batch until the server answers (up to `attempts` times for network errors and
    /// 5xx answers; the same bytes each time).
    private func send(_ stored: StoredBatch, replicaID: String, _ connection: ServiceConnection, _ context: JobContext) async throws -> Outcome {
        let url = connection.url(connection.nativeURL, "replicas/\(replicaID)/batches/\(stored.seq)")
        var attempt = 0
        while true {
            do {
                let reply = try await connection.send(.PUT, url, body: stored.body)
                switch reply.status {
                case 200:
                    let result = try decodeResult { try JSONValue.parse(reply.body) }
                    guard result.seq == stored.seq, result.batchId == stored.batchID else {
                        throw SyncError(.ledgerConflict, "the server answered batch \(stored.seq) with the result of batch \(result.seq) (\(result.batchId))")
                    }
                    return .applied(result, String(decoding: reply.body, as: UTF8.self))
                case 422:
                    guard let json = try? reply.json(), let result = json["result"] else {
                        throw SyncError(.invalidResponse, "HTTP 422 without the batch result")
                    }
                    return .rejected(try decodeResult { result })
                default:
                    throw ServiceConnection.failure(reply, url: url)
                }
            } catch let error as SyncError where error.code == .unreachable || (error.code == .server && (error.status ?? 0) >= 500) {
                attempt += 1
                guard attempt < syncParameters.attempts else { throw error }
                context.log("batch \(stored.seq) not acknowledged (\(error)); sending it again", severity: .warning)
                try await Task.sleep(for: .milliseconds(200 << min(attempt, 5)))
            }
        }
    }

    /// One page of a layer's change feed.
    private func changePage(
        _ state: ReplicaState, layer: Int, since: Int64, upto: Int64, after: String?, _ connection: ServiceConnection
    ) async throws -> ChangePage {
        var query = [("layer", String(layer)), ("since", String(since)), ("upto", String(upto)), ("limit", "1000")]
        if let after { query.append(("after", after)) }
        let reply = try await connection.send(.GET, connection.url(connection.nativeURL, "replicas/\(state.replicaID)/changes", query: query))
        guard reply.status == 200 else { throw ServiceConnection.failure(reply, url: connection.nativeURL) }
        return try decodePage(reply.body)
    }

    /// A batch's result, read without the generic decoder.
    private func decodeResult(_ json: () throws -> JSONValue) throws -> BatchResult {
        do {
            return try BatchResult(json: json())
        } catch {
            throw SyncError(.invalidResponse, "the server's answer is not a batch result: \(error)")
        }
    }

    /// A change-feed page, read without the generic decoder (see ``FeedChange/init(json:)``).
    private func decodePage(_ data: Data) throws -> ChangePage {
        do {
            return try ChangePage(json: JSONValue.parse(data))
        } catch {
            throw SyncError(.invalidResponse, "the server's change page is not readable: \(error)")
        }
    }

    private func decode<T: Decodable>(_ type: T.Type, _ data: Data) throws -> T {
        do {
            return try JSONValueDecoder().decode(type, from: data)
        } catch {
            throw SyncError(.invalidResponse, "the server's answer is not a \(type): \(error)")
        }
    }

    static func rejections(_ result: BatchResult, _ batch: UploadBatch, state: ReplicaState, pending: Bool) -> [RejectedEdit] {
        var out: [RejectedEdit] = []
        for layer in result.layers {
            let table = state.layers.first { $0.id == layer.id }?.table ?? String(layer.id)
            let edits = batch.layers.first { $0.id == layer.id }?.edits ?? []
            for r in layer.results where !r.success {
                let edit = edits.first { $0.globalId == r.globalId }
                let text = edit.flatMap { try? JSONValueEncoder().encode($0).jsonString }
                out.append(RejectedEdit(
                    layer: table, globalID: r.globalId, operation: r.op.rawValue, reason: r.error?.description ?? "rejected", seq: batch.seq,
                    pending: pending, edit: text))
            }
        }
        for r in result.attachments ?? [] where !r.success {
            let edit = batch.attachments?.first { $0.globalId == r.globalId }
            out.append(RejectedEdit(
                layer: GeodatabaseConnection.attachmentsTable, globalID: r.globalId, operation: r.op.rawValue, reason: r.error?.description ?? "rejected",
                seq: batch.seq, pending: pending, edit: edit.flatMap { try? JSONValueEncoder().encode($0).jsonString }))
        }
        return out
    }

    static func conflicts(_ result: BatchResult, state: ReplicaState) -> [SyncConflict] {
        let ofAttachments = (result.attachments ?? []).flatMap { r in
            (r.conflicts ?? []).compactMap { c -> SyncConflict? in
                guard let text = try? JSONValueEncoder().encode(c).jsonString else { return nil }
                let table = state.layers.first { $0.id == c.layerId }?.table ?? String(c.layerId)
                return SyncConflict(serverID: c.id, table: table, globalID: c.globalId, kind: c.kind.rawValue, record: text, state: c.state)
            }
        }
        return ofAttachments + result.layers.flatMap { layer in
            layer.results.flatMap { r in
                (r.conflicts ?? []).compactMap { c -> SyncConflict? in
                    guard let text = try? JSONValueEncoder().encode(c).jsonString else { return nil }
                    let table = state.layers.first { $0.id == layer.id }?.table ?? String(layer.id)
                    return SyncConflict(serverID: c.id, table: table, globalID: c.globalId, kind: c.kind.rawValue, record: text, state: c.state)
                }
            }
        }
    }

    private func record(_ result: BatchResult, of batch: UploadBatch, state: ReplicaState, _ context: JobContext) {
        for (edit, outcome) in zip(batch.attachments ?? [], result.attachments ?? []) where outcome.success && outcome.resolution == nil {
            guard let layer = state.layers.first(where: { $0.id == edit.layerId }) else { continue }
            Self.update(context, layer: layer) { $0.attachmentsUploaded += 1 }
        }
        for layerResult in result.layers {
            guard let layer = state.layers.first(where: { $0.id == layerResult.id }) else { continue }
            Self.update(context, layer: layer) { r in
                for edit in layerResult.results {
                    r.conflicts += edit.conflicts?.count ?? 0
                    if edit.resolution == "merged" { r.merged += 1 }
                    guard edit.success else {
                        r.editResults.append(.init(globalId: edit.globalId, operation: edit.op.rawValue, message: edit.error?.description ?? "rejected"))
                        continue
                    }
                    switch edit.op {
                    case .insert: r.uploaded.inserts += 1
                    case .update: r.uploaded.updates += 1
                    case .delete: r.uploaded.deletes += 1
                    }
                }
            }
        }
    }

    // MARK: - Download

    private func download(_ state: ReplicaState, _ connection: ServiceConnection, _ context: JobContext) async throws {
        let layers = state.layers.filter { syncParameters.downloads($0, model: state.syncModel) }
        guard !layers.isEmpty else { return }
        let checkpoint = context.checkpointData
        let upto: Int64
        let info = try await connection.json(.GET, connection.url(connection.nativeURL, "replicas/\(state.replicaID)"))
        // A service whose schema moved on: the replica migrates in the transaction that applies
        // this download.
        var newSchema: ServiceSchema?
        if let version = info["serviceSchemaVersion"]?.integerValue, version > state.schemaVersion {
            let answer = try await connection.json(.GET, connection.url(connection.nativeURL, "schema"))
            guard let schema = answer["schema"] else { throw SyncError(.invalidResponse, "the service sent no schema") }
            do {
                newSchema = try ServiceSchema.decode(Data(schema.jsonString.utf8))
            } catch {
                throw SyncError(.invalidResponse, "the service's schema version \(version) is not readable here: \(error)")
            }
            context.log("the service schema moved from version \(state.schemaVersion) to \(version); migrating with this download")
        }
        if let saved = checkpoint?["upto"]?.integerValue {
            upto = saved
        } else {
            guard let generation = info["serviceGeneration"]?.integerValue else { throw SyncError(.invalidResponse, "the replica info has no serviceGeneration") }
            upto = generation
            // Rows left staged by a sync that did not finish are fetched again.
            try await geodatabase.write { conn in try conn.clearStaging() }
        }
        var index = Int(checkpoint?["layer"]?.integerValue ?? 0)
        var after = checkpoint?["after"]?.stringValue
        var staged = checkpoint?["staged"]?.integerValue ?? 0
        func save() async throws {
            try await context.checkpoint(["upto": .integer(upto), "layer": .integer(Int64(index)), "after": after.map(JSONValue.string) ?? .null, "staged": .integer(staged)])
        }
        try await save()
        while index < layers.count {
            let layer = layers[index]
            let since = state.cursor(forLayer: layer.id)
            if since < upto {
                // The next page is requested before this one is staged, so the server reads it
                // while the replica writes (only the cursor of a staged page is checkpointed).
                var page = try await changePage(state, layer: layer.id, since: since, upto: upto, after: after, connection)
                while true {
                    let next = page.next
                    async let following: ChangePage? = next == nil ? nil : changePage(state, layer: layer.id, since: since, upto: upto, after: next, connection)
                    try await stage(page.changes, layerID: layer.id)
                    try faults.check("client.afterStage")
                    staged += Int64(page.changes.count)
                    if page.next == nil { context.log("staged \(staged) changes of \(layer.table)") }
                    context.reportProgress("changes downloaded", done: staged, total: nil)
                    after = page.next
                    try await save()
                    guard let nextPage = try await following else { break }
                    page = nextPage
                }
            }
            index += 1
            after = nil
            try await save()
        }
        let contentDirectory = state.attachmentsDirection == .bidirectional ? URL(fileURLWithPath: geodatabase.url.path + ".attachments") : nil
        if let contentDirectory { try await downloadContent(layers, into: contentDirectory, connection, context) }
        let downloadedIDs = Set(layers.map(\.id))
        let faults = self.faults
        let migration = newSchema
        let gdb = geodatabase
        let counts = try await withSchemaRestoredOnFailure(gdb, migrating: migration != nil) { try await gdb.write { conn -> [Int: PendingChanges] in
            try conn.withChangeCaptureSilenced {
                var counts: [Int: PendingChanges] = [:]
                if let migration {
                    // Pending values of dropped fields are kept as records first.
                    try conn.migrateSchema(to: migration, allowDrop: true, addLayers: false) { layer, column in
                        try conn.archivePendingValues(of: layer, column: column)
                    }
                }
                for layer in layers {
                    counts[layer.id] = try Self.applyStaged(layerID: layer.id, table: layer.table, conn, contentDirectory: contentDirectory)
                }
                guard var current = try conn.replicaState() else { throw SyncError(.notAReplica, "the replica state disappeared") }
                if current.syncModel == .perReplica { current.cursor = max(current.cursor, upto) }
                for i in current.layers.indices where downloadedIDs.contains(current.layers[i].id) {
                    current.layers[i].cursor = max(current.layers[i].cursor, upto)
                }
                current.lastSyncAt = Date()
                if let migration { current.schemaVersion = max(current.schemaVersion, migration.schemaVersion) }
                try conn.setReplicaState(current)
                try conn.clearStaging()
                try faults.check("client.beforeApplyCommit")
                return counts
            }
        } }
        try faults.check("client.afterApply")
        if let contentDirectory { try? FileManager.default.removeItem(at: contentDirectory) }
        for layer in layers {
            Self.update(context, layer: layer) { $0.downloaded = counts[layer.id] ?? PendingChanges() }
        }
        let total = counts.values.reduce(0) { $0 + $1.total }
        context.log("applied \(total) server changes up to generation \(upto)")
    }

    /// Runs `body`; if it fails after a migration began, the geodatabase reads its stored (old)
    /// schema again, as the transaction rolled the migration back.
    private func withSchemaRestoredOnFailure<T>(_ gdb: Geodatabase, migrating: Bool, _ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch {
            if migrating { try? gdb.reloadSchema() }
            throw error
        }
    }

    /// Fetches the content of staged attachments the replica does not have into `directory`
    /// (`<sha256>`, verified), resuming a partial file with a Range request. Staged rows are read
    /// a thousand at a time and content streams to disk: nothing large is held in memory.
    private func downloadContent(_ layers: [ReplicaState.Layer], into directory: URL, _ connection: ServiceConnection, _ context: JobContext) async throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        for layer in layers {
            var after = ""
            while true {
                let layerID = layer.id, from = after
                let rows = try await geodatabase.read { conn in try conn.stagedRows(layerID: layerID, after: from, limit: 1000) }
                guard let last = rows.last else { break }
                after = last.globalID
                let wanted = try rows.compactMap { $0.row }.flatMap { try FeedChange(json: JSONValue.parse($0)).attachments ?? [] }
                guard !wanted.isEmpty else { continue }
                let ids = wanted.map(\.globalId)
                let local = try await geodatabase.read { conn in Set(try conn.attachmentRecords(globalIDs: ids).keys) }
                for info in wanted where !local.contains(info.globalId) {
                    try await fetch(info, into: directory, connection, context)
                    Self.update(context, layer: layer) { $0.attachmentsDownloaded += 1 }
                }
            }
        }
    }

    /// One attachment's content into `directory/<sha256>`, a chunk per request, verified.
    private func fetch(_ info: AttachmentInfo, into directory: URL, _ connection: ServiceConnection, _ context: JobContext) async throws {
        let target = directory.appendingPathComponent(info.sha256), partial = directory.appendingPathComponent(info.sha256 + ".partial")
        if FileManager.default.fileExists(atPath: target.path) { return }
        if !FileManager.default.fileExists(atPath: partial.path) { _ = FileManager.default.createFile(atPath: partial.path, contents: nil) }
        guard let handle = FileHandle(forUpdatingAtPath: partial.path) else { throw SyncError(.unsupported, "cannot write \(partial.path)") }
        defer { try? handle.close() }
        var offset = Int64(try handle.seekToEnd())
        if offset > info.size {
            try handle.truncate(atOffset: 0)
            offset = 0
        }
        let url = connection.url(connection.nativeURL, "attachments/\(info.globalId)")
        if offset > 0 { context.log("resuming the download of attachment \(info.name) at byte \(offset)") }
        while offset < info.size {
            let end = min(info.size, offset + Int64(syncParameters.attachmentChunkSize)) - 1
            let reply = try await withRetries(context, url) { try await connection.send(.GET, url, range: "bytes=\(offset)-\(end)") }
            guard reply.status == 206 || (reply.status == 200 && offset == 0) else { throw ServiceConnection.failure(reply, url: url) }
            guard !reply.body.isEmpty else { throw SyncError(.invalidResponse, "the server sent no bytes of attachment \(info.globalId) from \(offset)") }
            try handle.write(contentsOf: reply.body)
            offset += Int64(reply.body.count)
            try faults.check("client.afterContentChunk")
        }
        try handle.synchronize()
        guard try Self.sha256(of: partial) == info.sha256 else {
            try? FileManager.default.removeItem(at: partial)
            throw SyncError(.invalidResponse, "attachment \(info.globalId) arrived with a different SHA-256 than announced; it is fetched again next time")
        }
        try FileManager.default.moveItem(at: partial, to: target)
    }

    static func sha256(of file: URL) throws -> String {
        guard let handle = FileHandle(forReadingAtPath: file.path) else { throw SyncError(.unsupported, "cannot read \(file.path)") }
        defer { try? handle.close() }
        var hash = SHA256()
        while let chunk = try handle.read(upToCount: 1 << 20), !chunk.isEmpty { chunk.withUnsafeBytes { hash.update($0) } }
        return SHA256.hexString(hash.finalize())
    }

    private func stage(_ changes: [FeedChange], layerID: Int) async throws {
        guard !changes.isEmpty else { return }
        let rows = changes.map { ($0, $0.json.jsonString) }
        try await geodatabase.write { conn in
            for (change, row) in rows {
                try conn.stage(layerID: layerID, globalID: change.globalId, kind: change.kind.rawValue, generation: change.generation, row: row)
            }
        }
    }

    // MARK: - Verify

    private func verify(_ state: ReplicaState, _ connection: ServiceConnection, _ context: JobContext) async throws {
        let layers = state.layers.filter { syncParameters.downloads($0, model: state.syncModel) }
        guard !layers.isEmpty else { return }
        let ids = layers.map { String($0.id) }.joined(separator: ",")
        context.log("verifying")
        // The replica's checksums are computed while the server computes its own.
        async let computed = localChecksums(layers)
        let reply = try await connection.send(.GET, connection.url(connection.nativeURL, "replicas/\(state.replicaID)/checksums", query: [("layers", ids)]))
        context.log("server checksums received")
        guard reply.status == 200 else { throw ServiceConnection.failure(reply, url: connection.nativeURL) }
        let server = try decode(ReplicaChecksums.self, reply.body)
        let locals = try await computed
        for (layer, localSum) in zip(layers, locals) {
            guard let expected = server.layers.first(where: { $0.id == layer.id }) else { continue }
            guard let local = localSum else {
                context.log("\(layer.table) was edited during the sync; its checksum is checked next time")
                continue
            }
            if local.hex == expected.checksum && local.count == expected.count {
                Self.update(context, layer: layer) { $0.checksumMatches = true }
                continue
            }
            context.log(
                "\(layer.table) differs from the server (\(local.count) features here, \(expected.count) there); fetching the layer again",
                severity: .warning)
            let counts = try await refetch(layer, state: state, connection)
            let again = try await localChecksum(layer)
            let matches = again.map { $0.count == expected.count && $0.hex == expected.checksum } ?? false
            Self.update(context, layer: layer) {
                $0.refetched = true
                $0.checksumMatches = matches
                $0.downloaded.inserts += counts.inserts
                $0.downloaded.updates += counts.updates
                $0.downloaded.deletes += counts.deletes
            }
        }
    }

    private func localChecksums(_ layers: [ReplicaState.Layer]) async throws -> [FeatureDigest.Accumulator?] {
        var sums: [FeatureDigest.Accumulator?] = []
        for layer in layers { sums.append(try await localChecksum(layer)) }
        return sums
    }

    /// The layer's checksum, nil when it has pending edits (it cannot match until they upload).
    private func localChecksum(_ layer: ReplicaState.Layer) async throws -> FeatureDigest.Accumulator? {
        try await geodatabase.read { conn in
            let table = try conn.geodatabase.table(named: layer.table)
            guard try table.pendingChanges(in: conn).total == 0 else { return nil }
            return try table.checksum(matching: .all, in: conn)
        }
    }

    /// Fetches every feature of the layer in the replica's scope again and makes the local table
    /// equal to it (local edits still win).
    private func refetch(_ layer: ReplicaState.Layer, state: ReplicaState, _ connection: ServiceConnection) async throws -> PendingChanges {
        try await geodatabase.write { conn in try conn.clearStaging(layerID: layer.id) }
        var after: String?
        repeat {
            var query = [("layer", String(layer.id)), ("limit", "1000")]
            if let after { query.append(("after", after)) }
            let reply = try await connection.send(.GET, connection.url(connection.nativeURL, "replicas/\(state.replicaID)/snapshot", query: query))
            guard reply.status == 200 else { throw ServiceConnection.failure(reply, url: connection.nativeURL) }
            let page = try decodePage(reply.body)
            try await stage(page.changes, layerID: layer.id)
            after = page.next
        } while after != nil
        return try await geodatabase.write { conn in
            try conn.withChangeCaptureSilenced {
                let counts = try Self.applyStaged(layerID: layer.id, table: layer.table, conn, deleteAbsent: true)
                try conn.clearStaging(layerID: layer.id)
                return counts
            }
        }
    }
}
