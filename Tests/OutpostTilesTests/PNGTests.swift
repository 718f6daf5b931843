import Foundation
import OutpostCore
import OutpostStorage
import OutpostTestSupport
import Testing

@testable import OutpostTiles

@Suite("PNG")
struct PNGTests {
    @Test func decodesWhatItEncodesInEveryLayout() throws {
        let rgba = TestTiles.pixels(TileKey(level: 3, row: 1, col: 2))
        #expect(try PNGDecoder.decode(try PNGEncoder.encode(pixels: rgba, width: 256, height: 256)).pixels == rgba)
        var rgb: [UInt8] = []
        for i in stride(from: 0, to: rgba.count, by: 4) { rgb += rgba[i..<(i + 3)] }
        let image = try PNGDecoder.decode(try PNGEncoder.encode(pixels: rgb, width: 256, height: 256, channels: 3, level: 1))
        #expect(image.pixels == rgba)  // opaque RGB comes back as RGBA with alpha 255
    }

    /// libpng (through GDAL) writes grey and RGB PNGs of our tile; we read them to the same pixels.
    @Test(arguments: ["grey", "rgb"])
    func readsPNGsOtherWritersMake(_ layout: String) async throws {
        let dir = TemporaryDirectory()
        let source = dir.file("tile.png")
        let rgba = TestTiles.pixels(TileKey(level: 5, row: 3, col: 7))
        try Data(try PNGEncoder.encode(pixels: rgba, width: 256, height: 256)).write(to: source)
        let out = dir.file("gdal.png")
        var arguments = ["-q", "-of", "PNG", "-b", "1", "-b", "2", "-b", "3", source.path, out.path]
        if layout == "grey" { arguments = ["-q", "-of", "PNG", "-b", "2", source.path, out.path] }
        let made = try await ExternalTools.run("gdal_translate", arguments)
        #expect(made.succeeded, "\(made.stderr)")
        let decoded = try PNGDecoder.decode([UInt8](try Data(contentsOf: out)))
        #expect(decoded.width == 256 && decoded.height == 256)
        for p in [0, 1000, 33_333, 65_535] {
            if layout == "grey" {
                #expect(decoded.pixels[4 * p] == rgba[4 * p + 1] && decoded.pixels[4 * p + 2] == rgba[4 * p + 1])
            } else {
                #expect(Array(decoded.pixels[(4 * p)..<(4 * p + 4)]) == [rgba[4 * p], rgba[4 * p + 1], rgba[4 * p + 2], 255])
            }
        }
    }

    /// A tile of few colours (some translucent) optimises into a palette PNG that libpng, through
    /// GDAL, expands back to the same RGBA pixels.
    @Test func fewColoursBecomeAPaletteImageGDALReads() async throws {
        var rgba = [UInt8](repeating: 0, count: 256 * 256 * 4)
        let colours: [[UInt8]] = [[250, 240, 230, 255], [30, 90, 200, 128], [0, 0, 0, 0], [20, 160, 60, 255]]
        for p in 0..<(256 * 256) { rgba.replaceSubrange(p * 4 ..< p * 4 + 4, with: colours[(p / 256 / 37 + p % 256 / 51) % colours.count]) }
        let tile = try PNGEncoder.encode(pixels: rgba, width: 256, height: 256)
        let optimized = PNGDecoder.optimized(tile)
        #expect(optimized[25] == 3, "colour type of the IHDR")
        #expect(optimized.count < tile.count)
        #expect(try PNGDecoder.decode(optimized).pixels == rgba)

        let dir = TemporaryDirectory()
        let source = dir.file("palette.png"), out = dir.file("expanded.png")
        try Data(optimized).write(to: source)
        let made = try await ExternalTools.run("gdal_translate", ["-q", "-of", "PNG", "-expand", "rgba", source.path, out.path])
        #expect(made.succeeded, "\(made.stderr)")
        #expect(try PNGDecoder.decode([UInt8](try Data(contentsOf: out))).pixels == rgba)
    }

