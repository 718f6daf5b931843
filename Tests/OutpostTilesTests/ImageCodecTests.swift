import Foundation
import OutpostCore
import OutpostStorage
import OutpostTestSupport
import OutpostTileCodecs
import Testing

@testable import OutpostTiles

@Suite("JPEG and WebP tiles")
struct ImageCodecTests {
    /// JPEG and WebP come from the system libraries.
    init() {
        SystemTileCodecs.install()
    }

    /// PNG's zlib path (a build without OutpostTileCodecs, the sync stack on iOS) inflates what
    /// libdeflate inflates, and refuses the same damaged or oversized streams.
    @Test func zlibAndLibdeflateInflateAlike() throws {
        #expect(TileCodecs.installed.deflate != nil)
        var generator = SystemRandomNumberGenerator()
        var rows = [UInt8](repeating: 0, count: 256 * 1025)
        for i in rows.indices {
            rows[i] = i % 7 == 0 ? UInt8.random(in: 0...255, using: &generator) : UInt8(i % 251)
        }
        let stream = try PNGEncoder.deflate(rows, level: 6)
        var fast = [UInt8](repeating: 0, count: rows.count), slow = fast
        try PNGDecoder.inflate(stream, into: &fast, width: 256, height: 256)
        try PNGDecoder.zlibInflate(stream, into: &slow, width: 256, height: 256)
        #expect(fast == rows && slow == rows)
        // Cut short, or more data than the image holds: both refuse.
        let cut = Array(stream.prefix(stream.count / 2))
        var small = [UInt8](repeating: 0, count: rows.count - 1)
        #expect(throws: PNGDecoder.Error.self) { try PNGDecoder.inflate(cut, into: &fast, width: 256, height: 256) }
        #expect(throws: PNGDecoder.Error.self) { try PNGDecoder.zlibInflate(cut, into: &slow, width: 256, height: 256) }
        #expect(throws: PNGDecoder.Error.self) { try PNGDecoder.inflate(stream, into: &small, width: 256, height: 256) }
        #expect(throws: PNGDecoder.Error.self) { try PNGDecoder.zlibInflate(stream, into: &small, width: 256, height: 256) }
    }

    /// The largest and the mean absolute difference of two RGBA images' colour channels.
    static func difference(_ a: [UInt8], _ b: [UInt8]) -> (max: Int, mean: Double) {
        var worst = 0, sum = 0, n = 0
        for i in 0..<min(a.count, b.count) where i % 4 != 3 {
            let d = abs(Int(a[i]) - Int(b[i]))
            worst = max(worst, d)
            sum += d
            n += 1
        }
        return (worst, Double(sum) / Double(max(n, 1)))
    }

