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
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.fieldInspection(in: dir)
        defer { try? gdb.close() }
        let renderer = MapRenderer(geodatabase: gdb)
        let extent = try #require(try await renderer.extent())
        let range = try #require(TilingScheme.webMercator.tileRange(level: 14, covering: extent))
        var before = 0, after = 0
        for key in range.inBundleOrder().prefix(6) {
            let tile = try await renderer.tile(key, level: 1)
            let optimized = PNGDecoder.optimized(tile)
            #expect(optimized.count <= tile.count)
            #expect(try PNGDecoder.decode(optimized).pixels == (try PNGDecoder.decode(tile).pixels))
            before += tile.count
            after += optimized.count
        }
        #expect(after < before)
    }
}
