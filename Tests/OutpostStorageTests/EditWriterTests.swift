import Foundation
import GRDB
import OutpostCore
import OutpostTestSupport
import Testing

@testable import OutpostStorage

@Suite("Checked edits one at a time (a server applying a batch)")
struct EditWriterTests {
    /// One edit, as both paths take it.
    enum Edit {
        case insert(Feature)
        case update(Int64, Feature)
        case delete(Int64)
    }

    /// The edits through ``FeatureTable/EditWriter`` and through ``FeatureTable``'s array edits,
    /// each in a savepoint of its own: what each returned (an object id, or the error's code and
    /// message).
    static func apply(_ edits: [Edit], to gdb: Geodatabase, writer useWriter: Bool) async throws -> [String] {
        let table = try gdb.table(named: "inspection_points")
        return try await gdb.write { conn -> [String] in
            var writer = FeatureTable.EditWriter(table, in: conn)
            var out: [String] = []
            for edit in edits {
                do {
                    let id: Int64? = try conn.inSavepoint {
                        switch edit {
                        case .insert(let f): return useWriter ? try writer.insert(f) : try table.add([f], in: conn)[0].objectID
                        case .update(let id, var f):
                            if useWriter { try writer.update(objectID: id, f) } else {
                                f.objectID = id
                                try table.update([f], in: conn)
                            }
                            return nil
                        case .delete(let id):
                            if useWriter { try writer.delete(objectID: id) } else { try table.delete(objectIDs: [id], in: conn) }
                            return nil
                        }
                    }
                    out.append(id.map { "id \($0)" } ?? "ok")
                } catch let error as StorageError {
                    out.append("\(error.code) \(error.description)")
                }
            }
            try writer.finish()
            return out
        }
    }

    static func rows(_ gdb: Geodatabase) throws -> [[DatabaseValue]] {
        try gdb.read { conn in
            try Row.fetchAll(conn.db, sql: "SELECT * FROM inspection_points ORDER BY objectid").map { Array($0.databaseValues) }
        }
    }

    @Test func writesAndRefusesExactlyAsTheTableEditsDo() async throws {
        let dir = TemporaryDirectory()
        let a = try SampleGeodatabases.emptyFieldInspection(in: dir, name: "writer.gpkg")
        let b = try SampleGeodatabases.emptyFieldInspection(in: dir, name: "table.gpkg")
        let gid = "{6A1E2F40-1111-4C2B-9D11-0123456789AB}"
        let at = Date(timeIntervalSince1970: 1_700_000_000)
        let edits: [Edit] = [
            // Given values, a default (status), a lower-case global id stored normalised, a date as text.
            .insert(Feature(globalID: gid.lowercased(), attributes: ["asset_id": .string("GD-1"), "asset_type": .string("valve"), "inspected_at": .date(at)], geometry: .point(try Point(x: 24.9, y: 60.1)))),
            // A new global id; an integer in a double field; no geometry.
            .insert(Feature(attributes: ["asset_id": .string("GD-2"), "asset_type": .string("meter"), "depth_m": .integer(3)])),
            // Updates: attributes only, geometry only, both.
            .update(1, Feature(attributes: ["notes": .string("checked"), "condition": .integer(2)])),
            .update(1, Feature(attributes: [:], geometry: .point(try Point(x: 25, y: 60.2)))),
            .update(2, Feature(attributes: ["inspector": .string("Aino")], geometry: .point(try Point(x: 24.8, y: 60.3)))),
            // Refused by the checks: unknown field, a value outside its domain, outside its range, a wrong geometry type.
            .insert(Feature(attributes: ["asset_id": .string("GD-3"), "asset_type": .string("valve"), "colour": .string("red")])),
            .update(1, Feature(attributes: ["asset_type": .string("tree")])),
            .update(2, Feature(attributes: ["depth_m": .double(99)])),
            .insert(Feature(attributes: ["asset_id": .string("GD-4"), "asset_type": .string("pole")], geometry: .lineString(try LineString([Position(x: 0, y: 0), Position(x: 1, y: 1)])))),
            // Refused by the table: a duplicate global id, a null in a NOT NULL column.
            .insert(Feature(globalID: gid, attributes: ["asset_id": .string("GD-5"), "asset_type": .string("valve")])),
            .update(2, Feature(attributes: ["asset_id": .null])),
            // Not found: an update and a delete of a feature that is not there.
            .update(99, Feature(attributes: ["notes": .string("x")])),
            .delete(99),
            .delete(2),
        ]
        let viaWriter = try await Self.apply(edits, to: a, writer: true)
        let viaTable = try await Self.apply(edits, to: b, writer: false)
        #expect(viaWriter == viaTable)
        #expect(viaWriter[0] == "id 1" && viaWriter[1] == "id 2" && viaWriter.last == "ok")
        #expect(viaWriter[5...10].allSatisfy { $0.hasPrefix("invalidEdit") })
        #expect(viaWriter[11...12].allSatisfy { $0.hasPrefix("notFound") })
        #expect(try Self.rows(a) == Self.rows(b))
        // The R-tree followed (through the GeoPackage triggers) and the contents' extent grew once.
        #expect(try await a.string("SELECT rtreecheck('rtree_inspection_points_geom')") == "ok")
        #expect(try await a.int("SELECT count(*) FROM rtree_inspection_points_geom") == 1)
        let extent = try a.read { conn in try Row.fetchOne(conn.db, sql: "SELECT min_x, min_y, max_x, max_y FROM gpkg_contents WHERE table_name = 'inspection_points'") }
        #expect(extent?[0] as Double? == 24.8 && extent?[1] as Double? == 60.1 && extent?[2] as Double? == 25 && extent?[3] as Double? == 60.3)
    }

