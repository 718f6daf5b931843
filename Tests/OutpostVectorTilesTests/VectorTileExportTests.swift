import Foundation
import OutpostCore
import OutpostServer
import OutpostSQLiteService
import OutpostStorage
import OutpostTestSupport
import OutpostTiles
import Testing

@testable import OutpostVectorTiles

/// Tiles made from real data (Natural Earth's countries and places, OpenStreetMap's central
/// Helsinki) checked by other readers: every tile decoded by Python's mapbox-vector-tile, each
/// feature against its source cut to the tile with shapely (within the grid's tolerance, its
/// attributes equal, polygons valid), nothing missing at the last zoom; GDAL's MVT driver reads
/// the MBTiles.
@Suite("Vector tiles from layers, checked by mapbox-vector-tile, shapely and GDAL")
struct VectorTileExportTests {
    /// Invalid source polygons repaired with GEOS, as `outpost` and the server do.
    init() { GEOSPolygonRepair.install() }

    static func service(_ name: String, in dir: TemporaryDirectory) throws -> Geodatabase {
        let url = dir.file("\(name).gpkg")
        let sample = Repository.sampleData(name)
        try SQLiteServiceBackend.create(at: url, schema: try ServiceSchema.load(from: sample.appendingPathComponent("service.json")), dataDirectory: sample.appendingPathComponent("data"))
        return try Geodatabase.open(at: url, readOnly: true)
    }

