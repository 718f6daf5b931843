import Foundation
import GRDB
import OutpostCore
import OutpostTestSupport
import Testing

@testable import OutpostStorage

@Suite("Spatial index rebuilt after many edits in one transaction")
struct SpatialIndexRebuildTests {
    static let rtree = "rtree_inspection_points_geom"

    /// A geodatabase with `count` random points, imported in bulk.
    static func layer(_ count: Int, in dir: TemporaryDirectory) async throws -> (Geodatabase, FeatureTable) {
        let gdb = try SampleGeodatabases.emptyFieldInspection(in: dir)
        let table = try gdb.table(named: "inspection_points")
        try await ImporterTests.importPoints(ImporterTests.randomPoints(count, seed: 7), into: table)
        return (gdb, table)
    }

    static func triggers(_ gdb: Geodatabase) async throws -> [String] {
        try await gdb.read { conn in
            try String.fetchAll(conn.db, sql: "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'rtree_inspection_points_geom_%' ORDER BY name")
        }
    }

    /// The index holds exactly one entry per non-empty geometry, each containing its bounds.
    static func expectIndexMatchesTable(_ gdb: Geodatabase) async throws {
        #expect(try await gdb.string("SELECT rtreecheck('\(rtree)')") == "ok")
        let geometries = try await gdb.int("SELECT count(*) FROM inspection_points WHERE geom NOT NULL AND NOT ST_IsEmpty(geom)")
        #expect(try await gdb.int("SELECT count(*) FROM \(rtree)") == geometries)
        let wrong = try await gdb.int(
            """
            SELECT count(*) FROM \(rtree) r LEFT JOIN inspection_points p ON p.objectid = r.id
            WHERE p.objectid IS NULL OR NOT (r.minx <= ST_MinX(p.geom) AND r.maxx >= ST_MaxX(p.geom) AND r.miny <= ST_MinY(p.geom) AND r.maxy >= ST_MaxY(p.geom))
            """)
        #expect(wrong == 0)
    }

    @Test func manyEditsRebuildTheIndexAndRestoreTheTriggers() async throws {
        let dir = TemporaryDirectory()
        let (gdb, table) = try await Self.layer(5_000, in: dir)
        let triggersBefore = try await Self.triggers(gdb)
        #expect(triggersBefore.count == 6)
        let target = Envelope(xmin: 170.5, ymin: 80.5, xmax: 171.5, ymax: 81.5)
        try await gdb.write { conn in
            try conn.maintainingSpatialIndex(of: "inspection_points") {
                // A few geometry writes go through the triggers; enough of them set them aside.
                try table.update([Feature(objectID: 4_999, geometry: .point(try Point(x: 1, y: 1)))], in: conn)
                #expect(try Self.triggerCount(conn) == 6)
                #expect(!conn.spatialIndexIsStale("inspection_points"))
                try table.update((1...1_000).map { Feature(objectID: Int64($0), geometry: .point(try Point(x: 171, y: 81))) }, in: conn)
                #expect(try Self.triggerCount(conn) == 0)
                try table.delete(objectIDs: (2_001...2_300).map(Int64.init), in: conn)
                _ = try table.add((0..<500).map { i in
                    Feature(attributes: ["asset_id": .string("N-\(i)"), "asset_type": .string("valve"), "status": .string("open")], geometry: .point(try Point(x: -171, y: -81)))
                }, in: conn)
                try conn.execute("UPDATE inspection_points SET geom = NULL WHERE objectid BETWEEN 3001 AND 3050")
                // Inside, envelope queries do not trust the stale index.
                #expect(try table.objectIDs(matching: FeatureQuery(envelope: target), in: conn).count == 1_000)
            }
        }
        #expect(try await Self.triggers(gdb) == triggersBefore, "the triggers come back unchanged")
        try await Self.expectIndexMatchesTable(gdb)
        #expect(try await gdb.int("SELECT count(*) FROM \(Self.rtree)") == 5_000 - 300 + 500 - 50)
        #expect(try await table.objectIDs(matching: FeatureQuery(envelope: target)) == (1...1_000).map(Int64.init))
        // GDAL answers a spatial filter through the rebuilt index.
        let gdal = try await ExternalTools.run("ogrinfo", ["-ro", "-so", "-spat", "170.5", "80.5", "171.5", "81.5", gdb.url.path, "inspection_points"])
        #expect(gdal.succeeded && gdal.stdout.contains("Feature Count: 1000\n"), "\(gdal.stdout)\(gdal.stderr)")
        // The restored triggers keep the index right for later edits.
        try await table.update([Feature(objectID: 1, geometry: .point(try Point(x: 0.5, y: 0.5)))])
        #expect(try await table.objectIDs(matching: FeatureQuery(envelope: Envelope(xmin: 0.4, ymin: 0.4, xmax: 0.6, ymax: 0.6))).contains(1))
        try await Self.expectIndexMatchesTable(gdb)
        try gdb.close()
    }

