import Foundation
import OutpostCore
import OutpostTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `outpost serve` over vector tile files placed beside the services (a `.vtpk`, a PMTiles
/// archive, MBTiles of `pbf`): each is a VectorTileServer in the catalog, its description in
/// ArcGIS's shape; every tile its tile map names comes over HTTP and decodes with Python's
/// mapbox-vector-tile, gzipped or plain as the client asks; the style's layers are the tiles'.
/// QGIS loads the service by its URL and draws the streets where the source has them; bad tile
/// addresses get 400, absent tiles 404.
@Suite("VectorTileServer")
struct VectorTileServerTests {
    static let walk = """
        import gzip, json, sys, urllib.request
        import mapbox_vector_tile
        service, expected = sys.argv[1], int(sys.argv[2])
        def get(path, gz=False):
            request = urllib.request.Request(service + path, headers={"Accept-Encoding": "gzip"} if gz else {})
            with urllib.request.urlopen(request) as r:
                body = r.read()
                return (gzip.decompress(body) if r.headers.get("Content-Encoding") == "gzip" else body), r.headers
        info = json.loads(get("?f=json")[0])
        assert info["tiles"] == ["tile/{z}/{y}/{x}.pbf"] and info["tileInfo"]["rows"] == 512 and info["defaultStyles"] == "resources/styles"
        assert info["type"] == "indexedVector" and info["tileMap"] == "tilemap" and info["tileInfo"]["format"] == "pbf"
        assert len(info["tileInfo"]["lods"]) == info["maxLOD"] + 1 and info["fullExtent"]["spatialReference"]["latestWkid"] == 3857
        index = json.loads(get("/tilemap")[0])["index"]
        keys = []
        def visit(node, z, x, y):
            if node == 0:
                return
            keys.append((z, x, y, node == 1))
            if isinstance(node, list):
                for i, child in enumerate(node):
                    visit(child, z + 1, 2 * x + i % 2, 2 * y + i // 2)
        keys.append((0, 0, 0, False))
        for i, child in enumerate(index):
            visit(child, 1, i % 2, i // 2)
        layers, tiles, gzipped = set(), 0, 0
        for z, x, y, leaf in keys:
            if z < info["minLOD"]:
                continue
            try:
                plain, headers = get(f"/tile/{z}/{y}/{x}.pbf", gz=(tiles % 2 == 0))
            except urllib.error.HTTPError as e:
                assert e.code == 404 and not leaf, (z, x, y, e.code)
                continue
            assert headers["Content-Type"] == "application/x-protobuf"
            gzipped += headers.get("Content-Encoding") == "gzip"
            tiles += 1
            layers |= set(mapbox_vector_tile.decode(plain).keys())
        assert tiles == expected, (tiles, expected)
        style = json.loads(get("/resources/styles/root.json")[0])
        assert style["version"] == 8 and style["sources"]["esri"]["url"] == service, style["sources"]
        styled = {l["source-layer"] for l in style["layers"] if "source-layer" in l}
        assert styled == layers, (styled, layers)
        print(json.dumps({"tiles": tiles, "gzipped": gzipped, "layers": sorted(layers)}))
        """

    static let preview = HeadlessChromium.prelude + """
        DRAWN = (
            "let n = 0; for (const c of document.querySelectorAll('#map canvas')) {"
            "  const p = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;"
            "  for (let i = 3; i < p.length; i += 4 * 13) if (p[i] > 0) n++; } return n;")
        try:
            driver.set_page_load_timeout(60)
            driver.get(sys.argv[1])
            assert "streets" in driver.page_source and "VectorTileServer" in driver.title, driver.title
            WebDriverWait(driver, 30).until(lambda d: d.execute_script(DRAWN) > 200)
            # A tile the service has not (a 404) is no error of the page's.
            errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE" and not (e["source"] == "network" and "404" in e["message"])]
            assert not errors, errors
            print("drawn", driver.execute_script(DRAWN))
        finally:
            driver.quit()
        """

    /// A package's tiles (from its bundles) against the service's: each equal to the served
    /// tile once unzipped, and every served tile of the area at the package's zooms in it.
    static let sameAsServed = """
        import gzip, json, math, struct, sys, urllib.request, zipfile
        path, service, area = sys.argv[1], sys.argv[2], [float(v) for v in sys.argv[3].split(",")]
        z = zipfile.ZipFile(path)
        root = json.loads(z.read("p12/root.json"))
        tiles = {}
        for name in z.namelist():
            if name.startswith("p12/tile/L") and name.endswith(".bundle"):
                level, file = int(name.split("/")[2][1:]), name.split("/")[3]
                row0, col0, data = int(file[1:5], 16), int(file[6:10], 16), z.read(name)
                for slot in range(128 * 128):
                    entry = struct.unpack_from("<Q", data, 64 + 8 * slot)[0]
                    if entry >> 40:
                        tiles[(level, col0 + slot % 128, row0 + slot // 128)] = gzip.decompress(data[entry % (1 << 40):entry % (1 << 40) + (entry >> 40)])
        def served(zz, x, y):
            try:
                with urllib.request.urlopen(f"{service}/tile/{zz}/{y}/{x}.pbf") as r:
                    return r.read()
            except urllib.error.HTTPError as e:
                assert e.code == 404
                return None
        for key, body in tiles.items():
            assert served(*key) == body, key
        def tile(lon, lat, zz):
            n = 2 ** zz
            y = (1 - math.asinh(math.tan(math.radians(lat))) / math.pi) / 2 * n
            return int((lon + 180) / 360 * n), int(y)
        for zz in range(root["minLOD"], root["maxLOD"] + 1):
            x0, y0 = tile(area[0], area[3], zz)
            x1, y1 = tile(area[2], area[1], zz)
            for x in range(x0, x1 + 1):
                for y in range(y0, y1 + 1):
                    if (zz, x, y) not in tiles:
                        assert served(zz, x, y) is None, ("missing", zz, x, y)
        print(len(tiles))
        """

    @Test(.scaledTimeLimit(minutes: 4)) func packagesArchivesAndMBTilesAreServedAndQGISDrawsThem() async throws {
        let dir = TemporaryDirectory("outpost-vts")
        let services = dir.file("services")
        try FileManager.default.createDirectory(at: services, withIntermediateDirectories: true)
        let helsinki = services.appendingPathComponent("helsinki.gpkg")
        #expect(try await outpost(["service", "create", Repository.sampleData("helsinki").path, "--out", helsinki.path]).status == 0)
        let countries = dir.file("natural_earth.gpkg")
        #expect(try await outpost(["service", "create", Repository.sampleData("natural_earth").path, "--out", countries.path]).status == 0)
        let streets = dir.file("streets.json")
        try #"{"layers": [{"source": "streets"}, {"source": "addresses", "minZoom": 14}], "minZoom": 10, "maxZoom": 15}"#.write(to: streets, atomically: true, encoding: .utf8)
        var made: [String: Int64] = [:]
        for (name, source, options) in [
            ("streets.vtpk", helsinki, ["--definition", streets.path]), ("world.pmtiles", countries, ["--max-zoom", "3"]),
            ("streets-mb.mbtiles", helsinki, ["--definition", streets.path]),
        ] {
            let run = try await outpost(["vtiles", "export", source.path, "--out", services.appendingPathComponent(name).path, "--json"] + options)
            #expect(run.status == 0, "\(run.stderr)")
            made[name] = try JSONValue.parse(Data(run.stdout.utf8))["tiles"]?.integerValue
        }
        let server = try await ServeProcess.start(service: services)
        let base = server.url.appendingPathComponent("arcgis/rest/services")

        let catalog = try JSONValue.parse(Data(try await ExternalTools.run("curl", ["-s", "\(base.absoluteString)?f=json"]).stdout.utf8))
        let listed = Set((catalog["services"]?.arrayValue ?? []).compactMap { s in s["type"]?.stringValue == "VectorTileServer" ? s["name"]?.stringValue : nil })
        #expect(listed == ["streets", "world", "streets-mb"], "\(catalog)")

        for (service, file) in [("streets", "streets.vtpk"), ("world", "world.pmtiles"), ("streets-mb", "streets-mb.mbtiles")] {
            let url = base.appendingPathComponent("\(service)/VectorTileServer").absoluteString
            let run = try await ExternalTools.python(Self.walk, [url, String(made[file] ?? -1)])
            #expect(run.succeeded, "\(service): \(run.stderr)")
            let summary = try? JSONValue.parse(Data(run.stdout.utf8))
            #expect((summary?["gzipped"]?.integerValue ?? 0) > 0, "\(service): \(run.stdout)")
        }

        // Refusals: a tile outside its level, not a number, absent; a service that is not there.
        let vts = base.appendingPathComponent("streets/VectorTileServer").absoluteString
        for (path, status) in [("tile/2/4/0.pbf", "400"), ("tile/2/x/0.pbf", "400"), ("tile/31/0/0.pbf", "400"), ("tile/3/0/0.pbf", "404")] {
            let code = try await ExternalTools.run("curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "\(vts)/\(path)"])
            #expect(code.stdout == status, "\(path): \(code.stdout)")
        }
        // The package is a MapServer too, drawn by its style: its description, an exported image
        // (GDAL reads it; ink where the streets are), tiles (none above the first zoom), a raster
        // export of its tiles, and an area too large to draw refused.
        let drawnMap = base.appendingPathComponent("streets/MapServer").absoluteString
        let mapInfo = try JSONValue.parse(Data(try await ExternalTools.run("curl", ["-s", "\(drawnMap)?f=json"]).stdout.utf8))
        #expect(mapInfo["tileInfo"]?["lods"]?.arrayValue?.count ?? 0 > 15 && mapInfo["layers"]?[0]?["type"] == "Raster Layer", "\(mapInfo)")
        let image = dir.file("streets-export.png")
        let bbox = "2776000,8437000,2779000,8440000"
        let drawnImage = try await ExternalTools.run("curl", ["-s", "-o", image.path, "-w", "%{http_code}", "\(drawnMap)/export?bbox=\(bbox)&size=300,300&f=image&transparent=true"])
        #expect(drawnImage.stdout == "200", "\(drawnImage.stdout)")
        let stats = try await ExternalTools.run("gdalinfo", ["-stats", image.path])
        #expect(stats.status == 0 && stats.stdout.contains("Size is 300, 300"), "\(stats.stdout)\(stats.stderr)")
        let alpha = try #require(stats.stdout.components(separatedBy: "Band 4").last)
        #expect(alpha.contains("Maximum=255") && !alpha.contains("Mean=0.000"), "\(alpha)")
        for (path, status) in [("tile/15/9484/18654", "200"), ("tile/3/2/4", "404"), ("tile/40/0/0", "400"), ("export?bbox=-2e7,-2e7,2e7,2e7&size=800,800&f=image", "400"), ("identify?geometry=0,0", "400")] {
            let code = try await ExternalTools.run("curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "\(drawnMap)/\(path)"])
            #expect(code.stdout == status, "\(path): \(code.stdout)")
        }
        let rasterFromVector = try await outpost([
            "tiles", "export", "--url", drawnMap, "--extent", "24.94,60.165,24.95,60.17", "--levels", "14-15", "--out", dir.file("streets-raster.tpkx").path,
        ])
        #expect(rasterFromVector.status == 0, "\(rasterFromVector.stderr)")
        let rasterTiles = try JSONValue.parse(Data(try await outpost(["tiles", "inspect", dir.file("streets-raster.tpkx").path, "--json"]).stdout.utf8))
        #expect(rasterTiles["tileFormat"] == "PNG" && rasterTiles["tiles"]?.integerValue ?? 0 > 4, "\(rasterTiles)")

        let missing = try await ExternalTools.run("curl", ["-s", "-w", "%{http_code}", base.appendingPathComponent("nothing/VectorTileServer").absoluteString])
        #expect(missing.stdout.hasSuffix("404") && missing.stdout.contains("vector tile service nothing"), "\(missing.stdout)")

        // QGIS, given the service's URL, fetches its tiles and draws the streets where they are.
        let drawn = try await QGISDrawing.compare(
            QGISDrawing.vectorTileServer(try #require(URL(string: vts))), with: helsinki, layer: "streets", kind: "line", area: "24.93,60.16,24.96,60.18")
        #expect(QGISDrawing.problem(drawn, atLeast: 10_000) == nil, "\(drawn)")

        // The Services Directory's page previews the tiles: its own script decodes them into
        // canvases (headless Chromium; coloured pixels drawn, no error in the console).
        let browser = try await ExternalTools.python(Self.preview, ["\(vts)?f=html"])
        #expect(browser.succeeded, "\(browser.stdout)\(browser.stderr.suffix(1500))")

        // Taken offline two ways: `vtiles export` of the service's URL, and a map whose basemap is
        // the VectorTileServer, in one offline-map job. Each package holds exactly the served
        // tiles of the area (read back from its bundles and compared with HTTP, byte for byte).
        let taken = dir.file("taken.vtpk")
        let export = try await outpost(["vtiles", "export", vts, "--area", "24.94,60.165,24.95,60.17", "--max-zoom", "15", "--out", taken.path, "--json"])
        #expect(export.status == 0, "\(export.stderr)")
        // Estimated first from the service's tile map: the same tiles counted.
        let estimate = try await outpost(["vtiles", "estimate", vts, "--area", "24.94,60.165,24.95,60.17", "--max-zoom", "15", "--json"])
        #expect(estimate.status == 0, "\(estimate.stderr)")
        let told = try JSONValue.parse(Data(estimate.stdout.utf8))
        let exported = try JSONValue.parse(Data(export.stdout.utf8))
        #expect(told["tileCount"] == exported["tiles"] && told["exact"] == true, "\(told) \(exported)")
        try #"{"formatVersion": 1, "title": "Streets", "initialExtent": {"xmin": 24.94, "ymin": 60.165, "xmax": 24.95, "ymax": 60.17, "spatialReference": {"wkid": 4326}}, "operationalLayers": [{"id": "addresses", "title": "Addresses", "url": "helsinki/FeatureServer/0"}], "basemap": {"title": "Streets", "url": "streets/VectorTileServer"}}"#
            .write(to: services.appendingPathComponent("vector.map.json"), atomically: true, encoding: .utf8)
        let mapServer = try await ServeProcess.start(service: services)
        let offline = dir.file("crew-map")
        let created = try await outpost([
            "offline", "create", "--map", "\(mapServer.url.absoluteString)/arcgis/rest/maps/vector.json", "--extent", "24.94,60.165,24.95,60.17", "--out", offline.path,
        ])
        #expect(created.status == 0, "\(created.stderr)")
        let status = try await outpost(["offline", "status", offline.path])
        #expect(status.stdout.contains("basemap.vtpk"), "\(status.stdout)")
        for package in [taken, offline.appendingPathComponent("basemap.vtpk")] {
            let check = try await ExternalTools.python(Self.sameAsServed, [package.path, vts, "24.94,60.165,24.95,60.17"])
            #expect(check.succeeded, "\(package.lastPathComponent): \(check.stderr)")
            #expect(Int(check.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0 > 5, "\(check.stdout)")
        }
        await mapServer.stop()

        // Raster MBTiles beside them stay a MapServer: tiles of the drawn Helsinki map, served again.
        let raster = try await outpost([
            "tiles", "export", "--url", base.appendingPathComponent("helsinki/MapServer").absoluteString, "--extent", "24.94,60.165,24.95,60.17", "--levels",
            "13-14", "--out", services.appendingPathComponent("drawn.mbtiles").path,
        ])
        #expect(raster.status == 0, "\(raster.stderr)")
        await server.stop()
        let again = try await ServeProcess.start(service: services)
        let types = try JSONValue.parse(Data(try await ExternalTools.run("curl", ["-s", "\(again.url.absoluteString)/arcgis/rest/services?f=json"]).stdout.utf8))
        let kinds = Dictionary(uniqueKeysWithValues: (types["services"]?.arrayValue ?? []).compactMap { s in s["name"]?.stringValue.map { ($0 + "/" + (s["type"]?.stringValue ?? ""), true) } })
        #expect(kinds["drawn/MapServer"] == true && kinds["streets-mb/VectorTileServer"] == true && kinds["drawn/VectorTileServer"] == nil, "\(types)")
        await again.stop()
    }

    /// One tile of a served VectorTileServer, decoded: `{layer: sorted names or ids}`, and the
    /// tile's bytes' digest. Arguments: the service URL, z, lon, lat, and the field to list.
    static let oneTile = """
        import gzip, hashlib, json, math, sys, urllib.request
        import mapbox_vector_tile
        service, z, lon, lat, field = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
        n = 2 ** z
        x = int((lon + 180) / 360 * n)
        y = int((1 - math.asinh(math.tan(math.radians(lat))) / math.pi) / 2 * n)
        request = urllib.request.Request(f"{service}/tile/{z}/{y}/{x}.pbf", headers={"Accept-Encoding": "gzip"})
        with urllib.request.urlopen(request) as r:
            body = r.read()
            plain = gzip.decompress(body) if r.headers.get("Content-Encoding") == "gzip" else body
        tile = mapbox_vector_tile.decode(plain)
        out = {name: sorted(str(f["properties"].get(field)) for f in layer["features"]) for name, layer in tile.items()}
        print(json.dumps({"key": [z, x, y], "layers": out, "sha": hashlib.sha256(plain).hexdigest()}))
        """

    /// A feature service is a VectorTileServer too: its layers made into tiles when a tile is
    /// first asked for (every layer and field, z0–14, as `vtiles export` makes them by default),
    /// kept, and made again after an edit; QGIS draws them over the source.
    @Test(.scaledTimeLimit(minutes: 4)) func aFeatureServicesLayersAreServedAsVectorTilesMadeOnRequest() async throws {
        let dir = TemporaryDirectory("outpost-vts-layers")
        let services = dir.file("services")
        try FileManager.default.createDirectory(at: services, withIntermediateDirectories: true)
        let helsinki = services.appendingPathComponent("helsinki.gpkg")
        #expect(try await outpost(["service", "create", Repository.sampleData("helsinki").path, "--out", helsinki.path]).status == 0)
        // Beside it a service of tables only: nothing to make tiles of.
        let register = dir.file("register")
        try FileManager.default.createDirectory(at: register.appendingPathComponent("data"), withIntermediateDirectories: true)
        try Data(
            #"""
            {"formatVersion": 1, "name": "register", "spatialReference": {"wkid": 4326}, "capabilities": ["Query"],
             "tables": [{"id": 0, "name": "visits", "fields": [{"name": "objectid", "type": "OID"}, {"name": "note", "type": "String", "length": 80}]}]}
            """#.utf8
        ).write(to: register.appendingPathComponent("service.json"))
        let created = try await outpost(["service", "create", register.path, "--out", services.appendingPathComponent("register.gpkg").path])
        #expect(created.status == 0, "\(created.stderr)")
        let files = dir.file("files")
        let server = try await ServeProcess.start(service: services, arguments: ["--output-directory", files.path])
        let base = server.url.appendingPathComponent("arcgis/rest/services")
        let vts = base.appendingPathComponent("helsinki/VectorTileServer").absoluteString
        let keptVersions = {
            Set((try? FileManager.default.contentsOfDirectory(atPath: files.appendingPathComponent("rendered-tiles/helsinki/vector").path)) ?? [])
        }

        let info = try JSONValue.parse(Data(try await ExternalTools.run("curl", ["-s", "\(vts)?f=json"]).stdout.utf8))
        #expect(info["type"] == "indexedVector" && info["tileMap"] == nil && info["capabilities"] == "TilesOnly", "\(info)")
        #expect(info["minLOD"] == 0 && info["maxLOD"] == 14 && info["tileInfo"]?["lods"]?.arrayValue?.count == 15, "\(info)")
        let x = info["fullExtent"]?["xmin"]?.doubleValue ?? 0
        #expect(x > 2_770_000 && x < 2_790_000, "\(info)")

        // The same tile as the export makes, and the same bytes when asked again (kept).
        let (lon, lat) = ("24.9455", "60.1690")
        let first = try await ExternalTools.python(Self.oneTile, [vts, "14", lon, lat, "name"])
        #expect(first.succeeded, "\(first.stderr)")
        let served = try JSONValue.parse(Data(first.stdout.utf8))
        let streets = served["layers"]?["streets"]?.arrayValue?.compactMap(\.stringValue) ?? []
        #expect(streets.count > 20 && (served["layers"]?["addresses"]?.arrayValue?.count ?? 0) > 20, "\(served)")
        let again = try JSONValue.parse(Data(try await ExternalTools.python(Self.oneTile, [vts, "14", lon, lat, "name"]).stdout.utf8))
        #expect(again["sha"] == served["sha"])
        let versionsBefore = keptVersions()
        #expect(versionsBefore.count == 1 && versionsBefore.first?.hasPrefix("v") == true, "\(versionsBefore)")
        let exported = dir.file("area.mbtiles")
        let export = try await outpost(["vtiles", "export", helsinki.path, "--area", "24.945,60.1685,24.946,60.1695", "--min-zoom", "14", "--max-zoom", "14", "--out", exported.path])
        #expect(export.status == 0, "\(export.stderr)")
        let key = served["key"]?.arrayValue?.compactMap(\.integerValue) ?? []
        let fromFile = try await ExternalTools.python(
            """
            import gzip, hashlib, sqlite3, sys
            z, x, y = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
            row = sqlite3.connect(sys.argv[1]).execute("SELECT tile_data FROM tiles WHERE zoom_level=? AND tile_column=? AND tile_row=?", (z, x, 2 ** z - 1 - y)).fetchone()
            print(hashlib.sha256(gzip.decompress(row[0])).hexdigest())
            """, [exported.path] + key.map(String.init))
        #expect(fromFile.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == served["sha"]?.stringValue, "\(fromFile.stdout)\(fromFile.stderr)")

        // An edit through the FeatureServer: the tile is made again and holds the new street.
        let street = #"[{"geometry": {"paths": [[[24.9452, 60.1688], [24.9458, 60.1692]]], "spatialReference": {"wkid": 4326}}, "attributes": {"name": "Testikatu", "highway": "residential"}}]"#
        let added = try await applyEdits(base.appendingPathComponent("helsinki/FeatureServer").absoluteString, layer: 1, "adds", street)
        #expect(added["addResults"]?[0]?["success"] == true, "\(added)")
        let after = try JSONValue.parse(Data(try await ExternalTools.python(Self.oneTile, [vts, "14", lon, lat, "name"]).stdout.utf8))
        let streetsAfter = after["layers"]?["streets"]?.arrayValue?.compactMap(\.stringValue) ?? []
        #expect(!streets.contains("Testikatu") && streetsAfter.contains("Testikatu") && streetsAfter.count == streets.count + 1, "\(streetsAfter)")
        // The tiles of the data before the edit are gone: one version is kept.
        let versionsAfter = keptVersions()
        #expect(versionsAfter.count == 1 && versionsAfter.isDisjoint(with: versionsBefore), "\(versionsBefore) → \(versionsAfter)")

        // A service whose layers cannot be tiled: 404 with the reason, for the service and its tiles.
        let registerVTS = base.appendingPathComponent("register/VectorTileServer").absoluteString
        for path in ["?f=json", "/tile/3/2/4.pbf"] {
            let refused = try await ExternalTools.run("curl", ["-s", "-w", "\n%{http_code}", "\(registerVTS)\(path)"])
            #expect(refused.stdout.hasSuffix("\n404") && refused.stdout.contains("register has no layer with geometry"), "\(path): \(refused.stdout)")
        }

        // No tile map (tiles are made on request); nothing past z14; bad addresses refused.
        for (path, status) in [("tilemap", "404"), ("tile/15/9703/18548.pbf", "404"), ("tile/31/0/0.pbf", "400"), ("tile/3/9/0.pbf", "400")] {
            let code = try await ExternalTools.run("curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "\(vts)/\(path)"])
            #expect(code.stdout == status, "\(path): \(code.stdout)")
        }
        let style = try JSONValue.parse(Data(try await ExternalTools.run("curl", ["-s", "\(vts)/resources/styles/root.json"]).stdout.utf8))
        let styled = Set((style["layers"]?.arrayValue ?? []).compactMap { $0["source-layer"]?.stringValue })
        #expect(styled == ["streets", "addresses"] && style["sources"]?["esri"]?["url"]?.stringValue == vts, "\(style)")

        // QGIS, given the URL, draws the streets where the source has them.
        let drawn = try await QGISDrawing.compare(
            QGISDrawing.vectorTileServer(try #require(URL(string: vts))), with: helsinki, layer: "streets", kind: "line", area: "24.93,60.16,24.96,60.18")
        #expect(QGISDrawing.problem(drawn, atLeast: 10_000) == nil, "\(drawn)")
        await server.stop()
    }
}
