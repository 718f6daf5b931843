import Foundation
import OutpostCore
@testable import OutpostProtocol
import OutpostStorage
import OutpostSyncService
import Testing

/// `SyncService`'s steps over a store held in memory, no I/O: a batch applies once and is
/// replayed after, refusals and rejections leave the store as it was, concurrent edits meet the
/// conflict rules, and the feed sends each replica what others changed and nothing of its own.
/// (The same steps run over SQLite and PostgreSQL in the backend-parametrised sync tests.)
@Suite("Sync service over a store in memory")
struct SyncServiceTests {
    static let crewA = "{0A0A0A0A-0000-4000-8000-00000000000A}"
    static let crewB = "{0B0B0B0B-0000-4000-8000-00000000000B}"
    static let layer = LayerDefinition(
        id: 0, name: "inspections", geometryType: nil,
        fields: [FieldDefinition(name: "objectid", type: .oid), FieldDefinition(name: "globalid", type: .globalID), FieldDefinition(name: "status", type: .string)])

    static func gid(_ n: Int) -> String { "{00000000-0000-4000-8000-\(String(format: "%012d", n))}" }

    /// A store with replicas A and B of the whole table, at generation 0, its clock stopped at
    /// 2026-12-02 12:00 UTC.
    static func store() -> MemorySyncStore {
        let store = MemorySyncStore(schema: ServiceSchema(name: "inspections", layers: [], tables: [layer]), clock: ServiceClock { Date(timeIntervalSince1970: 1_796_212_800) })
        store.change { s in
            for id in [crewA, crewB] {
                s.replicas[id] = ReplicaInfo(
                    replicaID: id, replicaName: id == crewA ? "A" : "B", syncModel: .perReplica, replicaServerGen: 0,
                    layers: [ReplicaInfo.Layer(id: 0, serverGen: 0, syncDirection: .bidirectional)], geometry: nil, returnAttachments: false,
                    attachmentsSyncDirection: .none, lastSeq: 0, serviceGeneration: 0, schemaVersion: 1, creationDate: 0, lastSyncDate: nil)
            }
        }
        return store
    }

    static func batch(_ replica: String, seq: Int64, rollback: Bool = true, rule: String? = nil, _ edits: [BatchEdit]) -> UploadBatch {
        var batch = UploadBatch(
            replicaId: replica, batchId: "\(replica)-\(seq)", seq: seq, schemaVersion: 1, rollbackOnFailure: rollback, layers: [BatchLayer(id: 0, edits: edits)])
        batch.conflictPolicy = rule
        return batch
    }

    static func insert(_ n: Int, status: String) -> BatchEdit {
        BatchEdit(op: .insert, globalId: gid(n), attributes: ["status": .string(status)], editedAt: "2026-12-02T11:00:00.000Z")
    }

    static func update(_ n: Int, status: String, base: Int64, at time: String = "2026-12-02T11:30:00.000Z") -> BatchEdit {
        BatchEdit(op: .update, globalId: gid(n), attributes: ["status": .string(status)], changedColumns: ["status"], editedAt: time, baseGeneration: base)
    }

    static func status(_ store: MemorySyncStore, _ n: Int) -> FieldValue? { store.committed.features[0]?[gid(n)]?.attributes["status"] }

    @Test func aBatchAppliesOnceAndIsReplayedAfter() async throws {
        let store = Self.store()
        let service = SyncService(store: store)
        let batch = Self.batch(Self.crewA, seq: 1, [Self.insert(1, status: "open"), Self.insert(2, status: "open")])
        let first = try await service.apply(batch, hash: "h1")
        #expect(first.result.generation == 1 && first.result.layers[0].results.allSatisfy(\.success))
        #expect(store.committed.generation == 1 && store.committed.features[0]?.count == 2)
        #expect(store.committed.replicas[Self.crewA]?.lastSeq == 1 && store.committed.replicas[Self.crewA]?.lastSyncDate == 1_796_212_800_000)

        // The same batch again (its response was lost): the stored answer, nothing applied twice.
        let again = try await service.apply(batch, hash: "h1")
        #expect(again.result.replayed == true && again.result.layers == first.result.layers && again.result.generation == 1 && again.stages == nil)
        #expect(store.committed.generation == 1 && store.committed.log.count == 2)
        #expect(try await service.batchResult(replicaID: Self.crewA.lowercased(), seq: 1)?.generation == 1, "the ledger answers by a replica id in any case")
    }

