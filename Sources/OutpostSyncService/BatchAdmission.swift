import Foundation
import OutpostCore
import OutpostProtocol

/// Batch admission (docs/sync.md, invariants I3 and I4): what the server does with an uploaded
/// batch, decided from the replica's registration and its ledger row alone. No I/O: a backend
/// reads the inputs and carries out the outcome inside the transaction that holds the service's
/// commit lock; routes turn refusals into HTTP statuses.
///
/// The machine has two steps. ``admit(_:hash:replica:ledger:)`` answers one of
/// - ``Decision/replay(_:)``: this seq was applied with the same content (same hash): answer its
///   stored result, apply nothing (I3);
/// - ``Decision/replayRejected(_:)``: this seq was rolled back with the same content and its
///   answer kept (``KeptRejection``): answer the same refusal again, apply nothing;
/// - ``BatchRefusal``: the same seq with other content, a gap or a step back in the sequence
///   (I4), a layer or attachments the replica may not upload;
/// - ``Decision/apply(_:)``: the next batch in sequence (other content under a rolled-back seq
///   is a new batch): apply it.
///
/// Once the edits are applied, ``Admitted/finish(generation:applied:failed:layers:attachments:)``
/// answers ``Finish/rejected(_:)`` (rollback on failure and an edit failed: the transaction rolls
/// back) or ``Finish/commit(_:)``: the ledger row to write, the generation to advance to, the
/// ledger rows to prune and the replica's new position.
public enum BatchAdmission {
    /// The replica's ledger row for the batch's seq (the server keeps the latest only). A row
    /// at the seq after the replica's last one is a kept rejection: an applied batch moves the
    /// replica's position to its seq in the same commit as its row.
    public struct LedgerEntry: Sendable, Equatable {
        /// The SHA-256 of the batch's body.
        public var hash: String
        /// The stored result, as it was answered.
        public var result: String

        /// An entry of this hash and result.
        public init(hash: String, result: String) {
            self.hash = hash
            self.result = result
        }
    }

    /// What to do with a batch.
    public enum Decision: Sendable {
        /// Answer the stored result again (marked `replayed`); nothing is applied.
        case replay(BatchAnswer)
        /// Refuse the batch again as it was refused (its result marked `replayed`): nothing is
        /// applied, and the service's state since cannot change the answer.
        case replayRejected(BatchRejected)
        /// Apply it: it is the next in sequence.
        case apply(Admitted)
    }

    /// Decides what happens to `batch`, whose body hashes to `hash`, sent by `replica` whose
    /// ledger row for the batch's seq is `ledger` (nil when there is none).
    /// - Throws: ``BatchRefusal``; a ledger row whose result cannot be read throws the parse error.
    public static func admit(_ batch: UploadBatch, hash: String, replica: ReplicaInfo, ledger: LedgerEntry?) throws -> Decision {
        let replicaID = replica.replicaID
        let expected = replica.lastSeq + 1
        if let ledger {
            let rolledBack = batch.seq > replica.lastSeq
            if ledger.hash == hash {
                let result = try replayed(ledger.result)
                return rolledBack ? .replayRejected(BatchRejected(result: result)) : .replay(BatchAnswer(result))
            }
            // Other content under a seq that was rolled back: the replica withdrew that batch
            // and sealed this one in its place.
            guard rolledBack else { throw BatchRefusal.differentContent(replicaID: replicaID, seq: batch.seq, expectedSeq: expected) }
        }
        return .apply(try admitNext(batch, hash: hash, replica: replica))
    }

    /// Decides what happens to a batch still streaming in (docs/sync.md, "Framed batches"), from
    /// its head (`batch` without edits, its `layers` those the head announces): nil when the
    /// ledger holds the seq (only the whole body's hash tells a replay from other content), else
    /// admitted as ``admit(_:hash:replica:ledger:)`` would; its hash is set once the body ends.
    /// - Throws: ``BatchRefusal`` as ``admit(_:hash:replica:ledger:)``.
    public static func admitStreamed(_ batch: UploadBatch, replica: ReplicaInfo, ledger: LedgerEntry?) throws -> Admitted? {
        guard ledger == nil else { return nil }
        return try admitNext(batch, hash: "", replica: replica)
    }