    /// Compares every tile with its source in Python; prints a JSON summary line.
    static let check = """
        import gzip, json, math, sqlite3, sys
        import mapbox_vector_tile, pyogrio.raw, shapely
        from shapely.geometry import shape, box
        mbtiles, gpkg, spec = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
        extent, buffer, maxzoom = spec["extent"], spec["buffer"], spec["maxZoom"]
        R, H = 6378137.0, 20037508.342789244
        def merc(x, y):
            if spec["geographic"]:
                lat = max(min(y, 89.9), -89.9)
                return x * math.pi / 180 * R, math.log(math.tan(math.pi / 4 + lat * math.pi / 360)) * R
            return x, y
        sources = {}
        for layer, table in spec["layers"].items():
            meta, fids, geoms, values = pyogrio.raw.read(gpkg, layer=table, return_fids=True)
            fields = list(meta["fields"])
            rows = {}
            for i, fid in enumerate(fids):
                g = shapely.from_wkb(geoms[i])
                g = shapely.transform(g, lambda a: [merc(x, y) for x, y in a])
                rows[int(fid)] = (g, {f: values[j][i] for j, f in enumerate(fields)})
            sources[layer] = (rows, shapely.STRtree([r[0] for r in rows.values()]), list(rows.keys()))
        def substantial(g):
            # What the grid can hold: polygon parts of 4 square units or more, line parts of 2 or more.
            parts = getattr(g, "geoms", [g])
            if g.geom_type.endswith("Polygon"):
                kept = [p for p in parts if p.geom_type == "Polygon" and p.area >= 4]
            elif "Line" in g.geom_type:
                kept = [p for p in parts if p.geom_type == "LineString" and p.length >= 2]
            else:
                return g
            return shapely.union_all(kept) if kept else shapely.GeometryCollection()
        def directed(a, b):
            # The farthest a point along a (every 2 units) lies from b.
            if a is None or a.is_empty: return 0.0
            if b is None or b.is_empty: return 99.0
            pts = shapely.points(shapely.get_coordinates(shapely.segmentize(a, 2)))
            return float(shapely.distance(pts, b).max())
        db = sqlite3.connect(mbtiles)
        stats = {"tiles": 0, "features": 0, "invalid": 0, "invalidFromInvalidSource": 0, "worst": 0.0, "missing": 0, "checked": 0}
        problems = []
        for z, col, tms, data in db.execute("SELECT zoom_level, tile_column, tile_row, tile_data FROM tiles"):
            row = (1 << z) - 1 - tms
            span = 2 * H / (1 << z)
            xmin, ymax = -H + col * span, H - row * span
            scale = extent / span
            to_tile = lambda a: [((x - xmin) * scale, (ymax - y) * scale) for x, y in a]
            tile = mapbox_vector_tile.decode(gzip.decompress(data), default_options={"y_coord_down": True})
            stats["tiles"] += 1
            window = box(-buffer, -buffer, extent + buffer, extent + buffer)
            for name, layer in tile.items():
                rows, tree, order = sources[name]
                present = set()
                for f in layer["features"]:
                    stats["features"] += 1
                    fid = f["id"]
                    present.add(fid)
                    g = shape(f["geometry"])
                    source, attributes = rows[fid]
                    for k, v in f["properties"].items():
                        want = attributes[k]
                        if isinstance(v, float) or isinstance(want, float):
                            ok = abs(float(v) - float(want)) < 1e-9 * max(1, abs(float(want)))
                        else:
                            ok = v == want or str(v) == str(want)
                        if not ok: problems.append("%s/%d/%d %s %d: %s=%r, source %r" % (z, col, row, name, fid, k, v, want))
                    # GEOS's overlay, not clip_by_rect (which may leave degenerate rings); an
                    # invalid source (Natural Earth's Sudan crosses itself) made valid first, as
                    # the generator does with GEOS before tiling it.
                    valid_source = source.is_valid
                    full = shapely.make_valid(shapely.transform(source, to_tile)).intersection(window)
                    polygonal = g.geom_type in ("Polygon", "MultiPolygon")
                    if polygonal and not g.is_valid:
                        if valid_source:
                            stats["invalid"] += 1
                            problems.append("%s/%d/%d %s %d invalid: %s" % (z, col, row, name, fid, shapely.is_valid_reason(g)))
                        else:
                            stats["invalidFromInvalidSource"] += 1
                    # An invalid source has no one right shape to be near (Sudan's ring runs out
                    # 86 km in a needle that crosses itself at its base, narrower than a unit at
                    # these zooms): its tiles are held to validity, above, and to presence, below.
                    if not valid_source: continue
                    # Each way: every part of ours lies near the source cut to the tile, and every
                    # part of that the grid can hold lies near ours.
                    ours, theirs, held = (g.boundary, full.boundary, substantial(full).boundary) if polygonal else (g, full, substantial(full))
                    d = max(directed(ours, theirs), directed(held, ours))
                    limit = spec["simplification"] + 0.75
                    if d > limit: problems.append("%s/%d/%d %s %d lies %.2f units from its source" % (z, col, row, name, fid, d))
                    if polygonal:
                        err = abs(g.area - full.area) / max(full.length, 1)
                        stats["worst"] = max(stats["worst"], err)
                        if err > 1.5: problems.append("%s/%d/%d %s %d area %.1f vs %.1f" % (z, col, row, name, fid, g.area, full.area))
                # At the last zoom nothing of substance is missing (no thinning there).
                if z == maxzoom and not spec["sizeLimited"]:
                    tile_box = shapely.transform(window, lambda a: [(xmin + x / scale, ymax - y / scale) for x, y in a])
                    for i in tree.query(tile_box):
                        fid = order[i]
                        if fid in present: continue
                        part = shapely.make_valid(shapely.transform(rows[fid][0], to_tile)).intersection(window)
                        stats["checked"] += 1
                        if part.is_empty: continue
                        big = part.area >= 4 if part.geom_type.endswith("Polygon") else (part.length >= 2 if "Line" in part.geom_type else True)
                        if big:
                            stats["missing"] += 1
                            problems.append("%s/%d/%d %s %d is missing" % (z, col, row, name, fid))
        stats["problems"] = problems[:10]
        print(json.dumps(stats))
        """

    static func export(_ gdb: Geodatabase, definition: VectorTileDefinition, to url: URL) async throws -> VectorTileGenerator.Summary {
        try await VectorTileMBTiles.export(try VectorTileGenerator(geodatabase: gdb, definition: definition), to: url)
    }

