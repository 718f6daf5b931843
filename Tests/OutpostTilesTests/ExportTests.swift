import Foundation
import OutpostCore
import OutpostTestSupport
import OutpostTileCodecs
import OutpostHTTPTestSupport
import Testing

@testable import OutpostTiles

/// A source that makes its tiles on demand and counts what it was asked for.
final class CountingSource: TileSource {
    let requests = Locked<[TileKey: Int]>([:])
    let maxLevel: Int
    /// Tiles the source does not have.
    let absent: @Sendable (TileKey) -> Bool

    init(maxLevel: Int = 18, absent: @escaping @Sendable (TileKey) -> Bool = { _ in false }) {
        self.maxLevel = maxLevel
        self.absent = absent
    }

    var label: String { "counting" }
    var total: Int { requests.withLock { $0.values.reduce(0, +) } }
    var refetched: Int { requests.withLock { $0.values.filter { $0 > 1 }.count } }

    func cacheInfo() async throws -> TileCacheInfo { TestTiles.info(levels: 0...maxLevel) }

    func tile(_ key: TileKey) async throws -> [UInt8]? {
        requests.withLock { $0[key, default: 0] += 1 }
        return absent(key) ? nil : TestTiles.cheap(key)
    }
}

@Suite("Export tile cache")
struct ExportTests {
    /// JPEG and WebP come from the system libraries.
    init() {
        SystemTileCodecs.install()
    }

    /// Central Portland, levels 10–14: a few hundred tiles over several bundles at level 14.
    static let area = AreaOfInterest.envelope(Envelope(xmin: -122.75, ymin: 45.45, xmax: -122.55, ymax: 45.6), .wgs84)

    func expectCacheHolds(_ url: URL, _ selection: TileSelection, absent: (TileKey) -> Bool = { _ in false }) async throws {
        let cache = TileCache(fileURL: url)
        try await cache.load()
        var n = 0
        for key in selection.tiles {
            let expected = absent(key) ? nil : TestTiles.cheap(key)
            #expect(try cache.tile(key) == expected, "\(key)")
            n += 1
        }
        #expect(try cache.summary().reduce(0) { $0 + $1.tiles } == n - selection.tiles.filter(absent).count)
    }

