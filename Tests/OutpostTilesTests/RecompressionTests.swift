import Foundation
import OutpostCore
import OutpostStorage
import OutpostTestSupport
import OutpostTileCodecs
import Testing

@testable import OutpostTiles

@Suite("Recompressed exports: JPEG, MIXED and WebP")
struct RecompressionTests {
    /// JPEG and WebP come from the system libraries.
    init() {
        SystemTileCodecs.install()
    }

    /// Levels 0–2 of the world (21 tiles), three kinds of tile: imagery-like opaque tiles, the
    /// same with a transparent corner, and flat sea.
    static func kind(_ key: TileKey) -> Int { (key.row + key.col + key.level) % 3 }

    static func pixels(_ key: TileKey) -> [UInt8] {
        switch kind(key) {
        case 0: return ImageCodecTests.photo(seed: UInt64(key.row * 16 + key.col + 1))
        case 1:
            var px = ImageCodecTests.photo(seed: UInt64(key.row * 16 + key.col + 1))
            for y in 0..<96 { for x in 0..<96 { px[(y * 256 + x) * 4 + 3] = 0 } }
            return px
        default: return [UInt8]((0..<(256 * 256)).flatMap { _ in [170, 211, 223, 255] as [UInt8] })
        }
    }

    static let keys = (0...2).flatMap { level in (0..<(1 << level)).flatMap { row in (0..<(1 << level)).map { TileKey(level: level, row: row, col: $0) } } }

    /// A PNG tile package of `keys`, the export source.
    static func source(in dir: TemporaryDirectory) throws -> URL {
        let url = dir.file("source.tpkx")
        let writer = try TileCacheWriter(format: .tilePackage, at: url, info: TestTiles.info(levels: 0...2))
        for level in 0...2 {
            for key in TileRange(level: level, minRow: 0, maxRow: (1 << level) - 1, minCol: 0, maxCol: (1 << level) - 1).inBundleOrder() {
                try writer.add(key, data: try PNGEncoder.encode(pixels: pixels(key), width: 256, height: 256))
            }
        }
        try writer.finish()
        return url
    }

    static func export(_ source: URL, to out: URL, quality: Double?, webp: Bool = false) async throws -> JobSnapshot {
        let task = ExportTileCacheTask(source: .cache(source))
        try await task.load()
        let parameters = ExportTileCacheParameters(areaOfInterest: nil, levelIDs: [0, 1, 2], compressionQuality: quality, webp: webp)
        let job = task.makeExportTileCacheJob(parameters: parameters, downloadFileURL: out)
        // The recoding travels in the job's JSON: run the job rebuilt from it.
        var registry = JobRegistry()
        registry.withTileJobs(TileJobEnvironment())
        let rebuilt = try registry.makeJob(from: try JobSnapshot.decode(try job.toJSON()))
        try rebuilt.start()
        _ = await rebuilt.waitUntilFinished()
        return rebuilt.snapshot
    }

