import Foundation
import OutpostCore
import OutpostHTTPTestSupport
import OutpostTestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `outpost serve` as operators meet it: damaged files among the served ones, and a SIGTERM in
/// the middle of a crew's sync.
@Suite("outpost serve: damaged files and drains")
struct ServeResilienceTests {
    static func get(_ url: String) async throws -> (status: Int, headers: [AnyHashable: Any], body: String) {
        let (data, response) = try await URLSession(configuration: .ephemeral).data(from: URL(string: url)!)
        let http = response as! HTTPURLResponse
        return (http.statusCode, http.allHeaderFields, String(decoding: data, as: UTF8.self))
    }

    /// A folder with the field-inspection service and a damaged file of every kind (a
    /// zero-filled locator, a truncated network, a GeoPackage of zeros, a broken tile package,
    /// geoprocessing service and map definition): the server starts, names each on stderr,
    /// serves the good service, lists the broken ones as unavailable in the catalog and its
    /// page, answers their requests with 503, and says so on /ready. `--strict` refuses to start.
    @Test(.scaledTimeLimit(minutes: 3))
    func oneDamagedFileDoesNotStopTheOtherServices() async throws {
        let dir = TemporaryDirectory()
        let services = dir.file("services")
        try FileManager.default.createDirectory(at: services, withIntermediateDirectories: true)
        let gpkg = services.appendingPathComponent("field_inspection.gpkg")
        #expect(try await outpost(["service", "create", Repository.sampleData("field_inspection").path, "--out", gpkg.path]).succeeded)
        let network = try await outpost(["network", "create", gpkg.path, "--layer", "pipelines", "--out", dir.file("pipes.network").path])
        #expect(network.succeeded, "\(network.stderr)")
        let whole = try Data(contentsOf: dir.file("pipes.network"))
        try whole.prefix(whole.count / 3).write(to: services.appendingPathComponent("pipes.network"))
        try Data(count: 65_536).write(to: services.appendingPathComponent("assets.locator"))
        try Data(count: 8_192).write(to: services.appendingPathComponent("zeros.gpkg"))
        try Data("PK\u{3}\u{4}not really".utf8).write(to: services.appendingPathComponent("basemap.tpkx"))
        try Data("{\"formatVersion\": 1, \"tasks\": [".utf8).write(to: services.appendingPathComponent("analysis.gp.json"))
        try Data("{".utf8).write(to: services.appendingPathComponent("crews.map.json"))
        let broken: [(name: String, type: String)] = [
            ("pipes", "NAServer"), ("assets", "GeocodeServer"), ("zeros", "FeatureServer"), ("basemap", "MapServer"), ("analysis", "GPServer"),
        ]

        let log = dir.file("serve.log")
        let server = try await ServeProcess.start(service: services, errorLog: log)
        let base = server.url.absoluteString
        // The good service answers.
        let query = try await Self.get("\(base)/arcgis/rest/services/field_inspection/FeatureServer/0/query?where=1%3D1&returnCountOnly=true&f=json")
        #expect(query.status == 200 && query.body.contains("\"count\":300"), "\(query.body)")
        // The catalog lists the broken ones, marked.
        let catalog = try JSONValue.parse(Data(try await Self.get("\(base)/arcgis/rest/services?f=json").body.utf8))
        let listed = catalog["services"]?.arrayValue ?? []
        for (name, type) in broken {
            #expect(listed.contains { $0["name"]?.stringValue == name && $0["type"]?.stringValue == type && $0["status"] == "unavailable" }, "\(name) \(type): \(listed)")
        }
        #expect(listed.contains { $0["name"] == "field_inspection" && $0["type"] == "FeatureServer" && $0["status"] == nil })
        let page = try await Self.get("\(base)/arcgis/rest/services?f=html")
        #expect(page.status == 200 && page.body.contains("unavailable: its file could not be opened"))
        // Their requests: 503 naming the file; a name never served stays 404.
        for (path, file) in [
            ("assets/GeocodeServer/findAddressCandidates?SingleLine=x&f=json", "assets.locator"), ("pipes/NAServer/Route?f=json", "pipes.network"),
            ("zeros/FeatureServer/0/query?where=1%3D1&f=json", "zeros.gpkg"), ("basemap/MapServer/tile/0/0/0", "basemap.tpkx"),
            ("analysis/GPServer?f=json", "analysis.gp.json"),
        ] {
            let answer = try await Self.get("\(base)/arcgis/rest/services/\(path)")
            #expect(answer.status == 503 && answer.body.contains(file), "\(path): \(answer.status) \(answer.body)")
        }
        #expect(try await Self.get("\(base)/arcgis/rest/maps/crews.json").status == 503)
        #expect(try await Self.get("\(base)/outpost/v1/locators/assets/file").status == 503)
        #expect(try await Self.get("\(base)/arcgis/rest/services/nothere/GeocodeServer?f=json").status == 404)
        // Readiness: degraded, with the list (no tokens on this server).
        let ready = try await Self.get("\(base)/ready")
        let readiness = try JSONValue.parse(Data(ready.body.utf8))
        #expect(ready.status == 200 && readiness["status"] == "degraded" && readiness["unavailable"] == 6, "\(ready.body)")
        #expect((readiness["unavailableServices"]?.arrayValue ?? []).contains { $0["file"] == "assets.locator" && $0["type"] == "GeocodeServer" })
        #expect(await server.stop() == 0)
        // The start named each, one line apiece.
        let lines = try String(contentsOf: log, encoding: .utf8).split(separator: "\n").filter { $0.contains("cannot be served") }
        for file in ["pipes.network", "assets.locator", "zeros.gpkg", "basemap.tpkx", "analysis.gp.json", "crews.map.json"] {
            #expect(lines.filter { $0.hasPrefix("outpost serve: \(file) (") }.count == 1, "\(file): \(lines)")
        }

        // --strict: exit 1, one line naming a damaged file; nothing listens.
        let strict = try await outpost(["serve", "--service", services.path, "--port", "0", "--strict"])
        #expect(strict.status == 1 && strict.stderr.hasPrefix("outpost: ") && strict.stderr.split(separator: "\n").count == 1, "\(strict.stderr)")
        #expect(broken.contains { strict.stderr.contains($0.name) } || strict.stderr.contains("crews.map.json"), "\(strict.stderr)")
        // A folder where nothing opens does not start either.
        let alone = dir.file("alone")
        try FileManager.default.createDirectory(at: alone, withIntermediateDirectories: true)
        try Data(count: 4_096).write(to: alone.appendingPathComponent("assets.locator"))
        let nothing = try await outpost(["serve", "--service", alone.path, "--port", "0"])
        #expect(nothing.status == 1 && nothing.stderr.contains("no service could be opened"), "\(nothing.stderr)")
    }

