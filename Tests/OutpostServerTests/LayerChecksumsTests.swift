import Foundation
import OutpostCore
import OutpostProtocol
import OutpostServiceTestSupport
import OutpostStorage
import OutpostSyncService
import OutpostTestSupport
import Synchronization
import Testing

@testable import OutpostSQLiteService

@Suite("A server's whole-layer checksums, kept by the batches it applies")
struct LayerChecksumsTests {
    /// A new replica's export hashes the layers it holds whole; each batch the server applies
    /// then moves those sums to its generation by hashing the rows it wrote, as they were and as
    /// they are, and every one equals the layer hashed afresh: inserts, updates and deletes, a
    /// rejected edit's savepoint, batches sent back to back (the second starts from a sum still
    /// being moved), a batch refused whole. A commit made otherwise (applyEdits, a second
    /// connection to the file) leaves them behind, and they are hashed again.
    @Test func batchesMoveAWholeLayersChecksumToTheirGeneration() async throws {
        try await withServer(.sqlite) { client, service in
            let backend = try #require(service.backend as? SQLiteServiceBackend)
            // On a machine busy with other tests the batch's reader may come later than a batch
            // of a few rows lasts, and the sums would be given up (their absence is not what is
            // tested). Only this service's batches wait longer.
            backend.layerChecksums.snapshotWaitMilliseconds.store(5_000, ordering: .relaxed)
            let sync: any SyncBackend = backend
            let info = try await registerReplica(service)
            let uri = "\(native)/replicas/\(q(info.replicaID))/batches"
            func hashed(_ layer: Int) async throws -> (UInt64, Int) {
                let sum = try await backend.geodatabase.read { conn in try conn.geodatabase.table(id: layer).checksum(matching: FeatureQuery(), in: conn) }
                return (sum.value, sum.count)
            }
            func known(_ layer: Int) async throws -> (UInt64, Int)? {
                await backend.layerChecksums.settled()
                return backend.layerChecksums.sum(of: layer, at: try await backend.generation()).map { ($0.value, $0.count) }
            }
            func expectCurrent(_ comment: Comment, layers: [Int] = [0, 3], sourceLocation: SourceLocation = #_sourceLocation) async throws {
                for layer in layers {
                    let sum = try await known(layer)
                    #expect(sum != nil, "layer \(layer): \(comment)", sourceLocation: sourceLocation)
                    if let sum { #expect(sum == (try await hashed(layer)), "layer \(layer): \(comment)", sourceLocation: sourceLocation) }
                }
            }
            try await expectCurrent("hashed by the new replica's export")

            let existing = try await service.backend.features(layerID: 0, query: FeatureQuery(limit: 6))
            let before = try await hashed(0)
            var edits = [insertEdit(), BatchEdit(op: .update, globalId: existing[0].globalID!, attributes: ["asset_id": "K-1"], geometry: ["x": -122.66, "y": 45.51])]
            edits.append(BatchEdit(op: .delete, globalId: existing[1].globalID!))
            #expect(try await client.put("\(uri)/1", json: try batch(info, seq: 1, edits)).status == 200)
            try await expectCurrent("an insert, an update and a delete")
            #expect(try await known(0)! != before)

            // Without rollback, a rejected edit among applied ones.
            let mixed = [
                BatchEdit(op: .update, globalId: existing[2].globalID!, attributes: ["asset_id": "K-2"]),
                BatchEdit(op: .update, globalId: existing[3].globalID!, attributes: ["asset_type": "spaceship"]),
                BatchEdit(op: .delete, globalId: existing[4].globalID!),
            ]
            let answer = try await client.put("\(uri)/2", json: try batch(info, seq: 2, mixed, rollback: false))
            #expect(answer.status == 200, "\(answer.text)")
            #expect(try JSONDecoder().decode(BatchResult.self, from: Data(answer.text.utf8)).layers.first?.results.map(\.success) == [true, false, true])
            try await expectCurrent("a rejected edit's savepoint rolled back")

            // Two batches back to back: the second begins while the first's sums may still be moving.
            let moved = try await service.backend.features(layerID: 0, query: FeatureQuery(limit: 10)).filter { $0.globalID != existing[5].globalID }
            #expect(try await client.put("\(uri)/3", json: try batch(info, seq: 3, [BatchEdit(op: .update, globalId: moved[6].globalID!, geometry: ["x": -122.6, "y": 45.5])])).status == 200)
            #expect(try await client.put("\(uri)/4", json: try batch(info, seq: 4, [BatchEdit(op: .delete, globalId: moved[6].globalID!), insertEdit()])).status == 200)
            try await expectCurrent("two batches back to back")

            // With rollback, one bad edit refuses the batch: nothing committed, the sums stay.
            let generation = try await backend.generation()
            let refused = [BatchEdit(op: .update, globalId: existing[5].globalID!, attributes: ["asset_id": "K-3"]), BatchEdit(op: .update, globalId: existing[5].globalID!, attributes: ["asset_type": "spaceship"])]
            _ = try await client.put("\(uri)/5", json: try batch(info, seq: 5, refused))
            #expect(try await backend.generation() == generation)
            try await expectCurrent("a batch refused whole")

            // applyEdits commits a generation of its own: the sums are behind it, and the next
            // whole verify hashes the layer (and keeps that).
            _ = try await service.backend.applyEdits(
                layerID: 0, edits: EditRequest(updates: [Feature(objectID: existing[5].objectID, attributes: ["notes": .string("office")])]), rollbackOnFailure: true)
            #expect(try await known(0) == nil)
            let asked = try await sync.checksums(replicaID: info.replicaID, layerIDs: [0])
            #expect(asked.layers[0].checksum == String(format: "%016llx", try await hashed(0).0))
            try await expectCurrent("hashed by a verify", layers: [0])

            // A commit on another connection to the file (another process's) is in no sum: the
            // server's next batch finds the writer's data version moved and forgets them all.
            let other = try Geodatabase.open(at: service.file)
            try await other.write { conn in try conn.execute("UPDATE inspection_points SET notes = 'from elsewhere' WHERE objectid = ?", arguments: [.integer(existing[5].objectID!)]) }
            try other.close()
            let next = try await sync.replica(id: info.replicaID).lastSeq + 1
            #expect(try await client.put("\(uri)/\(next)", json: try batch(info, seq: next, [insertEdit("{0C0C0C0C-0000-4000-8000-000000000003}")])).status == 200)
            #expect(try await known(0) == nil)
            #expect(try await known(3) == nil)
            let after = try await sync.checksums(replicaID: info.replicaID, layerIDs: [0, 3])
            #expect(after.layers[0].checksum == String(format: "%016llx", try await hashed(0).0))
            try await expectCurrent("hashed again after the other connection's commit")
        }
    }

    /// A batch whose reader of the data it starts from does not come in time (every reader of
    /// the file's pool busy) gives the kept sums up instead of waiting for it: nothing is kept
    /// for the new generation, the reader that comes later does no harm, and the next whole
    /// verify hashes the layer afresh, as a fresh hash does.
    @Test func aBatchWhoseReaderComesLateGivesTheSumsUp() async throws {
        try await withServer(.sqlite) { client, service in
            let backend = try #require(service.backend as? SQLiteServiceBackend)
            let sync: any SyncBackend = backend
            let info = try await registerReplica(service)
            let uri = "\(native)/replicas/\(q(info.replicaID))/batches"
            func hashed(_ layer: Int) async throws -> UInt64 {
                try await backend.geodatabase.read { conn in try conn.geodatabase.table(id: layer).checksum(matching: FeatureQuery(), in: conn) }.value
            }
            func known(_ layer: Int) async throws -> UInt64? {
                await backend.layerChecksums.settled()
                return backend.layerChecksums.sum(of: layer, at: try await backend.generation())?.value
            }
            #expect(try await known(0) == (try await hashed(0)), "hashed by the new replica's export")
            let existing = try await service.backend.features(layerID: 0, query: FeatureQuery(limit: 2))

            // Every reader of the pool held, then one more asked for: it must wait.
            let geodatabase = backend.geodatabase
            let release = DispatchSemaphore(value: 0)
            let holders = 5
            let holding = DispatchGroup()
            for _ in 0..<holders {
                holding.enter()
                Thread.detachNewThread {
                    _ = try? geodatabase.readCommittedBlocking { _ in
                        holding.leave()
                        release.wait()
                    }
                }
            }
            #expect(holding.wait(timeout: .now() + 10) == .success, "the pool lends \(holders) readers")
            let probed = Flag()
            Thread.detachNewThread { _ = try? geodatabase.readCommittedBlocking { _ in probed.set() } }
            try await Task.sleep(for: .milliseconds(50))
            #expect(!probed.isSet, "no reader is left in the pool")
            // Let them go however the batch ends, so a batch that needed a reader cannot hang.
            let letGo = Flag(), safety = Flag()
            @Sendable func letThemGo() { if letGo.set() { for _ in 0..<holders { release.signal() } } }
            Thread.detachNewThread {
                Thread.sleep(forTimeInterval: 10)
                if !letGo.isSet { safety.set() }
                letThemGo()
            }

            let edits = [
                BatchEdit(op: .update, globalId: existing[0].globalID!, attributes: ["asset_id": "L-1"], geometry: ["x": -122.61, "y": 45.53]),
                BatchEdit(op: .delete, globalId: existing[1].globalID!), insertEdit(),
            ]
            let answer = try await client.put("\(uri)/1", json: try batch(info, seq: 1, edits))
            #expect(answer.status == 200, "\(answer.text)")
            #expect(!safety.isSet, "the batch was answered while every reader was held")
            letThemGo()
            #expect(try await known(0) == nil, "given up, not kept wrong")
            #expect(try await known(3) == nil)
            try await Task.sleep(for: .milliseconds(50))
            #expect(probed.isSet, "the readers came back to the pool")

            // The whole verify hashes afresh and keeps that; the next batch moves it again.
            let asked = try await sync.checksums(replicaID: info.replicaID, layerIDs: [0])
            #expect(asked.layers[0].checksum == String(format: "%016llx", try await hashed(0)))
            #expect(try await known(0) == (try await hashed(0)))
            backend.layerChecksums.snapshotWaitMilliseconds.store(5_000, ordering: .relaxed)
            #expect(try await client.put("\(uri)/2", json: try batch(info, seq: 2, [insertEdit("{0C0C0C0C-0000-4000-8000-000000000004}")])).status == 200)
            #expect(try await known(0) == (try await hashed(0)), "moved by the next batch")
        }
    }

    /// A flag set once, from any thread.
    final class Flag: Sendable {
        private let value = Atomic<Bool>(false)
        var isSet: Bool { value.load(ordering: .relaxed) }
        /// Sets it; whether this call did.
        @discardableResult func set() -> Bool { !value.exchange(true, ordering: .relaxed) }
    }
}
