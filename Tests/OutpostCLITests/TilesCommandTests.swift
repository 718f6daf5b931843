import Foundation
import OutpostCore

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import OutpostTestSupport
import OutpostHTTPTestSupport
import Testing

/// `outpost tiles` against a real HTTP tile server on loopback.
@Suite("outpost tiles")
struct TilesCommandTests {
    final class Requests: Sendable {
        let counts = Locked<[String: Int]>([:])
        var total: Int { counts.withLock { $0.values.reduce(0, +) } }
        var repeated: Int { counts.withLock { $0.values.filter { $0 > 1 }.count } }
    }

    /// Tile bytes that say which tile they are (bundles keep any bytes); row multiples of 11 are
    /// missing (404).
    static func tile(z: Int, x: Int, y: Int) -> Data? {
        y % 11 == 0 ? nil : Data("tile \(z)/\(y)/\(x) ".utf8 + [UInt8](repeating: UInt8(truncatingIfNeeded: x &* 7 &+ y), count: 2000))
    }

    static func server() async throws -> (LoopbackHTTPServer, Requests) {
        let requests = Requests()
        let server = try await LoopbackHTTPServer.start { request in
            let n = request.path.split(separator: "/").suffix(3).compactMap { Int($0.replacingOccurrences(of: ".png", with: "")) }
            guard n.count == 3 else { return .json("{}", status: 400) }
            requests.counts.withLock { $0[request.path, default: 0] += 1 }
            guard let body = tile(z: n[0], x: n[1], y: n[2]) else { return .json("missing", status: 404) }
            return LoopbackHTTPServer.Response(body: body, contentType: "image/png")
        }
        return (server, requests)
    }

    static let area = ["--extent", "-122.9,45.4,-122.4,45.7"]

    /// `--compression-quality` makes a MIXED cache, `--webp` a WebP MBTiles file; `--webp` into a
    /// tile package is refused with the reason and leaves nothing.
    @Test func compressionQualityAndWebPFromTheCommandLine() async throws {
        let dir = TemporaryDirectory()
        try SampleGeodatabases.fieldInspection(in: dir).close()
        let base = ["tiles", "export", "--url", dir.file("field.gpkg").path, "--extent=-122.70,45.49,-122.60,45.56", "--levels", "12-13"]
        for (out, flags, format) in [("mixed.tpkx", ["--compression-quality", "60"], "MIXED"), ("tiles.mbtiles", ["--webp"], "WEBP")] {
            let made = try await outpost(base + flags + ["--out", dir.file(out).path])
            #expect(made.succeeded, "\(made.stderr)")
            let inspect = try JSONValue.parse(try await outpost(["tiles", "inspect", dir.file(out).path, "--json"]).stdout)
            #expect(inspect["tileFormat"] == .string(format))
        }
        let refused = try await outpost(base + ["--webp", "--out", dir.file("webp.tpkx").path])
        #expect(!refused.succeeded && refused.stderr.contains("WebP tiles need an .mbtiles output"), "\(refused.stderr)")
        #expect(!FileManager.default.fileExists(atPath: dir.file("webp.tpkx").path))
    }

