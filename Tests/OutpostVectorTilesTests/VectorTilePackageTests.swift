import Foundation
import OutpostCore
import OutpostServer
import OutpostStorage
import OutpostTestSupport
import OutpostTiles
import Testing

@testable import OutpostVectorTiles

/// The vector tile package (`.vtpk`): its layout and `root.json` as ArcGIS's readers take them,
/// its bundles and tile map read by an independent Python reader (zipfile, struct, gzip,
/// mapbox-vector-tile), its tiles the same as the MBTiles export's, and damage refused.
@Suite("Vector tile packages")
struct VectorTilePackageTests {
    /// Invalid source polygons repaired with GEOS, as `outpost` and the server do.
    init() { GEOSPolygonRepair.install() }

    /// Reads a package as a third party would: every entry stored and intact, `root.json`,
    /// style and item XML, each bundle's header and index, every tile gunzipped and decoded, and
    /// the tile map naming exactly the tiles in the bundles. Prints a JSON summary.
    static let check = """
        import gzip, json, struct, sys, zipfile
        import xml.etree.ElementTree as ET
        import mapbox_vector_tile
        path = sys.argv[1]
        z = zipfile.ZipFile(path)
        assert z.testzip() is None
        assert all(i.compress_type == zipfile.ZIP_STORED for i in z.infolist())
        names = set(z.namelist())
        for required in ("esriinfo/iteminfo.xml", "esriinfo/item.pkinfo", "p12/root.json", "p12/resources/styles/root.json", "p12/tilemap/root.json"):
            assert required in names, required
        root = json.loads(z.read("p12/root.json"))
        info = root["tileInfo"]
        assert root["type"] == "indexedVector" and root["tileMap"] == "tilemap" and root["tiles"] == ["tile/{z}/{y}/{x}.pbf"]
        assert info["rows"] == info["cols"] == 512 and info["format"] == "pbf" and info["spatialReference"]["latestWkid"] == 3857
        assert [l["level"] for l in info["lods"]] == list(range(root["maxLOD"] + 1))
        assert abs(info["lods"][0]["resolution"] - 78271.516964) < 1e-6 and abs(info["origin"]["x"] + 20037508.342787) < 1e-3
        assert root["resourceInfo"]["cacheInfo"]["storageInfo"] == {"packetSize": 128, "storageFormat": "compactV2"}
        assert root["resourceInfo"]["tileCompression"] == "gzip"
        style = json.loads(z.read("p12/resources/styles/root.json"))
        assert style["version"] == 8 and style["sources"]["esri"] == {"type": "vector", "url": "../../"}
        item = ET.fromstring(z.read("esriinfo/iteminfo.xml"))
        assert item.tag == "ESRI_ItemInformation" and item.find("type").text == "Vector Tile Package"
        assert ET.fromstring(z.read("esriinfo/item.pkinfo")).find("ID").text == item.find("guid").text
        tiles, layers = {}, {}
        for name in sorted(names):
            if not (name.startswith("p12/tile/L") and name.endswith(".bundle")):
                continue
            level = int(name.split("/")[2][1:])
            file = name.split("/")[3]
            row0, col0 = int(file[1:5], 16), int(file[6:10], 16)
            data = z.read(name)
            version, count, max_size, offset_bytes, slack, size = struct.unpack_from("<iiiiqq", data, 0)
            assert version == 3 and count == 128 * 128 and offset_bytes == 5 and size == len(data), (name, version, count, size, len(data))
            assert struct.unpack_from("<i", data, 60)[0] == 131072
            for slot in range(128 * 128):
                entry = struct.unpack_from("<Q", data, 64 + 8 * slot)[0]
                offset, length = entry % (1 << 40), entry >> 40
                if length == 0:
                    continue
                assert length <= max_size
                pbf = gzip.decompress(data[offset:offset + length])
                key = (level, col0 + slot % 128, row0 + slot // 128)
                tiles[key] = pbf
                for layer, content in mapbox_vector_tile.decode(pbf).items():
                    assert content["extent"] == 4096
                    layers[layer] = layers.get(layer, 0) + len(content["features"])
        # Leaves (1) are tiles; a node with children may be one; nothing else is.
        leaves, inner = set(), {(0, 0, 0)}
        def visit(node, level, x, y):
            if node == 0:
                return
            if isinstance(node, list):
                assert len(node) == 4
                inner.add((level, x, y))
                for i, child in enumerate(node):
                    visit(child, level + 1, 2 * x + i % 2, 2 * y + i // 2)
            else:
                assert node == 1, node
                leaves.add((level, x, y))
        index = json.loads(z.read("p12/tilemap/root.json"))["index"]
        for i, child in enumerate(index):
            visit(child, 1, i % 2, i // 2)
        assert leaves <= set(tiles), sorted(leaves - set(tiles))[:5]
        assert set(tiles) <= leaves | inner, sorted(set(tiles) - leaves - inner)[:5]
        style_layers = {l["source-layer"] for l in style["layers"] if "source-layer" in l}
        assert style_layers <= set(layers), (style_layers, set(layers))
        print(json.dumps({"tiles": len(tiles), "layers": layers, "styled": sorted(style_layers), "levels": [root["minLOD"], root["maxLOD"]],
                          "digest": {f"{k[0]}/{k[1]}/{k[2]}": len(v) for k, v in tiles.items()}}))
        """

