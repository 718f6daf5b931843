import Foundation
import OutpostCore
import OutpostTiles

/// `compressionQuality` 75 on one core: PNG tiles as a server sends them, decoded and re-encoded
/// as JPEG by Outpost's recoding (`TileRecoding.mixed`) and by Pillow (`Image.open` →
/// `convert("RGB")` → `save(JPEG, quality=75)`) over the same files in the same run, with the
/// bytes before and after. Two sets: imagery-like tiles (where JPEG is the point) and the
/// Natural Earth tiles the renderer draws (few colours: indexed PNG is often smaller, and the
/// recoding keeps it).
enum JPEGBenchmark {
    static func run(workDirectory: URL) async throws {
        let imagery = try (0..<256).map { try PNGEncoder.encode(pixels: imageryPixels(seed: $0), width: 256, height: 256) }
        let rendered = try await PNGBenchmark.renderedTiles(workDirectory).map { try PNGEncoder.encodeTile(rgba: $0, width: 256, height: 256) }
        let python = ProcessInfo.processInfo.environment["OUTPOST_PYTHON"] ?? "python3"
        var rows: [[String]] = []
        for (name, tiles) in [("imagery-like (grain on gradients)", imagery), ("Natural Earth drawn by MapRenderer", rendered)] {
            let folder = workDirectory.appendingPathComponent("jpeg-\(rows.count)")
            try? FileManager.default.removeItem(at: folder)
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            for (i, tile) in tiles.enumerated() { try Data(tile).write(to: folder.appendingPathComponent("\(i).png")) }
            let recoding = TileRecoding.mixed(quality: 75, pngLevel: 6)
            var best = Double.infinity, jpegTiles = 0, out = 0
            for _ in 0..<3 {
                let start = ContinuousClock.now
                var bytes = 0, jpegs = 0
                for tile in tiles {
                    let recoded = recoding.recode(tile)
                    bytes += recoded.count
                    if JPEGCodec.isJPEG(recoded) { jpegs += 1 }
                }
                let elapsed = ContinuousClock.now - start
                best = min(best, Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
                (out, jpegTiles) = (bytes, jpegs)
            }
            let pillow = try measure([python, "-c", """
                import sys, io, os, time
                from PIL import Image
                folder, count = sys.argv[1], int(sys.argv[2])
                tiles = [open(os.path.join(folder, f"{i}.png"), "rb").read() for i in range(count)]
                best = None
                for _ in range(3):
                    t = time.perf_counter(); size = 0
                    for data in tiles:
                        out = io.BytesIO()
                        Image.open(io.BytesIO(data)).convert("RGB").save(out, "JPEG", quality=75)
                        size += out.tell()
                    elapsed = time.perf_counter() - t
                    best = elapsed if best is None else min(best, elapsed)
                print(best, size)
                """, folder.path, String(tiles.count)])
            let parts = pillow.output.split(whereSeparator: \.isWhitespace)
            guard parts.count >= 2, let pillowSeconds = Double(parts[0]), let pillowBytes = Int(parts[1]) else {
                throw BenchError("Pillow printed \(pillow.output)")
            }
            let png = tiles.reduce(0) { $0 + $1.count }
            let count = Double(tiles.count)
            rows.append([
                "\(name): Outpost", format(count / best), format(Double(png) / count / 1024, 1), format(Double(out) / count / 1024, 1),
                "\(jpegTiles) of \(tiles.count)", format(pillowSeconds / best, 2),
            ])
            rows.append([
                "\(name): Pillow", format(count / pillowSeconds), format(Double(png) / count / 1024, 1), format(Double(pillowBytes) / count / 1024, 1),
                "\(tiles.count) of \(tiles.count)", "1.00",
            ])
        }
        printTable(
            "compressionQuality 75 on one core: PNG tiles of 256×256 decoded and re-encoded as JPEG",
            ["", "tiles/s", "KB per PNG tile", "KB per tile after", "JPEG tiles", "speed vs Pillow"], rows)
        try await packages(workDirectory)
    }

    /// The export job (all cores, 8 tiles in flight) over 4,096 imagery-like PNG tiles in a
    /// z/x/y folder, into a .tpkx as fetched and with `compressionQuality` 75: time and package size.
    static func packages(_ workDirectory: URL) async throws {
        let range = TileRange(level: 14, minRow: 5_800, maxRow: 5_863, minCol: 2_600, maxCol: 2_663)
        let folder = workDirectory.appendingPathComponent("jpeg-imagery")
        let marker = folder.appendingPathComponent("complete")
        if !FileManager.default.fileExists(atPath: marker.path) {
            try? FileManager.default.removeItem(at: folder)
            for key in range.inBundleOrder() {
                let dir = folder.appendingPathComponent("\(key.level)/\(key.col)")
                try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
                let png = try PNGEncoder.encode(pixels: imageryPixels(seed: key.row * 131 + key.col), width: 256, height: 256)
                try Data(png).write(to: dir.appendingPathComponent("\(key.row).png"))
            }
            try Data().write(to: marker)
        }
        let scheme = TilingScheme.webMercator
        let first = scheme.envelope(of: TileKey(level: 14, row: range.minRow, col: range.minCol))!
        let last = scheme.envelope(of: TileKey(level: 14, row: range.maxRow, col: range.maxCol))!
        let area = Envelope(xmin: first.xmin + 0.001, ymin: last.ymin + 0.001, xmax: last.xmax - 0.001, ymax: first.ymax - 0.001)
        var rows: [[String]] = []
        for (label, quality) in [("PNG tiles as fetched", nil), ("compressionQuality 75 (MIXED)", 75.0)] as [(String, Double?)] {
            let out = workDirectory.appendingPathComponent("jpeg-imagery-\(quality.map { String(Int($0)) } ?? "png").tpkx")
            try? FileManager.default.removeItem(at: out)
            let task = ExportTileCacheTask(source: .cache(folder), tileSource: TilesBenchmark.FolderSource(folder: folder))
            let parameters = ExportTileCacheParameters(areaOfInterest: .envelope(area, .webMercator), levelIDs: [14], concurrency: 8, compressionQuality: quality)
            let started = Date()
            let job = task.makeExportTileCacheJob(parameters: parameters, downloadFileURL: out)
            try job.start()
            _ = try await job.output
            let seconds = Date().timeIntervalSince(started)
            let size = (try FileManager.default.attributesOfItem(atPath: out.path)[.size] as? NSNumber)?.doubleValue ?? 0
            rows.append([label, format(seconds, 2), format(Double(range.count) / seconds), format(size / 1e6, 1)])
        }
        printTable(
            "Export job, \(range.count) imagery-like PNG tiles from a z/x/y folder into a .tpkx (all cores)",
            ["", "seconds", "tiles/s", "package MB"], rows)
    }

    /// Opaque pixels with the texture of aerial imagery: gradients and fields with grain.
    static func imageryPixels(seed: Int) -> [UInt8] {
        var state = UInt64(seed) &* 0x9E37_79B9_7F4A_7C15 &+ 1
        var px = [UInt8](repeating: 255, count: 256 * 256 * 4)
        for y in 0..<256 {
            for x in 0..<256 {
                state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                let grain = Int(state >> 60)
                let field = ((x + seed * 13) / 48 + (y + seed * 7) / 40) % 3
                let i = (y * 256 + x) * 4
                px[i] = UInt8(clamping: [96, 140, 180][field] + (x + y) / 16 + grain)
                px[i + 1] = UInt8(clamping: [120, 150, 165][field] + y / 12 + grain)
                px[i + 2] = UInt8(clamping: [70, 90, 140][field] + x / 20 + grain)
            }
        }
        return px
    }
}
