import Foundation
import OutpostCore
import OutpostProtocol
import OutpostStorage
import OutpostTestSupport
import Testing

@testable import OutpostSync

@Suite("Generate and sync over loopback HTTP")
struct SyncRoundTripTests {
    @Test(.timeLimit(.minutes(2)), arguments: BackendKind.syncing)
    func generateEditBothSidesAndSync(kind: BackendKind) async throws {
        let h = try await SyncHarness.start(kind)
        let gdb = try await h.replica()
        #expect(try await gdb.table(named: "inspection_points").count() == 300)
        #expect(try await gdb.table(named: "inspection_log").count() == 60)
        try await h.expectConverged(gdb, table: "inspection_points", layerID: 0)

        // Local edits: an add, an update, a delete.
        let points = try gdb.table(named: "inspection_points")
        let added = try await points.add([Feature(attributes: ["asset_id": .string("NEW-1"), "asset_type": .string("valve"), "status": .string("open"), "condition": .integer(2)], geometry: try point(-122.65, 45.52))])[0]
        var first = try await points.features(matching: FeatureQuery(where: "objectid = 1"))[0]
        first.attributes = ["notes": .string("checked in the field")]
        try await points.update([first])
        let doomed = try await points.features(matching: FeatureQuery(where: "objectid = 2"))[0]
        try await points.delete(objectIDs: [doomed.objectID!])
        // Server edits by someone else: an update of another feature and an add.
        var other = try await h.service.backend.features(layerID: 0, query: FeatureQuery(where: "objectid = 3"))[0]
        other.attributes = ["notes": .string("pressure tested by the office")]
        try await h.serverEdit(layer: 0, updates: [other])
        try await h.serverEdit(layer: 0, adds: [Feature(attributes: ["asset_id": .string("SRV-1"), "asset_type": .string("meter")], geometry: try point(-122.61, 45.50))])

        let results = try await h.sync(gdb)
        let layer0 = try #require(results.first { $0.layerId == 0 })
        #expect(layer0.uploaded == PendingChanges(inserts: 1, updates: 1, deletes: 1))
        #expect(layer0.downloaded == PendingChanges(inserts: 1, updates: 1, deletes: 0))
        #expect(layer0.checksumMatches == true)
        #expect(layer0.editResults.isEmpty)
        try await h.expectConverged(gdb, table: "inspection_points", layerID: 0)
        #expect(try await points.pendingChanges().total == 0)
        #expect(try await h.service.backend.features(layerID: 0, query: FeatureQuery(where: "asset_id = 'NEW-1'")).first?.globalID == added.globalID)

        // A second sync with nothing to do moves nothing.
        let again = try await h.sync(gdb)
        #expect(again.allSatisfy { $0.uploaded.total == 0 && $0.downloaded.total == 0 })
        try await h.stop()
    }
}