    @Test func estimateExportAndInspect() async throws {
        let (server, requests) = try await Self.server()
        defer { Task { try? await server.stop() } }
        let dir = TemporaryDirectory()
        let template = server.baseURL.absoluteString + "/tiles/{z}/{x}/{y}.png"
        let estimate = try await outpost(["tiles", "estimate", "--url", template] + Self.area + ["--levels", "10-13", "--json"])
        #expect(estimate.succeeded, "\(estimate.stderr)")
        let e = try JSONValue.parse(estimate.stdout)
        let count = try #require(e["tileCount"]?.integerValue)
        #expect(count > 100 && e["withinLimit"] == true && (e["fileSize"]?.integerValue ?? 0) > 0)

        let export = try await outpost(["tiles", "export", "--url", template] + Self.area + ["--levels", "10-13", "--out", dir.file("city.tpkx").path])
        #expect(export.succeeded, "\(export.stderr)")
        let inspect = try await outpost(["tiles", "inspect", dir.file("city.tpkx").path, "--json"])
        #expect(inspect.succeeded, "\(inspect.stderr)")
        let i = try JSONValue.parse(inspect.stdout)
        #expect(i["format"] == "tpkx" && i["levels"]?.arrayValue?.count == 4)
        let missing = try #require(i["tiles"]?.integerValue)
        #expect(missing < count && missing > count / 2)
        #expect(requests.repeated <= 24)  // the estimate's sample, asked again by the export

        // Over the limit: refused with the count, nothing fetched.
        let before = requests.total
        let big = try await outpost(["tiles", "export", "--url", template] + Self.area + ["--levels", "10-16", "--max-tiles", "500", "--out", dir.file("big.mbtiles").path])
        #expect(big.status == 1 && big.stderr.contains("more than the limit of 500"))
        #expect(requests.total == before)
        #expect(!FileManager.default.fileExists(atPath: dir.file("big.mbtiles").path))

        // A damaged cache is refused in one line.
        try Data("PK\u{3}\u{4}not really".utf8).write(to: dir.file("bad.tpkx"))
        let bad = try await outpost(["tiles", "inspect", dir.file("bad.tpkx").path])
        #expect(bad.status == 1 && bad.stderr.hasPrefix("outpost: ") && bad.stderr.split(separator: "\n").count == 1)

        // A package whose directory is whole but one bundle's tiles were cut short (an interrupted
        // copy repacked): exit 1 naming the bundle and a tile; --json lists the damage too.
        let short = dir.file("short.tpkx")
        let repack = try await ExternalTools.run(ExternalTools.python, ["-c", """
            import sys, zipfile
            src = zipfile.ZipFile(sys.argv[1])
            bundles = sorted(n for n in src.namelist() if n.endswith(".bundle"))
            victim = max(bundles, key=lambda n: src.getinfo(n).file_size)
            with zipfile.ZipFile(sys.argv[2], "w", zipfile.ZIP_STORED) as out:
                for i in src.infolist():
                    data = src.read(i.filename)
                    out.writestr(i.filename, data[:-3000] if i.filename == victim else data)
            print(victim)
            """, dir.file("city.tpkx").path, short.path])
        #expect(repack.succeeded, "\(repack.stderr)")
        let victim = repack.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let damaged = try await outpost(["tiles", "inspect", short.path])
        #expect(damaged.status == 1, "\(damaged.stdout)")
        #expect(damaged.stderr.hasPrefix("outpost: ") && damaged.stderr.split(separator: "\n").count == 1, "\(damaged.stderr)")
        #expect(damaged.stderr.contains(victim) && damaged.stderr.contains(", tile "), "\(damaged.stderr)")
        let damagedJSON = try await outpost(["tiles", "inspect", short.path, "--json"])
        #expect(damagedJSON.status == 1)
        let report = try JSONValue.parse(damagedJSON.stdout)
        #expect(report["damaged"]?[0]?["bundle"]?.stringValue?.hasSuffix(victim) == true)
        #expect(report["damaged"]?[0]?["tile"]?["level"]?.integerValue != nil)
        #expect(try JSONValue.parse((try await outpost(["tiles", "inspect", dir.file("city.tpkx").path, "--json"])).stdout)["damaged"] == [])
    }

