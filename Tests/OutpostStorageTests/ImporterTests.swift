import Foundation
import GRDB
import OutpostCore
import OutpostTestSupport
import Testing

@testable import OutpostStorage

@Suite("Bulk import and the R-tree bulk loader")
struct ImporterTests {
    static func randomPoints(_ n: Int, seed: UInt64) -> [(Double, Double)] {
        var rng = FastRandomGenerator(seed: seed)
        return (0..<n).map { _ in
            (Double(rng.next() % 3_600_000) / 10_000 - 180, Double(rng.next() % 1_700_000) / 10_000 - 85)
        }
    }

    /// Imports `points` as valves in bulk; returns how many were added.
    @discardableResult
    static func importPoints(_ points: [(Double, Double)], into table: FeatureTable) async throws -> Int {
        try await table.geodatabase.write { conn in
            try table.importFeatures(in: conn) { importer in
                for (i, (x, y)) in points.enumerated() {
                    var values = [FieldValue](repeating: .null, count: importer.valueFields.count)
                    for (k, f) in importer.valueFields.enumerated() {
                        switch f.name {
                        case "asset_id": values[k] = .string("A-\(i)")
                        case "asset_type": values[k] = .string("valve")
                        case "status": values[k] = .string("open")
                        default: break
                        }
                    }
                    try importer.add(values: values, geometry: .point(try Point(x: x, y: y)))
                }
            }
        }
    }