    /// The checks of a batch the ledger does not hold: the next in sequence, of layers (and
    /// attachments) the replica uploads.
    private static func admitNext(_ batch: UploadBatch, hash: String, replica: ReplicaInfo) throws -> Admitted {
        let replicaID = replica.replicaID
        let expected = replica.lastSeq + 1
        guard batch.seq == expected else { throw BatchRefusal.outOfOrder(replicaID: replicaID, seq: batch.seq, expectedSeq: expected) }
        for layer in batch.layers {
            guard let registered = replica.layers.first(where: { $0.id == layer.id }), registered.syncDirection.uploads else {
                throw BatchRefusal.layerNotUploadable(replicaID: replicaID, layerID: layer.id)
            }
        }
        if let attachments = batch.attachments, !attachments.isEmpty, !replica.attachmentsSyncDirection.uploads {
            throw BatchRefusal.attachmentsNotUploadable(replicaID: replicaID, direction: replica.attachmentsSyncDirection)
        }
        return Admitted(
            replicaID: replicaID, seq: batch.seq, batchID: batch.batchId, hash: hash, rollbackOnFailure: batch.rollbackOnFailure,
            compactAnswer: batch.compactAnswer == true)
    }

    /// A stored result as it is answered again: marked `replayed`.
    public static func replayed(_ stored: String) throws -> BatchResult {
        var result = try BatchResult(json: JSONValue.parse(stored))
        result.replayed = true
        return result
    }

    /// A rolled-back batch's answer as the ledger keeps it (in a transaction of its own, after
    /// the rollback): the same batch sent again is refused alike, even if the service's state
    /// since would now let it apply. A delta-file edits file imported twice gives two replies,
    /// and the crew may import either; without the kept answer the first could say "refused"
    /// while the second applied the batch. Other content under the same seq is admitted
    /// (``admit(_:hash:replica:ledger:)``), and its commit replaces the row.
    public struct KeptRejection: Sendable, Equatable {
        /// The uploading replica.
        public let replicaID: String
        /// The rolled-back batch's seq: the replica's last seq + 1.
        public let seq: Int64
        /// The batch's id.
        public let batchID: String
        /// The SHA-256 of the batch's body.
        public let hash: String
        /// The rejection's result (every edit listed), as answered.
        public let result: String

        /// A kept rejection of these values.
        public init(replicaID: String, seq: Int64, batchID: String, hash: String, result: String) {
            self.replicaID = replicaID
            self.seq = seq
            self.batchID = batchID
            self.hash = hash
            self.result = result
        }

        /// Whether the ledger may keep it for `replica` as it is now: still the next in
        /// sequence (no other batch applied since the rollback).
        public func isNext(for replica: ReplicaInfo) -> Bool { seq == replica.lastSeq + 1 }
    }

    /// A batch admitted for applying.
    public struct Admitted: Sendable, Equatable {
        /// The uploading replica.
        public let replicaID: String
        /// The batch's sequence number.
        public let seq: Int64
        /// The batch's id.
        public let batchID: String
        /// The body's hash (a streamed batch's is known when its body has ended).
        public var hash: String
        /// Whether one failed edit rejects the whole batch.
        public let rollbackOnFailure: Bool
        /// The batch asked for a compact answer (`UploadBatch/compactAnswer`): the ledger
        /// stores and answers it so; a rejected batch's result lists every edit regardless.
        public var compactAnswer = false

        /// The answer the ledger keeps for this batch rolled back with `rejected`.
        public func kept(_ rejected: BatchRejected) -> KeptRejection {
            KeptRejection(replicaID: replicaID, seq: seq, batchID: batchID, hash: hash, result: rejected.result.jsonText)
        }

