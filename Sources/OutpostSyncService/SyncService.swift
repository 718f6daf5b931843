import Foundation
import OutpostCore
import OutpostProtocol
import OutpostStorage

/// The sync protocol's server side (docs/sync.md), once for every database: applying an
/// uploaded batch exactly once and serving a page of the change feed, over a ``SyncStore``'s
/// primitive operations.
public struct SyncService<Store: SyncStore>: Sendable {
    /// The database.
    public let store: Store

    /// A service over `store`.
    public init(store: Store) { self.store = store }

    // MARK: - Applying a batch

    /// Applies `batch` (its body hashes to `hash`) exactly once, in one transaction:
    /// 1. the commit lock, and the generation the batch's changes will carry;
    /// 2. the replica and the ledger's row for the batch's seq;
    /// 3. admission (``BatchAdmission``): a resent batch gets its stored answer, a refused one
    ///    throws `BatchRefusal`;
    /// 4. the edits, layer by layer, then the attachments (the store's ``BatchApplying``);
    /// 5. the finish: `BatchRejected` when rollback on failure refuses the batch, otherwise the
    ///    ledger row, the generation and the replica's position are recorded, and the
    ///    transaction commits.
    ///
    /// With `keepsRejection`, a rolled-back batch's answer goes into the ledger after the
    /// rollback (``BatchAdmission/KeptRejection``), so the same batch is refused alike however
    /// often it comes. Batches a replica seals (native sync, delta files) keep it; those made
    /// from an ArcGIS `synchronizeReplica` request do not: there the same edits are sent again
    /// after their cause is fixed, and are judged again.
    public func apply(_ batch: UploadBatch, hash: String, keepsRejection: Bool = true) async throws -> BatchAnswer {
        try await apply(batch, hash: hash, streamed: nil, keepsRejection: keepsRejection)
    }

    /// Applies a framed batch as its frames arrive, admitted and answered as
    /// ``apply(_:hash:keepsRejection:)`` would the whole batch. Throws `StreamedBatch.WholeBodyNeeded` (nothing
    /// applied) when only the whole body can decide: a seq the ledger holds, a stalled body, or
    /// a store that applies whole batches only.
    public func apply(streamed head: UploadBatch.FramedReader.Head, from body: StreamedBatch) async throws -> BatchAnswer {
        guard store.appliesStreamedBatches else { throw StreamedBatch.WholeBodyNeeded() }
        return try await apply(head.batch, hash: nil, streamed: Streamed(announced: head.layers, body: body), keepsRejection: true)
    }

    private struct Streamed: Sendable {
        let announced: [UploadBatch.AnnouncedLayer]
        let body: StreamedBatch
    }

    /// A rejection leaving the transaction with what the ledger keeps of it.
    private struct RolledBack: Error {
        let rejected: BatchRejected
        let kept: BatchAdmission.KeptRejection
    }

    private func apply(_ batch: UploadBatch, hash: String?, streamed: Streamed?, keepsRejection: Bool) async throws -> BatchAnswer {
        do {
            return try await applyOnce(batch, hash: hash, streamed: streamed)
        } catch let rolledBack as RolledBack {
            if keepsRejection {
                try await store.writeTransaction { tx in
                    _ = try await tx.lockGeneration()
                    // A batch applied since (another process, the same replica) answers for the seq.
                    guard rolledBack.kept.isNext(for: try await tx.replica(rolledBack.kept.replicaID, forUpdate: true)) else { return }
                    try await tx.keep(rolledBack.kept)
                }
            }
            throw rolledBack.rejected
        }
    }