    static func python(_ mbtiles: URL, _ gdb: Geodatabase, _ d: VectorTileDefinition, sizeLimited: Bool = false) async throws -> [String: JSONValue] {
        let spec: JSONValue = [
            "extent": .integer(Int64(d.extent)), "buffer": .integer(Int64(d.buffer)), "maxZoom": .integer(Int64(d.maxZoom)), "geographic": true,
            "simplification": .number(d.simplification), "sizeLimited": .bool(sizeLimited),
            "layers": .object(Dictionary(uniqueKeysWithValues: d.layers.map { ($0.tileLayerName, JSONValue.string($0.source)) })),
        ]
        let result = try await ExternalTools.python(check, [mbtiles.path, gdb.url.path, spec.jsonString])
        #expect(result.status == 0, "\(result.stderr)")
        let line = result.stdout.split(separator: "\n").last.map(String.init) ?? "{}"
        return try JSONValue.parse(Data(line.utf8)).objectValue ?? [:]
    }

    @Test(.scaledTimeLimit(minutes: 4)) func naturalEarthTilesMatchTheirSourceInOthersReaders() async throws {
        let dir = TemporaryDirectory("outpost-vtiles-ne")
        let gdb = try Self.service("natural_earth", in: dir)
        defer { try? gdb.close() }
        // Ids on: the check finds each feature's source row by it.
        let d = VectorTileDefinition(
            layers: [.init(source: "countries", name: "land"), .init(source: "populated_places", fields: ["name"], minZoom: 2)], maxZoom: 5, featureIDs: true)
        let out = dir.file("ne.mbtiles")
        let summary = try await Self.export(gdb, definition: d, to: out)
        #expect(summary.tiles > 300 && summary.droppedForSize == 0)
        #expect(!FileManager.default.fileExists(atPath: out.path + ".partial"))
        let stats = try await Self.python(out, gdb, d)
        #expect(stats["tiles"]?.integerValue == Int64(summary.tiles))
        // Sudan and the United States are invalid in the source: repaired, their tiles are valid too.
        #expect(stats["invalid"]?.integerValue == 0 && stats["invalidFromInvalidSource"]?.integerValue == 0 && stats["missing"]?.integerValue == 0, "\(stats)")
        #expect(stats["problems"]?.arrayValue?.isEmpty == true, "\(stats["problems"] ?? .null)")
        // GDAL's MVT driver reads the MBTiles as vector layers.
        let info = try await ExternalTools.run("ogrinfo", ["-ro", "-so", "-al", out.path])
        #expect(info.status == 0 && info.stdout.contains("Layer name: land") && info.stdout.contains("Layer name: populated_places"), "\(info.stdout)\(info.stderr)")
        // A country polygon at zoom 2 with its name, read back through GDAL.
        let z2 = try await ExternalTools.run("ogrinfo", ["-ro", "-oo", "ZOOM_LEVEL=2", out.path, "land", "-where", "name = 'Finland'"])
        #expect(z2.stdout.contains("Finland") && z2.stdout.contains("MULTIPOLYGON") || z2.stdout.contains("POLYGON"), "\(z2.stdout)")
    }

    /// A row another writer left undecodable (here a line claiming 1,000 points and holding none) is left out and
    /// named; everything else is tiled. An empty layer makes no tiles and no error.
    @Test(.scaledTimeLimit(minutes: 2)) func unreadableRowsAreLeftOutAndNamedAndEmptyLayersMakeNothing() async throws {
        let dir = TemporaryDirectory("outpost-vtiles-unreadable")
        var gdb = try Self.service("helsinki", in: dir)
        let column = gdb.schema.layer(named: "streets")!.geometryColumn
        try gdb.close()
        // The blob made in Python, written through GDAL, whose SQLite has the GeoPackage
        // functions the R-tree triggers call.
        let file = dir.file("helsinki.gpkg").path
        let made = try await ExternalTools.python(
            "import sqlite3, sys; b = sqlite3.connect(sys.argv[1]).execute('SELECT \"%s\" FROM streets WHERE objectid = 7' % sys.argv[2]).fetchone()[0]; print((b[:40] + bytes.fromhex('0102000000E8030000')).hex())",
            [file, column])
        let hex = made.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        for sql in ["UPDATE streets SET \"\(column)\" = X'\(hex)' WHERE objectid = 7", "DELETE FROM addresses"] {
            let broken = try await ExternalTools.run("ogrinfo", [file, "-sql", sql])
            #expect(broken.status == 0, "\(broken.stderr)")
        }
        gdb = try Geodatabase.open(at: dir.file("helsinki.gpkg"), readOnly: true)
        defer { try? gdb.close() }
        let out = dir.file("h.mbtiles")
        let summary = try await Self.export(gdb, definition: VectorTileDefinition(layers: [.init(source: "streets"), .init(source: "addresses")], maxZoom: 14), to: out)
        #expect(summary.tiles > 5)
        #expect(summary.unreadable.count == 1 && summary.unreadable.first?.objectID == 7 && summary.unreadable.first?.layer == "streets", "\(summary.unreadable)")
        let inspection = try VectorTileInspection.inspect { try VectorTileMBTilesReader(url: out).forEachTile($0) }
        #expect(inspection.layers.map(\.name) == ["streets"])
        // Drawn, the unreadable row is passed over and the rest of the streets show.
        let area = try #require(try await MapRenderer(geodatabase: gdb).extent())
        let pixels = try await MapRenderer(geodatabase: gdb).render(envelope: area, width: 200, height: 200, transparent: true)
        #expect(stride(from: 3, to: pixels.count, by: 4).filter { pixels[$0] > 0 }.count > 500)
        // A layer with nothing in it: no tiles at all, and no file left behind either way.
        let empty = dir.file("empty.mbtiles")
        let none = try await Self.export(gdb, definition: VectorTileDefinition(layers: [.init(source: "addresses")]), to: empty)
        #expect(none.tiles == 0)
    }

