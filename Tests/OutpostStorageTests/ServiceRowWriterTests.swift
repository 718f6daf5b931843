import Foundation
import GRDB
import OutpostCore
import OutpostTestSupport
import Testing

@testable import OutpostStorage

@Suite("Rows written as the service holds them (a download's changes)")
struct ServiceRowWriterTests {
    static func values(_ writer: ServiceRowWriter, _ given: [String: FieldValue]) -> [FieldValue?] {
        var out = [FieldValue?](repeating: nil, count: writer.fields.count)
        for (name, value) in given { out[writer.fieldIndex(named: name)!] = value }
        return out
    }

    @Test func insertsUpdatesAndLeavesAnEqualGeometryAlone() async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.emptyFieldInspection(in: dir)
        let table = try gdb.table(named: "inspection_points")
        let gid = "{6A1E2F40-1111-4C2B-9D11-0123456789AB}"
        let inspected = Date(timeIntervalSince1970: 1_700_000_000)
        let id = try await gdb.write { conn -> Int64 in
            var writer = ServiceRowWriter(table: table, conn: conn)
            let id = try writer.insert(
                globalID: gid.lowercased(), values: Self.values(writer, ["ASSET_ID": .string("GD-9"), "asset_type": .string("valve"), "inspected_at": .date(inspected)]),
                geometry: .point(try Point(x: 24.9, y: 60.1)))
            try writer.finish()
            return id
        }
        // The global id is stored normalised, an absent field takes its default, the date is GeoPackage text.
        let fetched = try gdb.read { conn in try Row.fetchOne(conn.db, sql: "SELECT globalid, status, inspected_at, notes FROM inspection_points WHERE objectid = ?", arguments: [id]) }
        let row = try #require(fetched)
        #expect(row[0] as String == gid)
        #expect(row[1] as String == "open")
        #expect(row[2] as String == GeoPackageDate.format(inspected))
        #expect((row[3] as String?) == nil)
        #expect(try await gdb.int("SELECT count(*) FROM rtree_inspection_points_geom") == 1)
        let extent = try gdb.read { conn in try Row.fetchOne(conn.db, sql: "SELECT min_x, max_y FROM gpkg_contents WHERE table_name = 'inspection_points'") }
        #expect(extent?[0] as Double? == 24.9 && extent?[1] as Double? == 60.1)

        // The same geometry again is not written (its R-tree entry stays where it was); new attributes are.
        let rtreeChanges = try await gdb.write { conn -> (Bool, Int, Bool, Int) in
            var writer = ServiceRowWriter(table: table, conn: conn)
            let located = try #require(try writer.locate(globalIDs: [gid])[gid])
            #expect(located.objectID == id)
            // Rows changed, triggers' included: the update alone, or the R-tree's delete and insert too.
            func changes(_ body: () throws -> Bool) throws -> (Bool, Int) {
                let before = try Int.fetchOne(conn.db, sql: "SELECT total_changes()") ?? 0
                let wrote = try body()
                return (wrote, (try Int.fetchOne(conn.db, sql: "SELECT total_changes()") ?? 0) - before)
            }
            let same = try changes {
                try writer.update(
                    objectID: id, values: Self.values(writer, ["notes": .string("checked")]), geometry: .set(.point(try Point(x: 24.9, y: 60.1))), stored: located.geometry)
            }
            let moved = try changes {
                try writer.update(objectID: id, values: Self.values(writer, [:]), geometry: .set(.point(try Point(x: 25, y: 60.2))), stored: located.geometry)
            }
            try writer.finish()
            return (same.0, same.1, moved.0, moved.1)
        }
        #expect(rtreeChanges.0 == false && rtreeChanges.2 == true)
        // Writing a geometry also fires the R-tree triggers (their rows count in total_changes).
        #expect(rtreeChanges.3 > rtreeChanges.1)
        #expect(try await gdb.string("SELECT notes FROM inspection_points WHERE objectid = \(id)") == "checked")
        #expect(try await gdb.string("SELECT rtreecheck('rtree_inspection_points_geom')") == "ok")