    @Test(arguments: ["out.tpkx", "out-folder", "out.mbtiles"])
    func exportsEveryTileOnceIntoEachFormat(_ name: String) async throws {
        let dir = TemporaryDirectory()
        let source = CountingSource(absent: { $0.level == 14 && $0.row % 7 == 0 })
        let task = ExportTileCacheTask(source: .http("http://unused/{z}/{x}/{y}"), tileSource: source)
        let parameters = ExportTileCacheParameters(areaOfInterest: Self.area, levelIDs: Array(10...14))
        let job = task.makeExportTileCacheJob(parameters: parameters, downloadFileURL: dir.file(name))
        try job.start()
        let cache = try await job.output
        #expect(cache.info?.levels == 10...14)
        let selection = try parameters.selection(try await source.cacheInfo())
        #expect(source.total == selection.tileCount && source.refetched == 0)
        try await expectCacheHolds(dir.file(name), selection, absent: source.absent)
        // Nothing left beside it.
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.url.path) == [name])
    }

    @Test func tooManyTilesIsRefusedBeforeAnyDownload() async throws {
        let dir = TemporaryDirectory()
        let source = CountingSource()
        let task = ExportTileCacheTask(source: .http("http://unused/{z}/{x}/{y}"), tileSource: source)
        var parameters = ExportTileCacheParameters(areaOfInterest: Self.area, levelIDs: Array(0...14))
        parameters.maxTileCount = 100
        let job = task.makeExportTileCacheJob(parameters: parameters, downloadFileURL: dir.file("x.tpkx"))
        try job.start()
        do {
            _ = try await job.output
            Issue.record("exported more tiles than allowed")
        } catch let error as JobError {
            #expect("\(error)".contains("more than the limit of 100"))
        }
        #expect(source.total == 0)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.url.path).isEmpty)
    }

    @Test func estimateCountsAndSizesFromASample() async throws {
        let source = CountingSource()
        let task = ExportTileCacheTask(source: .http("http://unused/{z}/{x}/{y}"), tileSource: source)
        // Scales between levels take the coarser level for minScale and the finer for maxScale
        // (level 9 is 1:1,155,581, level 10 1:577,791, level 14 1:36,112, level 15 1:18,056).
        let between = try await task.makeDefaultExportTileCacheParameters(areaOfInterest: Self.area, minScale: 600_000, maxScale: 30_000)
        #expect(between.levelIDs == Array(9...15))
        #expect(try await task.makeDefaultExportTileCacheParameters(areaOfInterest: nil, minScale: 0, maxScale: 0).levelIDs == Array(0...18))
        let parameters = try await task.makeDefaultExportTileCacheParameters(areaOfInterest: Self.area, minScale: 577_790.554289, maxScale: 36_111.909643)
        #expect(parameters.levelIDs == Array(10...14))
        let job = task.makeEstimateTileCacheSizeJob(parameters: parameters)
        try job.start()
        let estimate = try await job.output
        let selection = try parameters.selection(try await source.cacheInfo())
        #expect(estimate.tileCount == selection.tileCount)
        #expect(source.total == 24)
        // Within a quarter of the real size (the sample's tiles are alike).
        let dir = TemporaryDirectory()
        let export = task.makeExportTileCacheJob(parameters: parameters, downloadFileURL: dir.file("x.tpkx"))
        try export.start()
        _ = try await export.output
        let real = try FileManager.default.attributesOfItem(atPath: dir.file("x.tpkx").path)[.size] as! Int
        #expect(abs(Double(estimate.fileSize) / Double(real) - 1) < 0.25, "estimate \(estimate.fileSize), real \(real)")
    }

    @Test func pausedExportRebuiltFromJSONFinishesWithoutRefetching() async throws {
        let dir = TemporaryDirectory()
        let source = CountingSource()
        let task = ExportTileCacheTask(source: .http("http://unused/{z}/{x}/{y}"), tileSource: source)
        // About 2,400 tiles: several checkpoints.
        let area = AreaOfInterest.envelope(Envelope(xmin: -122.9, ymin: 45.4, xmax: -122.4, ymax: 45.7), .wgs84)
        let parameters = ExportTileCacheParameters(areaOfInterest: area, levelIDs: Array(12...15), concurrency: 2)
        let selection = try parameters.selection(try await source.cacheInfo())
        #expect(selection.tileCount > 1500)
        let job = task.makeExportTileCacheJob(parameters: parameters, downloadFileURL: dir.file("out.tpkx"))
        let paused = Task {
            for await status in job.statusUpdates where status == .paused { return }
        }
        try job.start()
        // Pause once the first checkpoint is in.
        while (job.progress.phases.first { $0.name == "tiles" }?.done ?? 0) < 512 && job.status != .succeeded {
            try await Task.sleep(for: .milliseconds(5))
        }
        try job.pause()
        await paused.value
        let fetchedBeforePause = source.total
        let json = try job.toJSON()
        var registry = JobRegistry()
        registry.withTileJobs(TileJobEnvironment(source: source))
        let rebuilt = try registry.makeJob(from: try JobSnapshot.decode(json))
        try rebuilt.start()
        #expect(await rebuilt.waitUntilFinished() == .succeeded)
        // Only tiles in flight at the pause (at most twice the concurrency) were fetched again.
        #expect(source.refetched <= 4, "\(source.refetched) refetched of \(fetchedBeforePause)")
        try await expectCacheHolds(dir.file("out.tpkx"), selection)
    }

    @Test(arguments: [TileCacheWriter.Format.tilePackage, .exploded, .mbtiles])
    func writerResumesFromACheckpointAfterACrash(_ format: TileCacheWriter.Format) async throws {
        // Tiles written after the checkpoint reach the files but not the state: a crash. The
        // resumed writer cuts them off and continues from the checkpoint's tile.
        let dir = TemporaryDirectory()
        let url = dir.file(format == .tilePackage ? "c.tpkx" : format == .mbtiles ? "c.mbtiles" : "c"), journal = dir.file("journal")
        let range = TileRange(level: 8, minRow: 100, maxRow: 140, minCol: 120, maxCol: 135)
        let keys = Array(range.inBundleOrder())
        let info = TestTiles.info(levels: 8...8)
        var state: JSONValue = .null
        do {
            let writer = try TileCacheWriter(format: format, at: url, info: info, journal: journal)
            for key in keys.prefix(300) { try writer.add(key, data: TestTiles.cheap(key)) }
            state = try writer.checkpoint()
            for key in keys[300..<420] { try writer.add(key, data: TestTiles.cheap(key)) }
            _ = try writer.checkpoint()  // durable on disk, but the job never saw this state
            for key in keys[420..<450] { try writer.add(key, data: TestTiles.cheap(key)) }  // and into the next bundle
        }
        let resumed = try TileCacheWriter(resuming: state, format: format, at: url, info: info, journal: journal)
        for key in keys.dropFirst(300) { try resumed.add(key, data: TestTiles.cheap(key)) }
        try resumed.finish()
        let cache = TileCache(fileURL: url)
        try await cache.load()
        for key in keys {
            let got = try cache.tile(key), want = TestTiles.cheap(key)
            #expect(got == want, "\(key) got \(got?.count ?? -1) bytes, want \(want.count)")
        }
        #expect(try cache.summary().reduce(0) { $0 + $1.tiles } == keys.count)
        if format == .tilePackage {
            let check = try await ExternalTools.run(ExternalTools.python, ["-c", "import sys, zipfile; assert zipfile.ZipFile(sys.argv[1]).testzip() is None", url.path])
            #expect(check.succeeded, "\(check.stderr)")
        }
        if format == .mbtiles { try await Self.expectMBTilesSpec(url, keys: keys) }
    }

    /// What MBTiles 1.3 asks of a file, checked with Python's sqlite3: the metadata rows
    /// (name and format required; bounds, minzoom and maxzoom as numbers), a `tiles` table or view
    /// with its four columns, one row per (zoom_level, tile_column, tile_row) under a unique index,
    /// rows in TMS order (`tile_row = 2^z − 1 − y`), and no image that no tile uses.
    static func expectMBTilesSpec(_ url: URL, keys: [TileKey]) async throws {
        let expected = keys.map { "\($0.level)/\($0.col)/\((1 << $0.level) - 1 - $0.row)" }.sorted().joined(separator: ",")
        let check = try await ExternalTools.python("""
            import sys, sqlite3
            db = sqlite3.connect(sys.argv[1])
            meta = dict(db.execute("SELECT name, value FROM metadata"))
            assert meta["name"] and meta["format"] in ("png", "jpg", "webp", "pbf"), meta
            bounds = [float(v) for v in meta["bounds"].split(",")]
            assert len(bounds) == 4 and bounds[0] < bounds[2] and bounds[1] < bounds[3], bounds
            assert int(meta["minzoom"]) <= int(meta["maxzoom"]), meta
            columns = [r[1] for r in db.execute("PRAGMA table_info(tiles)")]
            assert columns == ["zoom_level", "tile_column", "tile_row", "tile_data"], columns
            rows = sorted(f"{z}/{x}/{y}" for z, x, y in db.execute("SELECT zoom_level, tile_column, tile_row FROM tiles"))
            assert ",".join(rows) == sys.argv[2], "tiles are not the expected TMS keys, once each"
            unique = [i for i in db.execute("PRAGMA index_list(map)") if i[2]]
            assert unique, "map has no unique index"
            orphans = db.execute("SELECT count(*) FROM images WHERE tile_id NOT IN (SELECT tile_id FROM map)").fetchone()[0]
            assert orphans == 0, f"{orphans} images no tile uses"
            assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            print("ok")
            """, [url.path, expected])
        #expect(check.stdout.contains("ok"), "\(check.stderr)")
    }
}