    static func triggerCount(_ conn: GeodatabaseConnection) throws -> Int? {
        try Int.fetchOne(conn.db, sql: "SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'rtree_inspection_points_geom_%'")
    }

    @Test func attributeEditsAndFewMovesKeepTheTriggers() async throws {
        let dir = TemporaryDirectory()
        let (gdb, table) = try await Self.layer(5_000, in: dir)
        try await gdb.write { conn in
            try conn.maintainingSpatialIndex(of: "inspection_points") {
                // Attribute-only updates write no geometry: however many, the index stays current.
                try table.update((1...2_000).map { Feature(objectID: Int64($0), attributes: ["status": .string("closed")]) }, in: conn)
                try table.update([Feature(objectID: 1, geometry: .point(try Point(x: 171, y: 81)))], in: conn)
                #expect(try Self.triggerCount(conn) == 6)
            }
        }
        #expect(try await gdb.int("SELECT count(*) FROM \(Self.rtree) WHERE id = 1 AND minx > 170") == 1)
        try await Self.expectIndexMatchesTable(gdb)
        try gdb.close()
    }

    @Test func aKnownLargeWriteSetsTheTriggersAsideBeforeTheFirstEdit() async throws {
        let dir = TemporaryDirectory()
        let (gdb, table) = try await Self.layer(5_000, in: dir)
        let triggersBefore = try await Self.triggers(gdb)
        try await gdb.write { conn in
            // 600 announced writes reach the budget of 5,000 rows (125): no edit goes through the triggers.
            try conn.maintainingSpatialIndex(of: "inspection_points", expectedGeometryWrites: 600) {
                #expect(try Self.triggerCount(conn) == 0)
                #expect(conn.spatialIndexIsStale("inspection_points"))
                try table.update((1...600).map { Feature(objectID: Int64($0), geometry: .point(try Point(x: 171, y: 81))) }, in: conn)
                // As the triggers do, the packed index leaves out an empty geometry and a blob that
                // is not a GeoPackage geometry.
                try conn.execute("UPDATE inspection_points SET geom = x'47500011E61000000101000000000000000000F87F000000000000F87F' WHERE objectid = 4001")
                try conn.execute("UPDATE inspection_points SET geom = x'0102' WHERE objectid = 4002")
            }
            #expect(try Int.fetchOne(conn.db, sql: "SELECT count(*) FROM \(Self.rtree) WHERE id IN (4001, 4002)") == 0)
            // Fewer announced writes than the budget: the triggers stay until the writes counted reach it.
            try conn.maintainingSpatialIndex(of: "inspection_points", expectedGeometryWrites: 100) {
                #expect(try Self.triggerCount(conn) == 6)
                try table.update((601...700).map { Feature(objectID: Int64($0), geometry: .point(try Point(x: 171, y: 81))) }, in: conn)
                #expect(try Self.triggerCount(conn) == 6)
            }
        }
        #expect(try await Self.triggers(gdb) == triggersBefore)
        try await Self.expectIndexMatchesTable(gdb)
        #expect(try await table.objectIDs(matching: FeatureQuery(envelope: Envelope(xmin: 170.5, ymin: 80.5, xmax: 171.5, ymax: 81.5))).count == 700)
        try gdb.close()
    }

