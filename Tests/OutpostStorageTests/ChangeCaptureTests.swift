import Foundation
import GRDB
import OutpostCore
import OutpostTestSupport
import Testing

@testable import OutpostStorage

@Suite("Change capture")
struct ChangeCaptureTests {
    @Test func ownEditsAreCapturedAndCoalesced() async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.fieldInspection(in: dir)
        let table = try gdb.table(named: "inspection_points")
        #expect(try await table.pendingChanges() == PendingChanges())
        let added = try await table.add([FeatureTableEditTests.validPoint(), FeatureTableEditTests.validPoint()])
        try await table.update([Feature(objectID: added[0].objectID, attributes: ["notes": .string("updated after insert")])])
        try await table.delete(objectIDs: [added[1].objectID!])  // insert + delete: nothing to sync
        try await table.update([Feature(objectID: 1, attributes: ["notes": .string("a")])])
        try await table.update([Feature(objectID: 1, geometry: FeatureTableEditTests.point(-122.61, 45.51))])
        try await table.update([Feature(objectID: 2, attributes: ["condition": .integer(5)])])
        try await table.delete(objectIDs: [2, 3])
        // A no-op update is not an edit.
        let unchanged = try #require(try await table.feature(objectID: 4))
        try await table.update([Feature(objectID: 4, attributes: ["notes": unchanged["notes"]!])])
        let pending = try await table.pendingChanges()
        #expect(pending == PendingChanges(inserts: 1, updates: 1, deletes: 2))

        let changes = try await gdb.read { conn in try conn.capturedChanges(table: "inspection_points") }
        #expect(changes.count == 9)
        let geometryUpdate = try #require(changes.first { $0.objectID == 1 && $0.changedColumns == ["geom"] })
        let oldGeometry = try #require(geometryUpdate.oldGeometry)
        #expect(try GeoPackageBinary.decode(oldGeometry).geometry.type == .point)
        let noteUpdate = try #require(changes.first { $0.objectID == 1 && $0.changedColumns == ["notes"] })
        #expect(noteUpdate.oldValues.keys.sorted() == ["notes"])
        let delete = try #require(changes.first { $0.operation == .delete && $0.objectID == 3 })
        #expect(delete.oldValues["asset_id"] != nil && delete.oldGeometry != nil)
        #expect(changes.allSatisfy { $0.globalID.flatMap(GlobalID.normalized) != nil })
        #expect(changes.allSatisfy { GeoPackageDate.parse($0.editedAt) != nil })
        try gdb.close()
    }

    @Test func silencedCaptureRecordsNothingAndAlwaysComesBack() async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.fieldInspection(in: dir)
        let table = try gdb.table(named: "inspection_points")
        try await gdb.write { conn in
            try conn.withChangeCaptureSilenced {
                _ = try table.add([FeatureTableEditTests.validPoint()], in: conn)
                try table.update([Feature(objectID: 1, attributes: ["notes": .string("downloaded")])], in: conn)
                try table.delete(objectIDs: [2], in: conn)
            }
        }
        #expect(try await table.pendingChanges() == PendingChanges())
        // A failure inside the silenced block rolls the flag back with the transaction.
        await #expect(throws: StorageError.self) {
            try await gdb.write { conn in
                try conn.withChangeCaptureSilenced {
                    try table.delete(objectIDs: [99_999], in: conn)
                }
            }
        }
        try await table.update([Feature(objectID: 1, attributes: ["notes": .string("local")])])
        #expect(try await table.pendingChanges().updates == 1)
        #expect(throws: StorageError.self) { try gdb.read { conn in try conn.withChangeCaptureSilenced {} } }
        try gdb.close()
    }

    /// Edits by GDAL, the sqlite3 shell with SpatiaLite, and a DELETE from the plain shell are
    /// captured by the same triggers (docs/geopackage-extension.md, "Triggers").
    @Test func editsByOtherWritersAreCaptured() async throws {
        let dir = TemporaryDirectory()
        try SampleGeodatabases.fieldInspection(in: dir).close()
        let file = dir.file("field.gpkg")

        // GDAL appends a feature without a global id (the trigger gives it one), and its SQL
        // dialect updates in place.
        let (append, update) = try await OtherWriters.gdalAppendAndUpdate(file, scratch: dir)
        #expect(append.succeeded, "\(append.stderr)")
        #expect(!append.stderr.contains("Warning"), "\(append.stderr)")
        #expect(update.succeeded, "\(update.stderr)")
        // The sqlite3 shell with SpatiaLite (which registers the ST_* functions) inserts and updates.
        let spatialite = try await ExternalTools.run(
            "sqlite3", [file.path],
            input: """
                .bail on
                .load mod_spatialite
                SELECT EnableGpkgAmphibiousMode();
                INSERT INTO inspection_points (geom, asset_id, asset_type, status) VALUES (AsGPB(GeomFromText('POINT(-122.66 45.51)', 4326)), 'SL-1', 'meter', 'open');
                UPDATE inspection_points SET notes = 'moved', geom = AsGPB(GeomFromText('POINT(-122.67 45.52)', 4326)) WHERE asset_id = 'SL-1';
                """)
        #expect(spatialite.succeeded, "\(spatialite.stderr)")
        // The plain shell can only delete (its triggers need no ST_* function).
        let delete = try await ExternalTools.run("sqlite3", [file.path, "DELETE FROM inspection_points WHERE asset_id = 'HY-1002'"])
        #expect(delete.succeeded, "\(delete.stderr)")
        let plainInsert = try await ExternalTools.run("sqlite3", [file.path, "INSERT INTO inspection_points (asset_id, asset_type, status) VALUES ('X-1', 'meter', 'open')"])
        #expect(!plainInsert.succeeded && plainInsert.stderr.contains("ST_IsEmpty"))

        let gdb = try Geodatabase.open(at: file)
        let table = try gdb.table(named: "inspection_points")
        #expect(try await table.pendingChanges() == PendingChanges(inserts: 2, updates: 0, deletes: 1))
        let changes = try await gdb.read { conn in try conn.capturedChanges() }
        #expect(changes.map(\.operation) == [.insert, .update, .insert, .update, .delete])
        #expect(changes[1].changedColumns.sorted() == ["condition", "status"])
        #expect(changes[1].oldValues["status"] == .string("open"))
        #expect(changes[3].changedColumns.sorted() == ["geom", "notes"])
        let gdal = try #require(try await table.features(matching: FeatureQuery(where: "asset_id = 'GD-1'")).first)
        #expect(gdal.globalID.flatMap(GlobalID.normalized) == gdal.globalID)
        #expect(changes[0].globalID == gdal.globalID)
        #expect(gdal["depth_m"] == .double(2.5) && gdal["status"] == .string("closed"))
        let moved = try #require(try await table.features(matching: FeatureQuery(where: "asset_id = 'SL-1'")).first)
        #expect(moved.geometry == .point(try Point(x: -122.67, y: 45.52)))
        // The index followed every writer.
        #expect(try await gdb.string("SELECT rtreecheck('rtree_inspection_points_geom')") == "ok")
        #expect(try await table.objectIDs(matching: FeatureQuery(envelope: Envelope(xmin: -122.671, ymin: 45.519, xmax: -122.669, ymax: 45.521))).contains(moved.objectID!))
        try gdb.close()
        let check = try await ExternalTools.run("/usr/bin/python3", [try #require(ExternalTools.validateGPKG), "-k", "--extra", "--warning-as-error", file.path])
        #expect(check.succeeded, "\(check.stdout)\(check.stderr)")
    }
}
