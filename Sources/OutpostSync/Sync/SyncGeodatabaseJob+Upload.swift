import Foundation
import OutpostCore
import OutpostProtocol
import OutpostStorage

/// Step 1: seal pending edits into numbered batches and send them until the server answers.
extension SyncGeodatabaseJob {
    /// The tables whose captured edits go up: the layers that upload, and the attachments when
    /// they sync up (their capture installed first). Empty when nothing uploads.
    static func uploadTables(_ state: ReplicaState, _ parameters: SyncGeodatabaseParameters, _ conn: GeodatabaseConnection) throws -> [String] {
        var tables = state.layers.filter { parameters.uploads($0, model: state.syncModel) }.map(\.table)
        guard !tables.isEmpty else { return [] }
        if state.attachmentsDirection == .upload || state.attachmentsDirection == .bidirectional {
            try conn.installAttachmentCapture()
            tables.append(GeodatabaseConnection.attachmentsTable)
        }
        return tables
    }

    func upload(_ state: ReplicaState, _ client: NativeSyncClient, _ context: JobContext) async throws {
        let parameters = syncParameters
        let uploadTables = try await geodatabase.write { conn in try Self.uploadTables(state, parameters, conn) }
        guard !uploadTables.isEmpty else { return }
        let rollback = syncParameters.shouldRollbackOnFailure, policy = syncParameters.conflictPolicy
        let downloadLayers = state.layers.filter { parameters.downloads($0, model: state.syncModel) }
        let streams = BatchSealer.sealsFramed(state)
        var sent = 0
        // The next batch, made while the server applies the current one (see below).
        var prepared: PreparedBatch?
        // Attachments whose content was gone when their batch went: a batch refused for them
        // alone is withdrawn and sealed again once, without them (see `refusedOnlyFor`).
        var sealedAgainFor = Set<String>()
        while true {
            try await context.checkpoint(["batchesSent": .integer(Int64(sent))])
            let maxChanges = parameters.changeLimit(ofBatch: sent, streams: streams)
            // The batch made ahead is held only through the seal (then it is the sent batch), and
            // whether it was the one sealed.
            let sealed: (SealedBatch, Bool)?
            // Whether captured changes remain after the batch (it is not the last one).
            var more = true
            // A framed batch sealed afresh goes out while it is written (docs/sync.md, "Framed
            // batches"): the request starts before the seal reads the change rows, the end mark
            // waits for the commit.
            let outgoing = OutgoingBatch()
            let uploaded = Self.results(context).values.reduce(0) { $0 + $1.uploaded.total }
            async let streamed = Self.send(outgoing, client, checksumsFor: downloadLayers, parameters, moved: uploaded)
            do {
                let ahead = prepared
                prepared = nil
                (sealed, more) = try await geodatabase.write { conn -> ((SealedBatch, Bool)?, Bool) in
                    let sealed: (SealedBatch, Bool)?
                    if let pending = try conn.sealedBatch() {
                        // Sealed by an earlier run: read back from its stored bytes.
                        sealed = (try SealedBatch(decoding: pending), false)
                    } else if let current = try conn.replicaState() {
                        if let ahead, let made = try BatchSealer.sealPrepared(ahead, conn, state: current, tables: uploadTables, maxChanges: maxChanges) {
                            sealed = (made, true)
                        } else {
                            sealed = try BatchSealer.seal(
                                conn, state: current, tables: uploadTables, maxChanges: maxChanges, rollbackOnFailure: rollback, conflictPolicy: policy,
                                streaming: outgoing
                            ).map { ($0, false) }
                        }
                    } else {
                        sealed = nil
                    }
                    guard let covered = sealed?.0.stored.coversChangeID else { return (sealed, false) }
                    return (sealed, try conn.sealLimit(maxChanges: 1, tables: uploadTables, after: covered) != nil || conn.hasUnsentResolutions())
                }
                outgoing.decideNotStreamed()
                // Nothing of a streamed batch is committed by the server before its end mark.
                try faults.check("client.afterSeal")
            } catch {
                outgoing.fail(error)
                _ = await streamed
                throw error
            }
            // The stored batch's end mark: the server may commit it now.
            outgoing.release()
            guard let (batch, madeAhead) = consume sealed else { break }
            let stored = batch.stored
            // Checksums made while an earlier batch was applied no longer describe the replica.
            VerifyAhead.shared.drop(job: context.jobID)
            if madeAhead { context.log("batch \(stored.seq) was made while batch \(stored.seq - 1) was applied") }
            // Attachment content first, by hash: what the server has is not sent again, and an
            // upload that dropped continues where the server's copy ends.
            let vanished = try await uploadContent(of: batch.attachments, client, context)
            context.log("sending batch \(stored.seq) (\(batch.editCount) edits, \(stored.body.count >> 10) KB)")
            // While the server applies this batch, the next one is made from a snapshot of the
            // replica (nothing is stored: at most one batch is ever sealed and unacknowledged).
            // After the acknowledgement it is sealed as it is if it still carries exactly the
            // change rows a fresh seal would take; otherwise it is dropped and sealed afresh.
            let gdb = geodatabase, covered = stored.coversChangeID, nextSeq = stored.seq + 1, nextLimit = parameters.changeLimit(ofBatch: sent + 1, streams: streams)
            // When this is the last batch and the verify will compare whole layers, the
            // replica's checksums are computed meanwhile too (VerifyAhead).
            let moved = uploaded + batch.editCount
            let layers = downloadLayers
            let checksumAhead = !layers.isEmpty && Self.verifiesWholeLayers(layers, parameters, moved: moved)
            async let next = { () async throws -> PreparedBatch? in
                let next: PreparedBatch? = try await gdb.readCommitted { conn in
                    try BatchSealer.prepare(
                        conn, seq: nextSeq, after: covered, tables: uploadTables, maxChanges: nextLimit, rollbackOnFailure: rollback, conflictPolicy: policy)
                } ?? nil
                if next == nil, checksumAhead { try await checksumsAhead(state, context) }
                return next
            }()
            // An answer with failures reads the batch's edits back from its stored bytes.
            func rejections(_ result: BatchResult, pending: Bool) throws -> [RejectedEdit] {
                result.rejected.isEmpty ? [] : Self.rejections(result, try UploadBatch.decode(stored.body), state: state, pending: pending)
            }
            // The last batch, when the verify will compare whole layers: the server starts its
            // checksums as soon as the batch commits (taken by the verify's request if nothing
            // was committed after it).
            let askChecksums = checksumAhead && !more ? layers.map(\.id) : nil
            // A streamed batch's answer is its first try; a retry sends the stored bytes.
            var first = await streamed
            if first != nil { context.log("batch \(stored.seq) went out while it was sealed") }
            let outcome = try await withRetries(context, "batch \(stored.seq) not acknowledged") {
                if let tried = first.take() { return try tried.get() }
                return try await client.putBatch(seq: stored.seq, batchID: stored.batchID, body: stored.body, checksums: askChecksums)
            }
            context.log("batch \(stored.seq) answered")
            // A failed preparation costs nothing but the fresh seal.
            prepared = (try? await next) ?? nil
            // The last batch, with the replica's checksums made: the server computes its own
            // while the replica acknowledges and downloads (taken only at the generation the
            // download reaches).
            if prepared == nil, checksumAhead, VerifyAhead.shared.awaitsServer(job: context.jobID) {
                let ids = layers.map(\.id)
                VerifyAhead.shared.askServer(job: context.jobID, schemaVersion: state.schemaVersion) { try await client.checksums(layers: ids) }
            }
            try faults.check("client.afterSend")
            switch outcome {
            case .applied(let result, let text):
                // The last batch: the download's first requests go out while it is acknowledged.
                if prepared == nil, !more, !downloadLayers.isEmpty { startDownloadAhead(state, layers: downloadLayers, client, context) }
                // Without rollback the server refused only the insert of a photo deleted here
                // since the seal: the next batch carries its delete, so nothing was lost to
                // report.
                let rejected = try rejections(result, pending: false).filter { !Self.isInsert($0, of: vanished) }
                let conflicts = Self.conflicts(result, state: state)
                // Not waiting for the disk: if a power cut takes the acknowledgement, the stored
                // batch goes again and the server answers it from its ledger (I3); the next seal,
                // a durable commit, makes this one durable first.
                try await geodatabase.write(durable: false) { conn in
                    try conn.acknowledgeBatch(seq: stored.seq, result: text, rejected: rejected, conflicts: conflicts)
                }
                try faults.check("client.afterAck")
                record(result, attachments: batch.attachments, state: state, context)
                if result.replayed == true { context.log("batch \(stored.seq) had already been applied; the server replayed its answer") }
                if !rejected.isEmpty { context.log("\(rejected.count) edits of batch \(stored.seq) were rejected", severity: .warning) }
            case .rejected(let result) where Self.sealsAgain(result, vanished: vanished, sealedAgainFor: sealedAgainFor):
                // Refused as a whole for photos deleted here after the batch was sealed, and
                // nothing applied: sealed again from the pending changes, where their insert and
                // delete cancel, and sent in this sync (its sequence number is still the next).
                sealedAgainFor.formUnion(vanished)
                try await geodatabase.write { conn in try conn.withdrawSealedBatch(seq: stored.seq, rejected: []) }
                context.log("batch \(stored.seq) was refused for \(vanished.count) attachments deleted here after it was sealed; sealing it again")
                prepared = nil
                continue
            case .rejected(let result):
                let rejected = try rejections(result, pending: true)
                try await geodatabase.write { conn in try conn.withdrawSealedBatch(seq: stored.seq, rejected: rejected) }
                record(result, attachments: batch.attachments, state: state, context)
                let first = rejected.first.map { " (first: \($0.layer) \($0.globalID): \($0.reason))" } ?? ""
                throw SyncError(
                    .rejected,
                    "the server rolled back the upload: \(rejected.count) of \(batch.editCount) edits are invalid\(first); nothing was applied and the edits are still pending")
            }
            // The answer's results take milliseconds to free (8–9 ms for 16,000): not before the
            // next step.
            BackgroundRelease.release(consume outcome)
            sent += 1
            context.reportProgress("batches uploaded", done: Int64(sent), total: nil)
        }
    }