    /// Killed (SIGKILL) after the finished cache was moved into place and before the job
    /// recorded its end: the same command checks the cache where it is and ends, fetching nothing.
    @Test func anExportKilledAfterItsMoveEndsWhenTheCommandRunsAgain() async throws {
        let (server, requests) = try await Self.server()
        defer { Task { try? await server.stop() } }
        let dir = TemporaryDirectory()
        let template = server.baseURL.absoluteString + "/{z}/{x}/{y}"
        let arguments = ["tiles", "export", "--url", template] + Self.area + ["--levels", "12-13", "--out", dir.file("out.tpkx").path]
        let killed = try await ExternalTools.run(Repository.outpostExecutable.path, arguments, environment: ["OUTPOST_FAULT": "tiles.afterMove:kill"])
        #expect(killed.status == 9 || killed.status == 137, "\(killed.status) \(killed.stderr)")
        #expect(FileManager.default.fileExists(atPath: dir.file("out.tpkx").path) && !FileManager.default.fileExists(atPath: dir.file("out.tpkx.partial").path))
        let fetched = requests.total
        let again = try await ExternalTools.run(Repository.outpostExecutable.path, arguments)
        #expect(again.succeeded && again.stderr.contains("resuming job"), "\(again.stderr)")
        #expect(requests.total == fetched)
        let inspect = try JSONValue.parse(try await outpost(["tiles", "inspect", dir.file("out.tpkx").path, "--json"]).stdout)
        #expect((inspect["tiles"]?.integerValue ?? 0) > 0)
    }

