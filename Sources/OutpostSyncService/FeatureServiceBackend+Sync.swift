import Foundation
import OutpostCore
import OutpostProtocol
import OutpostStorage

/// What a client asks for when it creates a replica (ArcGIS createReplica parameters).
public struct ReplicaRequest: Sendable {
    /// The replica's name.
    public var name: String
    /// Layer ids with their where clause, geometry use, query option and direction.
    public var layers: [ReplicaInfo.Layer]
    /// The filter geometry, in the service's spatial reference.
    public var geometry: Geometry?
    /// Whether the replica syncs as a whole or layer by layer (`none`: a snapshot, not registered).
    public var syncModel: ReplicaInfo.SyncModel
    /// Whether the replica holds attachments.
    public var returnAttachments: Bool
    /// Which way attachments sync.
    public var attachmentsSyncDirection: ReplicaInfo.Direction
    /// JSON replicas: attachments by URL (the default, as ArcGIS) or embedded as base64 `data`.
    public var returnAttachmentsDataByUrl = true
    /// The replica's id, when the caller chose it; nil: a new one. A server job that may be run
    /// again on another host (its own stopped) chooses it once and records it with the job, so
    /// every run registers the same replica: a registration an earlier run made is kept (its
    /// generation lowered to this run's snapshot, if that is lower), not left with no holder.
    public var replicaID: String?

    /// A request of these values.
    public init(
        name: String, layers: [ReplicaInfo.Layer], geometry: Geometry? = nil, syncModel: ReplicaInfo.SyncModel = .perReplica,
        returnAttachments: Bool = false, attachmentsSyncDirection: ReplicaInfo.Direction = .none
    ) {
        self.name = name
        self.layers = layers
        self.geometry = geometry
        self.syncModel = syncModel
        self.returnAttachments = returnAttachments
        self.attachmentsSyncDirection = attachmentsSyncDirection
    }
}

extension ReplicaRequest {
    /// Refuses a request for layers the service lacks, or for syncing layers without global ids.
    public func validate(against schema: ServiceSchema) throws {
        guard !layers.isEmpty else { throw SyncServiceError.invalidParameter("layers", "no layers asked for") }
        if let replicaID, GlobalID.normalized(replicaID) != replicaID {
            throw SyncServiceError.invalidParameter("replicaID", "\(replicaID.prefix(40)) is not a global id in {UPPER-CASE} form")
        }
        for layer in layers where schema.layer(id: layer.id) == nil {
            throw SyncServiceError.invalidParameter("layers", "the service has no layer \(layer.id)")
        }
        if syncModel != .none {
            for layer in layers where schema.layer(id: layer.id)?.globalIDField == nil {
                throw SyncServiceError.invalidParameter("layers", "layer \(layer.id) has no global ids, so it cannot sync")
            }
        }
    }

    /// The replica this request registers, starting at `generation`.
    public func info(replicaID: String, generation: Int64, schema: ServiceSchema, created: Int64) throws -> ReplicaInfo {
        ReplicaInfo(
            replicaID: replicaID, replicaName: name, syncModel: syncModel, replicaServerGen: generation,
            layers: layers.map { var l = $0; l.serverGen = generation; return l },
            geometry: try geometry.map { try EsriJSON.value($0) },
            returnAttachments: returnAttachments, attachmentsSyncDirection: attachmentsSyncDirection, lastSeq: 0,
            serviceGeneration: generation, schemaVersion: schema.schemaVersion, creationDate: created, lastSyncDate: nil)
    }
}

/// The file a replica's data is written to.
public enum ReplicaFileFormat: String, Sendable {
    /// A replica GeoPackage with change capture and the replica state (ArcGIS `dataFormat=sqlite`):
    /// what Outpost's client syncs.
    case geopackage
    /// The ArcGIS JSON replica: `{"replicaID", "replicaServerGen", "layers": [{"id", "features"}]}`.
    case json
}

