import Foundation
import NIOCore
import OutpostCore
import OutpostHTTPTestSupport
import OutpostProtocol
import OutpostServer
import OutpostServiceTestSupport
import OutpostStorage
import OutpostSyncService
import OutpostTestSupport
import Testing

@testable import OutpostSync
import OutpostSQLiteService

/// A framed batch is applied by the server as its frames arrive (docs/sync.md, "Framed
/// batches"), over real HTTP on 127.0.0.1: once, whatever way its bytes come in pieces; nothing
/// of a body broken off or malformed; a body that stalls is applied once all of it is there,
/// without the write transaction waiting on it.
@Suite("Framed batches streamed in")
struct StreamedBatchTests {
    struct Upload {
        let h: SyncHarness
        let batch: UploadBatch
        /// The batch framed in frames of about 2 KB.
        let body: Data
        let url: URL
    }

    /// A replica with `inserts` new points, and the first batch it would send them in.
    static func upload(_ kind: BackendKind, inserts: Int = 2_500) async throws -> Upload {
        let h = try await SyncHarness.start(kind)
        let gdb = try await h.replica(layers: [0])
        let points = try gdb.table(named: "inspection_points")
        _ = try await points.add(try (0..<inserts).map { i in
            Feature(attributes: ["asset_id": .string("STREAM-\(i)"), "asset_type": .string("valve")], geometry: try point(-122.6 + Double(i) * 1e-4, 45.5))
        })
        let (body, replicaID) = try await gdb.write { conn -> (Data, String) in
            let state = try #require(try conn.replicaState())
            #expect(state.batchEncodings?.contains(UploadBatch.framedEncoding) == true)
            let prepared = try #require(try BatchSealer.prepare(conn, seq: 1, after: 0, tables: [state.layers[0].table], maxChanges: 20_000, rollbackOnFailure: true))
            return (prepared.made.stored.body, state.replicaID)
        }
        try gdb.close()
        let batch = try UploadBatch.decode(body)
        #expect(batch.editCount == inserts)
        let connection = try ServiceConnection(featureServerURL: h.url)
        return Upload(
            h: h, batch: batch, body: try FramedBatchTests.framed(batch, frameBytes: 2_000).body,
            url: connection.url(connection.nativeURL, "replicas/\(replicaID)/batches/1"))
    }

    static func streamedRows(_ h: SyncHarness) async throws -> Int {
        try await h.serverRows(0).values.count { $0.attributes["asset_id"]?.stringValue?.hasPrefix("STREAM-") == true }
    }

    static let contentType = UploadBatch.Encoding.binary.contentType

    /// How many framed batches the server applied `how` (its `/metrics`).
    static func framed(_ h: SyncHarness, applied how: String) async throws -> Int {
        var root = URLComponents(url: h.url, resolvingAgainstBaseURL: false)!
        root.path = "/metrics"
        let connection = try ServiceConnection(featureServerURL: h.url)
        let text = String(decoding: try await connection.send(.GET, root.url!, accept: "text/plain").body, as: UTF8.self)
        let prefix = "outpost_sync_framed_batches_total{applied=\"\(how)\"} "
        return text.split(separator: "\n").first { $0.hasPrefix(prefix) }.flatMap { Double($0.dropFirst(prefix.count)) }.map { Int($0) } ?? 0
    }