        // Clearing the geometry removes its entry; a table constraint is a typed edit error and writes nothing.
        try await gdb.write { conn in
            var writer = ServiceRowWriter(table: table, conn: conn)
            let located = try writer.locate(globalIDs: [gid])[gid]
            try writer.update(objectID: id, values: Self.values(writer, [:]), geometry: .clear, stored: located?.geometry)
            let error = #expect(throws: StorageError.self) {
                try writer.update(objectID: id, values: Self.values(writer, ["asset_id": .null]), geometry: .keep, stored: nil)
            }
            #expect(error?.code == .invalidEdit)
        }
        #expect(try await gdb.int("SELECT count(*) FROM rtree_inspection_points_geom") == 0)
        #expect(try await gdb.string("SELECT asset_id FROM inspection_points WHERE objectid = \(id)") == "GD-9")
        // A global id that is not a GUID is refused.
        await #expect(throws: StorageError.self) {
            try await gdb.write { conn in
                var writer = ServiceRowWriter(table: table, conn: conn)
                _ = try writer.insert(globalID: "not-a-guid", values: Self.values(writer, ["asset_id": .string("X"), "asset_type": .string("valve")]), geometry: nil)
            }
        }
    }

    /// Rows written one after another with different sets of columns each get their own
    /// statement (the writer reuses the last one only for the same set), and every value is
    /// bound as the table stores it.
    @Test func rowsOfDifferentColumnsInTurnEachWriteTheirOwn() async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.emptyFieldInspection(in: dir)
        let table = try gdb.table(named: "inspection_points")
        let gids = (1...3).map { "{6A1E2F40-1111-4C2B-9D11-0123456789A\($0)}" }
        let inspected = Date(timeIntervalSince1970: 1_700_000_000)
        let ids = try await gdb.write { conn -> [Int64] in
            var writer = ServiceRowWriter(table: table, conn: conn)
            var ids: [Int64] = []
            for (n, gid) in gids.enumerated() {
                ids.append(try writer.insert(
                    globalID: gid, values: Self.values(writer, ["asset_id": .string("GD-\(n)"), "asset_type": .string("valve")]),
                    geometry: .point(try Point(x: 24.9 + Double(n), y: 60.1))))
            }
            let located = try writer.locate(globalIDs: gids)
            // notes only; then type, notes, an integer into a double field and a move; then notes only again.
            try writer.update(objectID: ids[0], values: Self.values(writer, ["notes": .string("first")]), geometry: .keep, stored: located[gids[0]]?.geometry)
            try writer.update(
                objectID: ids[1], values: Self.values(writer, ["asset_type": .string("hydrant"), "notes": .string("second"), "depth_m": .integer(3)]),
                geometry: .set(.point(try Point(x: 30, y: 61))), stored: located[gids[1]]?.geometry)
            try writer.update(objectID: ids[2], values: Self.values(writer, ["notes": .string("third")]), geometry: .clear, stored: located[gids[2]]?.geometry)
            try writer.update(objectID: ids[0], values: Self.values(writer, ["inspected_at": .date(inspected)]), geometry: .keep, stored: nil)
            // Nothing to write: no statement runs.
            #expect(try writer.update(objectID: ids[1], values: Self.values(writer, [:]), geometry: .keep, stored: nil) == false)
            try writer.finish()
            return ids
        }
        let rows = try gdb.read { conn in
            try Row.fetchAll(
                conn.db, sql: "SELECT objectid, asset_type, notes, depth_m, typeof(depth_m), inspected_at, ST_MinX(geom), geom IS NULL FROM inspection_points ORDER BY objectid")
        }
        #expect(rows.map { $0[0] as Int64 } == ids)
        #expect(rows.map { $0[1] as String } == ["valve", "hydrant", "valve"])
        #expect(rows.map { $0[2] as String? } == ["first", "second", "third"])
        #expect(rows[1][3] as Double? == 3 && rows[1][4] as String == "real")
        #expect(rows[0][5] as String? == GeoPackageDate.format(inspected) && rows[1][5] as String? == nil)
        #expect(rows[1][6] as Double? == 30)
        #expect(rows.map { $0[7] as Bool } == [false, false, true])
        #expect(try await gdb.int("SELECT count(*) FROM rtree_inspection_points_geom") == 2)
        #expect(try await gdb.string("SELECT rtreecheck('rtree_inspection_points_geom')") == "ok")
    }
}