    /// Workers sharing the subtrees make the same tiles as one walk alone.
    @Test(.scaledTimeLimit(minutes: 2)) func workersMakeWhatOneWalkMakes() async throws {
        let dir = TemporaryDirectory("outpost-vtiles-workers")
        let gdb = try Self.service("natural_earth", in: dir)
        defer { try? gdb.close() }
        let generator = try VectorTileGenerator(geodatabase: gdb, definition: VectorTileDefinition(layers: [.init(source: "countries")], maxZoom: 5))
        var made: [[TileKey: [UInt8]]] = []
        for workers in [1, 3] {
            let tiles = Locked<[TileKey: [UInt8]]>([:])
            let summary = try await generator.generate(concurrency: workers) { key, bytes in tiles.withLock { $0[key] = bytes } }
            let all = tiles.withLock { $0 }
            #expect(summary.tiles == all.count && summary.levels[5]?.tiles ?? 0 > 100)
            made.append(all)
        }
        #expect(made[0] == made[1])
    }

    /// The schema in Schemas/ and the reader accept the same documents.
    @Test func theDefinitionSchemaAndTheReaderAgree() async throws {
        let example = Repository.schema("examples/helsinki.vector-tiles.json")
        let result = try await ExternalTools.checkJSONSchema(
            Repository.schema("vector-tile-definition.schema.json"), valid: [example],
            invalid: [["layers": []], ["layers": [["name": "x"]]], ["layers": [["source": "a"]], "maxZoom": 25], ["layers": [["source": "a"]], "colour": "red"]])
        #expect(result.status == 0, "\(result.stderr)")
        let dir = TemporaryDirectory("outpost-vtiles-definition")
        let gdb = try Self.service("helsinki", in: dir)
        defer { try? gdb.close() }
        let d = try VectorTileDefinition.read(example)
        #expect(d.maxZoom == 16 && d.minZoom == 0 && d.pointDropRate == 2.5 && d.layers[0].tileLayerName == "roads")
        let generator = try VectorTileGenerator(geodatabase: gdb, definition: d)
        #expect(generator.tileLayers.map(\.name) == ["roads", "addresses"] && generator.tileLayers[1].fields.map(\.name) == ["street", "house_number"])
        // Layers in other spatial references, without geometry, or named twice are refused.
        var twice = d
        twice.layers[1].name = "roads"
        #expect(throws: VectorTileError(.invalidDefinition, "two layers are named roads")) { try VectorTileGenerator(geodatabase: gdb, definition: twice) }
    }