/// A registered replica's copies (a preplanned area's package, taken by many crews).
extension ReplicaInfo {
    /// The registration of a copy of this replica's file: a new id and name, every layer at
    /// `generation`, no batches yet.
    /// - Throws: ``SyncServiceError`` (`invalidRequest`) for a copy of a replica that cannot sync, or a generation the service has
    ///   not reached (or one before the replica began).
    public func copy(id: String, name: String, generation: Int64, created: Int64) throws -> ReplicaInfo {
        guard syncModel != .none else { throw SyncServiceError(.invalidRequest, "replica \(replicaID) does not sync; there is nothing to register") }
        let began = layers.map(\.serverGen).min() ?? replicaServerGen
        guard generation >= min(began, replicaServerGen), generation <= serviceGeneration else {
            throw SyncServiceError(.invalidRequest, "generation \(generation) is outside replica \(replicaID)'s history (\(min(began, replicaServerGen))…\(serviceGeneration))")
        }
        var copy = self
        copy.replicaID = id
        copy.replicaName = name
        copy.replicaServerGen = generation
        copy.layers = layers.map { var l = $0; l.serverGen = generation; return l }
        copy.lastSeq = 0
        copy.lastSyncDate = nil
        copy.creationDate = created
        return copy
    }
}

/// The sync side of a service's storage: replicas, the batch ledger, the change feed.
public protocol SyncBackend: Sendable {
    /// The service schema now (replicas behind its version migrate to it).
    func schema() async throws -> ServiceSchema
    /// How much of some attachment content (by SHA-256) the server has.
    func blobStatus(sha256: String) async throws -> BlobStatus
    /// Appends a chunk of attachment content at `offset` (see `BlobStore`).
    func appendBlob(sha256: String, offset: Int64, total: Int64, bytes: Data) async throws -> BlobStatus
    /// An attachment's metadata and hash, by its global id.
    func attachmentInfo(globalID: String) async throws -> AttachmentInfo
    /// Up to `length` bytes of an attachment from `offset`.
    func attachmentBytes(globalID: String, offset: Int64, length: Int) async throws -> Data
    /// Registers a replica (unless its sync model is `none`) and writes its data, a snapshot
    /// consistent with the generation it starts from, to `url`.
    func createReplica(_ request: ReplicaRequest, serviceURL: String, format: ReplicaFileFormat, writingTo url: URL) async throws -> ReplicaInfo
    /// The registered replica `id`.
    /// - Throws: `SyncServiceError` (`notFound`) for an unknown replica.
    func replica(id: String) async throws -> ReplicaInfo
    /// Every registered replica.
    func replicas() async throws -> [ReplicaInfo]
    /// Unregisters replica `id`: it can no longer sync, and its ledger goes.
    /// - Throws: `SyncServiceError` (`notFound`) for an unknown replica.
    func unregisterReplica(id: String) async throws
    /// Registers a new replica with the scope of replica `id`, starting at `generation` (the
    /// generation of the copy of its file a client holds: a preplanned area's package).
    func copyReplica(id: String, name: String, generation: Int64) async throws -> ReplicaInfo
    /// Applies a batch exactly once, as `BatchAdmission` decides: a resent batch (same hash)
    /// gets the stored result; another batch under the same seq, a seq gap, or a layer the replica
    /// does not upload throws `BatchRefusal`; `BatchRejected` when `rollbackOnFailure` refuses
    /// the batch; with `keepsRejection` the ledger keeps that answer, and the same batch sent
    /// again is refused alike (`BatchAdmission.KeptRejection`). The answer's JSON text is the
    /// one stored in the ledger.
    func applyBatchAnswering(_ batch: UploadBatch, hash: String, keepsRejection: Bool) async throws -> BatchAnswer
    /// Applies a framed batch as its frames arrive (docs/sync.md, "Framed batches"), admitted
    /// and answered as ``applyBatchAnswering(_:hash:keepsRejection:)`` would the whole batch. Throws
    /// `StreamedBatch.WholeBodyNeeded` (nothing applied) when only the whole body can decide:
    /// a seq the ledger holds, a stalled body, or a backend that applies whole batches only.
    func applyStreamedBatch(_ head: UploadBatch.FramedReader.Head, from body: StreamedBatch) async throws -> BatchAnswer
    /// The stored result of an applied batch (for a client whose response was lost).
    func batchResult(replicaID: String, seq: Int64) async throws -> BatchResult?
    /// The service's generation now (the feed's windows end there at most).
    func generation() async throws -> Int64
    /// A page of a layer's changes in `since < generation ≤ upto` within the replica's filter,
    /// leaving out features only the replica itself changed. Reads only: the replica's state is
    /// unchanged (see ``recordReceived(replicaID:upTo:)``). With `stored`, a backend that keeps
    /// the stored form sends upserts in it (`FeedRow`); others send JSON values.
    func changes(replicaID: String, layerID: Int, since: Int64, upto: Int64, after: String?, limit: Int, stored: Bool) async throws -> ChangePage
    /// Records that the replica holds the service's changes up to `generation` (it asked the
    /// feed from there) and when it last synced: informational (`replicaServerGen`,
    /// `lastSyncDate`), written only for a caller that may sync the replica.
    func recordReceived(replicaID: String, upTo generation: Int64) async throws
    /// How many change-log rows of the layer lie in `since < generation ≤ upto`, counted no
    /// further than `cap` (a bound of the feed's size for a client deciding how to download).
    func windowRows(layerID: Int, since: Int64, upto: Int64, cap: Int) async throws -> Int
    /// The same page for a scope no replica holds (an update package's area and layers): no
    /// feature's changes are left out as echoes.
    func changes(scope: ReplicaInfo, layerID: Int, since: Int64, upto: Int64, after: String?, limit: Int) async throws -> ChangePage
    /// A page of every feature of a layer in the replica's scope now, as upserts ordered by
    /// global id (to refetch a layer whose checksum did not match).
    func snapshot(replicaID: String, layerID: Int, after: String?, limit: Int) async throws -> ChangePage
    /// Per-layer checksums of the replica's scope now; with `since`, of only the features
    /// changed after that generation where they are at most `ReplicaChecksums/maxWindowFeatures`
    /// (listed in the answer), the whole scope's otherwise.
    func checksums(replicaID: String, layerIDs: [Int], since: Int64?) async throws -> ReplicaChecksums
    /// The stored answer of an ArcGIS synchronizeReplica request with this key, if any.
    func replayedResponse(key: String) async throws -> String?
    /// Keeps an answer for identical retries (dropping those older than `retention`).
    func storeResponse(key: String, response: String, retention: Duration) async throws
    /// The conflict records kept on the server, oldest first, with their current state.
    func conflictRecords() async throws -> [ConflictRecord]
    /// Moves the service to `schema` (docs/sync.md, "Schema changes"): additive steps, and dropped
    /// fields when `allowDrop`; returns the steps taken (none when the schema is the same).
    @discardableResult
    func migrate(to schema: ServiceSchema, allowDrop: Bool) async throws -> [SchemaChange]
    /// Fault points for tests (`server.beforeCommit`: a batch applied, not yet committed).
    var faults: FaultInjector { get }
}