@Suite("HTTP tile sources")
struct HTTPSourceTests {
    /// JPEG and WebP come from the system libraries.
    init() {
        SystemTileCodecs.install()
    }

    /// Serves `cheap` tiles at /tiles/{z}/{x}/{y}.png and /MapServer/tile/{level}/{row}/{col}:
    /// every fifth tile fails with 503 the first time, tiles of row multiples of 9 are 404.
    final class Requests: Sendable {
        let counts = Locked<[String: Int]>([:])
    }

    static func server(failAlways: Bool = false) async throws -> (LoopbackHTTPServer, Requests) {
        let seen = Requests()
        let server = try await LoopbackHTTPServer.start { request in
            let parts = request.path.split(separator: "/").map(String.init)
            if parts.last == "MapServer" {
                let info = TestTiles.info(levels: 0...16)
                return .json("{\"mapName\":\"test\",\"tileInfo\":\(info.tileInfoJSON()),\"spatialReference\":{\"wkid\":102100,\"latestWkid\":3857},\"minLOD\":0,\"maxLOD\":16}")
            }
            let numbers = parts.suffix(3).map { Int($0.replacingOccurrences(of: ".png", with: "")) ?? -1 }
            guard numbers.count == 3 else { return .json("{}", status: 400) }
            let key = parts.contains("MapServer")
                ? TileKey(level: numbers[0], row: numbers[1], col: numbers[2]) : TileKey(level: numbers[0], row: numbers[2], col: numbers[1])
            let count = seen.counts.withLock { s -> Int in
                s[key.description, default: 0] += 1
                return s[key.description]!
            }
            if failAlways { return .json("{\"error\":\"down\"}", status: 503) }
            if key.row % 9 == 0 { return .json("not found", status: 404) }
            if (key.row + key.col) % 5 == 0 && count == 1 { return .json("busy", status: 503) }
            return LoopbackHTTPServer.Response(body: Data(TestTiles.cheap(key)), contentType: "image/png")
        }
        return (server, seen)
    }