    /// SIGTERM reaches the server the moment a crew's batch is answered, and the crew's link is
    /// slow (its next request waits 1.5 s in a proxy): the server keeps listening and lets that
    /// sync finish (exit 0, both sides equal), answers other new requests — a query, another
    /// replica's feed, /ready — with 503 and Retry-After meanwhile, then exits 0.
    @Test(.scaledTimeLimit(minutes: 3))
    func aDrainLetsASyncThatHadBegunFinish() async throws {
        let dir = TemporaryDirectory()
        let services = dir.file("services")
        try FileManager.default.createDirectory(at: services, withIntermediateDirectories: true)
        #expect(try await outpost(["service", "create", Repository.sampleData("field_inspection").path, "--out", services.appendingPathComponent("field_inspection.gpkg").path]).succeeded)
        let log = dir.file("serve.log")
        let server = try await ServeProcess.start(service: services, environment: ["LOG_LEVEL": "info"], errorLog: log)
        final class Moments: Sendable {
            let state = Locked((terminated: false, delayed: false))
        }
        let moments = Moments()
        let process = server.process
        let proxy = try await LoopbackProxy.start(
            upstream: server.url,
            observer: { method, uri, _, status, _ in
                guard method == "PUT", uri.contains("/batches/"), status == 200 else { return }
                let first = moments.state.withLock { s in
                    defer { s.terminated = true }
                    return !s.terminated
                }
                if first { process.signal(SIGTERM) }
            },
            rule: { method, uri in
                // The first feed request after the SIGTERM crawls over a slow link.
                guard method == "GET", uri.contains("/changes") else { return .forward }
                let slow = moments.state.withLock { s in
                    defer { if s.terminated { s.delayed = true } }
                    return s.terminated && !s.delayed
                }
                return slow ? .delay(.milliseconds(1_500)) : .forward
            })
        defer { Task { try? await proxy.stop() } }
        let direct = server.featureServer("field_inspection").absoluteString
        let replica = dir.file("crew.gpkg").path, other = dir.file("other.gpkg").path
        for (file, url) in [(replica, proxy.url(for: server.featureServer("field_inspection")).absoluteString), (other, direct)] {
            let taken = try await outpost(["replica", "create", "--url", url, "--layers", "0", "--out", file])
            #expect(taken.succeeded, "\(taken.stderr)")
        }
        let otherID = try #require(JSONValue.parse(Data(try await outpost(["replica", "info", other, "--json"]).stdout.utf8))["replicaId"]?.stringValue)
        #expect(try await SyncCommandTests.sqlite(replica, "UPDATE inspection_points SET notes = 'during the drain' WHERE objectid = 1;").succeeded)

        async let sync = outpost(["sync", replica, "--json"])
        // Once the drain began (the SIGTERM went at the batch's answer), while the crew's feed
        // request crawls: everything else is refused, with Retry-After.
        var draining = false
        for _ in 0..<200 where !draining {
            try await Task.sleep(for: .milliseconds(10))
            if moments.state.withLock({ $0.terminated }), let ready = try? await Self.get("\(server.url.absoluteString)/ready"), ready.status == 503 {
                draining = ready.body.contains("draining")
            }
        }
        #expect(draining, "the server never said it was draining")
        let refused = try await Self.get("\(direct)/0/query?where=1%3D1&f=json")
        #expect(refused.status == 503 && (refused.headers["Retry-After"] as? String) == "5", "\(refused.status) \(refused.body)")
        let another = try await Self.get("\(server.url.absoluteString)/outpost/v1/services/field_inspection/replicas/\(otherID)/changes?layer=0&since=0&upto=0")
        #expect(another.status == 503, "a sync that had not begun is refused: \(another.status)")

        let finished = try await sync
        #expect(finished.status == 0, "\(finished.stderr)\n\((try? String(contentsOf: log, encoding: .utf8)) ?? "")")
        let summary = try JSONValue.parse(Data(finished.stdout.utf8))
        #expect(summary["uploaded"]?["updates"] == 1 && summary["checksumsMatch"] == true, "\(finished.stdout)")
        #expect(moments.state.withLock { $0.delayed }, "the feed request was not slowed")
        // Nothing under way any more: the server exits on its own, well within the drain period.
        let started = ContinuousClock.now
        while process.isRunning, ContinuousClock.now - started < .seconds(20) { try await Task.sleep(for: .milliseconds(50)) }
        #expect(!process.isRunning, "the server did not exit after the sync")
        #expect(process.wait() == 0)
    }
}