/// An applied batch's result and the JSON text to answer with.
public struct BatchAnswer: Sendable {
    /// The result.
    public var result: BatchResult
    /// The answer's JSON text (the ledger's stored result).
    public var json: String
    /// Where applying it took its time, when the backend measured it (not for a replay).
    public var stages: BatchStages?

    /// An answer of this result and text.
    public init(result: BatchResult, json: String) {
        self.result = result
        self.json = json
    }

    /// A result encoded now (a replayed one: the stored text lacks `replayed`).
    public init(_ result: BatchResult) {
        self.init(result: result, json: result.jsonText)
    }

    /// An answer leaving a backend's transaction: an applied batch's carries its stages and
    /// when its ledger row began, so the commit after is timed too.
    public struct Pending: Sendable {
        var answer: BatchAnswer
        let recording: ContinuousClock.Instant?
        let locked: ContinuousClock.Instant?

        /// A replayed answer: nothing applied, nothing timed.
        public init(replay answer: BatchAnswer) {
            self.answer = answer
            recording = nil
            locked = nil
        }

        /// An applied batch's answer, made just before its ledger row is written; `locked` is
        /// when the transaction took the service's commit lock.
        public init(applied answer: BatchAnswer, stages: BatchStages, locked: ContinuousClock.Instant? = nil) {
            self.answer = answer
            self.answer.stages = stages
            recording = .now
            self.locked = locked
        }

        /// The answer once the transaction committed.
        public func committed() -> BatchAnswer {
            guard let recording else { return answer }
            var out = answer
            let now = ContinuousClock.now
            out.stages?.commit = now - recording
            if let locked { out.stages?.commitLockHeld = now - locked }
            return out
        }
    }
}