    @Test(.scaledTimeLimit(minutes: 4)) func helsinkiStreetsAndAddressesMatchTheirSource() async throws {
        let dir = TemporaryDirectory("outpost-vtiles-hki")
        let gdb = try Self.service("helsinki", in: dir)
        defer { try? gdb.close() }
        let d = VectorTileDefinition(layers: [.init(source: "streets", minZoom: 10), .init(source: "addresses", minZoom: 13)], maxZoom: 15, featureIDs: true)
        let out = dir.file("helsinki.mbtiles")
        let summary = try await Self.export(gdb, definition: d, to: out)
        #expect(summary.tiles > 10)
        // Without ids (the default) the same features, none with an id, in smaller tiles.
        var plain = d
        plain.featureIDs = false
        let withoutIDs = dir.file("no-ids.mbtiles")
        let plainSummary = try await Self.export(gdb, definition: plain, to: withoutIDs)
        #expect(plainSummary.tiles == summary.tiles && plainSummary.features == summary.features && plainSummary.bytes < summary.bytes)
        var idsSeen = (with: 0, without: 0)
        try VectorTileMBTilesReader(url: out).forEachTile { _, bytes in
            idsSeen.with += try VectorTile(decoding: VectorTileCompression.plain(bytes)).layers.flatMap(\.features).filter { $0.id != nil }.count
        }
        try VectorTileMBTilesReader(url: withoutIDs).forEachTile { _, bytes in
            idsSeen.without += try VectorTile(decoding: VectorTileCompression.plain(bytes)).layers.flatMap(\.features).filter { $0.id != nil }.count
        }
        #expect(idsSeen.with == summary.features && idsSeen.without == 0, "\(idsSeen)")
        let stats = try await Self.python(out, gdb, d)
        #expect(stats["missing"]?.integerValue == 0 && (stats["features"]?.integerValue ?? 0) > 1_000, "\(stats)")
        #expect(stats["problems"]?.arrayValue?.isEmpty == true, "\(stats["problems"] ?? .null)")
        let inspection = try VectorTileInspection.inspect { try VectorTileMBTilesReader(url: out).forEachTile($0) }
        #expect(inspection.layers.map(\.name) == ["addresses", "streets"] && inspection.damaged.isEmpty)
        #expect(inspection.layers.first { $0.name == "addresses" }?.minZoom == 13)
    }

