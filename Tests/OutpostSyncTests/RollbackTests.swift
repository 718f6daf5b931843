import Foundation
import OutpostCore
import OutpostProtocol
import OutpostServer
import OutpostStorage
import OutpostTestSupport
import OutpostServiceTestSupport
import Testing

@testable import OutpostSync

@Suite("Rollback on failure, both settings")
struct RollbackTests {
    /// Two valid edits and one the service's domain refuses (written with plain SQL, as another
    /// tool could, so no local validation stops it).
    static func edits(_ gdb: Geodatabase) async throws -> String {
        let points = try gdb.table(named: "inspection_points")
        _ = try await points.add([Feature(globalID: Scenario.newPoint, attributes: ["asset_id": .string("NEW-1"), "asset_type": .string("valve")], geometry: try point(-122.65, 45.52))])
        var first = try #require(try await points.features(matching: FeatureQuery(where: "objectid = 1")).first)
        first.attributes = ["notes": .string("valid change")]
        try await points.update([first])
        try await gdb.write { conn in try conn.execute("UPDATE inspection_points SET asset_type = 'spaceship' WHERE objectid = 7") }
        return try #require(try await points.features(matching: FeatureQuery(where: "objectid = 7")).first?.globalID)
    }

    @Test(.scaledTimeLimit(minutes: 2), arguments: BackendKind.syncing)
    func rollbackTrueChangesNothingOnEitherSide(kind: BackendKind) async throws {
        let h = try await SyncHarness.start(kind)
        let gdb = try await h.replica()
        let bad = try await Self.edits(gdb)
        let serverBefore = try await h.service.snapshot()
        let tablesBefore = try await Scenario.tableDump(gdb)
        let changesBefore = try await gdb.read { try $0.capturedChanges().map(\.id) }

        let error = await #expect(throws: JobError.self) { try await h.sync(gdb, SyncGeodatabaseParameters(shouldRollbackOnFailure: true)) }
        #expect(error?.syncErrorCode == .rejected)
        #expect(error?.message.contains("nothing was applied") == true, "\(String(describing: error))")
        #expect(try await h.service.snapshot() == serverBefore, "the server applied nothing")
        #expect(try await Scenario.tableDump(gdb) == tablesBefore, "the user tables are byte for byte as before")
        #expect(try await gdb.read { try $0.capturedChanges().map(\.id) } == changesBefore, "every edit is still pending")
        #expect(try await gdb.read { try $0.sealedBatch() } == nil)
        let rejected = try await gdb.read { try $0.rejectedEdits() }
        #expect(rejected.count == 1)
        #expect(rejected.first?.globalID == bad)
        #expect(rejected.first?.pending == true)
        #expect(rejected.first?.reason.contains("asset_type") == true, "\(rejected)")

        // Fixed, it syncs; the pending rejection goes.
        try await gdb.write { conn in try conn.execute("UPDATE inspection_points SET asset_type = 'valve' WHERE objectid = 7") }
        try await h.sync(gdb)
        #expect(try await gdb.read { try $0.rejectedEdits() }.isEmpty)
        try await h.expectConverged(gdb, table: "inspection_points", layerID: 0)
        #expect(try await h.serverRows(0)[bad]?.attributes["asset_type"] == .string("valve"))
        try await h.stop()
    }

    @Test(.scaledTimeLimit(minutes: 2), arguments: BackendKind.syncing)
    func rollbackFalseAppliesTheValidEditsAndKeepsTheRejectedOne(kind: BackendKind) async throws {
        let h = try await SyncHarness.start(kind)
        let gdb = try await h.replica()
        let bad = try await Self.edits(gdb)
        let originalType = try await h.serverRows(0)[bad]?.attributes["asset_type"]

        let results = try await h.sync(gdb, SyncGeodatabaseParameters(shouldRollbackOnFailure: false))
        let layer = try #require(results.first { $0.layerId == 0 })
        #expect(layer.uploaded == PendingChanges(inserts: 1, updates: 1, deletes: 0))
        #expect(layer.editResults.map(\.globalId) == [bad])
        #expect(layer.editResults.first?.message.contains("asset_type") == true)
        let server = try await h.serverRows(0)
        #expect(server[Scenario.newPoint] != nil, "the valid insert applied")
        #expect(server[bad]?.attributes["asset_type"] == originalType, "the invalid update did not")
        // Nothing dropped silently: the rejected edit is kept with its values, and the replica
        // returns to the server's state.
        let rejected = try await gdb.read { try $0.rejectedEdits() }
        #expect(rejected.count == 1)
        #expect(rejected.first?.pending == false)
        #expect(rejected.first?.edit?.contains("spaceship") == true)
        #expect(layer.refetched, "the replica held a value the server refused: the layer was fetched again")
        #expect(layer.checksumMatches == true)
        try await h.expectConverged(gdb, table: "inspection_points", layerID: 0)
        #expect(try await gdb.read { try $0.capturedChanges().count } == 0)
        try await h.stop()
    }
}