extension SyncBackend {
    /// Whole batches only: the route waits for the whole body.
    public func applyStreamedBatch(_ head: UploadBatch.FramedReader.Head, from body: StreamedBatch) async throws -> BatchAnswer {
        throw StreamedBatch.WholeBodyNeeded()
    }

    /// Per-layer checksums of the replica's whole scope now.
    public func checksums(replicaID: String, layerIDs: [Int]) async throws -> ReplicaChecksums {
        try await checksums(replicaID: replicaID, layerIDs: layerIDs, since: nil)
    }

    /// A batch a replica sealed (native sync, a delta file), applied with its rejection kept.
    public func applyBatchAnswering(_ batch: UploadBatch, hash: String) async throws -> BatchAnswer {
        try await applyBatchAnswering(batch, hash: hash, keepsRejection: true)
    }

    /// A batch made from an ArcGIS `synchronizeReplica` request, applied with its rejection not
    /// kept: the same edits sent again once their cause is fixed are judged again.
    public func applyBatch(_ batch: UploadBatch, hash: String) async throws -> BatchResult {
        try await applyBatchAnswering(batch, hash: hash, keepsRejection: false).result
    }

    /// ``changes(replicaID:layerID:since:upto:after:limit:stored:)`` with JSON values.
    public func changes(replicaID: String, layerID: Int, since: Int64, upto: Int64, after: String?, limit: Int) async throws -> ChangePage {
        try await changes(replicaID: replicaID, layerID: layerID, since: since, upto: upto, after: after, limit: limit, stored: false)
    }

    /// The most pages of nothing but the replica's own changes one feed request reads on.
    static var echoPagesPerRequest: Int { 32 }

    /// ``changes(replicaID:layerID:since:upto:after:limit:)``, read on past pages that hold
    /// nothing for the replica (all its own changes, left out): after it uploaded thousands of
    /// edits, its feed was that many empty pages, each a round trip. The answer is the page the
    /// client would have reached by asking for the next ones itself (generations in the window
    /// are final, I5); at most `echoPagesPerRequest` pages are read per request.
    public func feedPage(replicaID: String, layerID: Int, since: Int64, upto: Int64, after: String?, limit: Int, stored: Bool = false) async throws -> ChangePage {
        var page = try await changes(replicaID: replicaID, layerID: layerID, since: since, upto: upto, after: after, limit: limit, stored: stored)
        var read = 1
        while page.changes.isEmpty, let next = page.next, read < Self.echoPagesPerRequest {
            page = try await changes(replicaID: replicaID, layerID: layerID, since: since, upto: upto, after: next, limit: limit, stored: stored)
            read += 1
        }
        return page
    }
}

/// Where the server's time went while it applied one batch, reported on `/metrics` as
/// `outpost_sync_batch_stage_duration_seconds{stage=…}` (an operator sees which part of a slow
/// sync grows; `outpost-bench sync` prints the sums).
public struct BatchStages: Sendable, Equatable {
    /// Reading what the plans need: the features' object ids, others' changes since the
    /// batch's bases, current values and tombstones.
    public var reading: Duration = .zero
    /// Planning each edit and writing it (the R-tree's pack not included).
    public var editing: Duration = .zero
    /// Packing the layers' R-trees again after a large batch.
    public var spatialIndex: Duration = .zero
    /// Writing the change log and tombstones.
    public var changeLog: Duration = .zero
    /// The ledger row and the commit (the write-ahead log written and synced).
    public var commit: Duration = .zero
    /// From the service's commit lock taken to the commit done: how long the batch kept the
    /// service's other batches waiting (the stages above, and the admission before them).
    /// Not a stage of its own, so not in ``named``.
    public var commitLockHeld: Duration = .zero
    /// Edits whose reads, plan and checked rows were made ahead, off the writer, while it wrote
    /// the run before theirs. Not a stage either.
    public var preparedAhead = 0

    /// Stages of no time yet.
    public init() {}

    /// The stages by the names `/metrics` gives them, in order.
    public var named: [(stage: String, duration: Duration)] {
        [("reading", reading), ("editing", editing), ("spatial_index", spatialIndex), ("change_log", changeLog), ("commit", commit)]
    }
}
