import Foundation
import OutpostCore
import OutpostTiles

#if canImport(Glibc)
    import Glibc
#endif

/// Tile export throughput (the tiles issue): 50,176 tiles of ~10 KB in a z/x/y folder (the local
/// source) exported into a .tpkx and into MBTiles, next to the pmtiles Python writer, mbutil,
/// direct SQLite inserts into an MBTiles schema, and a plain copy of the same bytes into one file
/// (the disk floor). Every writer reads the same files and makes its output durable. PNG
/// encoding: `PNGBenchmark`.
enum TilesBenchmark {
    static let level = 14
    static let row0 = 5_800, col0 = 2_600, size = 224  // 224 × 224 = 50,176 tiles, 4 bundles

    static var keys: [TileKey] {
        Array(TileRange(level: level, minRow: row0, maxRow: row0 + size - 1, minCol: col0, maxCol: col0 + size - 1).inBundleOrder())
    }

    /// ~10 KB of incompressible bytes per tile, after a PNG signature (the sizes of real tiles).
    static func prepare(_ folder: URL) throws {
        let marker = folder.appendingPathComponent("complete")
        if FileManager.default.fileExists(atPath: marker.path) { return }
        try? FileManager.default.removeItem(at: folder)
        var random = UInt64(42)
        for key in keys {
            let dir = folder.appendingPathComponent("\(key.level)/\(key.col)")
            if key.row == row0 { try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true) }
            let count = 8_000 + Int(random % 4_096)
            var bytes: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
            bytes.reserveCapacity(count)
            while bytes.count < count {
                random = random &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                withUnsafeBytes(of: random) { bytes.append(contentsOf: $0) }
            }
            try Data(bytes).write(to: dir.appendingPathComponent("\(key.row).png"))
        }
        try Data("{\"name\":\"bench\",\"format\":\"png\"}".utf8).write(to: folder.appendingPathComponent("metadata.json"))
        try Data().write(to: marker)
    }

    static func read(_ folder: URL, _ key: TileKey) -> [UInt8]? {
        let path = folder.appendingPathComponent("\(key.level)/\(key.col)/\(key.row).png").path
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { return nil }
        let size = Int(info.st_size)
        return [UInt8](unsafeUninitializedCapacity: size) { buffer, count in
            count = Glibc.read(fd, buffer.baseAddress, size)
        }
    }

    /// The folder as a tile source.
    struct FolderSource: TileSource {
        let folder: URL
        var label: String { folder.path }
        func cacheInfo() async throws -> TileCacheInfo {
            TileCacheInfo(name: "bench", scheme: .webMercator, minLevel: 0, maxLevel: 23, format: "PNG", fullExtent: nil)
        }
        func tile(_ key: TileKey) async throws -> [UInt8]? { TilesBenchmark.read(folder, key) }
    }

    /// Worker: the Outpost export job into `output` (format from its name). Prints seconds.
    static func export(folder: URL, output: URL) async throws -> Double {
        try? FileManager.default.removeItem(at: output)
        let scheme = TilingScheme.webMercator
        let first = scheme.envelope(of: TileKey(level: level, row: row0, col: col0))!
        let last = scheme.envelope(of: TileKey(level: level, row: row0 + size - 1, col: col0 + size - 1))!
        // The tiles' own envelope, pulled in by a millimetre so no neighbour is touched.
        let area = Envelope(xmin: first.xmin + 0.001, ymin: last.ymin + 0.001, xmax: last.xmax - 0.001, ymax: first.ymax - 0.001)
        let task = ExportTileCacheTask(source: .cache(folder), tileSource: FolderSource(folder: folder))
        let parameters = ExportTileCacheParameters(areaOfInterest: .envelope(area, .webMercator), levelIDs: [level], maxTileCount: 100_000, concurrency: 8)
        let started = Date()
        let job = task.makeExportTileCacheJob(parameters: parameters, downloadFileURL: output)
        try job.start()
        let cache = try await job.output
        let seconds = Date().timeIntervalSince(started)
        let tiles = try cache.summary().reduce(0) { $0 + $1.tiles }
        guard tiles == keys.count else { throw BenchError("exported \(tiles) tiles, not \(keys.count)") }
        return seconds
    }

    /// Worker: every tile's bytes appended to one file, fsynced: the disk floor.
    static func floor(folder: URL, output: URL) throws -> Double {
        let started = Date()
        let fd = open(output.path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        guard fd >= 0 else { throw BenchError("cannot create \(output.path)") }
        var buffer: [UInt8] = []
        buffer.reserveCapacity(1 << 20)
        for key in keys {
            guard let bytes = read(folder, key) else { throw BenchError("missing \(key)") }
            buffer += bytes
            if buffer.count >= 1 << 20 {
                _ = buffer.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
                buffer.removeAll(keepingCapacity: true)
            }
        }
        _ = buffer.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        fsync(fd)
        close(fd)
        return Date().timeIntervalSince(started)
    }

    /// Map-like pixels: a smooth background, filled shapes and lines (what a renderer draws).
    static func mapPixels(_ seed: Int) -> [UInt8] {
        var px = [UInt8](repeating: 0, count: 256 * 256 * 4)
        for y in 0..<256 {
            for x in 0..<256 {
                let i = (y * 256 + x) * 4
                let inLake = (x - 128 - seed % 50) * (x - 128 - seed % 50) + (y - 100) * (y - 100) < 3_000
                let onRoad = abs(x - y - seed % 80) < 3 || abs(y - 180 + seed % 30) < 2
                px[i] = onRoad ? 250 : inLake ? 170 : UInt8(235 - (x + y) / 40)
                px[i + 1] = onRoad ? 200 : inLake ? 211 : UInt8(230 - y / 30)
                px[i + 2] = onRoad ? 120 : inLake ? 223 : 215
                px[i + 3] = 255
            }
        }
        return px
    }

    static func run(executable: String, workDirectory: URL) throws {
        let folder = workDirectory.appendingPathComponent("tiles-source")
        try prepare(folder)
        let count = keys.count
        let bytes = keys.reduce(0) { $0 + (read(folder, $1)?.count ?? 0) }
        let python = ProcessInfo.processInfo.environment["OUTPOST_PYTHON"] ?? "python3"
        let out = workDirectory.appendingPathComponent("tiles-out")
        try? FileManager.default.removeItem(at: out)
        try FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)
        let order = keys.map { "\($0.col)/\($0.row)" }.joined(separator: "\n")
        let orderFile = out.appendingPathComponent("order.txt")
        try Data(order.utf8).write(to: orderFile)

        func best(_ name: String, _ arguments: @autoclosure () -> [String], reset: URL? = nil, timed: Bool = true) throws -> ProcessMeasurement {
            var bestRun: ProcessMeasurement?
            for _ in 0..<3 {
                if let reset { try? FileManager.default.removeItem(at: reset) }
                var m = try measure(arguments())
                if timed { m.seconds = try reportedSeconds(m) }
                if bestRun == nil || m.seconds < bestRun!.seconds { bestRun = m }
            }
            return bestRun!
        }
        let tpkx = out.appendingPathComponent("out.tpkx"), mbtiles = out.appendingPathComponent("out.mbtiles")
        let outpostTPKX = try best("tpkx", [executable, "worker-tiles-export", folder.path, tpkx.path])
        let outpostMB = try best("mbtiles", [executable, "worker-tiles-export", folder.path, mbtiles.path])
        let floorRun = try best("floor", [executable, "worker-tiles-floor", folder.path, out.appendingPathComponent("floor.bin").path])
        let sqliteRun = try best("sqlite", [python, "-c", """
            import sys, sqlite3, time, os
            folder, order, target = sys.argv[1:4]
            if os.path.exists(target): os.remove(target)
            t = time.perf_counter()
            db = sqlite3.connect(target)
            db.execute("CREATE TABLE tiles (zoom_level INTEGER, tile_column INTEGER, tile_row INTEGER, tile_data BLOB)")
            db.execute("CREATE UNIQUE INDEX tile_index ON tiles (zoom_level, tile_column, tile_row)")
            def rows():
                for line in open(order):
                    x, y = line.split("/")
                    y = int(y)
                    with open(f"{folder}/14/{x}/{y}.png", "rb") as f:
                        yield (14, int(x), (1 << 14) - 1 - y, f.read())
            db.executemany("INSERT INTO tiles VALUES (?, ?, ?, ?)", rows())
            db.commit()
            db.close()
            print(time.perf_counter() - t)
            print("vmhwm-kb", [l.split()[1] for l in open("/proc/self/status") if l.startswith("VmHWM:")][0])
            """, folder.path, orderFile.path, out.appendingPathComponent("direct.mbtiles").path])
        let pmtilesRun = try best("pmtiles", [python, "-c", """
            import sys, time
            from pmtiles.writer import Writer
            from pmtiles.tile import zxy_to_tileid, TileType, Compression
            folder, order, target = sys.argv[1:4]
            t = time.perf_counter()
            keys = sorted((zxy_to_tileid(14, int(x), int(y)), int(x), int(y)) for x, y in (l.split("/") for l in open(order)))
            with open(target, "wb") as f:
                w = Writer(f)
                for tid, x, y in keys:
                    with open(f"{folder}/14/{x}/{y}.png", "rb") as tile:
                        w.write_tile(tid, tile.read())
                w.finalize({"tile_type": TileType.PNG, "tile_compression": Compression.NONE, "min_zoom": 14, "max_zoom": 14,
                            "min_lon_e7": -1800000000, "min_lat_e7": -850000000, "max_lon_e7": 1800000000, "max_lat_e7": 850000000,
                            "center_zoom": 14, "center_lon_e7": 0, "center_lat_e7": 0}, {})
                f.flush()
                import os; os.fsync(f.fileno())
            print(time.perf_counter() - t)
            print("vmhwm-kb", [l.split()[1] for l in open("/proc/self/status") if l.startswith("VmHWM:")][0])
            """, folder.path, orderFile.path, out.appendingPathComponent("out.pmtiles").path])
        let mbutilRun = try best(
            "mbutil", ["/bin/sh", "-c", "rm -f \"$1\"; mb-util --image_format=png --silent \"$0\" \"$1\" >/dev/null 2>&1", folder.path, out.appendingPathComponent("mbutil.mbtiles").path],
            timed: false)

        func row(_ name: String, _ m: ProcessMeasurement) -> [String] {
            [name, format(m.seconds, 2), format(Double(count) / m.seconds), format(Double(bytes) / m.seconds / 1e6, 0), format(floorRun.seconds / m.seconds, 2), format(m.peakMemoryMB)]
        }
        printTable(
            "Tile export: \(count) tiles of ~10 KB (\(bytes / 1_000_000) MB) from a z/x/y folder, each output made durable",
            ["", "seconds", "tiles/s", "MB/s", "vs floor", "peak MB"],
            [
                row("Outpost export job → .tpkx", outpostTPKX), row("Outpost export job → MBTiles", outpostMB),
                row("pmtiles Python writer", pmtilesRun), row("mbutil (disk → MBTiles)", mbutilRun),
                row("direct SQLite inserts (Python, one transaction)", sqliteRun), row("plain copy into one file (floor)", floorRun),
            ])
    }
}
