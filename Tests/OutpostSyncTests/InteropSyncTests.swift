import Foundation
import OutpostCore
import OutpostProtocol
import OutpostServer
import OutpostStorage
import OutpostTestSupport
import OutpostServiceTestSupport
import Testing

@testable import OutpostSync

/// Canonical GeoPackages for a third-party comparison: the same schema, features written in
/// global-id order (so equal data gets equal fids), nothing else.
enum CanonicalExport {
    static func write(_ layers: [Int: [Feature]], schema: ServiceSchema, to url: URL) throws {
        var s = schema
        s.layers = s.layers.filter { layers[$0.id] != nil }.map { var l = $0; l.sync = false; return l }
        s.tables = s.tables.filter { layers[$0.id] != nil }.map { var l = $0; l.sync = false; return l }
        let gdb = try Geodatabase.create(at: url, schema: s, overwrite: true, changeCapture: false) { conn in
            for (id, features) in layers {
                let table = try conn.geodatabase.table(id: id)
                try table.importFeatures(in: conn) { importer in
                    for var f in features.sorted(by: { $0.globalID! < $1.globalID! }) {
                        f.objectID = nil
                        _ = try importer.add(f)
                    }
                }
            }
        }
        try gdb.close()
    }

    /// pygeodiff's change count between two GeoPackages (0: the same data).
    static func geodiffChanges(_ a: URL, _ b: URL, changeset: URL) async throws -> Int {
        let result = try await ExternalTools.python(
            """
            import sys, pygeodiff
            g = pygeodiff.GeoDiff()
            g.create_changeset(sys.argv[1], sys.argv[2], sys.argv[3])
            print(g.changes_count(sys.argv[3]))
            """, [a.path, b.path, changeset.path])
        #expect(result.succeeded, "\(result.stderr)")
        return Int(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
    }
}

@Suite("Other writers and third-party checks")
struct InteropSyncTests {
    /// Edits made on the replica by GDAL, the sqlite3 shell with SpatiaLite, and a DELETE from
    /// the plain shell sync like any other; pygeodiff then finds no difference between the
    /// replica and the server's data for the same filter.
    @Test(.scaledTimeLimit(minutes: 3), arguments: BackendKind.syncing)
    func editsByOtherWritersSyncAndPygeodiffAgrees(kind: BackendKind) async throws {
        let h = try await SyncHarness.start(kind)
        let area = Envelope(xmin: -122.70, ymin: 45.49, xmax: -122.64, ymax: 45.53)
        let gdb = try await h.replica("field", extent: area, layers: [0, 3])
        let file = gdb.url
        let victim = try #require(try await gdb.table(named: "inspection_points").features(matching: FeatureQuery(limit: 1)).first)
        try gdb.close()

        let (append, update) = try await OtherWriters.gdalAppendAndUpdate(file, scratch: h.directory)
        #expect(append.succeeded, "\(append.stderr)")
        #expect(update.succeeded, "\(update.stderr)")
        let spatialite = try await ExternalTools.run(
            "sqlite3", [file.path],
            input: """
                .bail on
                .load mod_spatialite
                SELECT EnableGpkgAmphibiousMode();
                INSERT INTO inspection_points (geom, asset_id, asset_type, status) VALUES (AsGPB(GeomFromText('POINT(-122.66 45.51)', 4326)), 'SL-1', 'meter', 'open');
                UPDATE inspection_points SET notes = 'moved by spatialite', geom = AsGPB(GeomFromText('POINT(-122.67 45.52)', 4326)) WHERE asset_id = 'SL-1';
                INSERT INTO inspection_log (point_globalid, action, note, logged_at) VALUES ('\(victim.globalID!)', 'shell note', 'from sqlite3', '2025-06-01T10:00:00.000Z');
                """)
        #expect(spatialite.succeeded, "\(spatialite.stderr)")
        let delete = try await ExternalTools.run("sqlite3", [file.path, "DELETE FROM inspection_points WHERE globalid = '\(victim.globalID!)'"])
        #expect(delete.succeeded, "\(delete.stderr)")

        let reopened = try Geodatabase.open(at: file)
        let results = try await h.sync(reopened)
        let points = try #require(results.first { $0.layerId == 0 })
        #expect(points.uploaded == PendingChanges(inserts: 2, updates: 0, deletes: 1))
        #expect(results.first { $0.layerId == 3 }?.uploaded.inserts == 1)
        #expect(results.allSatisfy { $0.checksumMatches == true })
        let server = try await h.serverRows(0)
        #expect(server.values.contains { $0.attributes["asset_id"] == .string("GD-1") && $0.attributes["status"] == .string("closed") })
        let moved = Geometry.point(try Point(x: -122.67, y: 45.52))
        #expect(server.values.contains { $0.attributes["asset_id"] == .string("SL-1") && $0.geometry == moved })
        #expect(server[victim.globalID!] == nil)

        // pygeodiff on canonical exports of both sides (the replica's filter on the server).
        let schema = try await h.service.backend.schema()
        var scope = FeatureQuery()
        scope.intersecting = .polygon(area.polygon)
        scope.limit = 100_000
        let serverSide = [
            0: try await h.service.backend.features(layerID: 0, query: scope),
            3: try await h.service.backend.features(layerID: 3, query: FeatureQuery(limit: 100_000)),
        ]
        let replicaSide = [0: try await reopened.table(id: 0).features(), 3: try await reopened.table(id: 3).features()]
        let a = h.directory.file("server-export.gpkg"), b = h.directory.file("replica-export.gpkg")
        try CanonicalExport.write(serverSide, schema: schema, to: a)
        try CanonicalExport.write(replicaSide, schema: schema, to: b)
        #expect(try await CanonicalExport.geodiffChanges(a, b, changeset: h.directory.file("diff.bin")) == 0)
        // The comparison can fail: one changed value is one change.
        var tampered = replicaSide
        tampered[0]![0].attributes["notes"] = .string("tampered")
        try CanonicalExport.write(tampered, schema: schema, to: b)
        #expect(try await CanonicalExport.geodiffChanges(a, b, changeset: h.directory.file("diff2.bin")) == 1)
        try reopened.close()
        try await h.stop()
    }
}
