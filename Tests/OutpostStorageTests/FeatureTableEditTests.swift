import Foundation
import OutpostCore
import OutpostTestSupport
import Testing

@testable import OutpostStorage

@Suite("Feature edits")
struct FeatureTableEditTests {
    static func point(_ x: Double = -122.65, _ y: Double = 45.52) -> Geometry { .point(try! Point(x: x, y: y)) }

    static func validPoint() -> Feature {
        Feature(
            attributes: [
                "asset_id": .string("HY-9999"), "asset_type": .string("hydrant"), "condition": .integer(2),
                "inspected_at": .date(Date(timeIntervalSince1970: 1_700_000_000.123)), "depth_m": .double(1.5),
            ],
            geometry: point())
    }

    @Test func addReturnsIdsAndAppliesDefaults() async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.emptyFieldInspection(in: dir)
        let table = try gdb.table(named: "inspection_points")
        let added = try await table.add([Self.validPoint()])
        let id = try #require(added.first?.objectID)
        let gid = try #require(added.first?.globalID)
        #expect(GlobalID.normalized(gid) == gid)
        let stored = try #require(try await table.feature(objectID: id))
        #expect(stored.globalID == gid)
        #expect(stored["status"] == .string("open"))  // the schema default
        #expect(stored["notes"] == .null)
        #expect(stored["inspected_at"] == .date(Date(timeIntervalSince1970: 1_700_000_000.123)))
        #expect(stored.geometry == Self.point())
        #expect(try await table.feature(globalID: gid.lowercased())?.objectID == id)
        try gdb.close()
    }

    @Test func singlePartGeometriesArePromoted() async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.emptyFieldInspection(in: dir)
        let pipes = try gdb.table(named: "pipelines")
        let line = Geometry.lineString(try LineString([Position(x: 0, y: 0), Position(x: 1, y: 1)]))
        let added = try await pipes.add([Feature(attributes: ["pipe_id": .string("P-1")], geometry: line)])
        let stored = try await pipes.feature(objectID: added[0].objectID!)
        #expect(stored?.geometry?.type == .multiLineString)
        try gdb.close()
    }

    static let invalidEdits: [(String, Feature, String)] = {
        func with(_ change: (inout Feature) -> Void) -> Feature {
            var f = validPoint()
            change(&f)
            return f
        }
        return [
            ("unknown field", with { $0["colour"] = .string("red") }, "no field"),
            ("required field missing", with { $0["asset_id"] = nil }, "required"),
            ("explicit null in required field", with { $0["asset_id"] = .null }, "required"),
            ("too long", with { $0["asset_id"] = .string(String(repeating: "x", count: 17)) }, "longer"),
            ("coded value domain", with { $0["asset_type"] = .string("fountain") }, "not in domain"),
            ("shared domain", with { $0["status"] = .string("done") }, "not in domain"),
            ("range domain", with { $0["depth_m"] = .double(31) }, "not in domain"),
            ("SmallInteger range", with { $0["condition"] = .integer(70000) }, "SmallInteger"),
            ("type mismatch", with { $0["depth_m"] = .string("deep") }, "cannot go in a Double"),
            ("date as text", with { $0["inspected_at"] = .string("yesterday") }, "cannot go in a Date"),
            ("wrong geometry type", with { $0.geometry = .lineString(try! LineString([Position(x: 0, y: 0), Position(x: 1, y: 1)])) }, "cannot go in a Point"),
            ("Z in an XY layer", with { $0.geometry = .point(try! Point(x: 1, y: 2, z: 3)) }, "XYZ"),
            ("not a GUID", with { $0.globalID = "not-a-guid" }, "GUID"),
        ]
    }()

    @Test(arguments: invalidEdits)
    func invalidEditsWriteNothing(label: String, bad: Feature, reason: String) async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.fieldInspection(in: dir)
        let table = try gdb.table(named: "inspection_points")
        let before = try await SampleGeodatabases.contents(of: gdb)
        // The bad edit is second in the batch: the first, valid one must not be written either.
        do {
            _ = try await table.add([Self.validPoint(), bad])
            Issue.record("\(label) was accepted")
        } catch let error as StorageError {
            #expect(error.code == .invalidEdit, "\(label)")
            #expect(error.editIndex == 1, "\(label)")
            #expect(error.description.contains(reason), "\(label): \(error)")
        }
        #expect(try await SampleGeodatabases.contents(of: gdb) == before, "\(label) changed the data")
        #expect(try await gdb.read { conn in try conn.capturedChanges() }.isEmpty)
        try gdb.close()
    }

    @Test func updatesAndDeletes() async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.fieldInspection(in: dir)
        let table = try gdb.table(named: "inspection_points")
        var f = try #require(try await table.feature(objectID: 5))
        let gid = try #require(f.globalID)
        try await table.update([Feature(objectID: 5, attributes: ["status": .string("closed"), "notes": .string("Done")])])
        f = try #require(try await table.feature(objectID: 5))
        #expect(f["status"] == .string("closed") && f["notes"] == .string("Done"))
        // By global id, geometry only.
        try await table.update([Feature(globalID: gid, geometry: Self.point(-122.61, 45.55))])
        #expect(try await table.feature(objectID: 5)?.geometry == Self.point(-122.61, 45.55))
        #expect(try await table.feature(objectID: 5)?["notes"] == .string("Done"))
        // A bad update in a batch leaves the good one unapplied.
        let before = try await SampleGeodatabases.contents(of: gdb)
        await #expect(throws: StorageError.self) {
            try await table.update([Feature(objectID: 6, attributes: ["notes": .string("x")]), Feature(objectID: 7, attributes: ["condition": .integer(9)])])
        }
        let noRow = await #expect(throws: StorageError.self) { try await table.update([Feature(objectID: 99_999, attributes: ["notes": .string("x")])]) }
        #expect(noRow?.code == .notFound && "\(noRow!)".contains("no feature with object id 99999"), "\(String(describing: noRow))")
        let noGID = await #expect(throws: StorageError.self) {
            try await table.update([Feature(globalID: "{00000000-0000-4000-8000-000000000001}", attributes: ["notes": .string("x")])])
        }
        #expect(noGID?.code == .notFound && "\(noGID!)".contains("no feature with global id {00000000-0000-4000-8000-000000000001}"), "\(String(describing: noGID))")
        #expect(try await SampleGeodatabases.contents(of: gdb) == before)
        // Deleting a missing id deletes nothing.
        let missing = await #expect(throws: StorageError.self) { try await table.delete(objectIDs: [8, 99_999]) }
        #expect(missing?.code == .notFound && missing?.editIndex == 1)
        #expect(try await table.count() == 300)
        try await table.delete(objectIDs: [8, 9])
        try await table.delete(globalIDs: [gid])
        #expect(try await table.count() == 297)
        #expect(try await table.feature(objectID: 5) == nil)
        try gdb.close()
    }

    @Test func geometriesInAnotherSpatialReferenceAreProjectedOrRefused() async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.emptyFieldInspection(in: dir)
        let table = try gdb.table(named: "inspection_points")
        var f = Self.validPoint()
        let (x, y) = WebMercator.project(longitude: -122.65, latitude: 45.52)
        f.geometry = .point(try Point(x: x, y: y))
        let added = try await table.add([f], spatialReference: .webMercator)
        guard case .point(let p)? = try await table.feature(objectID: added[0].objectID!)?.geometry, let position = p.position else {
            Issue.record("no point stored")
            return
        }
        #expect(abs(position.x - -122.65) < 1e-9 && abs(position.y - 45.52) < 1e-9)
        let error = await #expect(throws: StorageError.self) { try await table.add([f], spatialReference: SpatialReference(wkid: 2193)) }
        #expect(error?.code == .invalidEdit && error?.message.contains("2193") == true)
        #expect(try await table.count() == 1)
        try gdb.close()
    }

    @Test func globalIDsAreImmutable() async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.fieldInspection(in: dir)
        let error = await #expect(throws: StorageError.self) {
            try await gdb.write { conn in
                try conn.db.execute(sql: "UPDATE inspection_points SET globalid = '{00000000-0000-4000-8000-000000000000}' WHERE objectid = 1")
            }
        }
        #expect(error?.message.contains("immutable") == true)
        try gdb.close()
    }

    @Test func tablesWithoutGeometry() async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.fieldInspection(in: dir)
        let log = try gdb.table(named: "inspection_log")
        let point = try #require(try await gdb.table(named: "inspection_points").feature(objectID: 1))
        let row = Feature(attributes: [
            "point_globalid": .string(point.globalID!.lowercased().replacingOccurrences(of: "{", with: "").replacingOccurrences(of: "}", with: "")),
            "action": .string("inspected"), "logged_at": .date(Date()),
        ])
        let added = try await log.add([row])
        #expect(try await log.feature(objectID: added[0].objectID!)?["point_globalid"] == .string(point.globalID!))
        await #expect(throws: StorageError.self) { try await log.add([Feature(attributes: row.attributes, geometry: Self.point())]) }
        try gdb.close()
    }
}