    /// A source that delivers 150 tiles and then holds every request (a link gone slow), the
    /// export killed (SIGKILL) after 1.5 s of waiting: what arrived was made durable on time
    /// while the export waited, so the same command, with the link back, fetches none of the
    /// delivered tiles again but those still in the reorder window, for each output format.
    @Test(arguments: ["out.mbtiles", "out.tpkx", "out-folder"])
    func anExportKilledWhileItsSourceStallsResumesWithWhatArrived(_ name: String) async throws {
        final class Link: Sendable {
            let state = Locked((delivered: Set<String>(), stalledAt: ContinuousClock.Instant?.none, open: false, asked: [String: Int]()))
        }
        let link = Link()
        let server = try await LoopbackHTTPServer.start { request in
            let n = request.path.split(separator: "/").suffix(3).compactMap { Int($0) }
            guard n.count == 3 else { return .json("{}", status: 400) }
            let deliver = link.state.withLock { s -> Bool in
                s.asked[request.path, default: 0] += 1
                guard s.open || s.delivered.count < 150 else {
                    if s.stalledAt == nil { s.stalledAt = .now }
                    return false
                }
                s.delivered.insert(request.path)
                return true
            }
            guard deliver else { return .held }
            guard let body = Self.tile(z: n[0], x: n[1], y: n[2]) else { return .json("missing", status: 404) }
            return LoopbackHTTPServer.Response(body: body, contentType: "image/png")
        }
        defer { Task { try? await server.stop() } }
        let dir = TemporaryDirectory()
        let arguments = [
            "tiles", "export", "--url", server.baseURL.absoluteString + "/{z}/{x}/{y}", "--levels", "0-7", "--extent=-12,34,32,61",
            "--concurrency", "4", "--out", dir.file(name).path,
        ]
        let export = try SpawnedProcess.spawn(Repository.outpostExecutable.path, arguments)
        var waited = false
        for _ in 0..<3_000 {
            if let stalled = link.state.withLock({ $0.stalledAt }), ContinuousClock.now - stalled >= .milliseconds(1_500) {
                waited = true
                break
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        export.signal(SIGKILL)
        export.wait()
        #expect(waited, "the export never stalled")
        let (before, deliveredBefore) = link.state.withLock { s in
            s.open = true
            return (s.asked, s.delivered)
        }
        #expect(deliveredBefore.count == 150)
        let again = try await ExternalTools.run(Repository.outpostExecutable.path, arguments)
        #expect(again.succeeded && again.stderr.contains("resuming job"), "\(again.stderr)")
        let (delivered, asked) = link.state.withLock { ($0.delivered, $0.asked) }
        let refetched = deliveredBefore.filter { (asked[$0] ?? 0) > (before[$0] ?? 0) }
        #expect(refetched.count <= 8, "\(refetched.count) of the tiles delivered before the kill were fetched again")
        let inspect = try JSONValue.parse(try await outpost(["tiles", "inspect", dir.file(name).path, "--json"]).stdout)
        let present = delivered.filter { key in
            let n = key.split(separator: "/").compactMap { Int($0) }
            return Self.tile(z: n[0], x: n[1], y: n[2]) != nil
        }
        #expect(inspect["tiles"]?.integerValue == Int64(present.count))
    }

    /// Killed (SIGKILL) right after a checkpoint, and again just before one; the same command
    /// then finishes the export, fetching only the tiles of the last 512 not yet durable. The
    /// third case has a whole-number extent, whose stored parameters read back as JSON integers:
    /// still the same command.
    @Test(arguments: [
        ("tiles.afterCheckpoint", Self.area, "12-15"), ("tiles.beforeCheckpoint", Self.area, "12-15"),
        ("tiles.afterCheckpoint", ["--extent=-123,45,-122,46"], "11-13"),
    ])
    func killedExportFinishesWhenTheCommandRunsAgain(_ point: String, _ area: [String], _ levels: String) async throws {
        let (server, requests) = try await Self.server()
        defer { Task { try? await server.stop() } }
        let dir = TemporaryDirectory()
        let template = server.baseURL.absoluteString + "/{z}/{x}/{y}"
        let arguments = ["tiles", "export", "--url", template] + area + ["--levels", levels, "--concurrency", "4", "--out", dir.file("out.mbtiles").path]
        let killed = try await ExternalTools.run(Repository.outpostExecutable.path, arguments, environment: ["OUTPOST_FAULT": "\(point):kill", "OUTPOST_TILE_CHECKPOINT_MS": "0"])
        #expect(killed.status == 9 || killed.status == 137, "\(killed.status) \(killed.stderr)")
        #expect(!FileManager.default.fileExists(atPath: dir.file("out.mbtiles").path))
        let fetchedBeforeKill = requests.total
        let again = try await ExternalTools.run(Repository.outpostExecutable.path, arguments, environment: ["OUTPOST_TILE_CHECKPOINT_MS": "0"])
        #expect(again.succeeded, "\(again.stderr)")
        #expect(again.stderr.contains("resuming job"))
        // At most one checkpoint's worth (512) plus the tiles in flight were asked twice.
        #expect(requests.repeated <= 512 + 8, "\(requests.repeated) of \(fetchedBeforeKill) asked again")
        let inspect = try await outpost(["tiles", "inspect", dir.file("out.mbtiles").path, "--json"])
        let summary = try JSONValue.parse(inspect.stdout)
        let expected = requests.counts.withLock { $0.keys.filter { key in
            let n = key.split(separator: "/").compactMap { Int($0) }
            return Self.tile(z: n[0], x: n[1], y: n[2]) != nil
        }.count }
        #expect(summary["tiles"]?.integerValue == Int64(expected))
        // Once more, as after a kill between the job's last save and the process's exit: the
        // command reports the finished export, it neither refuses the file nor fetches again.
        let fetched = requests.total
        let finished = try await ExternalTools.run(Repository.outpostExecutable.path, arguments)
        #expect(finished.succeeded && finished.stderr.contains("already made"), "\(finished.stderr)")
        #expect(requests.total == fetched)
    }
}

@Suite("outpost serve: tiled map services")
struct MapServerTests {
    /// A .tpkx beside the services is a MapServer; its tiles export from there like from any
    /// tiled service.
    @Test func servesATilePackageAndExportsFromIt() async throws {
        let (source, _) = try await TilesCommandTests.server()
        defer { Task { try? await source.stop() } }
        let dir = TemporaryDirectory()
        let services = dir.file("services")
        try FileManager.default.createDirectory(at: services, withIntermediateDirectories: true)
        let made = try await outpost([
            "tiles", "export", "--url", source.baseURL.absoluteString + "/{z}/{x}/{y}", "--extent", "-122.8,45.45,-122.5,45.65", "--levels", "9-13",
            "--out", services.appendingPathComponent("basemap.tpkx").path,
        ])
        #expect(made.succeeded, "\(made.stderr)")
        let server = try await ServeProcess.start(service: services)
        defer { Task { _ = await server.stop() } }
        let mapServer = server.url.appendingPathComponent("arcgis/rest/services/basemap/MapServer")

        let (infoData, infoResponse) = try await URLSession.shared.data(from: URL(string: mapServer.absoluteString + "?f=json")!)
        #expect((infoResponse as? HTTPURLResponse)?.statusCode == 200)
        let info = try JSONValue.parse(infoData)
        #expect(info["tileInfo"]?["lods"]?.arrayValue?.count == 24 && info["minLOD"] == 9 && info["maxLOD"] == 13)
        #expect(info["singleFusedMapCache"] == true)
        let catalog = try JSONValue.parse(try await URLSession.shared.data(from: URL(string: server.url.absoluteString + "/arcgis/rest/services?f=json")!).0)
        #expect(catalog["services"]?.arrayValue?.contains(["name": "basemap", "type": "MapServer"]) == true)

        // A tile, a missing one, and a malformed request.
        let key = (z: 13, x: 1_305, y: 2_929)  // (-122.65, 45.55)
        let (tileData, tileResponse) = try await URLSession.shared.data(from: mapServer.appendingPathComponent("tile/\(key.z)/\(key.y)/\(key.x)"))
        #expect((tileResponse as? HTTPURLResponse)?.statusCode == 200)
        #expect(tileData == TilesCommandTests.tile(z: key.z, x: key.x, y: key.y))
        let missing = try await URLSession.shared.data(from: mapServer.appendingPathComponent("tile/3/0/0"))
        #expect((missing.1 as? HTTPURLResponse)?.statusCode == 404)
        let bad = try await URLSession.shared.data(from: mapServer.appendingPathComponent("tile/x/0/0"))
        #expect((bad.1 as? HTTPURLResponse)?.statusCode == 400 && String(decoding: bad.0, as: UTF8.self).contains("non-negative integers"))

        // Exported again from our own MapServer, into MBTiles: the same tiles.
        let again = try await outpost([
            "tiles", "export", "--url", mapServer.absoluteString, "--extent", "-122.8,45.45,-122.5,45.65", "--levels", "11-13", "--out", dir.file("copy.mbtiles").path,
            "--json",
        ])
        #expect(again.succeeded, "\(again.stderr)")
        let a = try JSONValue.parse(try await outpost(["tiles", "inspect", services.appendingPathComponent("basemap.tpkx").path, "--json"]).stdout)
        let b = try JSONValue.parse(try await outpost(["tiles", "inspect", dir.file("copy.mbtiles").path, "--json"]).stdout)
        let levelsA = a["levels"]?.arrayValue?.filter { ($0["level"]?.integerValue ?? 0) >= 11 }.map { $0["tiles"] }
        #expect(levelsA == b["levels"]?.arrayValue?.map { $0["tiles"] })
    }
}

extension MapServerTests {
    /// `outpost serve` over a directory holding the sample field-inspection service as `field`.
    static func serveSample(in dir: TemporaryDirectory) async throws -> ServeProcess {
        let services = dir.file("services")
        try FileManager.default.createDirectory(at: services, withIntermediateDirectories: true)
        let created = try await outpost(["service", "create", Repository.sampleData("field_inspection").path, "--out", services.appendingPathComponent("field.gpkg").path])
        #expect(created.succeeded, "\(created.stderr)")
        return try await ServeProcess.start(service: services)
    }

    /// A feature service's layers drawn as tiles: PNGs that change when the data does.
    @Test func featureServicesHaveADrawnMapServer() async throws {
        let dir = TemporaryDirectory()
        let server = try await Self.serveSample(in: dir)
        defer { Task { _ = await server.stop() } }
        let base = server.url.appendingPathComponent("arcgis/rest/services/field")
        let info = try JSONValue.parse(try await URLSession.shared.data(from: URL(string: base.appendingPathComponent("MapServer").absoluteString + "?f=json")!).0)
        #expect(info["tileInfo"]?["rows"] == 256 && info["fullExtent"]?["xmin"]?.doubleValue != nil)

        // The tile at level 16 holding inspection point 1.
        let query = try JSONValue.parse(try await URLSession.shared.data(from: URL(string: base.appendingPathComponent("FeatureServer/0/query").absoluteString + "?objectIds=1&outSR=4326&f=json")!).0)
        let lon = try #require(query["features"]?[0]?["geometry"]?["x"]?.doubleValue), lat = try #require(query["features"]?[0]?["geometry"]?["y"]?.doubleValue)
        let n = Double(1 << 16)
        let col = Int((lon + 180) / 360 * n), row = Int((1 - log(tan(lat * .pi / 180) + 1 / cos(lat * .pi / 180)) / .pi) / 2 * n)
        let tileURL = base.appendingPathComponent("MapServer/tile/16/\(row)/\(col)")
        let (first, response) = try await URLSession.shared.data(from: tileURL)
        #expect((response as? HTTPURLResponse)?.statusCode == 200 && [UInt8](first.prefix(4)) == [0x89, 0x50, 0x4E, 0x47])
        #expect(try await URLSession.shared.data(from: tileURL).0 == first)  // kept
        // Delete the point: the tile is drawn again, without it.
        var request = URLRequest(url: base.appendingPathComponent("FeatureServer/0/applyEdits"))
        request.httpMethod = "POST"
        request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
        request.httpBody = Data("deletes=1&f=json".utf8)
        let deleted = try JSONValue.parse(try await URLSession.shared.data(for: request).0)
        #expect(deleted["deleteResults"]?[0]?["success"] == true)
        let after = try await URLSession.shared.data(from: tileURL).0
        #expect(after != first && [UInt8](after.prefix(4)) == [0x89, 0x50, 0x4E, 0x47])
        let outside = try await URLSession.shared.data(from: base.appendingPathComponent("MapServer/tile/3/9/0"))
        #expect((outside.1 as? HTTPURLResponse)?.statusCode == 400)
    }
}

extension MapServerTests {
    func json(_ url: String) async throws -> JSONValue { try JSONValue.parse(try await URLSession.shared.data(from: URL(string: url)!).0) }

    /// exportTiles and estimateExportTilesSize as server-side jobs, for clients that want the
    /// server to build the package.
    @Test func theServerExportsAPackageAsAJob() async throws {
        let dir = TemporaryDirectory()
        let server = try await Self.serveSample(in: dir)
        defer { Task { _ = await server.stop() } }
        let mapServer = server.url.absoluteString + "/arcgis/rest/services/field/MapServer"
        let extent = "-13658000,5700000,-13645000,5710000"  // central Portland, Web Mercator

        func finished(_ submitted: JSONValue) async throws -> JSONValue {
            let status = try #require(submitted["statusUrl"]?.stringValue)
            for _ in 0..<300 {
                let s = try await json(status + "?f=json")
                if s["status"]?.stringValue != "Pending" && s["status"]?.stringValue != "InProgress" { return s }
                try await Task.sleep(for: .milliseconds(100))
            }
            Issue.record("the job did not finish")
            return .null
        }
        let estimate = try await finished(try await json("\(mapServer)/estimateExportTilesSize?levels=12-14&exportExtent=\(extent)&f=json"))
        #expect(estimate["status"] == "Completed", "\(estimate)")
        let tiles = try #require(estimate["totalTilesToExport"]?.integerValue)
        #expect(tiles > 10 && (estimate["totalSize"]?.integerValue ?? 0) > 0)

        let export = try await finished(try await json("\(mapServer)/exportTiles?levels=12-14&exportExtent=\(extent)&tilePackage=true&f=json"))
        #expect(export["status"] == "Completed", "\(export)")
        let result = try #require(export["resultUrl"]?.stringValue)
        let package = try await URLSession.shared.data(from: URL(string: result)!).0
        try package.write(to: dir.file("server.tpkx"))
        let inspect = try JSONValue.parse(try await outpost(["tiles", "inspect", dir.file("server.tpkx").path, "--json"]).stdout)
        #expect(inspect["tiles"]?.integerValue == tiles && inspect["levels"]?.arrayValue?.count == 3)

        let bad = try await URLSession.shared.data(from: URL(string: "\(mapServer)/exportTiles?levels=a-b&f=json")!)
        #expect((bad.1 as? HTTPURLResponse)?.statusCode == 400)
        let tooMany = try await finished(try await json("\(mapServer)/exportTiles?levels=0-19&exportExtent=-13800000,5500000,-13500000,5900000&f=json"))
        #expect(tooMany["status"] == "Failed")

        // A cancelled export ends as Cancelled (not Failed), soon.
        let long = try await json("\(mapServer)/exportTiles?levels=10-17&exportExtent=-13680000,5690000,-13630000,5730000&f=json")
        let id = try #require(long["jobId"]?.stringValue)
        #expect(try await json("\(mapServer)/jobs/\(id)/cancel?f=json")["success"] == true)
        #expect(try await finished(long)["status"] == "Cancelled")
    }
}

extension MapServerTests {
    /// A tile package served as a MapServer draws `export` images by mosaicking its tiles: an
    /// image of exactly one tile's area and size is that tile, pixel for pixel; identify and
    /// find say there are no features to ask about.
    @Test func aTileCacheServiceExportsImagesFromItsTiles() async throws {
        let dir = TemporaryDirectory()
        let sample = try await Self.serveSample(in: dir)
        defer { Task { _ = await sample.stop() } }
        let cached = dir.file("cached")
        try FileManager.default.createDirectory(at: cached, withIntermediateDirectories: true)
        let made = try await outpost([
            "tiles", "export", "--url", sample.url.absoluteString + "/arcgis/rest/services/field/MapServer", "--extent=-122.70,45.49,-122.60,45.56",
            "--levels", "12-14", "--out", cached.appendingPathComponent("basemap.tpkx").path,
        ])
        #expect(made.succeeded, "\(made.stderr)")
        let server = try await ServeProcess.start(service: cached)
        defer { Task { _ = await server.stop() } }
        let map = server.url.absoluteString + "/arcgis/rest/services/basemap/MapServer"

        let info = try await json(map + "?f=json")
        #expect(info["layers"]?[0]?["type"] == "Raster Layer" && info["capabilities"] == "Map")
        // Tile (14, 5861, 2610) holds part of the sample; its area, at 256×256, is the tile.
        let (level, row, col) = (14, 5861, 2610)
        let span = 156_543.033_928 / Double(1 << level) * 256, origin = 20_037_508.342_789_244
        let bbox = "\(-origin + Double(col) * span),\(origin - Double(row + 1) * span),\(-origin + Double(col + 1) * span),\(origin - Double(row) * span)"
        let tile = try await URLSession.shared.data(from: URL(string: "\(map)/tile/\(level)/\(row)/\(col)")!).0
        let image = try await URLSession.shared.data(from: URL(string: "\(map)/export?bbox=\(bbox)&size=256,256&f=image")!).0
        let pixels = try await ExternalTools.python(
            """
            import sys, numpy
            from PIL import Image
            # Tiles may be indexed PNGs and exports RGBA ones: compare their RGBA pixels.
            a, b = (numpy.asarray(Image.open(p).convert("RGBA")) for p in sys.argv[1:3])
            print(a.shape == b.shape and bool((a == b).all()), int(a.std()))
            """, [try Self.save(tile, dir.file("tile.png")), try Self.save(image, dir.file("export.png"))])
        #expect(pixels.stdout.hasPrefix("True"), "the export is the tile: \(pixels.stdout) \(pixels.stderr)")
        #expect((Int(pixels.stdout.split(separator: " ").last?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "") ?? 0) > 5, "and it is not blank")
        let identify = try await URLSession.shared.data(from: URL(string: "\(map)/identify?geometry=0,0&mapExtent=\(bbox)&imageDisplay=256,256,96&f=json")!)
        #expect((identify.1 as? HTTPURLResponse)?.statusCode == 400)
    }

    static func save(_ data: Data, _ url: URL) throws -> String {
        try data.write(to: url)
        return url.path
    }
}
