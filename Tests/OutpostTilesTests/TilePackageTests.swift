import Foundation
import OutpostCore
import OutpostTestSupport
import Testing

@testable import OutpostTiles

@Suite("Tile packages and exploded caches")
struct TilePackageTests {
    static let ranges = [
        TileRange(level: 0, minRow: 0, maxRow: 0, minCol: 0, maxCol: 0), TileRange(level: 1, minRow: 0, maxRow: 1, minCol: 0, maxCol: 1),
        TileRange(level: 2, minRow: 0, maxRow: 3, minCol: 0, maxCol: 3),
    ]

    @Test(arguments: [TileCacheWriter.Format.tilePackage, .exploded, .mbtiles])
    func roundTrip(_ format: TileCacheWriter.Format) async throws {
        let dir = TemporaryDirectory()
        let url = dir.file(["test.tpkx", "test", "test.mbtiles"][[TileCacheWriter.Format.tilePackage, .exploded, .mbtiles].firstIndex(of: format)!])
        #expect(TileCacheWriter.Format(path: url.path) == format)
        let keys = try TestTiles.write(format, to: url, ranges: Self.ranges)
        let cache = TileCache(fileURL: url)
        try await cache.load()
        let info = try #require(cache.info)
        #expect(info.levels == 0...2 && info.format == "PNG" && info.scheme.tileSize == 256)
        for key in keys { #expect(try cache.tile(key) == (try TestTiles.tile(key))) }
        #expect(try cache.tile(level: 2, row: 9, col: 9) == nil)
        #expect(try cache.tile(level: 7, row: 0, col: 0) == nil)
        let summary = try cache.summary()
        #expect(summary.map(\.tiles) == [1, 4, 16])
        // Sea tiles (odd columns) are stored once per bundle.
        #expect(summary.map(\.distinctTiles) == [1, 3, 9])
    }

    @Test func packageIsAStoredZipThatGDALRecognises() async throws {
        let dir = TemporaryDirectory()
        let url = dir.file("test.tpkx")
        try TestTiles.write(.tilePackage, to: url, ranges: Self.ranges)
        // Python's zipfile checks every CRC and lists the methods.
        let check = try await ExternalTools.run(ExternalTools.python, ["-c", """
            import sys, zipfile, json
            z = zipfile.ZipFile(sys.argv[1])
            assert z.testzip() is None, "bad CRC"
            print(json.dumps({i.filename: i.compress_type for i in z.infolist()}))
            root = z.read("root.json")
            assert root.startswith(b'{"tileBundlesPath":"./tile"'), root[:40]
            assert len(root) >= 512
            info = json.loads(z.read("iteminfo.json"))
            assert info["type"] == "Compact Tile Package" and "tpkx" in info["typeKeywords"]
            """, url.path])
        #expect(check.succeeded, "\(check.stderr)")
        let methods = try JSONValue.parse(check.stdout).objectValue ?? [:]
        #expect(methods.keys.contains("tile/L02/R0000C0000.bundle"))
        #expect(methods.values.allSatisfy { $0 == .integer(0) })
    }

    /// GDAL's ESRIC driver: Debian's 3.6 reads the exploded cache through conf.xml; the GDAL in
    /// the rasterio wheel (≥ 3.8) reads the .tpkx. Both see the levels and the pixels we wrote.
    @Test func gdalReadsSizesLevelsAndPixels() async throws {
        let dir = TemporaryDirectory()
        let exploded = dir.file("cache"), package = dir.file("test.tpkx"), mbtiles = dir.file("test.mbtiles")
        try TestTiles.write(.exploded, to: exploded, ranges: Self.ranges)
        try TestTiles.write(.tilePackage, to: package, ranges: Self.ranges)
        try TestTiles.write(.mbtiles, to: mbtiles, ranges: Self.ranges)
        // Level 2 is 4×4 tiles: 1024×1024 pixels, with levels 1 and 0 as overviews.
        let info = try await ExternalTools.run("gdalinfo", ["-json", exploded.appendingPathComponent("conf.xml").path])
        #expect(info.succeeded, "\(info.stderr)")
        let json = try JSONValue.parse(info.stdout)
        #expect(json["driverShortName"] == "ESRIC")
        #expect(json["size"] == [1024, 1024])
        #expect(json["bands"]?.arrayValue?.first?["overviews"]?.arrayValue?.count == 2)
        // Pixel (x 600, y 300) is in tile row 1, col 2 at (88, 44).
        let expected = TestTiles.pixels(TileKey(level: 2, row: 1, col: 2))
        let i = (44 * 256 + 88) * 4
        let rgb = [Int(expected[i]), Int(expected[i + 1]), Int(expected[i + 2])][...]
        let values = try await ExternalTools.run("gdallocationinfo", ["-valonly", exploded.appendingPathComponent("conf.xml").path, "600", "300"])
        #expect(values.stdout.split(separator: "\n").compactMap { Int($0) }.prefix(3) == rgb)
        // MBTiles: GDAL flips the TMS rows back; the same pixel is where it should be.
        let mb = try await ExternalTools.run("gdalinfo", ["-json", mbtiles.path])
        #expect(mb.succeeded, "\(mb.stderr)")
        #expect(try JSONValue.parse(mb.stdout)["size"] == [1024, 1024])
        let mbValues = try await ExternalTools.run("gdallocationinfo", ["-valonly", mbtiles.path, "600", "300"])
        #expect(mbValues.stdout.split(separator: "\n").compactMap { Int($0) }.prefix(3) == rgb)

        let rasterio = try await ExternalTools.run(ExternalTools.python, ["-c", """
            import sys, json, rasterio
            from rasterio.windows import Window
            with rasterio.open(sys.argv[1]) as ds:
                px = [int(ds.read(b, window=Window(600, 300, 1, 1))[0][0]) for b in (1, 2, 3)]
                print(json.dumps({"driver": ds.driver, "size": [ds.width, ds.height], "overviews": ds.overviews(1), "px": px}))
            """, package.path])
        #expect(rasterio.succeeded, "\(rasterio.stderr)")
        let r = try JSONValue.parse(rasterio.stdout)
        #expect(r["driver"] == "ESRIC" && r["size"] == [1024, 1024] && r["overviews"] == [2, 4])
        #expect(r["px"] == .array([.integer(Int64(expected[i])), .integer(Int64(expected[i + 1])), .integer(Int64(expected[i + 2]))]))
    }

    /// A bundle whose tile bytes were cut short (a copy to a memory card that was interrupted)
    /// or zero-filled: `inspect` names the bundle and a damaged tile, reading that tile gives the
    /// same typed error, and the tiles that are whole still read.
    @Test(arguments: ["truncated", "zero-filled", "truncated in a package"])
    func damagedBundlesAreFoundAndNamed(_ damage: String) async throws {
        let dir = TemporaryDirectory()
        let exploded = dir.file("cache")
        let keys = try TestTiles.write(.exploded, to: exploded, ranges: Self.ranges)
        let bundle = exploded.appendingPathComponent("_alllayers/L02/R0000C0000.bundle")
        let whole = try Data(contentsOf: bundle)
        let tileBytes = whole.count - CompactBundle.fixedSize
        var url = exploded
        switch damage {
        case "truncated":
            try whole.prefix(whole.count - 1000).write(to: bundle)
        case "zero-filled":
            try (whole.prefix(CompactBundle.fixedSize + tileBytes / 2) + Data(count: tileBytes - tileBytes / 2)).write(to: bundle)
        default:
            // A package whose bundle entry is short but whose ZIP directory is intact.
            url = dir.file("short.tpkx")
            try TestTiles.write(.tilePackage, to: dir.file("whole.tpkx"), ranges: Self.ranges)
            let zip = try await ExternalTools.run(ExternalTools.python, ["-c", """
                import sys, zipfile
                src = zipfile.ZipFile(sys.argv[1])
                with zipfile.ZipFile(sys.argv[2], "w", zipfile.ZIP_STORED) as out:
                    for i in src.infolist():
                        data = src.read(i.filename)
                        out.writestr(i.filename, data[:-1000] if i.filename == "tile/L02/R0000C0000.bundle" else data)
                """, dir.file("whole.tpkx").path, url.path])
            #expect(zip.succeeded, "\(zip.stderr)")
        }
        let cache = TileCache(fileURL: url)
        try await cache.load()
        let inspection = try cache.inspect()
        #expect(inspection.levels.map(\.tiles) == [1, 4, 16])
        #expect(inspection.damage.count == 1)
        let found = try #require(inspection.damage.first)
        #expect(found.bundle.hasSuffix("L02/R0000C0000.bundle") && found.damagedTiles >= 1)
        #expect(found.error.code == .corrupt)
        let tile = try #require(found.error.tile)
        #expect(tile.level == 2)
        do {
            _ = try cache.tile(tile)
            Issue.record("read a damaged tile")
        } catch let error as TileCacheError {
            #expect(error.code == .corrupt && error.tile == tile && error.file == found.error.file, "\(error)")
        }
        for key in keys where key.level < 2 { #expect(try cache.tile(key) == (try TestTiles.tile(key))) }
    }

    @Test func damagedPackagesAreRefusedWithAReason() async throws {
        let dir = TemporaryDirectory()
        let url = dir.file("test.tpkx")
        try TestTiles.write(.tilePackage, to: url, ranges: Self.ranges)
        let whole = try Data(contentsOf: url)
        // Cut off: no central directory.
        let cut = dir.file("cut.tpkx")
        try whole.prefix(whole.count / 2).write(to: cut)
        await #expect(throws: TileCacheError.self) { try await TileCache(fileURL: cut).load() }
        // Not a package at all.
        let text = dir.file("notes.tpkx")
        try Data("hello".utf8).write(to: text)
        await #expect(throws: TileCacheError.self) { try await TileCache(fileURL: text).load() }
        // Deflated entries (a re-zipped package) cannot be read in place.
        let deflated = dir.file("deflated.tpkx")
        let zip = try await ExternalTools.run(ExternalTools.python, ["-c", """
            import sys, zipfile
            src = zipfile.ZipFile(sys.argv[1])
            with zipfile.ZipFile(sys.argv[2], "w", zipfile.ZIP_DEFLATED) as out:
                for i in src.infolist():
                    out.writestr(i.filename, src.read(i.filename))
            """, url.path, deflated.path])
        #expect(zip.succeeded, "\(zip.stderr)")
        do {
            try await TileCache(fileURL: deflated).load()
            Issue.record("opened a deflated package")
        } catch let error as TileCacheError {
            #expect(error.code == .unsupported)
        }
        // A missing file.
        await #expect(throws: TileCacheError.self) { try await TileCache(fileURL: dir.file("absent.tpkx")).load() }
    }
}
