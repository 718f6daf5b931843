import Foundation
import OutpostCore
import OutpostProtocol
import OutpostServer
import OutpostStorage
import OutpostTestSupport
import OutpostServiceTestSupport
import Testing

@testable import OutpostSync

/// Delta files on either backend (the CLI tests run SQLite): a round trip by file converges,
/// a replayed file is answered from the ledger, and an update package reaches a second replica.
@Suite("Delta files, both backends")
struct DeltaFileTests {
    @Test(.timeLimit(.minutes(2)), arguments: BackendKind.syncing)
    func aRoundTripByFileConvergesAndAnUpdatePackageFollows(kind: BackendKind) async throws {
        let h = try await SyncHarness.start(kind)
        let backend = try #require(h.service.backend as? any SyncBackend)
        let gdb = try await h.replica("crew"), reader = try await h.replica("reader")
        let points = try gdb.table(named: "inspection_points")
        var first = try #require(try await points.features(matching: FeatureQuery(where: "objectid = 1")).first)
        first.attributes = ["notes": .string("by file")]
        try await points.update([first])
        let dir = TemporaryDirectory("outpost-delta-\(kind)")
        let since = try #require(try await reader.read { try $0.replicaState() }).cursor

        try await DeltaSync.exportEdits(from: gdb, to: dir.file("e.delta"))
        let applied = try await DeltaImport.importEdits(dir.file("e.delta"), into: backend, service: "field_inspection", reply: dir.file("r.delta"))
        #expect(applied.edits == 1 && !applied.replayed)
        let again = try await DeltaImport.importEdits(dir.file("e.delta"), into: backend, service: "field_inspection", reply: dir.file("r2.delta"))
        #expect(again.replayed)
        let reply = try await DeltaSync.importReply(into: gdb, from: dir.file("r.delta"))
        #expect(reply.acknowledged)
        try await h.expectConverged(gdb, table: "inspection_points", layerID: 0)
        await #expect(throws: DeltaError.self) { try await DeltaSync.importReply(into: gdb, from: dir.file("r2.delta")) }

        // The other replica, with nothing to upload, takes the change from an update package.
        let upto = try await h.service.backend.generation()
        let count = try await DeltaImport.exportUpdates(
            from: backend, service: "field_inspection", layers: [0], area: nil, since: since, upto: upto, to: dir.file("u.delta"))
        #expect(count >= 1)
        let updated = try await DeltaSync.importReply(into: reader, from: dir.file("u.delta"))
        #expect(updated.changes >= 1 && updated.upto == upto)
        try await h.expectConverged(reader, table: "inspection_points", layerID: 0)
        try await h.stop()
    }
}
