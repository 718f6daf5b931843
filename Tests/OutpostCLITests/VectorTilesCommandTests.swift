import Foundation
import OutpostCore
import OutpostTestSupport
import Testing

/// `outpost vtiles export` and `inspect` on the Helsinki sample: the files they write and the
/// figures they print agree with each other and with GDAL; bad input is refused with exit 1
/// (or 64 for usage) and leaves no file behind.
@Suite("outpost vtiles")
struct VectorTilesCommandTests {
    @Test(.scaledTimeLimit(minutes: 5)) func exportThenInspectAgreeAndGDALReadsTheFile() async throws {
        let dir = TemporaryDirectory("outpost-cli-vtiles")
        let gdb = dir.file("helsinki.gpkg")
        let created = try await outpost(["service", "create", Repository.sampleData("helsinki").path, "--out", gdb.path])
        #expect(created.status == 0, "\(created.stderr)")
        let definition = dir.file("tiles.json")
        try #"{"layers": [{"source": "streets", "name": "roads", "fields": ["name"], "minZoom": 11}, {"source": "addresses", "minZoom": 14}], "maxZoom": 15}"#
            .write(to: definition, atomically: true, encoding: .utf8)
        let out = dir.file("helsinki.mbtiles")
        let export = try await outpost(["vtiles", "export", gdb.path, "--definition", definition.path, "--out", out.path, "--json"])
        #expect(export.status == 0, "\(export.stderr)")
        let made = try JSONValue.parse(Data(export.stdout.utf8))
        let tiles = try #require(made["tiles"]?.integerValue)
        #expect(tiles > 5 && made["droppedForSize"]?.integerValue == 0)
        // The estimate of the same export, small enough to be made whole: its very tiles.
        let estimate = try await outpost(["vtiles", "estimate", gdb.path, "--definition", definition.path, "--json"])
        #expect(estimate.status == 0, "\(estimate.stderr)")
        let told = try JSONValue.parse(Data(estimate.stdout.utf8))
        #expect(told["tileCount"]?.integerValue == tiles && told["exact"] == true && told["fileSize"]?["mbtiles"]?.integerValue ?? 0 > 0, "\(told)")
        let sampled = try await outpost(["vtiles", "estimate", gdb.path, "--definition", definition.path, "--sample-size", "2"])
        #expect(sampled.status == 0 && sampled.stdout.hasPrefix("about ") && sampled.stdout.contains("zoom 15:"), "\(sampled.stdout)\(sampled.stderr)")
        #expect(try await outpost(["vtiles", "estimate", gdb.path, "--sample-size", "0"]).status == 64)

        let inspect = try await outpost(["vtiles", "inspect", out.path, "--json"])
        #expect(inspect.status == 0, "\(inspect.stderr)")
        let seen = try JSONValue.parse(Data(inspect.stdout.utf8))
        #expect(seen["tiles"]?.integerValue == tiles)
        let layers = seen["layers"]?.arrayValue ?? []
        #expect(layers.compactMap { $0["name"]?.stringValue } == ["addresses", "roads"])
        #expect(layers.first { $0["name"]?.stringValue == "roads" }?["fields"]?.arrayValue?.compactMap(\.stringValue) == ["name"])
        #expect(layers.first { $0["name"]?.stringValue == "addresses" }?["minZoom"]?.integerValue == 14)
        let text = try await outpost(["vtiles", "inspect", out.path])
        #expect(text.stdout.contains("layer roads: lines, zooms 11–15"), "\(text.stdout)")

        // The same tiles as a vector tile package: inspect sees the same tiles and layers.
        let package = dir.file("helsinki.vtpk")
        let packed = try await outpost(["vtiles", "export", gdb.path, "--definition", definition.path, "--out", package.path, "--json"])
        #expect(packed.status == 0, "\(packed.stderr)")
        #expect(try JSONValue.parse(Data(packed.stdout.utf8))["tiles"]?.integerValue == tiles, "\(packed.stdout)")
        let unpacked = try JSONValue.parse(Data(try await outpost(["vtiles", "inspect", package.path, "--json"]).stdout.utf8))
        #expect(unpacked["format"] == "vtpk" && unpacked["tiles"]?.integerValue == tiles && unpacked["layers"] == seen["layers"], "\(unpacked)")
        // Drawn from the package by its style, and from the geodatabase: both PNGs of ink.
        for source in [package, gdb] {
            let png = dir.file("\(source.lastPathComponent).png")
            let drawn = try await outpost(["render", source.path, "--out", png.path, "--size", "320x240", "--extent", "24.93,60.16,24.96,60.18"])
            #expect(drawn.status == 0, "\(drawn.stderr)")
            let info = try await ExternalTools.run("gdalinfo", ["-stats", png.path])
            #expect(info.status == 0 && info.stdout.contains("Size is 320, 240"), "\(info.stdout)\(info.stderr)")
        }
        let notTiles = try await outpost(["render", out.path.replacingOccurrences(of: ".mbtiles", with: ".json"), "--out", dir.file("x.png").path])
        #expect(notTiles.status == 1)

        // Feature ids only when asked: the same tiles, every feature with its object id.
        let withIDs = dir.file("ids.mbtiles")
        let identified = try await outpost(["vtiles", "export", gdb.path, "--definition", definition.path, "--feature-ids", "--out", withIDs.path, "--json"])
        #expect(identified.status == 0, "\(identified.stderr)")
        let identifiedTiles = try JSONValue.parse(Data(identified.stdout.utf8))["tiles"]?.integerValue
        #expect(identifiedTiles == tiles)
        let countIDs = """
            import gzip, sqlite3, sys, mapbox_vector_tile
            n = [0, 0]
            for (data,) in sqlite3.connect(sys.argv[1]).execute("SELECT tile_data FROM tiles"):
                for layer in mapbox_vector_tile.decode(gzip.decompress(data)).values():
                    for f in layer["features"]:
                        n[0] += 1
                        n[1] += 1 if f.get("id") else 0
            print(n[0], n[1])
            """
        let idsIn = try await ExternalTools.python(countIDs, [withIDs.path]).stdout.split(separator: " ").compactMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
        let idsOut = try await ExternalTools.python(countIDs, [out.path]).stdout.split(separator: " ").compactMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
        #expect(idsIn.count == 2 && idsIn[0] > 100 && idsIn[1] == idsIn[0] && idsOut == [idsIn[0], 0], "\(idsIn) \(idsOut)")
        let serviceIDs = try await outpost(["vtiles", "export", "http://127.0.0.1:9/arcgis/rest/services/x/VectorTileServer", "--feature-ids", "--out", dir.file("s.mbtiles").path])
        #expect(serviceIDs.status == 64 && serviceIDs.stderr.contains("--feature-ids"), "\(serviceIDs.stderr)")

        // GDAL reads the layers and the metadata's vector_layers.
        let info = try await ExternalTools.run("ogrinfo", ["-ro", "-so", "-al", "-oo", "ZOOM_LEVEL=15", out.path])
        #expect(info.status == 0 && info.stdout.contains("Layer name: roads") && info.stdout.contains("name: String"), "\(info.stdout)\(info.stderr)")
    }