    private func applyOnce(_ batch: UploadBatch, hash: String?, streamed: Streamed?) async throws -> BatchAnswer {
        let requestedRule = try BatchPlanner.rule(batch.conflictPolicy)
        let clock = store.clock, faults = store.faults
        return try await store.writeTransaction { tx -> BatchAnswer.Pending in
            let generation = try await tx.lockGeneration() + 1
            let locked = ContinuousClock.now
            let replicaID = ReplicaID.normalized(batch.replicaId)
            let info = try await tx.replica(replicaID, forUpdate: true)
            let ledger = try await tx.ledgerEntry(replicaID: replicaID, seq: batch.seq)
            var admitted: BatchAdmission.Admitted
            if let streamed {
                var announced = batch
                announced.layers = streamed.announced.map { BatchLayer(id: $0.id, edits: []) }
                guard let a = try BatchAdmission.admitStreamed(announced, replica: info, ledger: ledger) else { throw StreamedBatch.WholeBodyNeeded() }
                admitted = a
            } else {
                switch try BatchAdmission.admit(batch, hash: hash ?? "", replica: info, ledger: ledger) {
                case .replay(let answer): return .init(replay: answer)
                case .replayRejected(let rejected): throw rejected
                case .apply(let a): admitted = a
                }
            }
            let dropped = batch.schemaVersion < (info.serviceSchemaVersion ?? 0) ? try await tx.droppedFields(since: batch.schemaVersion) : [:]
            var applier = try await tx.applier(
                BatchContext(
                    generation: generation, origin: (replicaID, batch.seq), rollbackOnFailure: batch.rollbackOnFailure, requestedRule: requestedRule,
                    droppedFields: dropped, now: BatchPlanner.timestamp(clock.now())))
            // Manual conflicts the replica resolved: its resolving edits are in this batch.
            if let resolved = batch.resolvedConflicts, !resolved.isEmpty { try await tx.resolveConflicts(resolved) }
            var layers: [BatchLayerResult] = []
            if let streamed {
                layers = try await Self.apply(streamed, with: &applier)
                admitted.hash = streamed.body.hash!
            } else {
                for edits in batch.layers { layers.append(BatchLayerResult(id: edits.id, results: try await applier.apply(edits))) }
            }
            var attachments: [BatchEditResult]?
            if let edits = batch.attachments, !edits.isEmpty { attachments = try await applier.apply(edits) }
            switch admitted.finish(generation: generation, applied: applier.applied, failed: applier.failed, layers: layers, attachments: attachments) {
            case .rejected(let rejected):
                throw RolledBack(rejected: rejected, kept: admitted.kept(rejected))
            case .commit(let commit):
                let pending = BatchAnswer.Pending(applied: commit.answer, stages: applier.stages, locked: locked)
                try await tx.record(commit, at: clock.milliseconds())
                try faults.check("server.beforeCommit")
                return pending
            }
        }.committed()
    }

    /// Each announced layer in turn, its runs of frames as they arrive (a run of a later layer
    /// ends it). A layer's work begins before its first frame comes (a store may set its
    /// spatial index's triggers aside while the replica still writes the frame). Ends with the
    /// body, whose hash is then known.
    private static func apply(_ streamed: Streamed, with applier: inout Store.Transaction.Applier) async throws -> [BatchLayerResult] {
        var layers: [BatchLayerResult] = []
        var next: StreamedBatch.Run?
        var taken = true
        for (position, layer) in streamed.announced.enumerated() {
            var received = false
            let results = try await applier.apply(layerID: layer.id, expectedGeometryWrites: layer.geometryWrites) {
                if taken {
                    next = try streamed.body.nextRun()
                    taken = false
                }
                guard let run = next, run.position == position else { return nil }
                taken = true
                received = true
                return run.edits
            }
            if received { layers.append(BatchLayerResult(id: layer.id, results: results)) }
        }
        // The last layer ended with the body (its reader keeps frames in the head's order).
        guard next == nil, streamed.body.hash != nil else { throw StreamedBatch.WholeBodyNeeded() }
        return layers
    }

    /// The stored result of the replica's batch `seq`, if the ledger still holds it as applied
    /// (a kept rejection is no applied batch's result).
    public func batchResult(replicaID: String, seq: Int64) async throws -> BatchResult? {
        try await store.readTransaction { tx in
            let replicaID = ReplicaID.normalized(replicaID)
            guard let entry = try await tx.ledgerEntry(replicaID: replicaID, seq: seq),
                seq <= (try await tx.replica(replicaID, forUpdate: false)).lastSeq
            else { return nil }
            return try BatchAdmission.replayed(entry.result)
        }
    }

    // MARK: - The change feed