    @Test func aFailedBodyStillLeavesAConsistentIndex() async throws {
        struct Stop: Error {}
        let dir = TemporaryDirectory()
        let (gdb, table) = try await Self.layer(2_000, in: dir)
        let triggersBefore = try await Self.triggers(gdb)
        // The caller catches the failure and commits what was written before it.
        _ = try await gdb.write { conn in
            #expect(throws: Stop.self) {
                try conn.maintainingSpatialIndex(of: "inspection_points") {
                    try table.update((1...600).map { Feature(objectID: Int64($0), geometry: .point(try Point(x: 171, y: 81))) }, in: conn)
                    throw Stop()
                }
            }
        }
        #expect(try await Self.triggers(gdb) == triggersBefore)
        try await Self.expectIndexMatchesTable(gdb)
        #expect(try await table.objectIDs(matching: FeatureQuery(envelope: Envelope(xmin: 170.5, ymin: 80.5, xmax: 171.5, ymax: 81.5))).count == 600)
        // A rolled-back transaction leaves the file as it was.
        await #expect(throws: Stop.self) {
            try await gdb.write { conn in
                try conn.maintainingSpatialIndex(of: "inspection_points") {
                    try table.delete(objectIDs: (1...1_000).map(Int64.init), in: conn)
                    throw Stop()
                }
            }
        }
        #expect(try await Self.triggers(gdb) == triggersBefore)
        #expect(try await gdb.int("SELECT count(*) FROM \(Self.rtree)") == 2_000)
        try await Self.expectIndexMatchesTable(gdb)
        try gdb.close()
    }

    /// Every entry of the index, in row id order.
    static func entries(_ conn: GeodatabaseConnection) throws -> [[Double]] {
        try Row.fetchAll(conn.db, sql: "SELECT id, minx, maxx, miny, maxy FROM \(rtree) ORDER BY id").map { row in (0..<5).map { row[$0] as Double } }
    }

    @Test func aPackFromTheOldIndexAndTheWrittenRowsEqualsOneFromTheTable() async throws {
        struct Stop: Error {}
        let dir = TemporaryDirectory()
        let (gdb, table) = try await Self.layer(5_000, in: dir)
        let triggersBefore = try await Self.triggers(gdb)
        let packed = try await gdb.write { conn -> [[Double]] in
            try conn.maintainingSpatialIndex(of: "inspection_points", expectedGeometryWrites: 3_000) {
                try table.update((1...1_000).map { Feature(objectID: Int64($0), geometry: .point(try Point(x: Double($0) / 10, y: -5))) }, in: conn)
                try table.update((1_001...1_500).map { Feature(objectID: Int64($0), attributes: ["status": .string("closed")]) }, in: conn)
                try table.delete(objectIDs: (2_001...2_300).map(Int64.init), in: conn)
                _ = try table.add((0..<400).map { i in
                    Feature(attributes: ["asset_id": .string("N-\(i)"), "asset_type": .string("valve")], geometry: .point(try Point(x: -171, y: Double(i) / 10)))
                }, in: conn)
                // Raw SQL: a row id that changes, a row replaced in place, a geometry cleared, an
                // empty one and a blob that is not a GeoPackage geometry.
                try conn.execute("UPDATE inspection_points SET objectid = 90000 WHERE objectid = 2500")
                try conn.execute(
                    "INSERT OR REPLACE INTO inspection_points (objectid, globalid, asset_id, asset_type, status, geom) SELECT 2600, globalid, 'R', 'valve', 'open', (SELECT geom FROM inspection_points WHERE objectid = 1) FROM inspection_points WHERE objectid = 2600")
                try conn.execute("UPDATE inspection_points SET geom = NULL WHERE objectid BETWEEN 3001 AND 3050")
                try conn.execute("UPDATE inspection_points SET geom = x'47500011E61000000101000000000000000000F87F000000000000F87F' WHERE objectid = 4001")
                try conn.execute("UPDATE inspection_points SET geom = x'0102' WHERE objectid = 4002")
                // A savepoint that rolls back takes its rows out again; one that commits keeps them.
                #expect(throws: Stop.self) {
                    try conn.inSavepoint {
                        try conn.execute("UPDATE inspection_points SET geom = NULL WHERE objectid BETWEEN 4100 AND 4200")
                        try conn.execute("DELETE FROM inspection_points WHERE objectid BETWEEN 4300 AND 4400")
                        throw Stop()
                    }
                }
                try conn.inSavepoint { try table.delete(objectIDs: [4_500], in: conn) }
            }
            #expect(conn.spatialIndexPacksFromChanges == 1, "packed from the old index and the rows written")
            #expect(RowChangeTracker.existing(on: conn.db) == nil, "the hook is gone once nothing is watched")
            return try Self.entries(conn)
        }
        #expect(try await Self.triggers(gdb) == triggersBefore)
        try await Self.expectIndexMatchesTable(gdb)
        #expect(try await gdb.int("SELECT count(*) FROM \(Self.rtree) WHERE id BETWEEN 4100 AND 4400") == 301)
        // The same index packed from every geometry of the table.
        let fromTable = try await gdb.write { conn in
            #expect(try SpatialIndexRebuild.rebuild(table, conn.db) == false)
            return try Self.entries(conn)
        }
        let expected = 5_000 - 300 + 400 - 50 - 2 - 1
        #expect(packed.count == expected)
        #expect(fromTable.count == expected)
        let differing = zip(packed, fromTable).filter { $0 != $1 }.map { $0.0[0] }
        #expect(differing.isEmpty, "entries differ for row ids \(differing.prefix(10))")
        try gdb.close()
    }

    /// Rows written past half the table are not kept (memory): the pack reads the table, also
    /// when a savepoint that crossed the limit rolls back.
    @Test func writesOfMostOfTheTableArePackedFromTheTable() async throws {
        struct Stop: Error {}
        let dir = TemporaryDirectory()
        let (gdb, table) = try await Self.layer(4_000, in: dir)
        try await gdb.write { conn in
            try conn.maintainingSpatialIndex(of: "inspection_points", expectedGeometryWrites: 3_000) {
                try table.update((1...1_500).map { Feature(objectID: Int64($0), geometry: .point(try Point(x: 171, y: 81))) }, in: conn)
                #expect(throws: Stop.self) {
                    try conn.inSavepoint {
                        try table.update((1_501...2_600).map { Feature(objectID: Int64($0), geometry: .point(try Point(x: 171, y: 81))) }, in: conn)
                        throw Stop()
                    }
                }
            }
            #expect(conn.spatialIndexPacksFromChanges == 0)
        }
        try await Self.expectIndexMatchesTable(gdb)
        #expect(try await table.objectIDs(matching: FeatureQuery(envelope: Envelope(xmin: 170.5, ymin: 80.5, xmax: 171.5, ymax: 81.5))).count == 1_500)
        try await gdb.write { conn in
            try conn.maintainingSpatialIndex(of: "inspection_points", expectedGeometryWrites: 3_000) {
                try table.update((1...2_100).map { Feature(objectID: Int64($0), geometry: .point(try Point(x: 170, y: 80))) }, in: conn)
            }
            #expect(conn.spatialIndexPacksFromChanges == 0)
        }
        try await Self.expectIndexMatchesTable(gdb)
        #expect(try await table.objectIDs(matching: FeatureQuery(envelope: Envelope(xmin: 169.5, ymin: 79.5, xmax: 170.5, ymax: 80.5))).count == 2_100)
        try gdb.close()
    }

    @Test func anIndexWhoseLeavesDisagreeWithItsRowIDsIsPackedFromTheTable() async throws {
        let dir = TemporaryDirectory()
        let (gdb, table) = try await Self.layer(2_000, in: dir)
        // An index damaged outside the rtree module: the leaf holding row 7 emptied of its cells,
        // its _rowid rows left.
        try await gdb.write { conn in
            try conn.execute("UPDATE \(Self.rtree)_node SET data = zeroblob(length(data)) WHERE nodeno = (SELECT nodeno FROM \(Self.rtree)_rowid WHERE rowid = 7)")
        }
        try await gdb.write { conn in
            try conn.maintainingSpatialIndex(of: "inspection_points", expectedGeometryWrites: 600) {
                try table.update((1...600).map { Feature(objectID: Int64($0), geometry: .point(try Point(x: 171, y: 81))) }, in: conn)
            }
            #expect(conn.spatialIndexPacksFromChanges == 0)
        }
        try await Self.expectIndexMatchesTable(gdb)
        try gdb.close()
    }

    @Test func theBudgetIsAFractionOfTheRowsAndNoneForHugeTables() {
        #expect(SpatialIndexRebuild.budget(span: 100_000) == 2_500)
        #expect(SpatialIndexRebuild.budget(span: 10) == 64, "a few writes always go through the triggers")
        #expect(SpatialIndexRebuild.budget(span: 0) == 64)
        #expect(SpatialIndexRebuild.budget(span: 50_000_000) == nil, "too many rows to pack in memory")
    }
}
