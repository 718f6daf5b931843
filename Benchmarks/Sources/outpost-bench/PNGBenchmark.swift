import CZlibBench
import Foundation
import OutpostCore
import OutpostSQLiteService
import OutpostServer
import OutpostStorage
import OutpostTiles

/// PNG encoding of 256×256 tiles on one core, next to zlib alone on the same pixels: tiles the
/// renderer draws from the Natural Earth sample (zoom 3, the whole world) and synthetic map-like
/// tiles. Each form of the encoder (RGBA with adaptive filters; the tile form: indexed when a
/// tile has at most 256 colours, else RGB or RGBA) and each zlib strategy, so the choices are
/// measured.
enum PNGBenchmark {
    static func run(workDirectory: URL) async throws {
        let rendered = try await renderedTiles(workDirectory)
        let synthetic = (0..<64).map { TilesBenchmark.mapPixels($0) }
        for (name, tiles) in [("Natural Earth drawn by MapRenderer, zoom 3", rendered), ("synthetic map-like tiles", synthetic)] {
            let raw = Double(tiles.count * 256 * 256 * 4)
            let zlibAlone = try best { tiles.reduce(0) { $0 + compressedSize($1) } }
            var rows: [[String]] = []
            func add(_ label: String, _ encode: ([UInt8]) throws -> [UInt8]) throws {
                let (seconds, bytes) = try best { try tiles.reduce(0) { $0 + (try encode($1)).count } }
                rows.append([
                    label, format(Double(tiles.count) / seconds), format(raw / seconds / 1e6), format(Double(bytes) / Double(tiles.count) / 1024, 1),
                    format(zlibAlone.seconds / seconds, 2),
                ])
            }
            rows.append([
                "zlib level 6 alone on the RGBA bytes (no PNG)", format(Double(tiles.count) / zlibAlone.seconds), format(raw / zlibAlone.seconds / 1e6),
                format(Double(zlibAlone.bytes) / Double(tiles.count) / 1024, 1), "1.00",
            ])
            try add("PNG RGBA, adaptive filters, level 6 (libdeflate)") { try PNGEncoder.encode(pixels: $0, width: 256, height: 256, level: 6) }
            try add("PNG RGBA, adaptive filters, level 6, zlib Z_FILTERED") { try PNGEncoder.encode(pixels: $0, width: 256, height: 256, level: 6, strategy: .filtered) }
            try add("PNG RGBA, adaptive filters, level 9 (libdeflate)") { try PNGEncoder.encode(pixels: $0, width: 256, height: 256, level: 9) }
            try add("PNG tile form (indexed, zlib, when ≤ 256 colours), level 6") { try PNGEncoder.encodeTile(rgba: $0, width: 256, height: 256, level: 6) }
            try add("PNG tile form, indexed rows with zlib Z_RLE, level 6") {
                try PNGEncoder.encodeTile(rgba: $0, width: 256, height: 256, level: 6, indexedStrategy: .rle)
            }
            let indexed = tiles.filter { Palette.index($0) != nil }.count
            printTable(
                "PNG encoding, one core: \(tiles.count) tiles of 256×256 (\(name); \(indexed) have ≤ 256 colours)",
                ["", "tiles/s", "MB/s (RGBA in)", "KB per tile", "speed vs zlib alone"], rows)
        }
    }

    /// Best of three runs: seconds and the sum `body` returns.
    static func best(_ body: () throws -> Int) throws -> (seconds: Double, bytes: Int) {
        var seconds = Double.infinity, bytes = 0
        for _ in 0..<3 {
            let start = ContinuousClock.now
            bytes = try body()
            let elapsed = ContinuousClock.now - start
            seconds = min(seconds, Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
        }
        return (seconds, bytes)
    }

    /// zlib level 6 over the raw bytes, as `compress2` does.
    static func compressedSize(_ bytes: [UInt8]) -> Int {
        var bound = compressBound(uLong(bytes.count))
        var out = [UInt8](repeating: 0, count: Int(bound))
        _ = bytes.withUnsafeBufferPointer { src in
            out.withUnsafeMutableBufferPointer { dst in compress2(dst.baseAddress, &bound, src.baseAddress, uLong(bytes.count), 6) }
        }
        return Int(bound)
    }

    /// The 64 tiles of zoom 3 drawn from the Natural Earth sample.
    static func renderedTiles(_ workDirectory: URL) async throws -> [[UInt8]] {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let sample = root.appendingPathComponent("SampleData/natural_earth")
        let file = workDirectory.appendingPathComponent("png-natural-earth.gpkg")
        Geodatabase.removeFiles(at: file)
        _ = try SQLiteServiceBackend.create(
            at: file, schema: try ServiceSchema.load(from: sample.appendingPathComponent("service.json")), dataDirectory: sample.appendingPathComponent("data"))
        let gdb = try Geodatabase.open(at: file)
        defer { try? gdb.close() }
        let renderer = MapRenderer(geodatabase: gdb)
        var tiles: [[UInt8]] = []
        for row in 0..<8 {
            for column in 0..<8 {
                let key = TileKey(level: 3, row: row, col: column)
                guard let envelope = TilingScheme.webMercator.envelope(of: key) else { continue }
                tiles.append(try await renderer.render(envelope: envelope, width: 256, height: 256))
            }
        }
        return tiles
    }
}
