import Foundation
import OutpostCore
import OutpostHTTPTestSupport
import OutpostTestSupport
import Synchronization
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `outpost serve` as operators meet it: damaged files among the served ones.
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
    @Test(.timeLimit(.minutes(3)))
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
}