    @Test(.scaledTimeLimit(minutes: 3)) func aPackageReadsAsArcGISLaysItOutAndHoldsTheMBTilesTiles() async throws {
        let dir = TemporaryDirectory("outpost-vtpk")
        let gdb = try VectorTileExportTests.service("helsinki", in: dir)
        defer { try? gdb.close() }
        let generator = try VectorTileGenerator(geodatabase: gdb, definition: VectorTileDefinition(layers: [.init(source: "streets"), .init(source: "addresses")], maxZoom: 16))
        let package = dir.file("helsinki.vtpk"), mb = dir.file("helsinki.mbtiles")
        let a = try await VectorTilePackage.export(generator, to: package)
        let b = try await VectorTileMBTiles.export(generator, to: mb)
        #expect(a.tiles == b.tiles && a.tiles > 20)
        #expect(!FileManager.default.fileExists(atPath: package.path + ".partial") && !FileManager.default.fileExists(atPath: package.path + ".tiles"))

        // Our reader walks the tile map; every tile equals the MBTiles one.
        var fromMB: [TileKey: [UInt8]] = [:]
        try VectorTileMBTilesReader(url: mb).forEachTile { fromMB[$0] = $1 }
        let reader = try await VectorTilePackageReader(url: package)
        var same = 0, seen = 0
        try reader.forEachTile { key, bytes in
            seen += 1
            if let other = fromMB[key], try VectorTileCompression.plain(other) == (try VectorTileCompression.plain(bytes)) { same += 1 }
        }
        #expect(seen == b.tiles && same == b.tiles, "\(seen) read, \(same) equal of \(b.tiles)")
        let style = try #require(try reader.json("p12/resources/styles/root.json"))
        let styled = (style["layers"]?.arrayValue ?? []).compactMap { $0["source-layer"]?.stringValue }
        #expect(Set(styled) == ["streets", "addresses"] && styled.last == "addresses", "points drawn over lines: \(styled)")

        // An independent reader agrees.
        let run = try await ExternalTools.python(Self.check, [package.path])
        #expect(run.succeeded, "\(run.stderr)")
        let summary = try JSONValue.parse(Data(run.stdout.utf8))
        #expect(summary["tiles"]?.integerValue == Int64(b.tiles), "\(run.stdout)")
        #expect(summary["layers"]?["streets"]?.integerValue ?? 0 > 0 && summary["layers"]?["addresses"]?.integerValue ?? 0 > 0, "\(run.stdout)")
        #expect(summary["levels"] == [0, 16])

        // The raster reader opens it too (levels, bundles), and tells it apart.
        let cache = TileCache(fileURL: package)
        try await cache.load()
        #expect(cache.isVectorTilePackage && cache.info?.format == "pbf" && cache.info?.scheme.tileSize == 512)
        #expect(try cache.tileCount() == b.tiles)
    }

    @Test(.scaledTimeLimit(minutes: 2)) func aTileMapNamingAMissingTileOrNotAPackageIsRefused() async throws {
        let dir = TemporaryDirectory("outpost-vtpk-bad")
        let gdb = try VectorTileExportTests.service("helsinki", in: dir)
        defer { try? gdb.close() }
        let generator = try VectorTileGenerator(geodatabase: gdb, definition: VectorTileDefinition(layers: [.init(source: "streets")], maxZoom: 6))
        let package = dir.file("streets.vtpk")
        try await VectorTilePackage.export(generator, to: package)
        // The same package with its tile map claiming every child of the deepest tile.
        let edited = dir.file("edited.vtpk")
        let rewrite = try await ExternalTools.python(
            """
            import json, sys, zipfile
            src, dst = zipfile.ZipFile(sys.argv[1]), zipfile.ZipFile(sys.argv[2], "w", zipfile.ZIP_STORED)
            for info in src.infolist():
                data = src.read(info.filename)
                if info.filename == "p12/tilemap/root.json":
                    text = json.dumps(json.loads(data))
                    data = text.replace("1", "[1,1,1,1]", 1).encode()
                dst.writestr(info, data)
            dst.close()
            """, [package.path, edited.path])
        #expect(rewrite.succeeded, "\(rewrite.stderr)")
        let reader = try await VectorTilePackageReader(url: edited)
        #expect(throws: VectorTileError.self) { try reader.forEachTile { _, _ in } }
        let inspect = try await ExternalTools.run(Repository.outpostExecutable.path, ["vtiles", "inspect", edited.path])
        #expect(inspect.status != 0 && inspect.stderr.contains("which no bundle holds"), "\(inspect.stderr)")

        // A raster tile package and a file that is not a package at all.
        let notVector = dir.file("not.vtpk")
        try Data("PK\u{3}\u{4} not really".utf8).write(to: notVector)
        await #expect(throws: VectorTileError.self) { _ = try await VectorTilePackageReader(url: notVector) }
    }
}
