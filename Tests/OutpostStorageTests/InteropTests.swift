import Foundation
import OutpostCore
import OutpostTestSupport
import Testing

@testable import OutpostStorage

/// GeoPackages written by other tools: the fixtures shipped in the pyogrio wheel and files GDAL
/// writes from the Natural Earth shapefile.
@Suite("GeoPackages written by others")
struct InteropTests {
    static func pyogrioFixtures() async throws -> URL {
        let r = try await ExternalTools.python("import os, pyogrio; print(os.path.join(os.path.dirname(pyogrio.__file__), 'tests', 'fixtures'))")
        guard r.succeeded else { throw ReaderMismatch(description: "pyogrio is not installed: \(r.stderr)") }
        return URL(fileURLWithPath: r.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// What pyogrio reads from a layer: attributes (JSON-safe) and geometry as WKT, per row.
    static func pyogrioRows(_ file: URL, layer: String) async throws -> [[String: JSONValue]] {
        let script = """
            import json, math, sys, pyogrio
            meta, fids, geometry, fields = pyogrio.raw.read(sys.argv[1], layer=sys.argv[2], return_fids=True)
            rows = []
            for i in range(len(fids)):
                row = {"fid": int(fids[i])}
                for name, column in zip(meta["fields"], fields):
                    v = column[i]
                    if hasattr(v, "item"): v = v.item()
                    if isinstance(v, float) and math.isnan(v): v = None
                    row[name] = v if v is None or isinstance(v, (int, float, str, bool)) else str(v)
                rows.append(row)
            print(json.dumps(rows))
            """
        let r = try await ExternalTools.python(script, [file.path, layer])
        guard r.succeeded else { throw ReaderMismatch(description: r.stderr) }
        return try JSONValue.parse(r.stdout).arrayValue!.map { $0.objectValue! }
    }

    @Test func nullsAndIntegerTypesFromFiona() async throws {
        let fixture = try await Self.pyogrioFixtures().appendingPathComponent("test_gpkg_nulls.gpkg")
        let dir = TemporaryDirectory()
        try FileManager.default.copyItem(at: fixture, to: dir.file("nulls.gpkg"))
        let gdb = try Geodatabase.open(at: dir.file("nulls.gpkg"), readOnly: true)
        #expect(!gdb.isManaged)
        let table = try gdb.table(named: "test_gpkg_nulls")
        #expect(table.definition.geometryType?.type == .point)
        let types = Dictionary(uniqueKeysWithValues: table.definition.fields.map { ($0.name, $0.type) })
        #expect(types["col_bool"] == .smallInteger && types["col_int64"] == .bigInteger && types["col_float32"] == .single)
        let features = try await table.features()
        let reference = try await Self.pyogrioRows(dir.file("nulls.gpkg"), layer: "test_gpkg_nulls")
        #expect(features.count == 4 && reference.count == 4)
        for (feature, row) in zip(features, reference) {
            #expect(feature.objectID == row["fid"]?.integerValue)
            for (name, value) in row where name != "fid" {
                let ours = feature[name]
                if value.isNull {
                    #expect(ours == .null, "\(name)")
                } else if case .bool(let b) = value {
                    #expect(ours?.integerValue == (b ? 1 : 0), "\(name)")
                } else {
                    #expect(ours?.doubleValue == value.doubleValue, "\(name): \(String(describing: ours)) vs \(value)")
                }
            }
        }
        #expect(features.last?.geometry == .point(try Point(x: 4, y: 4)))
        try gdb.close()
    }

    @Test func zAndMFromQGIS() async throws {
        let fixture = try await Self.pyogrioFixtures().appendingPathComponent("line_zm.gpkg")
        let gdb = try Geodatabase.open(at: fixture, readOnly: true)
        let table = try gdb.table(named: "line_zm")
        #expect(table.definition.hasZ && table.definition.hasM)
        let feature = try #require(try await table.features().first)
        #expect(feature.geometry?.layout == .xyzm)
        let wkt = try await ExternalTools.run("ogrinfo", ["-ro", "-q", fixture.path, "line_zm"]).stdout
        // ogrinfo prints the first vertex as "LINESTRING ZM (x y z m, ...".
        let first = try #require(wkt.components(separatedBy: "ZM (").dropFirst().first?.components(separatedBy: ",").first)
        let numbers = first.split(separator: " ").compactMap { Double($0) }
        var ours: Position?
        feature.geometry?.forEachPosition { if ours == nil { ours = $0 } }
        #expect(numbers.count == 4)
        #expect(abs(ours!.x - numbers[0]) < 1e-9 && abs(ours!.y - numbers[1]) < 1e-9)
        #expect(ours!.z == numbers[2] && ours!.m == numbers[3])
        try gdb.close()
    }

    @Test(arguments: ["curve.gpkg", "curvepolygon.gpkg", "multisurface.gpkg"])
    func curvesAreRefusedClearly(fixture: String) async throws {
        let url = try await Self.pyogrioFixtures().appendingPathComponent(fixture)
        let error = #expect(throws: StorageError.self) { try Geodatabase.open(at: url, readOnly: true) }
        #expect(error?.code == .unsupportedContent)
        #expect(error?.message.contains("not supported") == true, "\(error?.description ?? "")")
    }

    @Test(arguments: [true, false])
    func naturalEarthWrittenByGDAL(promoteToMulti: Bool) async throws {
        let dir = TemporaryDirectory()
        let shapefile = try await ExternalTools.python(
            "import os, pyogrio; print(os.path.join(os.path.dirname(pyogrio.__file__), 'tests', 'fixtures', 'naturalearth_lowres', 'naturalearth_lowres.shp'))"
        ).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let out = dir.file("ne.gpkg")
        var args = ["-f", "GPKG", out.path, shapefile, "-nln", "countries"]
        if promoteToMulti { args += ["-nlt", "PROMOTE_TO_MULTI"] }
        let convert = try await ExternalTools.run("ogr2ogr", args)
        #expect(convert.succeeded, "\(convert.stderr)")

        let gdb = try Geodatabase.open(at: out)
        let table = try gdb.table(named: "countries")
        #expect(table.definition.geometryType?.type == (promoteToMulti ? .multiPolygon : .polygon))
        let features = try await table.features()
        let reference = try await Self.pyogrioRows(out, layer: "countries")
        #expect(features.count == 177 && reference.count == 177)
        for (feature, row) in zip(features, reference) {
            #expect(feature["name"]?.stringValue == row["name"]?.stringValue)
            #expect(feature["pop_est"]?.doubleValue == row["pop_est"]?.doubleValue)
            #expect(feature["gdp_md_est"]?.integerValue == row["gdp_md_est"]?.integerValue)
            #expect(feature.geometry.map { [.polygon, .multiPolygon].contains($0.type) } == true)
        }
        // ogrinfo's extent equals ours.
        let info = try await ExternalTools.run("ogrinfo", ["-ro", "-so", out.path, "countries"]).stdout
        let extentLine = try #require(info.split(separator: "\n").first { $0.hasPrefix("Extent:") })
        let numbers = extentLine.split(whereSeparator: { "(),- ".contains($0) == false ? false : true }).compactMap { Double($0) }
        let e = try #require(try await table.extent())
        #expect(numbers.count == 4)
        #expect(String(format: "%.6f %.6f %.6f %.6f", abs(e.xmin), abs(e.ymin), e.xmax, e.ymax) == String(format: "%.6f %.6f %.6f %.6f", numbers[0], numbers[1], numbers[2], numbers[3]))
        // Queries work on GDAL's layout (geometry column "geom", fid "fid", GDAL's R-tree).
        let europe = try await table.count(matching: FeatureQuery(where: "continent = 'Europe'"))
        #expect(europe == reference.filter { $0["continent"] == .string("Europe") }.count)
        let inBox = try await table.objectIDs(matching: FeatureQuery(envelope: Envelope(xmin: 5, ymin: 45, xmax: 15, ymax: 55)))
        #expect(inBox.count > 5)
        // Edits through Outpost on a GDAL file read back in GDAL.
        _ = try await table.add([
            Feature(attributes: ["name": .string("Outpostia"), "continent": .string("Oceania")],
                    geometry: .polygon(Envelope(xmin: 170, ymin: -50, xmax: 171, ymax: -49).polygon))
        ])
        try gdb.close()
        let after = try await ExternalTools.run("ogrinfo", ["-ro", "-so", out.path, "countries"])
        #expect(after.stdout.contains("Feature Count: 178"), "\(after.stdout)")
        #expect(!after.stderr.contains("Warning"))
    }

    @Test func datesWithTimeZonesFromGDAL() async throws {
        let dir = TemporaryDirectory()
        let source = dir.file("dates.geojson")
        try #"{"type":"FeatureCollection","features":[{"type":"Feature","properties":{"when":"2024-03-01T10:00:00+02:00","day":"2024-03-01"},"geometry":{"type":"Point","coordinates":[1,2]}}]}"#
            .write(to: source, atomically: true, encoding: .utf8)
        let out = dir.file("dates.gpkg")
        let convert = try await ExternalTools.run("ogr2ogr", ["-f", "GPKG", out.path, source.path, "-nln", "dates"])
        #expect(convert.succeeded, "\(convert.stderr)")
        let gdb = try Geodatabase.open(at: out, readOnly: true)
        let feature = try #require(try await gdb.table(named: "dates").features().first)
        #expect(feature["when"] == .date(Date(timeIntervalSince1970: 1_709_280_000)))
        #expect(feature["day"] == .date(Date(timeIntervalSince1970: 1_709_251_200)))
        try gdb.close()
    }
}