    @Test func refusedAndRejectedBatchesLeaveTheStoreAsItWas() async throws {
        let store = Self.store()
        let service = SyncService(store: store)
        _ = try await service.apply(Self.batch(Self.crewA, seq: 1, [Self.insert(1, status: "open")]), hash: "h1")
        let before = store.committed

        // Another body under a seq the ledger holds, and a seq gap: refused.
        await #expect(throws: BatchRefusal.self) { try await service.apply(Self.batch(Self.crewA, seq: 1, [Self.insert(9, status: "x")]), hash: "other") }
        await #expect(throws: BatchRefusal.outOfOrder(replicaID: Self.crewA, seq: 3, expectedSeq: 2)) {
            try await service.apply(Self.batch(Self.crewA, seq: 3, [Self.insert(9, status: "x")]), hash: "h3")
        }
        // With rollback on failure one bad edit (an update of a feature never there) rejects all.
        let missing = Self.update(99, status: "gone", base: 1)
        await #expect(throws: BatchRejected.self) {
            try await service.apply(Self.batch(Self.crewA, seq: 2, [Self.insert(2, status: "new"), missing]), hash: "h2")
        }
        // A fault just before the commit: nothing of the batch stays.
        store.faults.arm("server.beforeCommit")
        await #expect(throws: (any Error).self) { try await service.apply(Self.batch(Self.crewA, seq: 2, [Self.insert(2, status: "new")]), hash: "h2b") }
        let after = store.committed
        #expect(after.generation == before.generation && after.log == before.log && after.features[0]?.keys.sorted() == before.features[0]?.keys.sorted())
        // The ledger keeps the rejection's answer under seq 2; the replica's position stays.
        #expect(after.replicas[Self.crewA]?.lastSeq == 1 && after.ledger[Self.crewA]?.keys.sorted() == [1, 2] && after.ledger[Self.crewA]?[2]?.hash == "h2")

        // Without rollback the bad edit fails alone and the rest applies.
        let partial = try await service.apply(Self.batch(Self.crewA, seq: 2, rollback: false, [Self.insert(2, status: "new"), missing]), hash: "h2c")
        #expect(partial.result.layers[0].results.map(\.success) == [true, false])
        #expect(Self.status(store, 2) == .string("new") && store.committed.features[0]?.count == 2)
    }

    @Test func aRolledBackBatchIsRefusedAlikeWhenSentAgain() async throws {
        let store = Self.store()
        let service = SyncService(store: store)
        // Seq 1 updates a feature the service does not hold yet: rolled back, its answer kept.
        let early = Self.batch(Self.crewA, seq: 1, [Self.update(7, status: "checked", base: 0)])
        let first = await #expect(throws: BatchRejected.self) { try await service.apply(early, hash: "h1") }
        #expect(first?.result.replayed == nil && first?.result.rejected.count == 1)
        #expect(try await service.batchResult(replicaID: Self.crewA, seq: 1) == nil, "a rolled-back batch has no applied result to look up")

        // Another crew adds the feature: the same batch would now apply, and is refused alike,
        // its answer marked replayed; nothing of it applies.
        _ = try await service.apply(Self.batch(Self.crewB, seq: 1, [Self.insert(7, status: "open")]), hash: "b1")
        let second = await #expect(throws: BatchRejected.self) { try await service.apply(early, hash: "h1") }
        #expect(second?.result.replayed == true && second?.result.layers == first?.result.layers)
        #expect(Self.status(store, 7) == .string("open") && store.committed.generation == 1 && store.committed.replicas[Self.crewA]?.lastSeq == 0)

        // The crew withdrew the batch and sealed another under seq 1: it applies, its row
        // replaces the kept one, and is what a resend gets.
        let resealed = Self.batch(Self.crewA, seq: 1, [Self.update(7, status: "checked", base: 1)])
        let applied = try await service.apply(resealed, hash: "h1b")
        #expect(applied.result.generation == 2 && Self.status(store, 7) == .string("checked"))
        #expect(store.committed.replicas[Self.crewA]?.lastSeq == 1 && store.committed.ledger[Self.crewA]?[1]?.hash == "h1b")
        #expect(try await service.apply(resealed, hash: "h1b").result.replayed == true)
        await #expect(throws: BatchRefusal.differentContent(replicaID: Self.crewA, seq: 1, expectedSeq: 2)) { try await service.apply(early, hash: "h1") }
        #expect(try await service.batchResult(replicaID: Self.crewA, seq: 1)?.generation == 2)
    }

    @Test func aBatchWhoseRejectionIsNotKeptIsJudgedAgain() async throws {
        // A batch made from an ArcGIS synchronizeReplica request: the same edits sent once their
        // cause is fixed apply.
        let store = Self.store()
        let service = SyncService(store: store)
        let early = Self.batch(Self.crewA, seq: 1, [Self.update(7, status: "checked", base: 0)])
        await #expect(throws: BatchRejected.self) { try await service.apply(early, hash: "k1", keepsRejection: false) }
        #expect(store.committed.ledger[Self.crewA] == nil)
        _ = try await service.apply(Self.batch(Self.crewB, seq: 1, [Self.insert(7, status: "open")]), hash: "b1")
        #expect(try await service.apply(early, hash: "k1", keepsRejection: false).result.generation == 2)
        #expect(Self.status(store, 7) == .string("checked"))
    }

    @Test func aRejectionIsNotKeptOverABatchAppliedSince() async throws {
        // Seq 1 is rolled back; before its answer is kept, the crew's resealed seq 1 applies (as
        // another process would, between the two transactions): the late answer must not take
        // the applied batch's row.
        let store = Self.store()
        let service = SyncService(store: store)
        let resealed = Self.batch(Self.crewA, seq: 1, [Self.insert(7, status: "checked")])
        store.beforeWrite.withLock {
            $0 = { number in if number == 2 { _ = try await SyncService(store: store).apply(resealed, hash: "h1b") } }
        }
        let early = Self.batch(Self.crewA, seq: 1, [Self.update(7, status: "checked", base: 0)])
        await #expect(throws: BatchRejected.self) { try await service.apply(early, hash: "h1") }
        #expect(store.committed.replicas[Self.crewA]?.lastSeq == 1 && store.committed.ledger[Self.crewA]?[1]?.hash == "h1b")
        #expect(try await service.apply(resealed, hash: "h1b").result.replayed == true)
        await #expect(throws: BatchRefusal.differentContent(replicaID: Self.crewA, seq: 1, expectedSeq: 2)) { try await service.apply(early, hash: "h1") }

        // The next seq rolled back with no writer between: its answer is kept.
        let next = Self.batch(Self.crewA, seq: 2, [Self.update(8, status: "checked", base: 1)])
        await #expect(throws: BatchRejected.self) { try await service.apply(next, hash: "h2") }
        #expect(store.committed.ledger[Self.crewA]?[2]?.hash == "h2" && store.committed.replicas[Self.crewA]?.lastSeq == 1)
    }

    @Test func concurrentEditsMeetTheConflictRules() async throws {
        let store = Self.store()
        let service = SyncService(store: store)
        _ = try await service.apply(Self.batch(Self.crewA, seq: 1, [Self.insert(1, status: "open"), Self.insert(2, status: "open")]), hash: "a1")
        // B changes both features after A's generation 1 ...
        _ = try await service.apply(Self.batch(Self.crewB, seq: 1, [Self.update(1, status: "closed", base: 1), Self.update(2, status: "closed", base: 1)]), hash: "b1")
        // ... and A, still at generation 1, changes them too: by the rule it asks for.
        let serverWins = try await service.apply(Self.batch(Self.crewA, seq: 2, rule: "serverWins", [Self.update(1, status: "repaired", base: 1)]), hash: "a2")
        #expect(Self.status(store, 1) == .string("closed"))
        #expect(serverWins.result.layers[0].results[0].conflicts?.first?.winner == "theirs")
        let manual = try await service.apply(Self.batch(Self.crewA, seq: 3, rule: "manual", [Self.update(2, status: "repaired", base: 1)]), hash: "a3")
        let open = try #require(manual.result.layers[0].results[0].conflicts?.first)
        #expect(open.state == "open" && Self.status(store, 2) == .string("closed"))
        #expect(store.committed.conflicts[open.id!]?.state == "open")
        // A resolves it with its next batch: the record is closed.
        var resolving = Self.batch(Self.crewA, seq: 4, rule: "clientWins", [Self.update(2, status: "repaired", base: 3)])
        resolving.resolvedConflicts = [open.id!]
        _ = try await service.apply(resolving, hash: "a4")
        #expect(store.committed.conflicts[open.id!]?.state == "resolved" && Self.status(store, 2) == .string("repaired"))
    }

    @Test func theFeedSendsOthersChangesAndNoneOfTheReplicasOwn() async throws {
        let store = Self.store()
        let service = SyncService(store: store)
        _ = try await service.apply(Self.batch(Self.crewA, seq: 1, (1...5).map { Self.insert($0, status: "open") }), hash: "a1")
        _ = try await service.apply(Self.batch(Self.crewB, seq: 1, [Self.update(2, status: "closed", base: 1)]), hash: "b1")

        // B gets A's five features, two pages of three; A gets only B's change.
        let first = try await service.feedPage(replicaID: Self.crewB, layerID: 0, since: 0, upto: 2, after: nil, limit: 3)
        #expect(first.changes.map(\.globalId) == (1...3).map(Self.gid) && first.next == Self.gid(3))
        let second = try await service.feedPage(replicaID: Self.crewB, layerID: 0, since: 0, upto: 2, after: first.next, limit: 3)
        #expect(second.changes.map(\.globalId) == [Self.gid(4), Self.gid(5)] && second.next == nil)
        #expect(first.changes[1].attributes?["status"] == .string("closed"), "a feature changed twice is sent once, as it is now")
        let forA = try await service.feedPage(replicaID: Self.crewA, layerID: 0, since: 0, upto: 2, after: nil, limit: 100)
        #expect(forA.changes.map(\.globalId) == [Self.gid(2)] && forA.changes[0].kind == .upsert)
        // A window of only A's own edits is empty for A without reading a feature.
        let own = try await service.feedPage(replicaID: Self.crewA, layerID: 0, since: 0, upto: 1, after: nil, limit: 100)
        #expect(own.changes.isEmpty && own.next == nil)
        // A deletion reaches the other replica as a leave.
        _ = try await service.apply(Self.batch(Self.crewA, seq: 2, [BatchEdit(op: .delete, globalId: Self.gid(4))]), hash: "a2")
        let leave = try await service.feedPage(replicaID: Self.crewB, layerID: 0, since: 2, upto: 3, after: nil, limit: 100)
        #expect(leave.changes.map(\.kind) == [.leave] && leave.changes[0].globalId == Self.gid(4))
        await #expect(throws: SyncServiceError.self) { try await service.feedPage(replicaID: Self.crewB, layerID: 7, since: 0, upto: 3, after: nil, limit: 10) }
    }

    @Test func aStoreOfWholeBatchesAsksForTheWholeBody() async throws {
        let store = Self.store()
        #expect(!store.appliesStreamedBatches)
        let service = SyncService(store: store)
        let body = StreamedBatch(limit: 1 << 20)
        let head = UploadBatch.FramedReader.Head(batch: Self.batch(Self.crewA, seq: 1, []), layers: [])
        await #expect(throws: StreamedBatch.WholeBodyNeeded.self) { try await service.apply(streamed: head, from: body) }
        #expect(store.committed.generation == 0)
    }
}