    @Test func aLargeRunPacksTheIndexOnceAndFindsEveryFeature() async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.emptyFieldInspection(in: dir)
        let table = try gdb.table(named: "inspection_points")
        // Inside the spatial-index watch, enough geometry writes set the triggers aside; the
        // index packed at the end holds every feature where it now is.
        try await gdb.write { conn in
            var writer = FeatureTable.EditWriter(table, in: conn)
            try conn.maintainingSpatialIndex(of: table.name, expectedGeometryWrites: 600) {
                for i in 0..<400 {
                    _ = try writer.insert(Feature(
                        attributes: ["asset_id": .string("P-\(i)"), "asset_type": .string("pole")], geometry: .point(try Point(x: Double(i), y: 0))))
                }
                for i in 1...200 { try writer.update(objectID: Int64(i), Feature(attributes: [:], geometry: .point(try Point(x: Double(i), y: 10)))) }
                try writer.finish()
            }
        }
        #expect(try await gdb.string("SELECT rtreecheck('rtree_inspection_points_geom')") == "ok")
        #expect(try await gdb.int("SELECT count(*) FROM rtree_inspection_points_geom WHERE miny >= 9.9") == 200)
        #expect(try await gdb.int("SELECT count(*) FROM rtree_inspection_points_geom WHERE maxy <= 0.1") == 200)
    }

    @Test func rowsAreSteppedInPlaceWithBoundArguments() async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.emptyFieldInspection(in: dir)
        try await gdb.write { conn in
            try conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, size REAL)")
            try conn.execute("INSERT INTO t VALUES (1, 'één', 1.5), (2, NULL, NULL), (3, 'c', 3)")
        }
        let seen = try await gdb.read { conn -> [String] in
            var out: [String] = []
            // Each argument kind bound; text read as UTF-8, null as nil, a real not as an integer.
            try conn.forEachRow("SELECT id, name, size FROM t WHERE id >= ? AND (name IS NOT ? OR size IS NULL) ORDER BY id", arguments: [.integer(1), .text("c")]) { row in
                out.append("\(row.integer(0) ?? -1) \(row.text(1) ?? "nil") \(row.isNull(2)) \(row.integer(2).map(String.init) ?? "-")")
            }
            return out
        }
        #expect(seen == ["1 één false -", "2 nil true -"])
        // A statement SQLite refuses is a typed error; the cached statement is reusable afterwards.
        await #expect(throws: StorageError.self) { try await gdb.read { conn in try conn.forEachRow("SELECT nope FROM t") { _ in } } }
        let count = try await gdb.read { conn -> Int in
            var n = 0
            try conn.forEachRow("SELECT id FROM t WHERE id > ?", arguments: [.integer(1)]) { _ in n += 1 }
            try conn.forEachRow("SELECT id FROM t WHERE id > ?", arguments: [.integer(2)]) { _ in n += 10 }
            return n
        }
        #expect(count == 12)
    }
}
