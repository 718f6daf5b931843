import Foundation
import OutpostCore
import OutpostTestSupport
import Testing

@Suite("outpost import and inspect")
struct ImportInspectTests {
    @Test func importsTheSampleServicesIntoValidGeoPackages() async throws {
        let dir = TemporaryDirectory()
        // Only layers with attachments bring the media and mapping tables: Natural Earth has none.
        for (service, layers, related) in [
            ("field_inspection", ["inspection_points": ("Point", 300), "pipelines": ("MultiLineString", 80), "service_areas": ("MultiPolygon", 12), "inspection_log": (nil as String?, 60)],
             ["attachments", "inspection_points_attachments"] as Set),
            ("natural_earth", ["countries": ("MultiPolygon", 177), "populated_places": ("Point", 243)], []),
        ] {
            let out = dir.file("\(service).gpkg")
            let result = try await outpost(["import", Repository.sampleData(service).path, "--out", out.path, "--json"])
            #expect(result.succeeded, "\(result.stderr)")
            let json = try JSONValue.parse(result.stdout)
            let imported = Dictionary(uniqueKeysWithValues: json["layers"]!.arrayValue!.map { ($0["name"]!.stringValue!, $0["imported"]!.integerValue!) })
            #expect(imported == layers.mapValues { Int64($0.1) })
            try await GeoPackageReaders.expectReadable(out, layers: layers, relatedTables: related)

            let inspect = try await outpost(["inspect", out.path, "--json"])
            #expect(inspect.succeeded, "\(inspect.stderr)")
            let report = try JSONValue.parse(inspect.stdout)
            for layer in report["layers"]!.arrayValue! {
                let name = layer["name"]!.stringValue!
                #expect(layer["count"]?.integerValue == Int64(layers[name]!.1))
                #expect(layer["pending"] == ["inserts": 0, "updates": 0, "deletes": 0])
                #expect(layer["geometryType"]?.stringValue == layers[name]!.0)
                if layers[name]!.0 != nil {
                    let values = layer["extent"]?.arrayValue?.compactMap { $0.doubleValue }
                    let e = try #require(values)
                    #expect(e.count == 4 && e[0] <= e[2] && e[1] <= e[3])
                } else {
                    #expect(layer["extent"] == .null)
                }
            }
        }
    }

    @Test func inspectCountsPendingEditsFromOtherWriters() async throws {
        let dir = TemporaryDirectory()
        let out = dir.file("f.gpkg")
        #expect(try await outpost(["import", Repository.sampleData("field_inspection").path, "--out", out.path]).succeeded)
        let shell = try await ExternalTools.run("sqlite3", [out.path, "DELETE FROM inspection_points WHERE objectid IN (1, 2); DELETE FROM inspection_log WHERE objectid = 5;"])
        #expect(shell.succeeded, "\(shell.stderr)")
        let update = try await ExternalTools.run("ogrinfo", [out.path, "-sql", "UPDATE pipelines SET diameter_mm = diameter_mm + 1 WHERE objectid = 3"])
        #expect(update.succeeded, "\(update.stderr)")
        let report = try JSONValue.parse(try await outpost(["inspect", out.path, "--json"]).stdout)
        let pending = Dictionary(uniqueKeysWithValues: report["layers"]!.arrayValue!.map { ($0["name"]!.stringValue!, $0["pending"]!) })
        #expect(pending["inspection_points"] == ["inserts": 0, "updates": 0, "deletes": 2])
        #expect(pending["inspection_log"] == ["inserts": 0, "updates": 0, "deletes": 1])
        #expect(pending["pipelines"] == ["inserts": 0, "updates": 1, "deletes": 0])
        let text = try await outpost(["inspect", out.path])
        #expect(text.stdout.contains("pending 0 inserts / 0 updates / 2 deletes"))
    }

    @Test func importsOneGeoJSONLayer() async throws {
        let dir = TemporaryDirectory()
        let out = dir.file("one.gpkg")
        let schema = Repository.sampleData("natural_earth/service.json").path
        let places = Repository.sampleData("natural_earth/data/populated_places.geojson").path
        let first = try await outpost(["import", places, "--schema", schema, "--layer", "populated_places", "--out", out.path])
        #expect(first.succeeded, "\(first.stderr)")
        #expect(first.stdout.contains("populated_places: 243 features"))
        // A second run appends to the existing file.
        #expect(try await outpost(["import", places, "--layer", "populated_places", "--out", out.path]).succeeded)
        let report = try JSONValue.parse(try await outpost(["inspect", out.path, "--json"]).stdout)
        #expect(report["layers"]?.arrayValue?.first { $0["name"] == "populated_places" }?["count"] == 486)
    }

    @Test func failuresAreOneLineWithExitCodeOne() async throws {
        let dir = TemporaryDirectory()
        let curve = try await ExternalTools.python(
            "import os, pyogrio; print(os.path.join(os.path.dirname(pyogrio.__file__), 'tests', 'fixtures', 'curvepolygon.gpkg'))"
        ).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let badSchema = dir.file("bad.json")
        try #"{"name":"s","layers":[{"id":0,"name":"a","geometryType":"Point","fields":[{"name":"x","type":"Text"}]}]}"#
            .write(to: badSchema, atomically: true, encoding: .utf8)
        let notGeoPackage = dir.file("text.gpkg")
        try "hello".write(to: notGeoPackage, atomically: true, encoding: .utf8)
        let cases: [([String], String)] = [
            (["inspect", curve], "not supported"),
            (["inspect", dir.file("missing.gpkg").path], "does not exist"),
            (["inspect", notGeoPackage.path], "not an SQLite database"),
            (["import", Repository.sampleData("field_inspection").path, "--schema", badSchema.path, "--out", dir.file("x.gpkg").path], "unknown field type"),
            (["import", Repository.sampleData("natural_earth/data/countries.geojson").path, "--out", dir.file("y.gpkg").path], "--layer"),
        ]
        for (arguments, reason) in cases {
            let result = try await outpost(arguments)
            #expect(result.status == 1, "\(arguments)")
            let lines = result.stderr.split(separator: "\n")
            #expect(lines.count == 1, "\(result.stderr)")
            #expect(result.stderr.hasPrefix("outpost: ") && result.stderr.contains(reason), "\(result.stderr)")
        }
        #expect(!FileManager.default.fileExists(atPath: dir.file("x.gpkg").path))
        // Refusing to overwrite, then overwriting on request.
        let out = dir.file("z.gpkg")
        #expect(try await outpost(["import", Repository.sampleData("natural_earth").path, "--out", out.path]).succeeded)
        let again = try await outpost(["import", Repository.sampleData("natural_earth").path, "--out", out.path])
        #expect(again.status == 1 && again.stderr.contains("already exists"))
        #expect(try await outpost(["import", Repository.sampleData("natural_earth").path, "--out", out.path, "--overwrite"]).succeeded)
    }
}