    @Test(arguments: ["/tiles/{z}/{x}/{y}.png", "/MapServer"])
    func exportsFromAServiceThatFailsNowAndThen(_ path: String) async throws {
        let (server, seen) = try await Self.server()
        defer { Task { try? await server.stop() } }
        let dir = TemporaryDirectory()
        let url = server.baseURL.absoluteString + path
        let task = ExportTileCacheTask(source: .http(url))
        try await task.load()
        #expect(task.tileCacheInfo?.levels == (path == "/MapServer" ? 0...16 : 0...23))
        let parameters = ExportTileCacheParameters(areaOfInterest: ExportTests.area, levelIDs: Array(10...14))
        let job = task.makeExportTileCacheJob(parameters: parameters, downloadFileURL: dir.file("out.tpkx"))
        try job.start()
        let cache = try await job.output
        let selection = try parameters.selection(try #require(task.tileCacheInfo))
        for key in selection.tiles {
            #expect(try cache.tile(key) == (key.row % 9 == 0 ? nil : TestTiles.cheap(key)), "\(key)")
        }
        // The 503s were retried; nothing else was asked twice.
        let asked = seen.counts.withLock { $0 }
        #expect(asked.values.allSatisfy { $0 <= 2 })
        #expect(job.messages.contains { $0.text.contains("were not in the source") })
    }

    @Test func aSourceThatStaysDownFailsTheExportAndLeavesNothing() async throws {
        let (server, _) = try await Self.server(failAlways: true)
        defer { Task { try? await server.stop() } }
        let dir = TemporaryDirectory()
        let source = try HTTPTileSource(url: server.baseURL.absoluteString + "/{z}/{x}/{y}", attempts: 3, backoff: .milliseconds(10))
        let task = ExportTileCacheTask(source: .http(source.template), tileSource: source)
        let job = task.makeExportTileCacheJob(parameters: ExportTileCacheParameters(areaOfInterest: ExportTests.area, levelIDs: [12]), downloadFileURL: dir.file("out.tpkx"))
        try job.start()
        do {
            _ = try await job.output
            Issue.record("an export from a dead source succeeded")
        } catch let error as JobError {
            #expect("\(error)".contains("failed 3 times"))
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.url.path).isEmpty)
    }

