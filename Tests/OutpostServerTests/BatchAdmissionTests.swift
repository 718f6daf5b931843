import Foundation
import OutpostCore
import OutpostProtocol
@testable import OutpostSyncService
import Testing

@testable import OutpostServer

/// Batch admission as a state machine, with no I/O: every branch of exactly-once (I3) and
/// in-order (I4) application, the upload-direction checks, and what a finished batch commits.
@Suite("Batch admission (I3, I4)")
struct BatchAdmissionTests {
    static let replicaID = "{0A0A0A0A-0000-4000-8000-00000000000A}"

    static func replica(lastSeq: Int64, layers: [(Int, ReplicaInfo.Direction)] = [(0, .bidirectional)], attachments: ReplicaInfo.Direction = .none) -> ReplicaInfo {
        ReplicaInfo(
            replicaID: replicaID, replicaName: "crew", syncModel: .perReplica, replicaServerGen: 7,
            layers: layers.map { ReplicaInfo.Layer(id: $0.0, serverGen: 7, syncDirection: $0.1) }, geometry: nil, returnAttachments: false,
            attachmentsSyncDirection: attachments, lastSeq: lastSeq, serviceGeneration: 7, schemaVersion: 1, creationDate: 0, lastSyncDate: nil)
    }

    static func batch(seq: Int64, layers: [Int] = [0], attachments: Int = 0, rollback: Bool = true) -> UploadBatch {
        var batch = UploadBatch(
            replicaId: replicaID, batchId: "batch-\(seq)", seq: seq, schemaVersion: 1, rollbackOnFailure: rollback,
            layers: layers.map { BatchLayer(id: $0, edits: [BatchEdit(op: .delete, globalId: "{0B0B0B0B-0000-4000-8000-00000000000B}")]) })
        if attachments > 0 {
            batch.attachments = (0..<attachments).map { _ in
                AttachmentEdit(op: .delete, layerId: 0, featureGlobalId: nil, attachment: nil, globalId: "{0C0C0C0C-0000-4000-8000-00000000000C}")
            }
        }
        return batch
    }

    static func admitted(_ batch: UploadBatch, hash: String = "h", replica: ReplicaInfo) throws -> BatchAdmission.Admitted {
        guard case .apply(let admitted) = try BatchAdmission.admit(batch, hash: hash, replica: replica, ledger: nil) else {
            throw BatchRefusal.outOfOrder(replicaID: "", seq: -1, expectedSeq: -1)
        }
        return admitted
    }

    static let stored = BatchResult(
        seq: 3, batchId: "batch-3", generation: 12,
        layers: [BatchLayerResult(id: 0, results: [BatchEditResult(globalId: "{0B0B0B0B-0000-4000-8000-00000000000B}", op: .delete, success: true)])])

    // MARK: - I3: exactly once