    @Test(arguments: [1, 51, 52, 2_600, 20_000])
    func bulkLoadedIndexIsValidAndAnswersLikeAScan(count: Int) async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.emptyFieldInspection(in: dir)
        let table = try gdb.table(named: "inspection_points")
        let points = Self.randomPoints(count, seed: UInt64(count))
        let imported = try await Self.importPoints(points, into: table)
        #expect(imported == count)
        #expect(try await gdb.string("SELECT rtreecheck('rtree_inspection_points_geom')") == "ok")
        #expect(try await gdb.int("SELECT count(*) FROM rtree_inspection_points_geom") == count)
        #expect(try await gdb.int("SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'rtree_inspection_points_geom_%'") == 6)
        #expect(try await table.pendingChanges() == PendingChanges(), "an import is base data, not edits")
        let box = Envelope(xmin: -20, ymin: -10, xmax: 35, ymax: 40)
        let want = points.enumerated().filter { box.contains(x: $0.element.0, y: $0.element.1) }.map { Int64($0.offset + 1) }
        #expect(try await table.objectIDs(matching: FeatureQuery(envelope: box)) == want)
        // The restored triggers keep the index right for later edits.
        try await table.update([Feature(objectID: 1, geometry: .point(try Point(x: 170, y: 80)))])
        #expect(try await table.objectIDs(matching: FeatureQuery(envelope: Envelope(xmin: 169.9, ymin: 79.9, xmax: 170.1, ymax: 80.1))) == [1])
        try gdb.close()
    }

    /// Packed nodes keep room for later inserts: SQLite splits a full node on its next insert, so
    /// edits through the GeoPackage triggers after a bulk load or a rebuild would split nearly
    /// every time. A hundred scattered inserts into 20,000 packed points add no node.
    @Test func packedNodesLeaveRoomForInserts() async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.emptyFieldInspection(in: dir)
        let table = try gdb.table(named: "inspection_points")
        try await Self.importPoints(Self.randomPoints(20_000, seed: 3), into: table)
        let nodes = try await gdb.read { conn in
            try conn.query("SELECT nodeno, data FROM rtree_inspection_points_geom_node ORDER BY nodeno").map { row -> (Int64, [UInt8]) in
                guard case .blob(let data) = row[1] else { return (row[0].integerValue ?? 0, []) }
                return (row[0].integerValue ?? 0, data)
            }
        }
        let capacity = (nodes[0].1.count - 4) / 24
        let cells = nodes.filter { $0.0 != 1 }.map { Int($0.1[2]) << 8 | Int($0.1[3]) }
        #expect(cells.count > 100 && cells.allSatisfy { $0 <= RTreeBulkLoader.packedCells(capacity: capacity) }, "\(cells.max() ?? 0) of \(capacity) cells")
        #expect(cells.reduce(0, +) > 20_000, "leaves and the level above them")
        var added: [Feature] = []
        for (x, y) in Self.randomPoints(100, seed: 4) {
            added.append(Feature(attributes: ["asset_id": .string("N"), "asset_type": .string("pole")], geometry: .point(try Point(x: x, y: y))))
        }
        _ = try await table.add(added)
        #expect(try await gdb.int("SELECT count(*) FROM rtree_inspection_points_geom_node") == nodes.count, "no insert split a node")
        #expect(try await gdb.string("SELECT rtreecheck('rtree_inspection_points_geom')") == "ok")
        try gdb.close()
    }

    /// The bulk loader's sorts (radix, quicksort, heapsort) order a range of entries as the
    /// standard sort orders their keys, negative and equal keys included, and move nothing else.
    @Test(arguments: ["random", "signed", "sorted", "reversed", "equal", "few values"], [nil, 0, 3])
    func inPlaceSortOrdersLikeTheStandardSort(shape: String, splits: Int?) {
        var rng = FastRandomGenerator(seed: 11)
        let keys: [Float] = (0..<5_000).map { i in
            switch shape {
            case "sorted": Float(i)
            case "reversed": Float(5_000 - i)
            case "equal": 3
            case "few values": Float(rng.next() % 4)
            case "signed": Float(Int(rng.next() % 200_001) - 100_000) / 7
            default: Float(rng.next() % 100_000) / 7
            }
        }
        var entries = keys.enumerated().map { RTreeEntry(id: Int64($0.offset), minX: $0.element, maxX: $0.element, minY: 0, maxY: 0) }
        // nil: the radix sort; splits 0: heapsort alone; 3: quicksort, then heapsort on what is left.
        RTreeBulkLoader.sortInPlace(&entries, 100..<4_900, splits: splits, by: RTreeBulkLoader.ByMinX.self)
        #expect(entries[100..<4_900].map(\.minX) == keys[100..<4_900].sorted())
        #expect(Set(entries[100..<4_900].map(\.id)) == Set((100..<4_900).map(Int64.init)), "a permutation of the range")
        #expect(entries[..<100].map(\.id) == (0..<100).map(Int64.init) && entries[4_900...].map(\.id) == (4_900..<5_000).map(Int64.init), "nothing outside the range moves")
    }

    /// The bulk loader's row id → leaf map: an array indexed by id for dense ids, sorted pairs
    /// otherwise; either way every id comes back once, in id order, with its node.
    @Test(arguments: [[Int64](5...12), [3, 1_000_000, 7, 42, 999_999_999]])
    func leafMapGivesEveryRowIDInOrder(ids: [Int64]) {
        let entries = ids.map { RTreeEntry(id: $0, minX: 0, maxX: 0, minY: 0, maxY: 0) }
        var map = RTreeBulkLoader.LeafMap(entries)
        for (k, id) in ids.enumerated() { map.set(id, Int64(k % 3) + 1) }
        var seen: [(Int64, Int64)] = []
        map.forEachInRowIDOrder { seen.append(($0, $1)) }
        let expected = ids.enumerated().map { ($0.element, Int64($0.offset % 3) + 1) }.sorted { $0.0 < $1.0 }
        #expect(seen.map(\.0) == expected.map(\.0))
        #expect(seen.map(\.1) == expected.map(\.1))
    }

    @Test func importIntoANonEmptyTableAppendsToTheIndex() async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.fieldInspection(in: dir)
        let table = try gdb.table(named: "inspection_points")
        _ = try await gdb.write { conn in
            try table.importFeatures(in: conn) { importer in
                for (x, y) in Self.randomPoints(500, seed: 7) {
                    try importer.add(Feature(attributes: ["asset_id": .string("N"), "asset_type": .string("pole")], geometry: .point(try Point(x: x, y: y))))
                }
            }
        }
        #expect(try await gdb.string("SELECT rtreecheck('rtree_inspection_points_geom')") == "ok")
        #expect(try await gdb.int("SELECT count(*) FROM rtree_inspection_points_geom") == 800)
        try gdb.close()
    }

    /// The global-id index of an empty table is built after the load, its sort spilling to disk
    /// (not held in memory); a duplicate id still fails the import with a typed error, and the
    /// connection's temporary storage is back in memory afterwards.
    @Test func theGlobalIDIndexIsBuiltAfterTheLoadAndCatchesDuplicates() async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.emptyFieldInspection(in: dir)
        let table = try gdb.table(named: "inspection_points")
        let duplicate = "{6A3E1D8C-0B7F-4C2A-9E5D-1F2A3B4C5D6E}"
        let error = await #expect(throws: StorageError.self) {
            try await gdb.write { conn in
                try table.importFeatures(in: conn) { importer in
                    for i in 0..<3_000 {
                        try importer.add(
                            Feature(globalID: i == 10 || i == 2_500 ? duplicate : nil, attributes: ["asset_id": .string("D\(i)"), "asset_type": .string("pole")],
                                    geometry: .point(try Point(x: 1, y: 1))))
                    }
                }
            }
        }
        #expect(error?.code == .invalidEdit && error?.message.contains("same global id") == true, "\(String(describing: error))")
        #expect(try await table.count() == 0)
        try await Self.importPoints(Self.randomPoints(3_000, seed: 3), into: table)
        #expect(try await gdb.int("SELECT count(DISTINCT globalid) FROM inspection_points") == 3_000)
        #expect(try await gdb.write { conn in try Int.fetchOne(conn.db, sql: "PRAGMA temp_store") } == 2, "temporary storage back in memory")
        try gdb.close()
    }

    @Test func aBadRowRollsTheWholeImportBack() async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.fieldInspection(in: dir)
        let table = try gdb.table(named: "inspection_points")
        let before = try await SampleGeodatabases.contents(of: gdb)
        let error = await #expect(throws: StorageError.self) {
            try await gdb.write { conn in
                try table.importFeatures(in: conn) { importer in
                    for i in 0..<100 {
                        let type = i == 60 ? "fountain" : "pole"
                        try importer.add(Feature(attributes: ["asset_id": .string("B\(i)"), "asset_type": .string(type)], geometry: .point(try Point(x: 1, y: 1))))
                    }
                }
            }
        }
        #expect(error?.editIndex == 60)
        #expect(try await SampleGeodatabases.contents(of: gdb) == before)
        #expect(try await gdb.int("SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'rtree_inspection_points_geom_%'") == 6)
        #expect(try await gdb.int("SELECT silenced FROM outpost_capture") == 0)
        try gdb.close()
    }

    @Test func geoJSONImportNamesTheBadFeature() async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.emptyFieldInspection(in: dir)
        let file = dir.file("bad.geojson")
        try #"{"type":"FeatureCollection","features":[{"type":"Feature","properties":{"asset_id":"A","asset_type":"pole"},"geometry":{"type":"Point","coordinates":[1,2]}},{"type":"Feature","properties":{"asset_id":"B","asset_type":"pole","colour":"red"},"geometry":{"type":"Point","coordinates":[1,2]}}]}"#
            .write(to: file, atomically: true, encoding: .utf8)
        let table = try gdb.table(named: "inspection_points")
        let error = await #expect(throws: StorageError.self) {
            try await gdb.write { conn in try GeoJSONImport.importFile(file, into: table, in: conn) }
        }
        #expect(error?.message.contains("feature 2") == true && error?.message.contains("colour") == true)
        #expect(try await table.count() == 0)
        let n = try await gdb.write { conn in try GeoJSONImport.importFile(file, into: table, in: conn, ignoreUnknownProperties: true) }
        #expect(n == 2)
        try gdb.close()
    }
}
