import Foundation
import OutpostCore
import OutpostTestSupport
import Testing

@testable import OutpostTiles

/// Tiles with content of their own (a pattern from the key) or the same blank "sea" tile.
enum TestTiles {
    static func pixels(_ key: TileKey) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 256 * 256 * 4)
        for y in 0..<256 {
            for x in 0..<256 {
                let i = (y * 256 + x) * 4
                out[i] = UInt8(truncatingIfNeeded: x &+ key.col &* 37)
                out[i + 1] = UInt8(truncatingIfNeeded: y &+ key.row &* 53)
                out[i + 2] = UInt8(truncatingIfNeeded: key.level &* 40 &+ (x ^ y))
                out[i + 3] = 255
            }
        }
        return out
    }

    /// Each key's PNG, encoded once: the bytes a test wrote are the bytes it compares, even when
    /// another suite installs the system codecs (libdeflate's stream differs from zlib's) between
    /// the write and the comparison.
    static func png(_ key: TileKey) throws -> [UInt8] {
        if let known = encoded.withLock({ $0[key] }) { return known }
        let bytes = try PNGEncoder.encode(pixels: pixels(key), width: 256, height: 256)
        return encoded.withLock { known in
            if let first = known[key] { return first }
            known[key] = bytes
            return bytes
        }
    }

    private static let encoded = Locked<[TileKey: [UInt8]]>([:])

    static let sea: [UInt8] = try! PNGEncoder.encode(pixels: [UInt8]((0..<(256 * 256)).flatMap { _ in [170, 211, 223, 255] as [UInt8] }), width: 256, height: 256)

    /// Even columns carry their own pattern, odd columns are sea.
    static func tile(_ key: TileKey) throws -> [UInt8] { key.col % 2 == 0 ? try png(key) : sea }

    /// The same rule with bytes that are quick to make (bundles store any bytes), for tests of
    /// many tiles.
    static func cheap(_ key: TileKey) -> [UInt8] {
        key.col % 2 == 0 ? Array("tile \(key) ".utf8) + [UInt8](repeating: UInt8(truncatingIfNeeded: key.row &* 31 &+ key.col), count: 3000) : sea
    }

    static func info(levels: ClosedRange<Int>, extent: Envelope? = nil) -> TileCacheInfo {
        TileCacheInfo(name: "test", scheme: .webMercator, minLevel: levels.lowerBound, maxLevel: levels.upperBound, format: "PNG", fullExtent: extent)
    }

    /// Writes every tile of `ranges` and returns the keys written.
    @discardableResult
    static func write(_ format: TileCacheWriter.Format, to url: URL, ranges: [TileRange]) throws -> [TileKey] {
        let levels = ranges.map(\.level)
        let writer = try TileCacheWriter(format: format, at: url, info: info(levels: levels.min()!...levels.max()!))
        var keys: [TileKey] = []
        for range in ranges {
            for key in range.inBundleOrder() {
                try writer.add(key, data: try tile(key))
                keys.append(key)
            }
        }
        try writer.finish()
        return keys
    }
}