    /// Opaque pixels like aerial imagery: smooth gradients with grain, which PNG compresses
    /// poorly and JPEG well.
    static func photo(seed: UInt64 = 7) -> [UInt8] {
        var state = seed
        var out = TestTiles.pixels(TileKey(level: 9, row: 1, col: 2))
        for i in out.indices where i % 4 != 3 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            out[i] = out[i] / 2 &+ UInt8(truncatingIfNeeded: state >> 59)
        }
        return out
    }

    /// A tile drawn from the sample geodatabase: real map content.
    static func mapTile() async throws -> [UInt8] {
        let png = try #require(try await PNGTests.sampleTiles(in: TemporaryDirectory(), count: 1).first)
        return try PNGDecoder.decode(png).pixels
    }

    @Test func jpegRoundTripsWithinItsTolerance() async throws {
        let pixels = try await Self.mapTile()
        let jpeg = try JPEGCodec.encode(rgba: pixels, width: 256, height: 256, quality: 90)
        #expect(TileImageFormat(sniffing: jpeg) == .jpeg)
        let back = try TileImageFormat.decode(jpeg)
        #expect(back.width == 256 && back.height == 256)
        let d = Self.difference(pixels, back.pixels)
        #expect(d.mean < 2.5, "mean difference \(d.mean)")
        #expect(stride(from: 3, to: back.pixels.count, by: 4).allSatisfy { back.pixels[$0] == 255 }, "JPEG decodes opaque")
        let q30 = try JPEGCodec.encode(rgba: pixels, width: 256, height: 256, quality: 30)
        #expect(q30.count < jpeg.count, "lower quality, smaller file")
    }

    /// The renderer draws opaque basemap tiles as JPEG when asked: the same picture as its PNG.
    @Test func rendererDrawsJPEGTilesForOpaqueBasemaps() async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.fieldInspection(in: dir)
        defer { try? gdb.close() }
        let source = GeodatabaseRenderSource(geodatabase: gdb, jpegQuality: 85)
        #expect(try await source.cacheInfo().format == "MIXED")
        let extent = try #require(try await source.renderer.extent())
        let range = try #require(TilingScheme.webMercator.tileRange(level: 14, covering: extent))
        for key in range.inBundleOrder().prefix(2) {
            let jpeg = try #require(try await source.tile(key))
            #expect(TileImageFormat(sniffing: jpeg) == .jpeg)
            let png = try await source.renderer.tile(key)
            let d = Self.difference(try PNGDecoder.decode(png).pixels, try JPEGCodec.decode(jpeg).pixels)
            #expect(d.mean < 3, "\(key): mean difference \(d.mean)")
        }
    }

    @Test func webpLosslessIsExactAndLossyKeepsTransparency() throws {
        var pixels = TestTiles.pixels(TileKey(level: 4, row: 3, col: 2))
        for p in 0..<(256 * 128) { pixels[p * 4 + 3] = 0 }  // the upper half transparent
        let lossless = try WebPCodec.encode(rgba: pixels, width: 256, height: 256, quality: nil)
        #expect(TileImageFormat(sniffing: lossless) == .webp)
        let exact = try TileImageFormat.decode(lossless).pixels
        for p in stride(from: 256 * 128, to: 256 * 256, by: 97) { #expect(exact[p * 4 ..< p * 4 + 4] == pixels[p * 4 ..< p * 4 + 4]) }
        let lossy = try TileImageFormat.decode(try WebPCodec.encode(rgba: pixels, width: 256, height: 256, quality: 75)).pixels
        #expect((0..<(256 * 128)).allSatisfy { lossy[$0 * 4 + 3] == 0 } && ((256 * 128)..<(256 * 256)).allSatisfy { lossy[$0 * 4 + 3] == 255 })
    }

    /// Pillow (its own libjpeg-turbo and libwebp) decodes our JPEG and WebP tiles to the pixels
    /// our decoders give, within a step of rounding.
    @Test func pillowReadsOurJPEGAndWebPAsWeDo() async throws {
        let pixels = try await Self.mapTile()
        let dir = TemporaryDirectory()
        for (name, bytes) in [
            ("tile.jpg", try JPEGCodec.encode(rgba: pixels, width: 256, height: 256, quality: 75)),
            ("tile.webp", try WebPCodec.encode(rgba: pixels, width: 256, height: 256, quality: 75)),
        ] {
            try Data(bytes).write(to: dir.file(name))
            let ours = try TileImageFormat.decode(bytes).pixels
            try Data(ours).write(to: dir.file(name + ".rgba"))
            let check = try await ExternalTools.python("""
                import sys
                from PIL import Image
                theirs = Image.open(sys.argv[1]).convert("RGBA").tobytes()
                ours = open(sys.argv[2], "rb").read()
                print(max(abs(a - b) for a, b in zip(theirs, ours)))
                """, [dir.file(name).path, dir.file(name + ".rgba").path])
            #expect(check.succeeded, "\(check.stderr)")
            #expect((Int(check.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 99) <= 2, "\(name): Pillow differs by \(check.stdout)")
        }
    }

    @Test func damagedImagesAreErrorsNotCrashes() async throws {
        let pixels = try await Self.mapTile()
        let jpeg = try JPEGCodec.encode(rgba: pixels, width: 256, height: 256, quality: 75)
        let webp = try WebPCodec.encode(rgba: pixels, width: 256, height: 256, quality: 75)
        for bad in [Array(jpeg.prefix(40)), [0xFF, 0xD8, 0xFF, 0xE0] + [UInt8](repeating: 7, count: 500), Array(webp.prefix(30)), Array("RIFF0000WEBPjunk".utf8)] {
            #expect(throws: (any Error).self) { try TileImageFormat.decode(bad) }
        }
        #expect(throws: (any Error).self) { try JPEGCodec.encode(rgba: pixels, width: 255, height: 256, quality: 75) }
        // A recoding keeps a tile it cannot read as it came.
        #expect(TileRecoding.mixed(quality: 75, pngLevel: 6).recode(Array(jpeg.prefix(40))) == Array(jpeg.prefix(40)))
    }

    /// MIXED recoding: opaque tiles become JPEG unless already smaller as fetched (a flat sea tile
    /// stays a tiny PNG); tiles with transparency stay PNG, pixel for pixel.
    @Test func mixedRecodingChoosesPerTile() throws {
        let recoding = TileRecoding.mixed(quality: 75, pngLevel: 6)
        let photo = try PNGEncoder.encode(pixels: Self.photo(), width: 256, height: 256)
        let jpeg = recoding.recode(photo)
        #expect(TileImageFormat(sniffing: jpeg) == .jpeg && jpeg.count < photo.count / 2)
        #expect(recoding.recode(TestTiles.sea) == TestTiles.sea)
        var clear = TestTiles.pixels(TileKey(level: 9, row: 1, col: 2))
        for p in 0..<4096 { clear[p * 4 + 3] = 0 }
        let translucent = try PNGEncoder.encode(pixels: clear, width: 256, height: 256)
        let kept = recoding.recode(translucent)
        #expect(TileImageFormat(sniffing: kept) == .png)
        #expect(try PNGDecoder.decode(kept).pixels == clear)
        // WebP sources become JPEG or PNG whatever their size: a MIXED cache holds nothing else.
        let webpOpaque = try WebPCodec.encode(rgba: Self.photo(), width: 256, height: 256, quality: 10)
        #expect(TileImageFormat(sniffing: recoding.recode(webpOpaque)) == .jpeg)
        let webpClear = try WebPCodec.encode(rgba: clear, width: 256, height: 256, quality: nil)
        let fromWebP = recoding.recode(webpClear)
        #expect(TileImageFormat(sniffing: fromWebP) == .png)
        // Lossless against what the WebP decodes to (libwebp may change colours under alpha 0).
        #expect(try PNGDecoder.decode(fromWebP).pixels == (try TileImageFormat.decode(webpClear).pixels))
        #expect(recoding.format(from: "PNG") == "MIXED" && recoding.format(from: "JPEG") == "JPEG" && TileRecoding.webp(quality: 75).format(from: "PNG") == "WEBP")
    }
}