        /// What the applied edits come to. `generation` is the one the batch's changes were
        /// logged under (the service's current generation + 1).
        public func finish(generation: Int64, applied: Int, failed: Int, layers: [BatchLayerResult], attachments: [BatchEditResult]?) -> Finish {
            var result = BatchResult(seq: seq, batchId: batchID, generation: applied > 0 ? generation : nil, layers: layers)
            result.attachments = attachments
            if rollbackOnFailure, failed > 0 { return .rejected(BatchRejected(result: result)) }
            let text = (compactAnswer ? result.compacted : result).jsonText
            return .commit(
                Commit(
                    answer: BatchAnswer(result: result, json: text), replicaID: replicaID, seq: seq, batchID: batchID, hash: hash,
                    advancesGenerationTo: applied > 0 ? generation : nil))
        }
    }

    /// How an applied batch ends.
    public enum Finish: Sendable {
        /// Nothing may stay applied: throw it to roll the transaction back.
        case rejected(BatchRejected)
        /// Commit, writing what ``Commit`` says.
        case commit(Commit)
    }

    /// What the transaction writes before it commits.
    public struct Commit: Sendable {
        /// The answer, also the ledger row's result.
        public let answer: BatchAnswer
        /// The uploading replica.
        public let replicaID: String
        /// The batch's sequence number.
        public let seq: Int64
        /// The batch's id.
        public let batchID: String
        /// The SHA-256 of the batch's body, for the ledger.
        public let hash: String
        /// The service's new generation, when any edit applied (nil: it stays).
        public let advancesGenerationTo: Int64?
        /// Ledger rows of the replica below this seq go: the client sends seq+1 only after it
        /// has the answer to seq, so only the latest row can be asked for again.
        public var pruneBelow: Int64 { seq }
        /// The replica's ledger position after the commit.
        public var lastSeq: Int64 { seq }
    }
}

/// A batch the server refuses without applying anything: out of sequence (the HTTP layer
/// answers a conflict, with the seq it expects) or not allowed for the replica.
public enum BatchRefusal: Error, Sendable, Equatable, CustomStringConvertible {
    /// The seq was applied before with other content: a client bug or two clients on one replica.
    case differentContent(replicaID: String, seq: Int64, expectedSeq: Int64)
    /// A gap or a step back: batches apply in seq order (I4).
    case outOfOrder(replicaID: String, seq: Int64, expectedSeq: Int64)
    /// The replica registered the layer download-only, not at all, or not in this replica.
    case layerNotUploadable(replicaID: String, layerID: Int)
    /// The replica does not upload attachments.
    case attachmentsNotUploadable(replicaID: String, direction: ReplicaInfo.Direction)

    public var description: String {
        switch self {
        case .differentContent(let replica, let seq, _): "batch \(seq) of replica \(replica) was already applied with different content"
        case .outOfOrder(let replica, let seq, let expected): "batch \(seq) is out of order: replica \(replica) expects batch \(expected)"
        case .layerNotUploadable(let replica, let layer): "layer \(layer) does not accept uploads from replica \(replica)"
        case .attachmentsNotUploadable(let replica, let direction):
            "replica \(replica) does not upload attachments (its attachment sync direction is \(direction.rawValue))"
        }
    }

    /// The seq the server expects next, for the sequence refusals.
    public var expectedSeq: Int64? {
        switch self {
        case .differentContent(_, _, let expected), .outOfOrder(_, _, let expected): expected
        case .layerNotUploadable, .attachmentsNotUploadable: nil
        }
    }
}

/// A batch refused as a whole (rollback on failure): nothing was applied, the per-edit results
/// say why.
public struct BatchRejected: Error, Sendable {
    /// Every edit's result.
    public var result: BatchResult

    /// A rejection with this result.
    public init(result: BatchResult) { self.result = result }
}

extension ReplicaInfo.Direction {
    /// Whether the replica sends edits of this kind to the server.
    var uploads: Bool { self == .upload || self == .bidirectional }
}