    /// Sends the batch `outgoing` streams, once the seal begins it (nil when it does not). The
    /// last batch asks for the checksums ahead as a batch sent whole does (sized by the edits its
    /// head announces).
    private static func send(
        _ outgoing: OutgoingBatch, _ client: NativeSyncClient, checksumsFor layers: [ReplicaState.Layer], _ parameters: SyncGeodatabaseParameters,
        moved: Int
    ) async -> Result<NativeSyncClient.BatchOutcome, any Error>? {
        guard let start = await outgoing.started() else { return nil }
        let ask = start.last && !layers.isEmpty && verifiesWholeLayers(layers, parameters, moved: moved + start.edits)
        do {
            return .success(try await client.putBatch(seq: start.seq, batchID: start.batchID, streaming: outgoing, checksums: ask ? layers.map(\.id) : nil))
        } catch {
            return .failure(error)
        }
    }

    /// Whether a batch refused with `result` is withdrawn and sealed again in the same sync:
    /// refused for nothing but inserts of the attachments `vanished`, none of which caused a
    /// reseal before in this sync (`sealedAgainFor`). Once per photo: the reseal cannot carry
    /// the same insert again (its delete is captured), so a second refusal for it is not this
    /// case and fails the sync instead of sealing in a loop.
    static func sealsAgain(_ result: BatchResult, vanished: Set<String>, sealedAgainFor: Set<String>) -> Bool {
        refusedOnlyFor(vanished, result) && sealedAgainFor.isDisjoint(with: vanished)
    }