    /// An MBTiles file's `format` row is what its tiles are, whatever the source declares (an
    /// XYZ template declares nothing: MIXED): PNG tiles say `png`, JPEG `jpg`, mostly JPEG with
    /// some PNG `png` (transparency kept), tiles recoded to WebP `webp`; GDAL's MBTiles driver
    /// (rasterio's) opens each and reads pixels.
    @Test(arguments: [("png", false, "png"), ("jpeg", false, "jpg"), ("mixed", false, "png"), ("png", true, "webp")])
    func anMBTilesFileSaysTheFormatOfItsTiles(_ kind: String, _ webp: Bool, _ expected: String) async throws {
        var pixels = [UInt8](repeating: 0, count: 256 * 256 * 4)
        for i in stride(from: 0, to: pixels.count, by: 4) { (pixels[i], pixels[i + 1], pixels[i + 2], pixels[i + 3]) = (UInt8(i / 4 % 256), 90, 160, 255) }
        let png = Data(try PNGEncoder.encode(pixels: pixels, width: 256, height: 256))
        let jpeg = Data(try JPEGCodec.encode(rgba: pixels, width: 256, height: 256, quality: 80))
        let server = try await LoopbackHTTPServer.start { request in
            let n = request.path.split(separator: "/").suffix(3).compactMap { Int($0.replacingOccurrences(of: ".png", with: "")) }
            guard n.count == 3 else { return .json("{}", status: 400) }
            let usePNG = kind == "png" || kind == "mixed" && (n[1] + n[2]) % 4 == 0
            return LoopbackHTTPServer.Response(body: usePNG ? png : jpeg, contentType: usePNG ? "image/png" : "image/jpeg")
        }
        defer { Task { try? await server.stop() } }
        let dir = TemporaryDirectory()
        let task = ExportTileCacheTask(source: .http(server.baseURL.absoluteString + "/tiles/{z}/{x}/{y}.png"))
        try await task.load()
        var parameters = ExportTileCacheParameters(areaOfInterest: .envelope(Envelope(xmin: -12, ymin: 34, xmax: 32, ymax: 61), .wgs84), levelIDs: Array(0...3))
        parameters.webp = webp
        let job = task.makeExportTileCacheJob(parameters: parameters, downloadFileURL: dir.file("europe.mbtiles"))
        try job.start()
        _ = try await job.output
        let check = try await ExternalTools.python("""
            import sys, sqlite3, rasterio
            from rasterio.windows import Window
            db = sqlite3.connect(sys.argv[1])
            print(dict(db.execute("SELECT name, value FROM metadata"))["format"])
            with rasterio.open(sys.argv[1]) as ds:
                assert ds.driver == "MBTiles", ds.driver
                band = ds.read(1, window=Window(0, 0, min(256, ds.width), min(256, ds.height)))
                assert band.size > 0 and band.any(), band.shape
            """, [dir.file("europe.mbtiles").path])
        #expect(check.succeeded, "\(check.stderr)")
        #expect(check.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == expected)
    }

    /// A MapServer that takes the connection and never answers: a Task loading the export task
    /// that is cancelled gets CancellationError at once (the HTTP request is cancelled with the
    /// load's last caller), the task is back to not loaded, and a later load tries again.
    @Test(.scaledTimeLimit(minutes: 1))
    func aLoadFromAServerThatNeverAnswersEndsWithItsCancelledTask() async throws {
        let (server, asked) = try await LoopbackHTTPServer.startSilent()
        defer { Task { try? await server.stop() } }
        let task = ExportTileCacheTask(source: .http(server.baseURL.absoluteString + "/MapServer"))
        let loading = Task { try await task.load() }
        while asked() == 0 { try await Task.sleep(for: .milliseconds(5)) }
        let started = ContinuousClock.now
        loading.cancel()
        await #expect(throws: CancellationError.self) { try await loading.value }
        #expect(ContinuousClock.now - started < CancellationBound.loaded, "the promise is 250 ms; the bound leaves a loaded machine room")
        #expect(task.loadStatus == .notLoaded)
        let again = Task { try await task.load() }
        while asked() < 2 { try await Task.sleep(for: .milliseconds(5)) }
        again.cancel()
        await #expect(throws: CancellationError.self) { try await again.value }
    }

    /// A tile-count estimate run in the structured form, against a source that takes each tile
    /// request and never answers: cancelling the Task ends the call within the bound (the sample
    /// request is cancelled) and the job ends cancelled.
    @Test(.scaledTimeLimit(minutes: 1))
    func anEstimateWhoseSourceNeverAnswersEndsWithItsTask() async throws {
        let (server, asked) = try await LoopbackHTTPServer.startSilent()
        defer { Task { try? await server.stop() } }
        let task = ExportTileCacheTask(source: .http(server.baseURL.absoluteString + "/tiles/{z}/{x}/{y}.png"))
        try await task.load()
        let job = task.makeEstimateTileCacheSizeJob(parameters: ExportTileCacheParameters(areaOfInterest: ExportTests.area, levelIDs: [10, 11]))
        let estimating = Task { try await job.run() }
        let (took, error) = try await CancellationBound.cancel(estimating) { asked() > 0 }
        #expect(error is CancellationError, "\(String(describing: error))")
        #expect(took < CancellationBound.loaded)
        #expect(await job.waitUntilFinished() == .failed && job.error?.code == .cancelled)
    }

    @Test func templatesNeedTheirPlaceholders() {
        #expect(throws: TileCacheError.self) { try HTTPTileSource(url: "http://x/{z}/{x}.png") }
        #expect(throws: TileCacheError.self) { try HTTPTileSource(url: "ftp://x/MapServer") }
        let source = try? HTTPTileSource(url: "http://x/{level}/{row}/{col}", token: "a b")
        #expect(source?.url(for: TileKey(level: 3, row: 2, col: 1)) == "http://x/3/2/1?token=a%20b")
    }
}