@Suite("GeoPackage dates")
struct GeoPackageDateTests {
    @Test func formatsWithMillisecondsInUTC() {
        #expect(GeoPackageDate.format(Date(timeIntervalSince1970: 0)) == "1970-01-01T00:00:00.000Z")
        #expect(GeoPackageDate.format(Date(timeIntervalSince1970: 1_700_000_000.123)) == "2023-11-14T22:13:20.123Z")
        #expect(GeoPackageDate.format(Date(timeIntervalSince1970: -86_400.5)) == "1969-12-30T23:59:59.500Z")
    }

    @Test func parsesWhatOtherWritersProduce() {
        let t = 1_700_000_000.0
        for text in ["2023-11-14T22:13:20.000Z", "2023-11-14T22:13:20Z", "2023-11-14 22:13:20", "2023-11-15T00:13:20+02:00", "2023-11-14T22:13:20"] {
            #expect(GeoPackageDate.parse(text)?.timeIntervalSince1970 == t, "\(text)")
        }
        #expect(GeoPackageDate.parse("2023-11-14")?.timeIntervalSince1970 == 1_699_920_000)
        for bad in ["", "2023-13-01", "2023-11-14T25:00", "2023/11/14", "2023-11-14T22:13:20.Z", "2023-11-14Tx"] {
            #expect(GeoPackageDate.parse(bad) == nil, "\(bad)")
        }
    }
}