    /// A page of layer `layerID`'s changes in `since < generation ≤ upto` within the scope of
    /// replica `replicaID` (or of `given`, a scope no replica holds: an update package's area),
    /// after global id `after`, at most `limit` features, in one snapshot:
    /// 1. the replica and its layer's scope;
    /// 2. on a window's first page, for a replica holding the whole layer: nothing to send
    ///    when no one else changed the layer in the window;
    /// 3. the features changed in the window, one row each;
    /// 4. those still in scope read whole, and their attachments when the replica syncs them;
    /// 5. the page (``ChangeFeedAssembly``): upserts, leaves, and nothing for the replica's own
    ///    edits.
    ///
    /// With `stored`, from a store that keeps it, the page's upserts carry their values in the
    /// stored form (`FeedRow`) instead of JSON.
    public func feedPage(
        replicaID: String, scope given: ReplicaInfo? = nil, layerID: Int, since: Int64, upto: Int64, after: String?, limit: Int, stored: Bool = false
    ) async throws -> ChangePage {
        try await store.readTransaction { tx in
            let info: ReplicaInfo
            if let given { info = given } else { info = try await tx.replica(ReplicaID.normalized(replicaID), forUpdate: false) }
            let schema = try await tx.schema(knownVersion: info.serviceSchemaVersion ?? 0)
            let (layerInfo, layer) = try ReplicaScope.layer(layerID, of: info, schema: schema)
            let scope = ReplicaScope(info: info, schema: schema).query(layerInfo, layer: layer)
            // Asked once per window (its first page): a later page exists only when it was not empty.
            if after == nil, ChangeFeedAssembly.holdsWholeLayer(scope) {
                let others = try await tx.othersChanged(layerID: layerID, since: since, upto: upto, replicaID: info.replicaID)
                if ChangeFeedAssembly.windowIsEmpty(scope: scope, othersChangedWindow: others) {
                    return ChangePage(layerId: layerID, since: since, upto: upto, changes: [], next: nil)
                }
            }
            let changed = try await tx.changedFeatures(layerID: layerID, since: since, upto: upto, after: after, limit: limit, replicaID: info.replicaID)
            let reads = ChangeFeedAssembly.reads(changed, scope: scope)
            var held: [String: FeedRow?]?
            if stored { held = try await tx.storedRows(layer, matching: reads) }
            var inScope: [String: FeatureTable.SyncRow] = [:]
            if held == nil { inScope = try await tx.syncRows(layer, matching: reads) }
            let found = held.map { Array($0.keys) } ?? Array(inScope.keys)
            let attachments = info.attachmentsSyncDirection == .bidirectional && layer.hasAttachments
                ? try await tx.attachmentInfos(layer, features: found) : nil
            let changes: [FeedChange]
            if let held {
                changes = try ChangeFeedAssembly.changes(changed, scope: scope, storedRows: held, attachments: attachments)
            } else {
                changes = try ChangeFeedAssembly.changes(changed, scope: scope, syncRows: inScope, attachments: attachments)
            }
            return ChangePage(layerId: layerID, since: since, upto: upto, changes: changes, next: ChangeFeedAssembly.next(changed, limit: limit))
        }
    }
}

extension SyncBackend where Self: SyncStore {
    /// Applied by ``SyncService/apply(_:hash:keepsRejection:)``.
    public func applyBatchAnswering(_ batch: UploadBatch, hash: String, keepsRejection: Bool) async throws -> BatchAnswer {
        try await SyncService(store: self).apply(batch, hash: hash, keepsRejection: keepsRejection)
    }

    /// Applied by ``SyncService/apply(streamed:from:)``.
    public func applyStreamedBatch(_ head: UploadBatch.FramedReader.Head, from body: StreamedBatch) async throws -> BatchAnswer {
        try await SyncService(store: self).apply(streamed: head, from: body)
    }

    /// Read by ``SyncService/batchResult(replicaID:seq:)``.
    public func batchResult(replicaID: String, seq: Int64) async throws -> BatchResult? {
        try await SyncService(store: self).batchResult(replicaID: replicaID, seq: seq)
    }

    /// Served by ``SyncService/feedPage(replicaID:scope:layerID:since:upto:after:limit:stored:)``.
    public func changes(replicaID: String, layerID: Int, since: Int64, upto: Int64, after: String?, limit: Int, stored: Bool) async throws -> ChangePage {
        try await SyncService(store: self).feedPage(replicaID: replicaID, layerID: layerID, since: since, upto: upto, after: after, limit: limit, stored: stored)
    }

    /// Served by ``SyncService/feedPage(replicaID:scope:layerID:since:upto:after:limit:stored:)``.
    public func changes(scope: ReplicaInfo, layerID: Int, since: Int64, upto: Int64, after: String?, limit: Int) async throws -> ChangePage {
        try await SyncService(store: self).feedPage(replicaID: scope.replicaID, scope: scope, layerID: layerID, since: since, upto: upto, after: after, limit: limit)
    }
}