    /// `compressionQuality` 75 into a .tpkx, a folder and MBTiles: opaque imagery becomes JPEG,
    /// tiles with transparency and tiles already smaller stay PNG, the metadata says MIXED at 75
    /// (MBTiles: `png`, since PNG tiles are among them), and GDAL reads every output to the
    /// source's pixels within JPEG's tolerance, with the transparency exactly where it was (from
    /// MBTiles without being told to read four bands).
    @Test(arguments: ["mixed.tpkx", "mixed", "mixed.mbtiles"])
    func compressionQualityWritesAMixedCacheGDALReads(_ name: String) async throws {
        let dir = TemporaryDirectory()
        let source = try Self.source(in: dir)
        let out = dir.file(name)
        let job = try await Self.export(source, to: out, quality: 75)
        #expect(job.status == .succeeded, "\(String(describing: job.error))")
        let cache = TileCache(fileURL: out)
        try await cache.load()
        #expect(cache.info?.format == (name.hasSuffix(".mbtiles") ? "PNG" : "MIXED"))
        if !name.hasSuffix(".mbtiles") { #expect(cache.info?.compressionQuality == 75) }
        var sizes = (source: 0, output: 0)
        let original = TileCache(fileURL: source)
        try await original.load()
        for key in Self.keys {
            let tile = try #require(try cache.tile(key))
            let format = TileImageFormat(sniffing: tile)
            switch Self.kind(key) {
            case 0: #expect(format == .jpeg, "\(key)")
            case 1:
                #expect(format == .png, "\(key)")
                #expect(try PNGDecoder.decode(tile).pixels == Self.pixels(key))
            default: #expect(format == .png, "\(key): a flat tile is smaller as PNG")
            }
            sizes.source += try #require(try original.tile(key)).count
            sizes.output += tile.count
        }
        #expect(sizes.output < sizes.source / 2, "\(sizes)")

        // GDAL: the .tpkx through rasterio's GDAL (ESRIC ≥ 3.8), the folder (conf.xml) and MBTiles
        // through Debian's gdal_translate; compared at level 2 with the source package.
        var readable = out.path
        if !name.hasSuffix(".tpkx") {
            let input = name.hasSuffix(".mbtiles") ? out.path : out.appendingPathComponent("conf.xml").path
            readable = dir.file("gdal.tif").path
            let made = try await ExternalTools.run("gdal_translate", ["-q", "-of", "GTiff", input, readable])
            #expect(made.succeeded, "\(made.stderr)")
        }
        let compare = try await ExternalTools.python("""
            import sys, rasterio, numpy
            a = rasterio.open(sys.argv[1]).read().astype(int)
            b = rasterio.open(sys.argv[2]).read().astype(int)
            assert a.shape == (4, 1024, 1024) and b.shape == a.shape, (a.shape, b.shape)
            assert (a[3] == b[3]).all(), "alpha differs"
            seen = a[3] == 255
            d = numpy.abs(a[:3] - b[:3])[:, seen]
            print(round(float(d.mean()), 2), int(d.max()))
            """, [source.path, readable])
        #expect(compare.succeeded, "\(compare.stderr)")
        let figures = compare.stdout.split(separator: " ").compactMap { Double($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
        #expect(figures.count == 2 && figures[0] < 4, "mean and largest difference: \(compare.stdout)")
    }

    /// WebP into MBTiles: every tile WebP (alpha kept), `format` = webp, and GDAL reads it; WebP
    /// into a tile package is refused before any tile is fetched.
    @Test func webpGoesIntoMBTilesOnly() async throws {
        let dir = TemporaryDirectory()
        let source = try Self.source(in: dir)
        let out = dir.file("tiles.mbtiles")
        let job = try await Self.export(source, to: out, quality: 80, webp: true)
        #expect(job.status == .succeeded)
        let cache = TileCache(fileURL: out)
        try await cache.load()
        #expect(cache.info?.format == "WEBP")
        for key in Self.keys {
            let tile = try #require(try cache.tile(key))
            #expect(TileImageFormat(sniffing: tile) == .webp)
            let decoded = try TileImageFormat.decode(tile).pixels
            #expect(decoded[3] == (Self.kind(key) == 1 ? 0 : 255), "\(key): the top-left pixel's alpha")
        }
        let info = try await ExternalTools.run("gdalinfo", ["-json", "-oo", "BAND_COUNT=4", out.path])
        #expect(info.succeeded, "\(info.stderr)")
        #expect(try JSONValue.parse(info.stdout)["size"] == [1024, 1024])
        let read = try await ExternalTools.run("gdal_translate", ["-q", "-oo", "BAND_COUNT=4", "-of", "PNG", out.path, dir.file("webp.png").path])
        #expect(read.succeeded, "\(read.stderr)")

        let refused = try await Self.export(source, to: dir.file("tiles.tpkx"), quality: 80, webp: true)
        #expect(refused.status == .failed)
        #expect(refused.error?.description.contains("WebP tiles need an .mbtiles output") == true, "\(String(describing: refused.error))")
        #expect(!FileManager.default.fileExists(atPath: dir.file("tiles.tpkx").path))
    }
}