    @Test(.scaledTimeLimit(minutes: 2), arguments: BackendKind.syncing)
    func aBatchSentInPiecesAppliesOnceAndIsReplayed(kind: BackendKind) async throws {
        let u = try await Self.upload(kind)
        let pieces = PiecewiseUpload.pieces(of: u.body, count: 12)
        let answer = try #require(await PiecewiseUpload.put(u.url, pieces: pieces, contentType: Self.contentType, pause: { _ in .milliseconds(10) }))
        #expect(answer.status == 200, "\(String(decoding: answer.body, as: UTF8.self))")
        let result = try BatchResult(json: JSONValue.parse(answer.body))
        #expect(result.seq == 1 && result.replayed != true && result.layers.first?.applied?.inserts == 2_500)
        #expect(try await Self.streamedRows(u.h) == 2_500)
        // (Whether SQLite applied it as it arrived depends on the pieces' timing on a busy
        // machine; theSQLiteBackendAppliesFramesAsTheyArrive… holds that. PostgreSQL applies
        // framed batches whole.)
        if kind == .postgres { #expect(try await Self.framed(u.h, applied: "streaming") == 0) }
        // The same bytes again, whole: the stored answer.
        let again = try #require(await PiecewiseUpload.put(u.url, pieces: [u.body], contentType: Self.contentType))
        #expect(try again.status == 200 && BatchResult(json: JSONValue.parse(again.body)).replayed == true)
        // The same bytes again in pieces: the stored answer too.
        let third = try #require(await PiecewiseUpload.put(u.url, pieces: pieces, contentType: Self.contentType))
        #expect(try third.status == 200 && BatchResult(json: JSONValue.parse(third.body)).replayed == true)
        #expect(try await Self.streamedRows(u.h) == 2_500)
        // Other content under the same seq.
        var other = u.batch
        other.batchId = GlobalID.make()
        let refused = try #require(await PiecewiseUpload.put(u.url, pieces: PiecewiseUpload.pieces(of: try FramedBatchTests.framed(other).body, count: 5), contentType: Self.contentType))
        #expect(refused.status == 409)
        #expect(try await Self.streamedRows(u.h) == 2_500)
        // Each resend waited for its whole body: only its hash says replay or refusal.
        let whole = try await Self.framed(u.h, applied: "whole"), streaming = try await Self.framed(u.h, applied: "streaming")
        #expect(whole + streaming == 4 && whole >= 3, "\(whole) whole, \(streaming) streaming")
        try await u.h.stop()
    }

    /// A batch of a frame or two is applied once all of it has come: its last frame arrives
    /// only after the replica's commit, and the write lock would wait for it.
    @Test(.scaledTimeLimit(minutes: 2), arguments: BackendKind.syncing)
    func aSmallFramedBatchIsAppliedWhole(kind: BackendKind) async throws {
        let u = try await Self.upload(kind, inserts: 40)
        let answer = try #require(await PiecewiseUpload.put(u.url, pieces: PiecewiseUpload.pieces(of: u.body, count: 3), contentType: Self.contentType))
        #expect(answer.status == 200)
        #expect(try await Self.streamedRows(u.h) == 40)
        #expect(try await Self.framed(u.h, applied: "whole") == 1)
        #expect(try await Self.framed(u.h, applied: "streaming") == 0)
        try await u.h.stop()
    }

    @Test(.scaledTimeLimit(minutes: 2), arguments: BackendKind.syncing)
    func aBodyBrokenOffOrMalformedAppliesNothing(kind: BackendKind) async throws {
        let u = try await Self.upload(kind)
        let before = try await u.h.service.snapshot()
        let pieces = PiecewiseUpload.pieces(of: u.body, count: 12)
        // The client gone after half of it.
        let broken = await PiecewiseUpload.put(u.url, pieces: pieces, contentType: Self.contentType, pause: { _ in .milliseconds(5) }, breakAfter: 6)
        #expect(broken == nil || broken!.status >= 400)
        // Cut inside a frame, then an end mark: the last frame never completes.
        let cut = u.body.prefix(u.body.count * 3 / 5) + Data([0])
        let malformed = try #require(await PiecewiseUpload.put(u.url, pieces: PiecewiseUpload.pieces(of: cut, count: 8), contentType: Self.contentType))
        #expect(malformed.status == 400 && String(decoding: malformed.body, as: UTF8.self).contains("not an upload batch"))
        #expect(try await u.h.service.snapshot() == before, "nothing applied, no generation taken")
        // The whole batch then applies once.
        let answer = try #require(await PiecewiseUpload.put(u.url, pieces: pieces, contentType: Self.contentType))
        #expect(answer.status == 200)
        #expect(try await Self.streamedRows(u.h) == 2_500)
        try await u.h.stop()
    }

    @Test(.scaledTimeLimit(minutes: 2), arguments: BackendKind.syncing)
    func aBodyThatStallsIsAppliedWhole(kind: BackendKind) async throws {
        let u = try await Self.upload(kind)
        let pieces = PiecewiseUpload.pieces(of: u.body, count: 12)
        let answer = try #require(await PiecewiseUpload.put(u.url, pieces: pieces, contentType: Self.contentType, pause: { $0 == 6 ? .milliseconds(400) : .zero }))
        #expect(answer.status == 200)
        #expect(try await Self.streamedRows(u.h) == 2_500)
        // (How it was applied depends on the server's pace against the pause; the SQLite
        // backend's own test holds that a stalled body is let go.)
        #expect(try await Self.framed(u.h, applied: "whole") + Self.framed(u.h, applied: "streaming") == 1)
        try await u.h.stop()
    }

    /// The SQLite backend itself: the frames are applied as they come (no fallback to the whole
    /// body); a body that stalls gives its transaction up before its end, with nothing applied;
    /// a seq the ledger holds waits for the whole body.
    @Test(.scaledTimeLimit(minutes: 2))
    func theSQLiteBackendAppliesFramesAsTheyArriveAndLetsGoOfAStalledBody() async throws {
        let u = try await Self.upload(.sqlite)
        let backend = try #require(u.h.service.backend as? any SyncBackend)
        let pieces = PiecewiseUpload.pieces(of: u.body, count: 12)
        final class Flag: Sendable {
            let value = Locked(false)
            var isSet: Bool { value.withLock { $0 } }
            func set() { value.withLock { $0 = true } }
        }
        // Limits far from the pauses (a busy machine must not change the outcome): a stall of
        // 5 s against a limit of 50 ms (at 1.5 s, a full suite on two cores once applied the
        // first half slower than the stall lasted, and saw none), steady pieces against 30 s.
        func stream(stallLimit: Duration, _ pause: @escaping @Sendable (Int) -> Duration) -> (StreamedBatch, Task<Void, Never>, Flag) {
            let streamed = StreamedBatch(limit: 64 << 20, stallLimit: stallLimit, totalStallLimit: stallLimit * 2)
            let (body, continuation) = AsyncStream.makeStream(of: ByteBuffer.self)
            let done = Flag()
            let feeder = Task {
                for (i, piece) in pieces.enumerated() {
                    try? await Task.sleep(for: pause(i))
                    continuation.yield(ByteBuffer(bytes: piece))
                }
                done.set()
                continuation.finish()
            }
            let pump = Task { await streamed.pump(body) }
            _ = feeder
            return (streamed, pump, done)
        }

        // Stalls after half: the transaction ends while the body is still coming.
        let before = try await u.h.service.snapshot()
        let (stalled, stalledPump, stalledDone) = stream(stallLimit: .milliseconds(50)) { $0 == 6 ? .seconds(5) : .milliseconds(5) }
        let stalledHead = try await stalled.head()
        await #expect(throws: StreamedBatch.WholeBodyNeeded.self) { _ = try await backend.applyStreamedBatch(stalledHead, from: stalled) }
        #expect(!stalledDone.isSet, "given up before the body ended")
        #expect(try await u.h.service.snapshot() == before, "nothing applied")
        await stalledPump.value

        // Steady pieces: applied as they arrive.
        let (steady, steadyPump, steadyDone) = stream(stallLimit: .seconds(30)) { _ in .milliseconds(30) }
        let head = try await steady.head()
        #expect(!steadyDone.isSet, "the head arrives first")
        let answer = try await backend.applyStreamedBatch(head, from: steady)
        #expect(answer.result.layers.first?.results.count { $0.success && $0.op == .insert } == 2_500 && answer.stages != nil)
        await steadyPump.value
        #expect(try await Self.streamedRows(u.h) == 2_500)

        // The ledger holds seq 1 now: only the whole body's hash can say what it is.
        let (again, againPump, _) = stream(stallLimit: .seconds(30)) { _ in .zero }
        let againHead = try await again.head()
        await #expect(throws: StreamedBatch.WholeBodyNeeded.self) { _ = try await backend.applyStreamedBatch(againHead, from: again) }
        await againPump.value
        let whole = try await again.whole()
        #expect(try await backend.applyBatchAnswering(try UploadBatch.decode(whole), hash: UploadBatch.hash(whole)).result.replayed == true)
        try await u.h.stop()
    }

    /// A batch's runs are read ahead, on a reader of the committed data, and their edits planned
    /// and checked there, while the run before is written (`BatchApplier.readsAhead`): the
    /// answer and the rows are those of the writer reading and planning alone, for features an
    /// earlier run inserted or deleted, a feature three times in one run, and features read ahead
    /// (one the service had; one the service changed after the edit's base, whose update in a
    /// late run is a conflict only if the reader read the others' changes too; an insert in a
    /// late run that fails).
    @Test(.scaledTimeLimit(minutes: 3))
    func runsReadAheadAnswerAsTheWriterReadingAlone() async throws {
        var outcomes: [(results: [String], rows: [String])] = []
        // The writer alone; every fresh edit of a later run prepared ahead; the helper's first
        // chunk in its hands when the writer comes to the run, and taken at its first edit (the
        // rest read and planned by the writer), or not done then (all done by the writer, the
        // helper's late work dropped); as a server does.
        let pacings: [(ahead: Bool, pacing: BatchApplier.HelperPacing)] = [
            (false, .free), (true, .writerWaitsForAll), (true, .firstChunkHeld), (true, .firstChunkLate), (true, .free),
        ]
        for (ahead, pacing) in pacings {
            // Three runs of at most 2,000 edits.
            let u = try await Self.upload(.sqlite, inserts: 4_500)
            let existing = try await u.h.serverRows(0).keys.sorted()
            let (deleted, kept) = (existing[0], existing[1])
            var batch = u.batch
            batch.rollbackOnFailure = false
            // In the order of their asset ids: the same edits at the same places in both runs.
            func number(_ edit: BatchEdit) -> Int { Int(edit.attributes?["asset_id"]?.stringValue?.dropFirst("STREAM-".count) ?? "") ?? 0 }
            let inserted = batch.layers[0].edits.sorted { number($0) < number($1) }
            let base = inserted.compactMap(\.baseGeneration).max()
            func update(_ gid: String, _ type: String) -> BatchEdit {
                BatchEdit(op: .update, globalId: gid, attributes: ["asset_type": .string(type)], changedColumns: ["asset_type"], baseGeneration: base)
            }
            // Changed on the server after the batch's base: its update in a late run is planned
            // ahead (on the reader) as a conflict.
            let conflicted = existing[2]
            let before = try await #require(u.h.service.backend as? any SyncBackend).generation()
            _ = try await u.h.service.backend.applyEdits(
                layerID: 0, edits: EditRequest(updates: [Feature(globalID: conflicted, attributes: ["asset_type": .string("pole")])]), rollbackOnFailure: true)
            var edits = inserted
            edits.insert(BatchEdit(op: .delete, globalId: deleted, baseGeneration: base), at: 10)
            // A delete in the second run's first chunk of a feature the service had, prepared
            // ahead: the writer's planner must learn it (``BatchPlanner/adopt``) for the feature's
            // update in the third.
            let deletedLate = existing[3]
            edits.insert(BatchEdit(op: .delete, globalId: deletedLate, baseGeneration: base), at: 2_010)
            // An update of a feature the service had, the first edit of it in the batch: prepared
            // ahead in its simple form (one step, its row in the chunk's buffers).
            let updatedLate = existing[4]
            edits.insert(update(updatedLate, "pole"), at: 2_020)
            // A late run's conflict, and an insert whose plan fails (a field the layer lacks).
            edits.insert(
                BatchEdit(op: .update, globalId: conflicted, attributes: ["asset_type": .string("hydrant")], changedColumns: ["asset_type"], baseGeneration: before),
                at: 2_300)
            edits.insert(
                BatchEdit(op: .insert, globalId: "{0B0B0B0B-0000-4000-8000-000000000001}", attributes: ["asset_id": .string("BAD"), "no_such_field": .string("x")]),
                at: 2_350)
            let (early, late) = (inserted[5].globalId, inserted[2_400].globalId)
            let new = Set(inserted.map(\.globalId))
            edits.append(update(deletedLate, "meter"))
            edits += [update(early, "hydrant"), update(late, "meter"), update(late, "hydrant"), update(deleted, "meter"), update(kept, "hydrant")]
            batch.layers[0].edits = edits
            let body = try FramedBatchTests.framed(batch, frameBytes: 2_000).body
            let backend = try #require(u.h.service.backend as? any SyncBackend)
            let streamed = StreamedBatch(limit: 64 << 20, stallLimit: .seconds(30), totalStallLimit: .seconds(60))
            let pump = Task { await streamed.pump(AsyncStream { $0.yield(ByteBuffer(bytes: body)); $0.finish() }) }
            BatchApplier.readsAhead.store(ahead, ordering: .relaxed)
            try #require(backend as? SQLiteServiceBackend).readAheadPacing.store(pacing.rawValue, ordering: .relaxed)
            let answer = try await backend.applyStreamedBatch(try await streamed.head(), from: streamed)
            BatchApplier.readsAhead.store(true, ordering: .relaxed)
            await pump.value
            let results = answer.result.layers[0].results
            #expect(results.count == edits.count)
            // Ahead, fresh edits of later runs were read, planned and checked off the writer.
            let preparedAhead = answer.stages?.preparedAhead ?? -1
            switch pacing {
            case _ where !ahead:
                #expect(preparedAhead == 0)
            case .writerWaitsForAll:
                // All but the first run's and the few edits of a feature seen before.
                #expect(preparedAhead >= edits.count - 2_000 - 6, "edits prepared ahead: \(preparedAhead) of \(edits.count)")
            case .firstChunkHeld:
                // The first chunk of each later run (two).
                #expect(preparedAhead == 2 * 200, "edits prepared ahead: \(preparedAhead)")
            case .firstChunkLate:
                #expect(preparedAhead == 0)
            case .free:
                // No count: on a busy machine the helper may get no core at all.
                break
            }

            #expect(results.suffix(5).map(\.success) == [true, true, true, results[results.count - 2].success, true], "\(results.suffix(5))")
            #expect(results[2_300].resolution == "conflict", "\(results[2_300])")
            #expect(results[2_350].success == false && results[2_350].error?.description.contains("no_such_field") == true, "\(results[2_350])")
            let rows = try await u.h.serverRows(0)
            #expect(rows[early]?.attributes["asset_type"] == .string("hydrant") && rows[late]?.attributes["asset_type"] == .string("hydrant"))
            #expect(rows[kept]?.attributes["asset_type"] == .string("hydrant"))
            #expect(rows[updatedLate]?.attributes["asset_type"] == .string("pole"))
            outcomes.append((
                results.map { "\($0.op) \($0.success) \($0.objectId ?? -1) \($0.resolution ?? "") \($0.error.map { "\($0)" } ?? "")" },
                rows.map { (new.contains($0.key) ? "new " : "\($0.key) ") + $0.value.description }.sorted()))
            try await u.h.stop()
        }
        for other in outcomes.dropFirst() {
            let (answers, rows) = (outcomes[0].results.difference(from: other.results), outcomes[0].rows.difference(from: other.rows))
            #expect(answers.isEmpty, "the same answer: \(Array(answers).prefix(4))")
            #expect(rows.isEmpty, "the same rows: \(Array(rows).prefix(4))")
        }
    }
}