    /// Clustered points, checked with mapbox-vector-tile against the source read by pyogrio: at
    /// every zoom below the last each point is counted once (the `point_count`s of a tile's
    /// clusters sum to the source points inside it, and over a zoom to all of them), every
    /// cluster lies in the square of the grid its points do, and the clusters drawn in a tile's
    /// buffer are its neighbour's own; the last zoom keeps every point unclustered.
    @Test(.scaledTimeLimit(minutes: 4)) func clusteredPointsCountEachPointOnceAndAgreeAcrossSeams() async throws {
        let dir = TemporaryDirectory("outpost-vtiles-cluster")
        let gdb = try Self.service("helsinki", in: dir)
        defer { try? gdb.close() }
        let d = VectorTileDefinition(layers: [.init(source: "addresses", fields: ["street"], minZoom: 9, clusterDistance: 32)], maxZoom: 15)
        let out = dir.file("clusters.mbtiles")
        let summary = try await Self.export(gdb, definition: d, to: out)
        #expect(summary.tiles > 10 && summary.droppedForSize == 0)
        let generator = try VectorTileGenerator(geodatabase: gdb, definition: d)
        #expect(generator.tileLayers[0].fields.map(\.name) == ["street", "point_count"])
        let script = """
            import gzip, json, math, sqlite3, sys
            import mapbox_vector_tile, pyogrio.raw, shapely
            mbtiles, gpkg = sys.argv[1], sys.argv[2]
            _, _, geoms, _ = pyogrio.raw.read(gpkg, layer="addresses", return_fids=True)
            points = [shapely.from_wkb(g) for g in geoms]
            R = 6378137.0
            merc = [(p.x * math.pi / 180 * R, math.log(math.tan(math.pi / 4 + p.y * math.pi / 360)) * R) for p in points]
            H = 20037508.342789244
            tiles = {}
            for z, x, y, data in sqlite3.connect(mbtiles).execute("SELECT zoom_level, tile_column, tile_row, tile_data FROM tiles"):
                y = (1 << z) - 1 - y
                layer = mapbox_vector_tile.decode(gzip.decompress(data), default_options={"y_coord_down": True}).get("addresses", {"features": []})
                tiles[(z, x, y)] = [(f["geometry"]["coordinates"], f["properties"]) for f in layer["features"]]
            problems, zooms = [], {}
            for (z, x, y), features in tiles.items():
                span = 2 * H / (1 << z)
                inside = [(c, p) for c, p in features if 0 <= c[0] < 4096 and 0 <= c[1] < 4096]
                if z == 15:
                    if any("point_count" in p for _, p in features): problems.append(f"{z}/{x}/{y}: point_count at the last zoom")
                    continue
                counts = sum(p["point_count"] for _, p in inside)
                src = [(mx, my) for mx, my in merc if 0 <= (mx + H - x * span) / span * 4096 < 4096 and 0 <= (H - my - y * span) / span * 4096 < 4096]
                zooms[z] = zooms.get(z, 0) + counts
                if counts != len(src): problems.append(f"{z}/{x}/{y}: clusters count {counts}, the source has {len(src)} inside")
                # Each cluster lies in its points' square (512 units: 8 squares across).
                for c, p in inside:
                    sx, sy = int(c[0] // 512), int(c[1] // 512)
                    members = [(mx, my) for mx, my in src if int((mx + H - x * span) / span * 4096 // 512) == sx and int((H - my - y * span) / span * 4096 // 512) == sy]
                    if len(members) != p["point_count"]: problems.append(f"{z}/{x}/{y}: a cluster of {p['point_count']} in a square of {len(members)}")
                # The buffer to the right is the right-hand neighbour's own clusters.
                right = tiles.get((z, x + 1, y))
                if right is not None:
                    mine = sorted((c[0] - 4096, c[1], p["point_count"]) for c, p in features if c[0] >= 4096)
                    theirs = sorted((c[0], c[1], p["point_count"]) for c, p in right if c[0] <= 80)
                    if len(mine) != len(theirs) or any(abs(a[0] - b[0]) > 1 or abs(a[1] - b[1]) > 1 or a[2] != b[2] for a, b in zip(mine, theirs)):
                        problems.append(f"{z}/{x}/{y}: buffer {mine[:3]} against the neighbour's {theirs[:3]}")
            print(json.dumps({"points": len(points), "zooms": zooms, "problems": problems[:10], "tiles": len(tiles)}))
            """
        let run = try await ExternalTools.python(script, [out.path, gdb.url.path])
        #expect(run.status == 0, "\(run.stderr)")
        let result = try JSONValue.parse(Data((run.stdout.split(separator: "\n").last.map(String.init) ?? "{}").utf8))
        let points = try #require(result["points"]?.integerValue)
        #expect(points > 1_000 && result["problems"]?.arrayValue == [], "\(result)")
        // Every zoom from 9 to 14 counts every point once.
        #expect(result["zooms"]?.objectValue?.count == 6 && result["zooms"]?.objectValue?.values.allSatisfy { $0.integerValue == points } == true, "\(result)")

        // Refused: a distance outside 1…256, lines clustered, a field named point_count.
        for (layer, why) in [
            (VectorTileDefinition.Layer(source: "addresses", clusterDistance: 0), "clusterDistance 0"),
            (VectorTileDefinition.Layer(source: "streets", clusterDistance: 16), "only points are clustered"),
        ] {
            let error = #expect(throws: VectorTileError.self) { try VectorTileGenerator(geodatabase: gdb, definition: VectorTileDefinition(layers: [layer])) }
            #expect(error?.message.contains(why) == true, "\(String(describing: error))")
        }
        var schema = try ServiceSchema.load(from: Repository.sampleData("field_inspection/service.json"))
        let pointLayer = try #require(schema.layers.firstIndex { $0.geometryType?.type == .point })
        schema.layers[pointLayer].fields.append(FieldDefinition(name: VectorTileGenerator.pointCountField, type: .integer))
        let counted = try Geodatabase.create(at: dir.file("counted.gpkg"), schema: schema)
        defer { try? counted.close() }
        let clash = #expect(throws: VectorTileError.self) {
            try VectorTileGenerator(geodatabase: counted, definition: VectorTileDefinition(layers: [.init(source: schema.layers[pointLayer].name, clusterDistance: 16)]))
        }
        #expect(clash?.message.contains("has a field point_count, which clustering adds") == true, "\(String(describing: clash))")
    }
}
