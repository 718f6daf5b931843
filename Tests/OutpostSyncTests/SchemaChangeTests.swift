import Foundation
import OutpostCore
import OutpostProtocol
import OutpostServer
import OutpostStorage
import OutpostSyncService
import OutpostTestSupport
import OutpostServiceTestSupport
import Testing

@testable import OutpostSync

/// Schema changes (docs/sync.md, "Schema changes"): the service evolves while replicas hold pending
/// edits; the replicas migrate with their next download and nothing a crew entered is lost.
@Suite("Schema changes")
struct SchemaChangeTests {
    /// The service schema plus a nullable field on the points, a new status code and a new layer.
    static func additive(_ schema: ServiceSchema) -> ServiceSchema {
        var s = schema
        s.layers[0].fields.append(FieldDefinition(name: "photo_count", type: .smallInteger, nullable: true))
        s.domains["status"]?.codedValues?.append(.init(name: "Deferred", code: "deferred"))
        s.layers.append(LayerDefinition(
            id: 9, name: "hazards", geometryType: .point, fields: [FieldDefinition(name: "kind", type: .string, length: 40, nullable: true)]))
        return s
    }

    static func backend(_ h: SyncHarness) -> any SyncBackend { h.service.backend as! any SyncBackend }

    @Test(.scaledTimeLimit(minutes: 2), arguments: BackendKind.syncing)
    func additiveChangesReachReplicasAndPendingEditsSurvive(kind: BackendKind) async throws {
        let h = try await SyncHarness.start(kind)
        let gdb = try await h.replica(layers: [0, 3])
        let points = try gdb.table(named: "inspection_points")
        let one = try #require(try await points.feature(objectID: 1)), two = try #require(try await points.feature(objectID: 2))
        // Pending edits made against schema version 1.
        try await points.update([Feature(objectID: 1, attributes: ["notes": .string("before the migration")])])
        let added = try await points.add([Feature(attributes: ["asset_id": .string("NEW-1"), "asset_type": .string("valve"), "status": .string("open")], geometry: try point(-122.66, 45.51))])[0]

        let steps = try await Self.backend(h).migrate(to: Self.additive(try await h.service.backend.schema()), allowDrop: false)
        #expect(Set(steps.map(\.kind)) == [.addField, .addLayer, .changeDomains])
        #expect(try await h.service.backend.schema().schemaVersion == 2)
        // The office uses the new field and code at once.
        var q = FeatureQuery()
        q.globalIDs = [two.globalID!]
        let serverTwo = try #require(try await h.service.backend.features(layerID: 0, query: q).first)
        try await h.serverEdit(layer: 0, updates: [Feature(objectID: serverTwo.objectID, attributes: ["photo_count": .integer(3), "status": .string("deferred")])])

        let results = try await h.sync(gdb)
        #expect(results.first { $0.layerId == 0 }?.checksumMatches == true)
        #expect(gdb.schema.schemaVersion == 2 && gdb.schema.layer(id: 0)?.field(named: "photo_count") != nil)
        #expect(gdb.schema.layer(id: 9) == nil, "a replica does not gain layers it was not made with")
        #expect(try await gdb.read { try $0.replicaState()?.schemaVersion } == 2)
        let local = try await SyncHarness.localRows(gdb, "inspection_points")
        #expect(local[two.globalID!]?.attributes["photo_count"] == .integer(3) && local[two.globalID!]?.attributes["status"] == .string("deferred"))
        let server = try await h.serverRows(0)
        #expect(server[one.globalID!]?.attributes["notes"] == .string("before the migration"), "the pending update synced")
        #expect(server[added.globalID!] != nil, "the pending insert synced")
        try await h.expectConverged(gdb, table: "inspection_points", layerID: 0)

        // The replica edits the new field and uses the new code; both sync up. (A FeatureTable
        // carries the definition it was made with: take it again after a migration.)
        try await gdb.table(named: "inspection_points").update([Feature(objectID: 1, attributes: ["photo_count": .integer(2), "status": .string("deferred")])])
        try await h.sync(gdb)
        #expect(try await h.serverRows(0)[one.globalID!]?.attributes["photo_count"] == .integer(2))
        try await h.expectConverged(gdb, table: "inspection_points", layerID: 0)
        try gdb.close()
        // GDAL sees the new column in the replica.
        let info = try await ExternalTools.run("ogrinfo", ["-ro", "-so", gdb.url.path, "inspection_points"])
        #expect(info.succeeded && info.stdout.contains("photo_count"), "\(info.stdout)\(info.stderr)")
        let check = try await ExternalTools.run("/usr/bin/python3", [try #require(ExternalTools.validateGPKG), "-k", "--extra", "--warning-as-error", gdb.url.path])
        #expect(check.succeeded, "the migrated replica is a valid GeoPackage: \(check.stdout)\(check.stderr)")
        try await h.stop()
    }

    /// A dropped field: values pending on a replica are kept in conflict records, whether they
    /// reach the server in an older-version batch or the replica migrates before uploading.
    @Test(.scaledTimeLimit(minutes: 2), arguments: BackendKind.syncing, [true, false])
    func droppedFieldsKeepPendingValues(kind: BackendKind, uploadFirst: Bool) async throws {
        let h = try await SyncHarness.start(kind)
        let gdb = try await h.replica(layers: [0])
        let points = try gdb.table(named: "inspection_points")
        let one = try #require(try await points.feature(objectID: 1))
        try await points.update([Feature(objectID: 1, attributes: ["inspector": .string("crew inspector"), "notes": .string("crew notes")])])
        var schema = try await h.service.backend.schema()
        await #expect(throws: StorageError.self, "a drop needs allowDrop") {
            var s = schema
            s.layers[0].fields.removeAll { $0.name == "inspector" }
            try await Self.backend(h).migrate(to: s, allowDrop: false)
        }
        schema.layers[0].fields.removeAll { $0.name == "inspector" }
        try await Self.backend(h).migrate(to: schema, allowDrop: true)

        if !uploadFirst {
            // The replica migrates before its edit goes up: the value is kept locally.
            try await h.sync(gdb, SyncGeodatabaseParameters(geodatabaseSyncDirection: .download))
            #expect(gdb.schema.layer(id: 0)?.field(named: "inspector") == nil)
        }
        try await h.sync(gdb)
        #expect(try await h.serverRows(0)[one.globalID!]?.attributes["notes"] == .string("crew notes"), "the rest of the edit applied")
        let records = try await gdb.read { try $0.conflicts() }.filter { $0.kind == "schemaDropped" }
        #expect(records.count == 1)
        let record = try JSONValue.parse(try #require(records.first?.record))
        #expect(record["ours"]?["inspector"] == .string("crew inspector"))
        if uploadFirst {
            #expect(try await Self.backend(h).conflictRecords().contains { $0.kind == .schemaDropped && $0.ours?["inspector"] == .string("crew inspector") })
        }
        try await h.expectConverged(gdb, table: "inspection_points", layerID: 0)
        try await h.stop()
    }

    /// Changes that would strand data are refused, and leave the service as it was.
    @Test(.scaledTimeLimit(minutes: 3), arguments: BackendKind.syncing)
    func unsafeChangesAreRefused(kind: BackendKind) async throws {
        let h = try await SyncHarness.start(kind)
        let base = try await h.service.backend.schema()
        var retyped = base
        retyped.layers[0].fields[retyped.layers[0].fields.firstIndex { $0.name == "notes" }!].type = .integer
        var required = base
        required.layers[0].fields.append(FieldDefinition(name: "crew_size", type: .integer, nullable: false))
        var removedLayer = base
        removedLayer.layers.removeLast()
        for bad in [retyped, required, removedLayer] {
            await #expect(throws: StorageError.self) { try await Self.backend(h).migrate(to: bad, allowDrop: true) }
        }
        let after = try await h.service.backend.schema()
        #expect(after.schemaVersion == base.schemaVersion && after.layers == base.layers)
        #expect(try await Self.backend(h).migrate(to: base, allowDrop: false).isEmpty, "the same schema is no change")
        try await h.stop()
    }
}