    /// A framed batch still arriving is admitted from its head, as the whole batch would be; a
    /// seq the ledger holds waits for the whole body (only its hash tells a replay from a
    /// refusal), whatever the head says.
    @Test func aStreamedBatchIsAdmittedFromItsHead() throws {
        var head = Self.batch(seq: 4)
        head.layers = [BatchLayer(id: 0, edits: [])]
        var admitted = try #require(try BatchAdmission.admitStreamed(head, replica: Self.replica(lastSeq: 3), ledger: nil))
        #expect(admitted.seq == 4 && admitted.batchID == "batch-4" && admitted.rollbackOnFailure)
        admitted.hash = "known at the end"
        guard case .commit(let commit) = admitted.finish(generation: 9, applied: 1, failed: 0, layers: [], attachments: nil) else {
            Issue.record("an applied streamed batch commits")
            return
        }
        #expect(commit.hash == "known at the end" && commit.advancesGenerationTo == 9)
        let ledger = BatchAdmission.LedgerEntry(hash: "any", result: Self.stored.json.jsonString)
        #expect(try BatchAdmission.admitStreamed(Self.batch(seq: 3), replica: Self.replica(lastSeq: 3), ledger: ledger) == nil)
        #expect(try BatchAdmission.admitStreamed(Self.batch(seq: 9), replica: Self.replica(lastSeq: 3), ledger: ledger) == nil)
        #expect(throws: BatchRefusal.outOfOrder(replicaID: Self.replicaID, seq: 6, expectedSeq: 4)) {
            try BatchAdmission.admitStreamed(Self.batch(seq: 6), replica: Self.replica(lastSeq: 3), ledger: nil)
        }
        #expect(throws: BatchRefusal.layerNotUploadable(replicaID: Self.replicaID, layerID: 1)) {
            try BatchAdmission.admitStreamed(Self.batch(seq: 4, layers: [0, 1]), replica: Self.replica(lastSeq: 3, layers: [(0, .bidirectional), (1, .download)]), ledger: nil)
        }
        #expect(throws: BatchRefusal.attachmentsNotUploadable(replicaID: Self.replicaID, direction: .none)) {
            try BatchAdmission.admitStreamed(Self.batch(seq: 4, attachments: 1), replica: Self.replica(lastSeq: 3), ledger: nil)
        }
    }

    @Test func theNextBatchInSequenceIsApplied() throws {
        let admitted = try Self.admitted(Self.batch(seq: 4), hash: "abc", replica: Self.replica(lastSeq: 3))
        #expect(admitted == BatchAdmission.Admitted(replicaID: Self.replicaID, seq: 4, batchID: "batch-4", hash: "abc", rollbackOnFailure: true))
        #expect(try Self.admitted(Self.batch(seq: 1), replica: Self.replica(lastSeq: 0)).seq == 1, "a new replica starts at 1")
    }

    @Test func aResentBatchIsAnsweredFromTheLedgerAndNotApplied() throws {
        let ledger = BatchAdmission.LedgerEntry(hash: "same", result: Self.stored.json.jsonString)
        guard case .replay(let answer) = try BatchAdmission.admit(Self.batch(seq: 3), hash: "same", replica: Self.replica(lastSeq: 3), ledger: ledger) else {
            Issue.record("a resend with the same content must replay")
            return
        }
        var expected = Self.stored
        expected.replayed = true
        #expect(answer.result == expected)
        #expect(try JSONValue.parse(answer.json) == expected.json, "the answer's text says replayed")
    }

    @Test func theSameSeqWithOtherContentIsRefused() {
        let ledger = BatchAdmission.LedgerEntry(hash: "first", result: Self.stored.json.jsonString)
        #expect(throws: BatchRefusal.differentContent(replicaID: Self.replicaID, seq: 3, expectedSeq: 4)) {
            try BatchAdmission.admit(Self.batch(seq: 3), hash: "second", replica: Self.replica(lastSeq: 3), ledger: ledger)
        }
    }

    @Test func aRolledBackBatchSentAgainIsRefusedAlike() throws {
        // A row at the seq after the replica's last one is a kept rejection.
        let ledger = BatchAdmission.LedgerEntry(hash: "same", result: Self.stored.json.jsonString)
        guard case .replayRejected(let rejected) = try BatchAdmission.admit(Self.batch(seq: 4), hash: "same", replica: Self.replica(lastSeq: 3), ledger: ledger) else {
            Issue.record("the same rolled-back batch must be refused again")
            return
        }
        var expected = Self.stored
        expected.replayed = true
        #expect(rejected.result == expected)
    }

    @Test func otherContentUnderARolledBackSeqIsTheNextBatch() throws {
        let ledger = BatchAdmission.LedgerEntry(hash: "withdrawn", result: Self.stored.json.jsonString)
        guard case .apply(let admitted) = try BatchAdmission.admit(Self.batch(seq: 4), hash: "resealed", replica: Self.replica(lastSeq: 3), ledger: ledger) else {
            Issue.record("a resealed batch must apply")
            return
        }
        #expect(admitted.seq == 4 && admitted.hash == "resealed")
        // Its rejection, were it refused too, is kept under its own hash.
        let kept = admitted.kept(BatchRejected(result: Self.stored))
        #expect(kept.seq == 4 && kept.hash == "resealed" && kept.batchID == "batch-4" && kept.isNext(for: Self.replica(lastSeq: 3)))
        #expect(try BatchResult(json: JSONValue.parse(kept.result)) == Self.stored)
    }

    @Test func aLedgerRowThatCannotBeReadIsAnErrorNotAnApply() {
        let ledger = BatchAdmission.LedgerEntry(hash: "same", result: "{not json")
        #expect(throws: (any Error).self) { try BatchAdmission.admit(Self.batch(seq: 3), hash: "same", replica: Self.replica(lastSeq: 3), ledger: ledger) }
    }

    // MARK: - I4: in order, no gaps

    @Test(arguments: [(Int64(5), Int64(3)), (6, 3), (1, 3), (3, 3), (0, 0), (-1, 0), (2, 0)])
    func anythingButTheNextSeqIsRefusedNamingTheExpectedOne(seq: Int64, lastSeq: Int64) {
        // (3, 3): the latest applied seq whose ledger row is gone (unregistered and registered
        // again, or pruned) is not applied a second time.
        #expect(throws: BatchRefusal.outOfOrder(replicaID: Self.replicaID, seq: seq, expectedSeq: lastSeq + 1)) {
            try BatchAdmission.admit(Self.batch(seq: seq), hash: "h", replica: Self.replica(lastSeq: lastSeq), ledger: nil)
        }
    }

    @Test func theLedgerIsConsultedBeforeTheSequence() throws {
        // A resend of the latest batch is a replay even though its seq is not the next one.
        let ledger = BatchAdmission.LedgerEntry(hash: "h", result: Self.stored.json.jsonString)
        guard case .replay = try BatchAdmission.admit(Self.batch(seq: 3), hash: "h", replica: Self.replica(lastSeq: 3), ledger: ledger) else {
            Issue.record("expected a replay")
            return
        }
    }

    // MARK: - Directions

    @Test(arguments: [ReplicaInfo.Direction.download, .none])
    func aLayerTheReplicaDoesNotUploadIsRefused(direction: ReplicaInfo.Direction) {
        let replica = Self.replica(lastSeq: 0, layers: [(0, .bidirectional), (1, direction)])
        #expect(throws: BatchRefusal.layerNotUploadable(replicaID: Self.replicaID, layerID: 1)) {
            try BatchAdmission.admit(Self.batch(seq: 1, layers: [0, 1]), hash: "h", replica: replica, ledger: nil)
        }
    }

    @Test func aLayerOutsideTheReplicaIsRefused() {
        #expect(throws: BatchRefusal.layerNotUploadable(replicaID: Self.replicaID, layerID: 9)) {
            try BatchAdmission.admit(Self.batch(seq: 1, layers: [9]), hash: "h", replica: Self.replica(lastSeq: 0), ledger: nil)
        }
    }

    @Test(arguments: [ReplicaInfo.Direction.upload, .bidirectional])
    func uploadingLayersAndAttachmentsAreAdmitted(direction: ReplicaInfo.Direction) throws {
        let replica = Self.replica(lastSeq: 0, layers: [(0, direction)], attachments: direction)
        #expect(try Self.admitted(Self.batch(seq: 1, attachments: 1), replica: replica).seq == 1)
    }

    @Test(arguments: [ReplicaInfo.Direction.download, .none])
    func attachmentsOfAReplicaThatDoesNotUploadThemAreRefused(direction: ReplicaInfo.Direction) throws {
        let replica = Self.replica(lastSeq: 0, attachments: direction)
        #expect(throws: BatchRefusal.attachmentsNotUploadable(replicaID: Self.replicaID, direction: direction)) {
            try BatchAdmission.admit(Self.batch(seq: 1, attachments: 2), hash: "h", replica: replica, ledger: nil)
        }
        var empty = Self.batch(seq: 1)
        empty.attachments = []
        #expect(try Self.admitted(empty, replica: replica).seq == 1, "an empty attachment list asks nothing")
    }

    // MARK: - Finishing

    static let layerResults = [
        BatchLayerResult(id: 0, results: [
            BatchEditResult(globalId: "{0B0B0B0B-0000-4000-8000-00000000000B}", op: .delete, success: true),
            BatchEditResult(globalId: "{0D0D0D0D-0000-4000-8000-00000000000D}", op: .update, success: false),
        ])
    ]

    @Test func aFailedEditRejectsARollbackBatch() throws {
        let admitted = try Self.admitted(Self.batch(seq: 4, rollback: true), replica: Self.replica(lastSeq: 3))
        guard case .rejected(let rejected) = admitted.finish(generation: 20, applied: 1, failed: 1, layers: Self.layerResults, attachments: nil) else {
            Issue.record("expected a rejection")
            return
        }
        #expect(rejected.result.rejected.count == 1 && rejected.result.seq == 4)
    }

    @Test func withoutRollbackTheBatchCommitsWithItsFailures() throws {
        let admitted = try Self.admitted(Self.batch(seq: 4, rollback: false), hash: "hash-4", replica: Self.replica(lastSeq: 3))
        guard case .commit(let commit) = admitted.finish(generation: 20, applied: 1, failed: 1, layers: Self.layerResults, attachments: []) else {
            Issue.record("expected a commit")
            return
        }
        #expect(commit.advancesGenerationTo == 20 && commit.answer.result.generation == 20)
        #expect(commit.seq == 4 && commit.lastSeq == 4 && commit.pruneBelow == 4 && commit.hash == "hash-4" && commit.batchID == "batch-4")
        #expect(commit.answer.result.replayed == nil && commit.answer.result.attachments == [])
        #expect(try JSONValue.parse(commit.answer.json) == commit.answer.result.json, "the ledger row stores the answer's text")
    }

    @Test func aBatchWithNothingAppliedKeepsTheGeneration() throws {
        let admitted = try Self.admitted(Self.batch(seq: 4, rollback: false), replica: Self.replica(lastSeq: 3))
        guard case .commit(let commit) = admitted.finish(generation: 20, applied: 0, failed: 2, layers: [], attachments: nil) else {
            Issue.record("expected a commit")
            return
        }
        #expect(commit.advancesGenerationTo == nil && commit.answer.result.generation == nil)
        #expect(commit.lastSeq == 4, "the seq is used up all the same: a resend replays")
    }

    // MARK: - As HTTP

    @Test func routesAnswerSequenceRefusalsWith409AndTheExpectedSeq() {
        let gap = ServiceError.from(BatchRefusal.outOfOrder(replicaID: Self.replicaID, seq: 6, expectedSeq: 4))
        #expect(gap.status == 409 && gap.details == ["expectedSeq: 4"])
        #expect(gap.message == "batch 6 is out of order: replica \(Self.replicaID) expects batch 4")
        #expect(ServiceError.from(BatchRefusal.differentContent(replicaID: Self.replicaID, seq: 3, expectedSeq: 4)).status == 409)
        let direction = ServiceError.from(BatchRefusal.layerNotUploadable(replicaID: Self.replicaID, layerID: 1))
        #expect(direction.status == 400 && direction.details.isEmpty)
        #expect(ServiceError.from(BatchRefusal.attachmentsNotUploadable(replicaID: Self.replicaID, direction: .download)).status == 400)
    }

    // MARK: - The batch's time stamp

    /// The time an edit without its own is applied at: UTC ISO 8601 to the nearest millisecond,
    /// as Foundation's ISO 8601 formatter writes it (the reference here).
    @Test(arguments: [0, 1_796_634_609.0265, 1_796_634_609.9996, 1_796_634_609.0004, 951_782_399.9999, -1.5, 4_102_444_800.123])
    func theBatchTimeStampIsUTCToTheMillisecond(_ seconds: Double) {
        let reference = ISO8601DateFormatter()
        reference.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let date = Date(timeIntervalSince1970: seconds)
        #expect(BatchPlanner.timestamp(date) == reference.string(from: date))
    }
}