@Suite("Compact Cache V2 bundles")
struct BundleTests {
    func u32(_ b: [UInt8], _ at: Int) -> UInt32 { b.withUnsafeBytes { UInt32(littleEndian: $0.loadUnaligned(fromByteOffset: at, as: UInt32.self)) } }
    func u64(_ b: [UInt8], _ at: Int) -> UInt64 { b.withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(fromByteOffset: at, as: UInt64.self)) } }

    @Test func byteLayoutOfAWrittenBundle() throws {
        let dir = TemporaryDirectory()
        let root = dir.file("cache")
        let range = TileRange(level: 3, minRow: 2, maxRow: 3, minCol: 4, maxCol: 6)
        try TestTiles.write(.exploded, to: root, ranges: [range])
        let bytes = [UInt8](try Data(contentsOf: root.appendingPathComponent("_alllayers/L03/R0000C0000.bundle")))
        // Header: the white paper's values.
        #expect(u32(bytes, 0) == 3 && u32(bytes, 4) == 16384 && u32(bytes, 12) == 5)
        #expect(u64(bytes, 16) == 0 && u64(bytes, 24) == UInt64(bytes.count) && u64(bytes, 32) == 40)
        #expect(u32(bytes, 40) == 131_092 && u32(bytes, 44) == 3 && u32(bytes, 48) == 16 && u32(bytes, 52) == 16384 && u32(bytes, 56) == 5)
        #expect(u32(bytes, 60) == 131_072)
        // Index: row-major, offset | size << 40, each tile after a u32 copy of its size.
        var maxSize = 0
        var offsets: [TileKey: UInt64] = [:]
        for key in range.inBundleOrder() {
            let entry = u64(bytes, 64 + 8 * (128 * key.row + key.col))
            let offset = Int(entry & 0xFF_FFFF_FFFF), size = Int(entry >> 40)
            let expected = try TestTiles.tile(key)
            #expect(size == expected.count)
            #expect(u32(bytes, offset - 4) == UInt32(size))
            #expect(Array(bytes[offset..<(offset + size)]) == expected)
            offsets[key] = entry
            maxSize = max(maxSize, size)
        }
        #expect(u32(bytes, 8) == UInt32(maxSize))
        // The first tile's size prefix sits right after the index.
        #expect(offsets[TileKey(level: 3, row: 2, col: 4)]! & 0xFF_FFFF_FFFF == 131_140)
        // Absent tiles have size 0.
        #expect(u64(bytes, 64) == 0)
        // The three sea tiles (odd columns 5, twice) share one stored copy.
        #expect(offsets[TileKey(level: 3, row: 2, col: 5)] == offsets[TileKey(level: 3, row: 3, col: 5)])
        let distinct = Set(offsets.values.map { $0 & 0xFF_FFFF_FFFF }).count
        #expect(distinct == 5)
        let stored = Set(offsets.values).map { 4 + Int($0 >> 40) }.reduce(0, +)
        #expect(bytes.count == 131_136 + stored)
    }

    @Test func readsTheHeaderVariantArcGISWritesAndDeadSpace() throws {
        // As ArcGIS Pro writes them: record count 0, max tile size 131,092, legacy field 0,
        // absent tiles as offset 4 / size 0, and stale bytes before the first live tile.
        let tile = try TestTiles.png(TileKey(level: 2, row: 1, col: 1))
        var bytes = [UInt8](repeating: 0, count: 131_136)
        func put32(_ v: UInt32, _ at: Int) { withUnsafeBytes(of: v.littleEndian) { for (i, b) in $0.enumerated() { bytes[at + i] = b } } }
        func put64(_ v: UInt64, _ at: Int) { withUnsafeBytes(of: v.littleEndian) { for (i, b) in $0.enumerated() { bytes[at + i] = b } } }
        put32(3, 0); put32(0, 4); put32(131_092, 8); put32(5, 12); put64(40, 32); put32(131_092, 40); put32(3, 44); put32(0, 48); put32(16384, 52); put32(5, 56); put32(131_072, 60)
        for slot in 0..<16384 { put64(4, 64 + 8 * slot) }
        bytes += [UInt8](repeating: 0xAB, count: 1000)  // dead space
        let offset = bytes.count + 4
        put64(UInt64(offset) | UInt64(tile.count) << 40, 64 + 8 * (128 * 1 + 1))
        withUnsafeBytes(of: UInt32(tile.count).littleEndian) { bytes += $0 }
        bytes += tile
        put64(UInt64(bytes.count), 24)
        let dir = TemporaryDirectory()
        let url = dir.file("R0000C0000.bundle")
        try Data(bytes).write(to: url)
        let reader = try BundleReader(source: try RandomAccessFile(url: url), start: 0, length: Int64(bytes.count), name: url.path)
        #expect(try reader.tile(row: 1, col: 1) == tile)
        #expect(try reader.tile(row: 0, col: 0) == nil)
        #expect(reader.counts.tiles == 1)
    }

    @Test func damagedBundlesGiveErrorsNamingFileAndTile() async throws {
        let dir = TemporaryDirectory()
        let root = dir.file("cache")
        try TestTiles.write(.exploded, to: root, ranges: [TileRange(level: 1, minRow: 0, maxRow: 1, minCol: 0, maxCol: 1)])
        let url = root.appendingPathComponent("_alllayers/L01/R0000C0000.bundle")
        let whole = try Data(contentsOf: url)
        // Truncated in the data: the index points past the end.
        try whole.prefix(whole.count - 100).write(to: url)
        let cache = TileCache(fileURL: root)
        try await cache.load()
        #expect(try cache.tile(level: 1, row: 0, col: 0) != nil)
        do {
            _ = try cache.tile(level: 1, row: 1, col: 0)
            Issue.record("read a tile past the end of a truncated bundle")
        } catch let error as TileCacheError {
            #expect(error.code == .corrupt && error.file?.hasSuffix("L01/R0000C0000.bundle") == true && error.tile == TileKey(level: 1, row: 1, col: 0))
        }
        // Truncated in the index, and a header that is not V2.
        try whole.prefix(5000).write(to: url)
        let short = TileCache(fileURL: root)
        try await short.load()
        #expect(throws: TileCacheError.self) { try short.tile(level: 1, row: 0, col: 0) }
        var garbage = whole
        garbage[0] = 9
        try garbage.write(to: url)
        let bad = TileCache(fileURL: root)
        try await bad.load()
        #expect(throws: TileCacheError.self) { try bad.tile(level: 1, row: 0, col: 0) }
    }

    @Test func tilesOutOfBundleOrderAreRefused() throws {
        let dir = TemporaryDirectory()
        let writer = try TileCacheWriter(format: .tilePackage, at: dir.file("x.tpkx"), info: TestTiles.info(levels: 0...9))
        try writer.add(TileKey(level: 9, row: 0, col: 0), data: TestTiles.sea)
        try writer.add(TileKey(level: 9, row: 0, col: 200), data: TestTiles.sea)
        #expect(throws: TileCacheError.self) { try writer.add(TileKey(level: 9, row: 0, col: 1), data: TestTiles.sea) }
        #expect(throws: TileCacheError.self) { try writer.add(TileKey(level: 12, row: 0, col: 1), data: TestTiles.sea) }
    }
}