    /// `encodeTile` takes the smallest lossless form: indexed for ≤ 256 colours, RGB when opaque,
    /// RGBA otherwise (IHDR's colour type is byte 25), and every form decodes to the input.
    @Test func tilesTakeTheirSmallestLosslessForm() throws {
        var few = [UInt8](repeating: 255, count: 256 * 256 * 4)
        for p in 0..<(256 * 256) { few[p * 4] = UInt8(p % 7 * 30); few[p * 4 + 3] = p % 5 == 0 ? 128 : 255 }
        var many = few
        for p in 0..<(256 * 256) { many[p * 4 + 1] = UInt8(p & 0xFF); many[p * 4 + 2] = UInt8(p >> 8) }
        var opaque = many
        for p in 0..<(256 * 256) { opaque[p * 4 + 3] = 255 }
        for (pixels, colourType) in [(few, UInt8(3)), (many, 6), (opaque, 2)] {
            let png = try PNGEncoder.encodeTile(rgba: pixels, width: 256, height: 256)
            #expect(png[25] == colourType)
            #expect(try PNGDecoder.decode(png).pixels == pixels)
        }
        let rgba = try PNGEncoder.encode(pixels: few, width: 256, height: 256)
        #expect(try PNGEncoder.encodeTile(rgba: few, width: 256, height: 256).count < rgba.count)
        #expect(throws: PNGEncoder.Error.self) { try PNGEncoder.encodeTile(rgba: few, width: 255, height: 256) }
    }

    /// Both ways of summing the filters' costs (16-byte lanes, what optimised builds run, and a
    /// byte at a time, what debug builds run) give a reference sum of |filtered byte|'s five
    /// costs, and so pick its filter: on random rows and on the flat-with-edges rows maps have,
    /// at 3 and 4 bytes per pixel, rows shorter than a pixel or a lane included, and rows past
    /// 255 lanes (where the lanes' 16-bit partial sums are emptied mid-row).
    @Test(arguments: [3, 4])
    func bothFilterCostSumsMatchTheReference(_ bpp: Int) {
        var random = SystemRandomNumberGenerator()
        for trial in 0..<140 {
            let width = [1, 5, 16, 17, 64, 301, 1100][trial % 7]
            let n = width * bpp
            let flat = trial % 2 == 0
            let up = (0..<n).map { i in flat ? UInt8(i / 37 * 40 & 0xFF) : UInt8.random(in: 0...255, using: &random) }
            let row = (0..<n).map { i in flat ? up[i] &+ (i % 50 == 0 ? 9 : 0) : UInt8.random(in: 0...255, using: &random) }
            var reference = [Int](repeating: 0, count: 5)
            for i in 0..<n {
                let a = i >= bpp ? Int(row[i - bpp]) : 0, b = Int(up[i]), c = i >= bpp ? Int(up[i - bpp]) : 0
                let p = a + b - c
                let pa = abs(p - a), pb = abs(p - b), pc = abs(p - c)
                let predictor = pa <= pb && pa <= pc ? a : (pb <= pc ? b : c)
                for (f, prediction) in [0, a, b, (a + b) / 2, predictor].enumerated() {
                    reference[f] += PNGEncoder.cost(row[i] &- UInt8(prediction))
                }
            }
            var lanes = FilterCosts(), bytes = FilterCosts()
            row.withUnsafeBufferPointer { r in
                up.withUnsafeBufferPointer { u in
                    lanes.addInLanes(r, u, bpp: bpp)
                    bytes.addByteAtATime(r, u, bpp: bpp)
                }
            }
            #expect(lanes.sums == reference, "trial \(trial), \(n) bytes: in lanes")
            #expect(bytes.sums == reference, "trial \(trial), \(n) bytes: a byte at a time")
            let expected = UInt8(reference.firstIndex(of: reference.min()!)!)
            let chosen = row.withUnsafeBufferPointer { r in up.withUnsafeBufferPointer { u in PNGEncoder.cheapestFilter(r, u, bpp: bpp) } }
            #expect(chosen == expected, "trial \(trial): costs \(reference)")
        }
    }

