import Foundation
import GRDB
import OutpostCore
import OutpostTestSupport
import Testing

@testable import OutpostStorage

@Suite("Creating and opening geodatabases")
struct GeodatabaseTests {
    @Test func createdFilesAreGeoPackages() throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.fieldInspection(in: dir)
        try gdb.read { conn in
            let db = conn.db
            #expect(try Int.fetchOne(db, sql: "PRAGMA application_id") == 1_196_444_487)
            #expect(try Int.fetchOne(db, sql: "PRAGMA user_version") == 10300)
            #expect(try String.fetchOne(db, sql: "PRAGMA integrity_check") == "ok")
            #expect(try Row.fetchAll(db, sql: "PRAGMA foreign_key_check").isEmpty)
            #expect(try Int.fetchOne(db, sql: "SELECT count(*) FROM gpkg_spatial_ref_sys WHERE srs_id IN (4326, -1, 0)") == 3)
            let badChange = try Int.fetchOne(
                db,
                sql: "SELECT count(*) FROM gpkg_contents WHERE last_change NOT GLOB '[0-9][0-9][0-9][0-9]-[0-1][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:[0-5][0-9].[0-9][0-9][0-9]Z'")
            #expect(badChange == 0)
            // Our tables are registered extensions, never layers.
            #expect(try Int.fetchOne(db, sql: "SELECT count(*) FROM gpkg_contents WHERE table_name LIKE 'outpost%'") == 0)
            let registered = try String.fetchAll(db, sql: "SELECT table_name FROM gpkg_extensions WHERE extension_name = 'outpost_sync' AND scope = 'write-only' ORDER BY table_name")
            #expect(registered == [
                "outpost_batches", "outpost_capture", "outpost_changes", "outpost_conflicts", "outpost_layer_cursor", "outpost_rejected", "outpost_replica",
                "outpost_schema", "outpost_staging",
            ])
            // GeoPackage 1.3 R-tree trigger set (validator Req 75).
            let triggers = try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'rtree_inspection_points_geom_%' ORDER BY name")
            #expect(triggers == ["delete", "insert", "update1", "update2", "update3", "update4"].map { "rtree_inspection_points_geom_\($0)" })
            for layer in ["inspection_points", "pipelines", "service_areas"] {
                #expect(try String.fetchOne(db, sql: "SELECT rtreecheck(?)", arguments: ["rtree_\(layer)_geom"]) == "ok")
            }
        }
        try gdb.close()
    }

    @Test func thirdPartyReadersAgree() async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.fieldInspection(in: dir)
        let attachable = try gdb.table(named: "inspection_points")
        _ = try await attachable.addAttachment(toFeature: 1, name: "photo.jpg", contentType: "image/jpeg", data: Data(repeating: 7, count: 1000))
        try gdb.close()
        try await GeoPackageReaders.expectReadable(
            dir.file("field.gpkg"),
            layers: ["inspection_points": ("Point", 300), "pipelines": ("MultiLineString", 80), "service_areas": ("MultiPolygon", 12), "inspection_log": (nil, 60)],
            relatedTables: ["attachments", "inspection_points_attachments"])
    }

    /// A closed geodatabase refuses every use with a typed error (its connection pool must not
    /// be touched again), and closing twice is harmless.
    @Test func aClosedGeodatabaseRefusesUse() async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.fieldInspection(in: dir)
        let table = try gdb.table(named: "inspection_points")
        try gdb.close()
        try gdb.close()
        let counted = await #expect(throws: StorageError.self) { try await table.count() }
        #expect(counted?.code == .closed)
        #expect((#expect(throws: StorageError.self) { try gdb.read { _ in 1 } })?.code == .closed)
        let written = await #expect(throws: StorageError.self) { try await gdb.write { _ in 1 } }
        #expect(written?.code == .closed)
    }

    @Test func creationIsAtomicAndRefusesToOverwrite() throws {
        let dir = TemporaryDirectory()
        let schema = try ServiceSchema.load(from: Repository.sampleData("field_inspection/service.json"))
        let url = dir.file("a.gpkg")
        let gdb = try Geodatabase.create(at: url, schema: schema)
        try gdb.close()
        let error = #expect(throws: StorageError.self) { try Geodatabase.create(at: url, schema: schema) }
        #expect(error?.code == .alreadyExists)
        #expect(throws: StorageError.self) { try Geodatabase.create(at: dir.file("a.sqlite"), schema: schema) }
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: dir.url.path).filter { $0.contains("partial") }
        #expect(leftovers.isEmpty)
        let replaced = try Geodatabase.create(at: url, schema: schema, overwrite: true)
        try replaced.close()
    }

    @Test func notAGeoPackageIsRefused() throws {
        let dir = TemporaryDirectory()
        func code(_ url: URL) -> StorageError.Code? {
            do {
                let g = try Geodatabase.open(at: url)
                try? g.close()
                return nil
            } catch let e as StorageError {
                return e.code
            } catch {
                return nil
            }
        }
        #expect(code(dir.file("missing.gpkg")) == .notFound)
        let random = dir.file("random.gpkg")
        try Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 31) }).write(to: random)
        #expect(code(random) == .notAGeoPackage)
        let plain = dir.file("plain.gpkg")
        let q = try DatabaseQueue(path: plain.path)
        try q.write { try $0.execute(sql: "CREATE TABLE t (a)") }
        try q.close()
        #expect(code(plain) == .notAGeoPackage)
    }

    @Test func damagedFilesAreRefused() throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.fieldInspection(in: dir)
        try gdb.close()
        let bytes = try Data(contentsOf: dir.file("field.gpkg"))
        // Keep the header, cut the file after a few pages.
        let truncated = dir.file("truncated.gpkg")
        try bytes.prefix(4096 * 3).write(to: truncated)
        let error = #expect(throws: StorageError.self) {
            let g = try Geodatabase.open(at: truncated)
            defer { try? g.close() }
            _ = try g.read { conn in try g.tables.map { try $0.count(matching: .all, in: conn) } }
        }
        #expect(error?.code == .corrupt || error?.code == .sqlite)
        // A GeoPackage whose gpkg_contents names a missing table.
        let broken = dir.file("broken.gpkg")
        try bytes.write(to: broken)
        let q = try DatabaseQueue(path: broken.path)
        try q.write { try $0.execute(sql: "DROP TABLE outpost_schema; INSERT INTO gpkg_contents (table_name, data_type) VALUES ('ghost', 'features')") }
        try q.close()
        let ghost = #expect(throws: StorageError.self) { try Geodatabase.open(at: broken) }
        #expect(ghost?.code == .corrupt)
        #expect(ghost?.message.contains("ghost") == true)
    }

    @Test func readOnlyGeodatabasesRefuseWrites() async throws {
        let dir = TemporaryDirectory()
        try SampleGeodatabases.fieldInspection(in: dir).close()
        let gdb = try Geodatabase.open(at: dir.file("field.gpkg"), readOnly: true)
        let table = try gdb.table(named: "inspection_log")
        let error = await #expect(throws: StorageError.self) { try await table.delete(objectIDs: [1]) }
        #expect(error?.code == .readOnly)
        #expect(try await table.count() == 60)
        try gdb.close()
    }
}