    /// Whether the server refused `result`'s batch for nothing but inserts of the attachments
    /// `vanished` (their content gone here before it went up).
    static func refusedOnlyFor(_ vanished: Set<String>, _ result: BatchResult) -> Bool {
        let refused = (result.attachments ?? []).filter { !$0.success }
        return !refused.isEmpty && refused.count == result.rejected.count
            && refused.allSatisfy { $0.op == .insert && vanished.contains(GlobalID.normalized($0.globalId) ?? $0.globalId) }
    }

    /// Whether `rejected` is the insert of one of the attachments `vanished`.
    static func isInsert(_ rejected: RejectedEdit, of vanished: Set<String>) -> Bool {
        rejected.layer == GeodatabaseConnection.attachmentsTable && rejected.operation == BatchEdit.Operation.insert.rawValue
            && vanished.contains(GlobalID.normalized(rejected.globalID) ?? rejected.globalID)
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

    func record(_ result: BatchResult, attachments: [AttachmentEdit], state: ReplicaState, _ context: JobContext) {
        for (edit, outcome) in zip(attachments, result.attachments ?? []) where outcome.success && outcome.resolution == nil {
            guard let layer = state.layers.first(where: { $0.id == edit.layerId }) else { continue }
            Self.update(context, layer: layer) { $0.attachmentsUploaded += 1 }
        }
        for layerResult in result.layers {
            guard let layer = state.layers.first(where: { $0.id == layerResult.id }) else { continue }
            // A compact answer counts what applied; a full one lists every edit.
            let applied = layerResult.applied ?? BatchLayerResult.Applied(counting: layerResult.results)
            Self.update(context, layer: layer) { r in
                r.uploaded.inserts += applied.inserts
                r.uploaded.updates += applied.updates
                r.uploaded.deletes += applied.deletes
                for edit in layerResult.results {
                    r.conflicts += edit.conflicts?.count ?? 0
                    if edit.resolution == "merged" { r.merged += 1 }
                    if !edit.success {
                        r.editResults.append(.init(globalId: edit.globalId, operation: edit.op.rawValue, message: edit.error?.description ?? "rejected"))
                    }
                }
            }
        }
    }
}