    /// A rendered map tile as an indexed PNG and as an RGBA PNG: Pillow and GDAL (libpng) read
    /// both to the same RGBA pixels, and the indexed one is the smaller.
    @Test func indexedAndRGBATilesDecodeAlikeInPillowAndGDAL() async throws {
        let dir = TemporaryDirectory()
        let indexed = try #require(try await Self.sampleTiles(in: dir, count: 1).first)
        #expect(indexed[25] == 3)
        let pixels = try PNGDecoder.decode(indexed).pixels
        let rgba = try PNGEncoder.encode(pixels: pixels, width: 256, height: 256)
        #expect(indexed.count < rgba.count)
        try Data(indexed).write(to: dir.file("indexed.png"))
        try Data(rgba).write(to: dir.file("rgba.png"))
        let pillow = try await ExternalTools.python("""
            import sys
            from PIL import Image
            a = Image.open(sys.argv[1]); b = Image.open(sys.argv[2])
            assert a.mode == "P" and b.mode == "RGBA", (a.mode, b.mode)
            assert a.convert("RGBA").tobytes() == b.tobytes(), "pixels differ"
            print("same")
            """, [dir.file("indexed.png").path, dir.file("rgba.png").path])
        #expect(pillow.stdout.contains("same"), "\(pillow.stderr)")
        for (name, source) in [("indexed", "indexed.png"), ("rgba", "rgba.png")] {
            let out = dir.file("\(name)-gdal.png")
            var arguments = ["-q", "-of", "PNG", dir.file(source).path, out.path]
            if name == "indexed" { arguments.insert(contentsOf: ["-expand", "rgba"], at: 1) }
            let made = try await ExternalTools.run("gdal_translate", arguments)
            #expect(made.succeeded, "\(made.stderr)")
            #expect(try PNGDecoder.decode([UInt8](try Data(contentsOf: out))).pixels == pixels)
        }
    }

    @Test func damagedPNGsAreErrorsNotCrashes() throws {
        let good = try PNGEncoder.encode(pixels: TestTiles.pixels(TileKey(level: 1, row: 0, col: 0)), width: 256, height: 256)
        var flipped = good
        flipped[40] ^= 0xFF
        for bad in [Array(good.prefix(good.count / 2)), flipped, Array("hello".utf8), Array(good.prefix(8)) + [0, 0, 0, 13]] {
            #expect(throws: PNGDecoder.Error.self) { try PNGDecoder.decode(bad) }
            #expect(PNGDecoder.optimized(bad) == bad)
        }
    }

    @Test func optimizingIsLosslessAndNeverLarger() async throws {
        var before = 0, after = 0
        for tile in try await Self.sampleTiles(in: TemporaryDirectory(), count: 6, zlibLevel: 1) {
            let optimized = PNGDecoder.optimized(tile)
            #expect(optimized.count <= tile.count)
            let pixels = try PNGDecoder.decode(tile).pixels
            #expect(try PNGDecoder.decode(optimized).pixels == pixels)
            before += try PNGEncoder.encode(pixels: pixels, width: 256, height: 256).count
            after += optimized.count
        }
        #expect(after < before, "optimised tiles are smaller than plain RGBA ones")
    }

    /// The first `count` zoom-14 tiles (in bundle order) the renderer draws of the field
    /// inspection sample.
    static func sampleTiles(in dir: TemporaryDirectory, count: Int, zlibLevel: Int32 = 6) async throws -> [[UInt8]] {
        let gdb = try SampleGeodatabases.fieldInspection(in: dir)
        defer { try? gdb.close() }
        let renderer = MapRenderer(geodatabase: gdb)
        let extent = try #require(try await renderer.extent())
        let range = try #require(TilingScheme.webMercator.tileRange(level: 14, covering: extent))
        var tiles: [[UInt8]] = []
        for key in range.inBundleOrder().prefix(count) { tiles.append(try await renderer.tile(key, level: zlibLevel)) }
        return tiles
    }
}
