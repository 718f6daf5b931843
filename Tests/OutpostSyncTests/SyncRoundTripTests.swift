import Foundation
import OutpostCore
import OutpostProtocol
import OutpostStorage
import OutpostTestSupport
import OutpostServiceTestSupport
import Testing

@testable import OutpostSync

@Suite("Generate and sync over loopback HTTP")
struct SyncRoundTripTests {
    @Test(.scaledTimeLimit(minutes: 2), arguments: BackendKind.syncing)
    func generateEditBothSidesAndSync(kind: BackendKind) async throws {
        let h = try await SyncHarness.start(kind)
        let gdb = try await h.replica()
        // The download was checked under a temporary name and renamed: nothing of it is left.
        let beside = try FileManager.default.contentsOfDirectory(atPath: gdb.url.deletingLastPathComponent().path)
        #expect(beside.filter { $0.hasPrefix(gdb.url.lastPathComponent + ".") }.isEmpty, "\(beside)")
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

@Suite("Large applies pack the R-tree again")
struct SpatialIndexSyncTests {
    /// The table's R-tree is valid, holds one entry per geometry, its triggers are in place, and
    /// an envelope query through it finds what a scan finds.
    static func expectIndexWhole(_ gdb: Geodatabase, _ table: String, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let rtree = "rtree_\(table)_geom"
        let (check, entries, geometries, triggers, misplaced) = try await gdb.read { conn in
            func int(_ sql: String) throws -> Int64 { try conn.query(sql)[0][0].integerValue ?? -1 }
            return (
                try conn.query("SELECT rtreecheck('\(rtree)')")[0][0].textValue,
                try int("SELECT count(*) FROM \(rtree)"),
                try int("SELECT count(*) FROM \(table) WHERE geom NOT NULL AND NOT ST_IsEmpty(geom)"),
                try int("SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name LIKE '\(rtree)_%'"),
                try int(
                    """
                    SELECT count(*) FROM \(rtree) r LEFT JOIN \(table) p ON p.objectid = r.id
                    WHERE p.objectid IS NULL OR NOT (r.minx <= ST_MinX(p.geom) AND r.maxx >= ST_MaxX(p.geom) AND r.miny <= ST_MinY(p.geom) AND r.maxy >= ST_MaxY(p.geom))
                    """))
        }
        #expect(check == "ok", sourceLocation: sourceLocation)
        #expect(entries == geometries && triggers == 6 && misplaced == 0, "\(entries) entries, \(geometries) geometries, \(triggers) triggers, \(misplaced) misplaced", sourceLocation: sourceLocation)
        let box = Envelope(xmin: -122.70, ymin: 45.48, xmax: -122.60, ymax: 45.54)
        let all = try await gdb.table(named: table).features()
        let scanned = all.filter { f in f.geometry?.envelope.map { $0.xmin <= box.xmax && $0.xmax >= box.xmin && $0.ymin <= box.ymax && $0.ymax >= box.ymin } ?? false }
        #expect(try await gdb.table(named: table).objectIDs(matching: FeatureQuery(envelope: box)) == scanned.compactMap(\.objectID).sorted(), sourceLocation: sourceLocation)
    }

    @Test(.scaledTimeLimit(minutes: 2), arguments: BackendKind.syncing)
    func moversOfMostOfALayerSyncWithWholeIndexes(kind: BackendKind) async throws {
        let h = try await SyncHarness.start(kind)
        let a = try await h.replica("a"), b = try await h.replica("b")
        // More geometry writes than a rebuild needs, on the server's batch and on B's download,
        // and more rows than B's download writes with its capture triggers set aside.
        let points = try a.table(named: "inspection_points")
        let captureTriggers = "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'outpost_inspection_points_%' ORDER BY name"
        let triggersBefore = try await b.read { conn in try conn.query(captureTriggers).map { "\($0[0].textValue ?? ""): \($0[1].textValue ?? "")" } }
        #expect(triggersBefore.map { $0.prefix { $0 != ":" } } == ["attachments_cascade", "delete", "globalid_immutable", "insert", "update"].map { "outpost_inspection_points_\($0)" })
        var moved = try await points.features(matching: FeatureQuery(where: "objectid <= 200"))
        for i in moved.indices {
            guard let e = moved[i].geometry?.envelope else { continue }
            moved[i].geometry = try point(e.xmin + 0.01, e.ymin - 0.005)
            moved[i].attributes = [:]
        }
        try await points.update(moved)
        try await points.delete(objectIDs: (201...220).map(Int64.init))
        _ = try await points.add((0..<400).map { i in
            Feature(attributes: ["asset_id": .string("BULK-\(i)"), "asset_type": .string("hydrant"), "status": .string("open")], geometry: try point(-122.66 + Double(i) * 0.0005, 45.51))
        })
        let up = try await h.sync(a)
        #expect(up.first { $0.layerId == 0 }?.uploaded == PendingChanges(inserts: 400, updates: 200, deletes: 20))
        let down = try await h.sync(b)
        let layer0 = try #require(down.first { $0.layerId == 0 })
        #expect(layer0.downloaded == PendingChanges(inserts: 400, updates: 200, deletes: 20))
        #expect(layer0.checksumMatches == true)
        try await h.expectConverged(b, table: "inspection_points", layerID: 0)
        // B's capture is whole again: the same triggers, and its next edits are captured and sent.
        #expect(try await b.read { conn in try conn.query(captureTriggers).map { "\($0[0].textValue ?? ""): \($0[1].textValue ?? "")" } } == triggersBefore)
        let bPoints = try b.table(named: "inspection_points")
        try await bPoints.update([Feature(objectID: 1, attributes: ["notes": .string("after the download")])])
        _ = try await bPoints.add([Feature(attributes: ["asset_id": .string("AFTER-1"), "asset_type": .string("hydrant"), "status": .string("open")], geometry: try point(-122.65, 45.52))])
        try await bPoints.delete(objectIDs: [221])
        #expect(try await bPoints.pendingChanges() == PendingChanges(inserts: 1, updates: 1, deletes: 1))
        let again = try await h.sync(b)
        #expect(again.first { $0.layerId == 0 }?.uploaded == PendingChanges(inserts: 1, updates: 1, deletes: 1))
        for gdb in [a, b] { try await Self.expectIndexWhole(gdb, "inspection_points") }
        if kind == .sqlite {
            let server = try Geodatabase.open(at: h.service.file, readOnly: true)
            try await Self.expectIndexWhole(server, "inspection_points")
            try server.close()
        }
        try await h.stop()
    }
}