    /// Killed (SIGKILL) right after a checkpoint, or after the file was moved into place; the
    /// same command then continues the job (making only the tiles it lacked) and the file is the
    /// one an uninterrupted export writes.
    @Test(.scaledTimeLimit(minutes: 5), arguments: ["vtiles.afterCheckpoint", "vtiles.afterMove"])
    func aKilledExportFinishesWhenTheCommandRunsAgain(_ point: String) async throws {
        let dir = TemporaryDirectory("outpost-cli-vtiles-kill")
        let gdb = dir.file("natural_earth.gpkg")
        #expect(try await outpost(["service", "create", Repository.sampleData("natural_earth").path, "--out", gdb.path]).status == 0)
        let out = dir.file("world.pmtiles")
        let arguments = ["vtiles", "export", gdb.path, "--max-zoom", "6", "--out", out.path]
        let killed = try await ExternalTools.run(Repository.outpostExecutable.path, arguments, environment: ["OUTPOST_FAULT": "\(point):kill", "OUTPOST_TILE_CHECKPOINT_MS": "0"])
        #expect(killed.status == 9 || killed.status == 137, "\(killed.status) \(killed.stderr)")
        #expect(FileManager.default.fileExists(atPath: out.path) == (point == "vtiles.afterMove"))
        let again = try await ExternalTools.run(Repository.outpostExecutable.path, arguments + ["--json"])
        #expect(again.succeeded && again.stderr.contains("resuming job"), "\(again.stderr)")
        let clean = dir.file("clean.pmtiles")
        #expect(try await outpost(["vtiles", "export", gdb.path, "--max-zoom", "6", "--out", clean.path]).status == 0)
        let (a, b) = (try await outpost(["vtiles", "inspect", out.path, "--json"]), try await outpost(["vtiles", "inspect", clean.path, "--json"]))
        let (resumed, whole) = (try JSONValue.parse(Data(a.stdout.utf8)), try JSONValue.parse(Data(b.stdout.utf8)))
        #expect(resumed["tiles"] == whole["tiles"] && resumed["bytes"] == whole["bytes"] && resumed["levels"] == whole["levels"], "\(resumed) vs \(whole)")
        #expect(try JSONValue.parse(Data(again.stdout.utf8))["tiles"] == whole["tiles"])
        for leftover in [".partial", ".tiles", ".tiles-index"] { #expect(!FileManager.default.fileExists(atPath: out.path + leftover), "\(leftover)") }
    }

    @Test(.scaledTimeLimit(minutes: 5)) func badInputIsRefusedAndLeavesNoFile() async throws {
        let dir = TemporaryDirectory("outpost-cli-vtiles-bad")
        let gdb = dir.file("helsinki.gpkg")
        _ = try await outpost(["service", "create", Repository.sampleData("helsinki").path, "--out", gdb.path])
        let out = dir.file("x.mbtiles")
        let unknown = dir.file("unknown.json")
        try #"{"layers": [{"source": "buildings"}]}"#.write(to: unknown, atomically: true, encoding: .utf8)
        let refused = try await outpost(["vtiles", "export", gdb.path, "--definition", unknown.path, "--out", out.path])
        #expect(refused.status == 1 && refused.stderr.contains("no layer buildings"), "\(refused.stderr)")
        let badField = dir.file("field.json")
        try #"{"layers": [{"source": "streets", "fields": ["colour"]}]}"#.write(to: badField, atomically: true, encoding: .utf8)
        let field = try await outpost(["vtiles", "export", gdb.path, "--definition", badField.path, "--out", out.path])
        #expect(field.status == 1 && field.stderr.contains("no field colour"), "\(field.stderr)")
        let zooms = try await outpost(["vtiles", "export", gdb.path, "--max-zoom", "30", "--out", out.path])
        #expect(zooms.status == 1 && zooms.stderr.contains("zooms"), "\(zooms.stderr)")
        let notJSON = dir.file("broken.json")
        try "{layers".write(to: notJSON, atomically: true, encoding: .utf8)
        let broken = try await outpost(["vtiles", "export", gdb.path, "--definition", notJSON.path, "--out", out.path])
        #expect(broken.status == 1 && broken.stderr.contains("not a vector tile definition"), "\(broken.stderr)")
        let format = try await outpost(["vtiles", "export", gdb.path, "--out", dir.file("x.zip").path])
        #expect(format.status == 64, "\(format.stderr)")
        // Areas: not four numbers, inside out, nowhere near the data's world.
        for (area, says) in [("24.9,60.1,25.0", "xmin,ymin,xmax,ymax"), ("25.0,60.1,24.9,60.2", "xmin"), ("-170,-89.99,-160,-89.95", "outside")] {
            let bad = try await outpost(["vtiles", "export", gdb.path, "--area=\(area)", "--out", out.path])
            #expect(bad.status != 0 && bad.stderr.localizedCaseInsensitiveContains(says), "\(area): \(bad.status) \(bad.stderr)")
        }
        #expect(!FileManager.default.fileExists(atPath: out.path) && !FileManager.default.fileExists(atPath: out.path + ".partial"))

        // inspect: a raster MBTiles, a file that is not SQLite, a damaged tile.
        let notSQLite = dir.file("junk.mbtiles")
        try Data("not a database".utf8).write(to: notSQLite)
        let junk = try await outpost(["vtiles", "inspect", notSQLite.path])
        #expect(junk.status == 1 && junk.stderr.contains("not a readable MBTiles"), "\(junk.stderr)")
        let good = dir.file("good.mbtiles")
        #expect(try await outpost(["vtiles", "export", gdb.path, "--max-zoom", "12", "--out", good.path]).status == 0)
        let damaged = try await ExternalTools.python(
            "import sqlite3, sys; db = sqlite3.connect(sys.argv[1]); db.execute(\"UPDATE images SET tile_data = X'1a05' WHERE tile_id = (SELECT min(tile_id) FROM images)\"); db.commit()",
            [good.path])
        #expect(damaged.status == 0, "\(damaged.stderr)")
        let check = try await outpost(["vtiles", "inspect", good.path])
        #expect(check.status == 1 && check.stderr.contains("does not decode"), "\(check.stderr)")
    }

    /// A layer with invalid polygons (Natural Earth's Sudan crosses itself, the United States'
    /// parts overlap): the export repairs them with GEOS, and every polygon of every tile is valid
    /// by shapely with both countries present at every zoom.
    @Test(.scaledTimeLimit(minutes: 5)) func invalidSourcePolygonsExportAsValidTiles() async throws {
        let dir = TemporaryDirectory("outpost-cli-vtiles-invalid")
        let gdb = dir.file("natural_earth.gpkg")
        #expect(try await outpost(["service", "create", Repository.sampleData("natural_earth").path, "--out", gdb.path]).status == 0)
        let definition = dir.file("countries.json")
        try #"{"layers": [{"source": "countries", "fields": ["name"]}], "maxZoom": 5}"#.write(to: definition, atomically: true, encoding: .utf8)
        let out = dir.file("countries.mbtiles")
        let run = try await outpost(["vtiles", "export", gdb.path, "--definition", definition.path, "--out", out.path])
        #expect(run.status == 0, "\(run.stderr)")
        let check = try await ExternalTools.python(
            """
            import gzip, json, sqlite3, sys, shapely, mapbox_vector_tile
            from shapely.geometry import shape
            invalid, seen = [], {}
            for z, x, y, data in sqlite3.connect(sys.argv[1]).execute("SELECT zoom_level, tile_column, tile_row, tile_data FROM tiles"):
                for f in mapbox_vector_tile.decode(gzip.decompress(data))["countries"]["features"]:
                    g = shape(f["geometry"])
                    if not g.is_valid: invalid.append((z, x, y, f["properties"]["name"], shapely.is_valid_reason(g)))
                    seen.setdefault(f["properties"]["name"], set()).add(z)
            assert not invalid, invalid[:5]
            for name in ("Sudan", "United States of America", "Russia"):
                assert seen.get(name) == set(range(6)), (name, seen.get(name))
            print(len(seen))
            """, [out.path])
        #expect(check.succeeded && (Int(check.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0) > 150, "\(check.stdout)\(check.stderr)")
    }
}
