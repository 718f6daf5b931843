import Foundation
import OutpostCore
import OutpostStorage
import OutpostTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Offline maps (`outpost offline create|sync|status`): a map of two services and a basemap taken
/// offline in one job, read by GDAL, synced in one job, and both jobs killed at random moments.
@Suite("outpost offline")
struct OfflineMapTests {
    /// The field-inspection and Natural Earth services and the sample map definition served from
    /// `directory/services`: the server and the map's URL.
    static func served(in dir: TemporaryDirectory, map: String = "field-crews.map.json", arguments: [String] = []) async throws -> (ServeProcess, String) {
        let services = dir.file("services")
        try FileManager.default.createDirectory(at: services, withIntermediateDirectories: true)
        for name in ["field_inspection", "natural_earth"] {
            let created = try await outpost(["service", "create", Repository.sampleData(name).path, "--out", services.appendingPathComponent("\(name).gpkg").path])
            #expect(created.succeeded, "\(created.stderr)")
        }
        // The map's locator (assets by id) and network (the pipes), served beside the services.
        let gpkg = services.appendingPathComponent("field_inspection.gpkg").path
        let locator = try await outpost(["locator", "create", gpkg, "--layer", "inspection_points", "--fields", "name=asset_id", "--out", services.appendingPathComponent("assets.locator").path])
        #expect(locator.succeeded, "\(locator.stderr)")
        let network = try await outpost(["network", "create", gpkg, "--layer", "pipelines", "--name-field", "pipe_id", "--out", services.appendingPathComponent("pipes.network").path])
        #expect(network.succeeded, "\(network.stderr)")
        try FileManager.default.copyItem(at: Repository.schema("examples/field-crews.map.json"), to: services.appendingPathComponent(map))
        let server = try await ServeProcess.start(service: services, arguments: arguments)
        return (server, "\(server.url.absoluteString)/arcgis/rest/maps/\(map.replacingOccurrences(of: ".map.json", with: "")).json")
    }

    static let area = ["--extent", "-122.70,45.49,-122.64,45.53", "--max-scale", "70000"]

    static func status(_ folder: URL, check: Bool = false) async throws -> JSONValue {
        let result = try await outpost(["offline", "status", folder.path, "--json"] + (check ? ["--check"] : []))
        #expect(result.succeeded, "\(result.stderr)")
        return try JSONValue.parse(Data(result.stdout.utf8))
    }

    /// A layer's features on the server whose `field` is `value`.
    static func serverCount(_ featureServer: String, layer: Int, where clause: String) async throws -> Int {
        let encoded = clause.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? clause
        let answer = try await ExternalTools.run("curl", ["-s", "\(featureServer)/\(layer)/query?where=\(encoded)&returnCountOnly=true&f=json"])
        return Int(try JSONValue.parse(Data(answer.stdout.utf8))["count"]?.integerValue ?? -1)
    }

    /// Runs `outpost` and kills it (SIGKILL) after `delay` unless it ended first: true when it
    /// ended on its own with exit status 0. The wait runs on a thread of its own, so the kill
    /// comes on time however busy the test's concurrency pool is.
    static func runOrKill(_ arguments: [String], after delay: Duration, environment: [String: String] = [:]) async throws -> Bool {
        let process = try SpawnedProcess.spawn(Repository.outpostExecutable.path, arguments, environment: environment)
        let milliseconds = Int(delay.components.seconds * 1000 + delay.components.attoseconds / 1_000_000_000_000_000)
        return await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                let deadline = Date().addingTimeInterval(Double(milliseconds) / 1000)
                while process.isRunning, Date() < deadline { usleep(2_000) }
                process.signal(SIGKILL)
                let status = process.wait()
                continuation.resume(returning: !process.endedBySignal && status == 0)
            }
        }
    }

    @Test(.scaledTimeLimit(minutes: 4))
    func anOfflineMapOfTwoServicesAndABasemapOpensInGDALAndSyncsInOneJob() async throws {
        let dir = TemporaryDirectory()
        let (server, mapURL) = try await Self.served(in: dir)
        defer { Task { await server.stop() } }
        let fieldInspection = server.featureServer("field_inspection").absoluteString, naturalEarth = server.featureServer("natural_earth").absoluteString

        // The served definition validates against the schema, with its URLs made absolute.
        let served = dir.file("served.json")
        #expect(try await ExternalTools.run("curl", ["-s", "-o", served.path, mapURL]).succeeded)
        #expect(try JSONValue.parse(Data(contentsOf: served))["operationalLayers"]?[0]?["url"]?.stringValue == "\(fieldInspection)/0")

        let folder = dir.file("crew-map")
        let created = try await outpost(["offline", "create", "--map", mapURL] + Self.area + ["--out", folder.path, "--json"])
        #expect(created.succeeded, "\(created.stderr)")
        let summary = try JSONValue.parse(Data(created.stdout.utf8))
        #expect(summary["layerErrors"] == [])
        #expect(summary["replicas"]?.arrayValue?.map { $0["file"]?.stringValue } == ["data/field_inspection.gpkg", "data/natural_earth.gpkg"])
        #expect(summary["basemap"] == "basemap.tpkx")
        #expect(summary["locators"] == ["locators/assets.locator"] && summary["networks"] == ["networks/pipes.network"], "\(summary)")
        // The copies are the served files, byte for byte, and work offline.
        for (copy, original) in [("locators/assets.locator", "assets.locator"), ("networks/pipes.network", "pipes.network")] {
            #expect(try Data(contentsOf: folder.appendingPathComponent(copy)) == Data(contentsOf: dir.file("services/\(original)")), "\(copy)")
        }
        // The file route continues a broken download where it ended (Range), and says when
        // there is nothing left.
        let whole = try Data(contentsOf: dir.file("services/assets.locator"))
        let tail = dir.file("tail.bin")
        let ranged = try await ExternalTools.run(
            "curl", ["-s", "-o", tail.path, "-w", "%{http_code}", "-r", "1000-", "\(server.url.absoluteString)/outpost/v1/locators/assets/file"])
        let tailBytes = try Data(contentsOf: tail)
        #expect(ranged.stdout == "206" && tailBytes == whole.dropFirst(1000), "\(ranged.stdout)")
        let past = try await ExternalTools.run("curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "-r", "\(whole.count)-", "\(server.url.absoluteString)/outpost/v1/locators/assets/file"])
        #expect(past.stdout == "416")
        // With If-Range: the tag the bytes came with continues; another tag (the file changed)
        // gets the whole file again.
        let fileURL = "\(server.url.absoluteString)/outpost/v1/locators/assets/file"
        let head = try await ExternalTools.run("curl", ["-s", "-o", "/dev/null", "-D", "-", fileURL])
        let tag = try #require(head.stdout.split(separator: "\r\n").first { $0.lowercased().hasPrefix("etag:") }).dropFirst(5).trimmingCharacters(in: .whitespaces)
        let same = try await ExternalTools.run("curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "-r", "1000-", "-H", "If-Range: \(tag)", fileURL])
        let changed = try await ExternalTools.run("curl", ["-s", "-o", tail.path, "-w", "%{http_code}", "-r", "1000-", "-H", "If-Range: \"0-0\"", fileURL])
        let refetched = try Data(contentsOf: tail)
        #expect(same.stdout == "206" && changed.stdout == "200" && refetched == whole, "\(same.stdout) \(changed.stdout)")
        let found = try await outpost(["geocode", folder.appendingPathComponent("locators/assets.locator").path, "HY-1000", "--json"])
        #expect(found.succeeded && found.stdout.contains("HY-1000"), "\(found.stderr)")
        #expect(!FileManager.default.fileExists(atPath: folder.path + ".partial"), "the folder being built is gone once the map is in place")

        // Both documents are what the schema says; the offline one points at local files.
        let schema = try await ExternalTools.checkJSONSchema(
            Repository.schema("map.schema.json"), valid: [
                served, folder.appendingPathComponent("map.json"), Repository.schema("examples/field-crews.map.json"),
                Repository.sampleData("maps/helsinki-crews.map.json"),
            ],
            invalid: [["formatVersion": 2, "title": "x", "operationalLayers": []], ["formatVersion": 1, "title": "x", "operationalLayers": [["id": "a", "title": "a", "url": "u", "file": "/etc/passwd"]]]])
        #expect(schema.succeeded, "\(schema.stderr)")

        // GDAL opens every file: the replicas as GeoPackages with their layers, the basemap as a
        // Compact Cache tile package (ESRIC, GDAL ≥ 3.8, through rasterio).
        for (file, layers) in [("field_inspection", ["inspection_points", "pipelines", "service_areas", "inspection_log"]), ("natural_earth", ["countries", "populated_places"])] {
            let info = try await ExternalTools.run("ogrinfo", ["-ro", "-so", "-q", folder.appendingPathComponent("data/\(file).gpkg").path])
            #expect(info.succeeded, "\(info.stderr)")
            for layer in layers { #expect(info.stdout.contains(layer), "\(file): \(info.stdout)") }
        }
        let raster = try await ExternalTools.python(
            """
            import sys, rasterio
            d = rasterio.open(sys.argv[1])
            assert d.driver == "ESRIC", d.driver
            assert d.width > 256 and d.height > 256 and d.count == 4, (d.width, d.height, d.count)
            assert d.read(4).max() == 255, "the basemap has drawn pixels"
            print(len(d.overviews(1)))
            """, [folder.appendingPathComponent("basemap.tpkx").path])
        #expect(raster.succeeded, "\(raster.stderr)")

        // Edits on both sides of both services.
        let gpkg = { (name: String) in folder.appendingPathComponent("data/\(name).gpkg").path }
        #expect(
            try await SyncCommandTests.sqlite(
                gpkg("field_inspection"),
                "INSERT INTO inspection_points (asset_id, asset_type, condition, status, geom) VALUES ('OFFLINE-1', 'hydrant', 3, 'open', AsGPB(GeomFromText('POINT(-122.66 45.51)', 4326)));"
            ).succeeded)
        #expect(
            try await SyncCommandTests.sqlite(
                gpkg("natural_earth"),
                "INSERT INTO populated_places (name, geom) VALUES ('Crew camp', AsGPB(GeomFromText('POINT(-122.67 45.50)', 4326)));"
            ).succeeded)
        let office = try await applyEdits(
            fieldInspection, layer: 0, "adds",
            #"[{"geometry":{"x":-122.68,"y":45.52,"spatialReference":{"wkid":4326}},"attributes":{"asset_id":"OFFICE-1","asset_type":"valve","condition":1,"status":"open"}}]"#)
        #expect(office["addResults"]?[0]?["success"] == true, "\(office)")
        let officePlace = try await applyEdits(
            naturalEarth, layer: 1, "adds", #"[{"geometry":{"x":-122.65,"y":45.52,"spatialReference":{"wkid":4326}},"attributes":{"name":"Office depot"}}]"#)
        #expect(officePlace["addResults"]?[0]?["success"] == true, "\(officePlace)")

        let before = try await Self.status(folder, check: true)
        #expect(before["replicas"]?.arrayValue?.allSatisfy { $0["updatesAvailable"] == true } == true, "\(before)")
        #expect(before["replicas"]?.arrayValue?.map { $0["pending"]?["inserts"] } == [1, 1])

        // One job syncs both.
        let synced = try await outpost(["offline", "sync", folder.path, "--json"])
        #expect(synced.succeeded, "\(synced.stderr)")
        let result = try JSONValue.parse(Data(synced.stdout.utf8))
        for replica in result["replicas"]?.arrayValue ?? [] {
            #expect(replica["error"] == .null && replica["uploaded"]?["inserts"] == 1 && replica["downloaded"]?["inserts"] == 1, "\(replica)")
        }
        #expect(result["replicas"]?.arrayValue?.count == 2)
        #expect(try await Self.serverCount(fieldInspection, layer: 0, where: "asset_id = 'OFFLINE-1'") == 1)
        #expect(try await Self.serverCount(naturalEarth, layer: 1, where: "name = 'Crew camp'") == 1)
        let local = try await SyncCommandTests.sqlite(
            gpkg("field_inspection"), "SELECT count(*) FROM inspection_points WHERE asset_id IN ('OFFICE-1', 'OFFLINE-1');")
        #expect(local.stdout.split(separator: "\n").last == "2", "\(local.stdout)")
        let after = try await Self.status(folder, check: true)
        #expect(after["replicas"]?.arrayValue?.allSatisfy { $0["updatesAvailable"] == false && $0["lastSync"] != .null } == true, "\(after)")
        #expect(after["replicas"]?.arrayValue?.map { $0["pending"]?["inserts"] } == [0, 0])

        // The same command again reports the map its job made; another map into the same folder
        // is refused. The first is untouched either way.
        let mapFile = folder.appendingPathComponent("map.json")
        let made = try Data(contentsOf: mapFile)
        let repeated = try await outpost(["offline", "create", "--map", mapURL] + Self.area + ["--out", folder.path])
        #expect(repeated.succeeded && repeated.stderr.contains("already made"), "\(repeated.stderr)")
        let other = try await outpost(["offline", "create", "--map", mapURL, "--extent", "-122.69,45.50,-122.65,45.52", "--out", folder.path])
        #expect(!other.succeeded && other.stderr.contains("is not empty"), "\(other.stderr)")
        #expect(try Data(contentsOf: mapFile) == made)
    }

    /// Layers that cannot go offline are reported and the rest is kept; --strict fails instead,
    /// leaving nothing behind and no replica registered.
    @Test(.scaledTimeLimit(minutes: 3))
    func layerErrorsAreReportedAndTheRestGoesOffline() async throws {
        let dir = TemporaryDirectory()
        let (server, _) = try await Self.served(in: dir)
        defer { Task { await server.stop() } }
        // A map the server does not have is a 404 with the ArcGIS error body.
        let missing = try await ExternalTools.run("curl", ["-s", "-w", "\n%{http_code}", "\(server.url.absoluteString)/arcgis/rest/maps/nope.json"])
        #expect(missing.stdout.hasSuffix("\n404") && missing.stdout.contains("\"error\""), "\(missing.stdout)")
        // A browser gets the Services Directory's page of a map definition.
        let page = try await ExternalTools.run("curl", ["-s", "-H", "Accept: text/html", "\(server.url.absoluteString)/arcgis/rest/maps/field-crews.json"])
        #expect(page.stdout.contains("<html") && page.stdout.contains("Field crews") && page.stdout.contains("south-west"), "\(page.stdout.prefix(300))")
        var map = try JSONValue.parse(Data(contentsOf: Repository.schema("examples/field-crews.map.json"))).objectValue ?? [:]
        var layers = map["operationalLayers"]?.arrayValue ?? []
        layers.append(["id": "missing_layer", "title": "Gone", "url": "field_inspection/FeatureServer/9"])
        layers.append(["id": "bad_filter", "title": "Bad filter", "url": "field_inspection/FeatureServer/1", "where": "no_such_column = 1"])
        layers.append(["id": "no_service", "title": "Elsewhere", "url": "nowhere/FeatureServer/0"])
        map["operationalLayers"] = .array(layers)
        map["servicesUrl"] = .string("\(server.url.absoluteString)/arcgis/rest/services/")
        let file = dir.file("map.json")
        try Data(JSONValue.object(map).jsonString.utf8).write(to: file)

        let folder = dir.file("crew-map")
        let created = try await outpost(["offline", "create", "--map", file.path] + Self.area + ["--skip", "places", "--no-basemap", "--out", folder.path, "--json"])
        #expect(created.succeeded, "\(created.stderr)")
        let summary = try JSONValue.parse(Data(created.stdout.utf8))
        let errors = Dictionary(uniqueKeysWithValues: (summary["layerErrors"]?.arrayValue ?? []).map { ($0["layer"]?.stringValue ?? "", $0["message"]?.stringValue ?? "") })
        #expect(Set(errors.keys) == ["missing_layer", "bad_filter", "no_service"], "\(errors)")
        #expect(errors["missing_layer"]?.contains("no layer 9") == true && errors["no_service"]?.contains("nowhere") == true, "\(errors)")
        #expect(summary["basemap"] == .null)
        let offline = try JSONValue.parse(Data(contentsOf: folder.appendingPathComponent("map.json")))
        let ids = offline["operationalLayers"]?.arrayValue?.compactMap { $0["id"]?.stringValue }
        #expect(ids == ["inspection_points", "pipelines", "service_areas", "inspection_log", "countries"], "skipped and failed layers are not in the offline map")

        // --strict: the first error fails the job before anything is made.
        let strictFolder = dir.file("strict-map")
        let strict = try await outpost(["offline", "create", "--map", file.path] + Self.area + ["--strict", "--out", strictFolder.path])
        #expect(!strict.succeeded && strict.stderr.contains("no layer 9"), "\(strict.stderr)")
        #expect(!FileManager.default.fileExists(atPath: strictFolder.path) && !FileManager.default.fileExists(atPath: strictFolder.path + ".partial"))
        // A name that is not a layer of the map is refused by name.
        let unknown = try await outpost(["offline", "create", "--map", file.path] + Self.area + ["--skip", "nope", "--out", dir.file("x").path])
        #expect(!unknown.succeeded && unknown.stderr.contains("nope, which is not a layer of the map"), "\(unknown.stderr)")
    }

    /// A service that takes no edits goes offline as a replica that only downloads, or with
    /// --read-only-snapshot as a copy the service does not register; --schema-only leaves a layer
    /// empty.
    @Test(.scaledTimeLimit(minutes: 3))
    func readOnlyServicesGoOfflineAsDownloadReplicasOrSnapshots() async throws {
        let dir = TemporaryDirectory()
        let services = dir.file("services")
        try FileManager.default.createDirectory(at: services, withIntermediateDirectories: true)
        var schema = try JSONValue.parse(Data(contentsOf: Repository.sampleData("natural_earth").appendingPathComponent("service.json"))).objectValue ?? [:]
        schema["name"] = "places_ro"
        schema["capabilities"] = ["Query", "Sync"]
        try Data(JSONValue.object(schema).jsonString.utf8).write(to: dir.file("service.json"))
        let created = try await outpost([
            "service", "create", "--schema", dir.file("service.json").path, "--data", Repository.sampleData("natural_earth").appendingPathComponent("data").path,
            "--out", services.appendingPathComponent("places_ro.gpkg").path,
        ])
        #expect(created.succeeded, "\(created.stderr)")
        let map: JSONValue = [
            "formatVersion": 1, "title": "Read only",
            "operationalLayers": [["id": "places", "title": "Places", "url": "places_ro/FeatureServer/1"], ["id": "countries", "title": "Countries", "url": "places_ro/FeatureServer/0"]],
        ]
        try Data(map.jsonString.utf8).write(to: services.appendingPathComponent("ro.map.json"))
        let server = try await ServeProcess.start(service: services)
        defer { Task { await server.stop() } }
        let mapURL = "\(server.url.absoluteString)/arcgis/rest/maps/ro.json", featureServer = server.featureServer("places_ro").absoluteString
        let area = ["--extent", "-130,30,-100,50"]

        let replica = try await outpost(["offline", "create", "--map", mapURL] + area + ["--out", dir.file("replica").path, "--json"])
        #expect(replica.succeeded, "\(replica.stderr)")
        let first = try JSONValue.parse(Data(replica.stdout.utf8))["replicas"]?[0]
        #expect(first?["readOnly"] == true && first?["snapshot"] == false && first?["replicaId"] != .null, "\(String(describing: first))")
        let synced = try await outpost(["offline", "sync", dir.file("replica").path, "--json"])
        #expect(synced.succeeded, "\(synced.stderr)")
        #expect(try JSONValue.parse(Data(synced.stdout.utf8))["replicas"]?[0]?["error"] == .null)
        #expect(try await Self.registeredReplicas(featureServer) == 1)
        // Its attachments follow the layers: downloaded with them.
        let direction = try await ExternalTools.run(
            "sqlite3", [dir.file("replica/data/places_ro.gpkg").path, "SELECT json_extract(state, '$.attachmentsDirection') FROM outpost_replica"])
        #expect(direction.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "bidirectional", "\(direction.stdout)")

        let snapshot = try await outpost(
            ["offline", "create", "--map", mapURL] + area + ["--read-only-snapshot", "--schema-only", "countries", "--out", dir.file("snapshot").path, "--json"])
        #expect(snapshot.succeeded, "\(snapshot.stderr)")
        let copy = try JSONValue.parse(Data(snapshot.stdout.utf8))["replicas"]?[0]
        #expect(copy?["snapshot"] == true && copy?["replicaId"] == .null, "\(String(describing: copy))")
        let counts = Dictionary(uniqueKeysWithValues: (copy?["layers"]?.arrayValue ?? []).map { ($0["id"]?.stringValue ?? "", $0["features"]?.integerValue ?? -1) })
        #expect(counts["countries"] == 0 && (counts["places"] ?? 0) > 0, "\(counts)")
        #expect(try await Self.registeredReplicas(featureServer) == 1, "a snapshot is not registered")
        let nothing = try await outpost(["offline", "sync", dir.file("snapshot").path])
        #expect(nothing.succeeded && nothing.stdout.contains("nothing to sync"), "\(nothing.stdout)")
    }

    /// Generation killed (SIGKILL) at random moments, again and again: the same command finishes
    /// it, the map holds each feature once, and the only replicas the services keep for it are
    /// the map's own. Then its sync is killed the same way: every crew edit reaches the services
    /// once, and the office's reach the crew once.
    @Test(.scaledTimeLimit(minutes: 6))
    func generationAndSyncSurviveSIGKILLAtRandomMoments() async throws {
        let dir = TemporaryDirectory()
        let (server, mapURL) = try await Self.served(in: dir)
        defer { Task { await server.stop() } }
        let fieldInspection = server.featureServer("field_inspection").absoluteString
        let folder = dir.file("crew-map"), jobs = dir.file("jobs")
        let arguments = ["offline", "create", "--map", mapURL] + Self.area + ["--out", folder.path, "--job-dir", jobs.path]
        // Tile checkpoints as often as they come, so kills land between them too.
        let environment = ["OUTPOST_TILE_CHECKPOINT_MS": "0"]
        var random = FastRandomGenerator(seed: 25)
        var kills = 0
        // Kills at fixed points first (after the parts, before the move), then at random times.
        for point in ["offline.afterParts", "offline.beforeMove"] {
            let killed = try await Self.runOrKill(arguments, after: .seconds(120), environment: environment.merging(["OUTPOST_FAULT": "\(point):kill"]) { a, _ in a })
            #expect(!killed, "the fault point \(point) killed it")
            #expect(!FileManager.default.fileExists(atPath: folder.appendingPathComponent("map.json").path), "no map before the job completes")
            kills += 1
            // Cancel this attempt (rolling back what it made) before the next one starts afresh.
            let cancelled = try await outpost(["job", "cancel", jobs.path])
            #expect(cancelled.succeeded, "\(cancelled.stderr)")
            #expect(!FileManager.default.fileExists(atPath: folder.path + ".partial"), "a cancelled job removes what it built")
        }
        #expect(try await Self.registeredReplicas(fieldInspection) == 0, "cancelled jobs unregister their replicas")
        // Random moments, later each time (a run that starts from a checkpoint needs a moment
        // to get past it): the first falls well inside a run that takes seconds.
        var finished = false, randomKills = 0
        while !finished, randomKills < 10 {
            let delay = Duration.milliseconds(Int.random(in: 100...400, using: &random) + 200 * randomKills)
            finished = try await Self.runOrKill(arguments, after: delay, environment: environment)
            if !finished { randomKills += 1 }
        }
        if !finished { finished = try await Self.runOrKill(arguments, after: .seconds(120), environment: environment) }
        kills += randomKills
        #expect(finished && randomKills >= 1, "the same command finished the map after \(randomKills) kills at random moments")
        // Once more, as after a kill between the job's last save and the process's exit: the
        // same command reports the map it made.
        let again = try await outpost(arguments)
        #expect(again.succeeded && again.stderr.contains("already made"), "\(again.stderr)")
        let status = try await Self.status(folder)
        #expect(status["layerErrors"] == [])
        let counts = status["replicas"]?[0]?["layers"]?.arrayValue?.map { $0["features"]?.integerValue ?? -1 }
        #expect(counts == [111, 32, 6, 60], "each feature once: \(String(describing: counts))")
        // The server keeps the map's replica, and at most the few a kill caught between asking
        // for a replica and recording the answer.
        let registered = try await Self.registeredReplicas(fieldInspection)
        #expect(registered >= 1 && registered <= 1 + kills, "\(registered) replicas after \(kills) kills")
        let raster = try await ExternalTools.python("import sys, rasterio; print(rasterio.open(sys.argv[1]).driver)", [folder.appendingPathComponent("basemap.tpkx").path])
        #expect(raster.stdout.contains("ESRIC"), "\(raster.stderr)")

        // Sync killed at random moments: 3,000 crew inserts and 5 office inserts, once each.
        let inserts = """
            WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 2999)
            INSERT INTO inspection_points (asset_id, asset_type, condition, status, geom)
            SELECT 'KILL-' || i, 'hydrant', 2, 'open', AsGPB(MakePoint(-122.69 + (i % 50) * 0.0008, 45.50 + (i / 50) * 0.0004, 4326)) FROM n;
            """
        #expect(try await SyncCommandTests.sqlite(folder.appendingPathComponent("data/field_inspection.gpkg").path, inserts).succeeded)
        for i in 0..<5 {
            let added = try await applyEdits(
                fieldInspection, layer: 0, "adds",
                #"[{"geometry":{"x":-122.68,"y":45.52,"spatialReference":{"wkid":4326}},"attributes":{"asset_id":"DESK-\#(i)","asset_type":"valve","condition":1,"status":"open"}}]"#)
            #expect(added["addResults"]?[0]?["success"] == true)
        }
        let sync = ["offline", "sync", folder.path]
        var synced = false, syncKills = 0
        while !synced, syncKills < 8 {
            synced = try await Self.runOrKill(sync, after: .milliseconds(Int.random(in: 30...200, using: &random) + 80 * syncKills))
            if !synced { syncKills += 1 }
        }
        if !synced { synced = try await Self.runOrKill(sync, after: .seconds(120)) }
        #expect(synced && syncKills >= 1, "synced after \(syncKills) kills")
        // One more sync moves nothing: everything arrived, once.
        #expect(try await outpost(sync).succeeded)
        #expect(try await Self.serverCount(fieldInspection, layer: 0, where: "asset_id LIKE 'KILL-%'") == 3000)
        let local = try await SyncCommandTests.sqlite(
            folder.appendingPathComponent("data/field_inspection.gpkg").path,
            "SELECT count(*), count(DISTINCT asset_id) FROM inspection_points WHERE asset_id LIKE 'KILL-%' OR asset_id LIKE 'DESK-%';")
        #expect(local.stdout.split(separator: "\n").last == "3005|3005", "\(local.stdout)")
        let after = try await Self.status(folder, check: true)
        #expect(after["replicas"]?.arrayValue?.allSatisfy { $0["updatesAvailable"] == false && $0["pending"]?["inserts"] == 0 } == true, "\(after)")
    }

    static func registeredReplicas(_ featureServer: String) async throws -> Int {
        let answer = try await ExternalTools.run("curl", ["-s", "\(featureServer)/replicas?f=json"])
        return try JSONValue.parse(Data(answer.stdout.utf8)).arrayValue?.count ?? -1
    }
}

/// Preplanned areas: packages prepared ahead by `outpost offline prepare`, downloaded by crews
/// with resume, their replicas registered as each crew's own.
@Suite("outpost offline prepare and preplanned downloads")
struct PreplannedAreaTests {
    @Test(.scaledTimeLimit(minutes: 5))
    func aPreparedPackageDownloadsWithResumeRegistersItsOwnReplicasAndSyncs() async throws {
        let dir = TemporaryDirectory()
        let (server, mapURL) = try await OfflineMapTests.served(in: dir)
        defer { Task { await server.stop() } }
        let fieldInspection = server.featureServer("field_inspection").absoluteString
        let areas = "\(server.url.absoluteString)/arcgis/rest/maps/field-crews/areas"
        let listed = try JSONValue.parse(Data(try await ExternalTools.run("curl", ["-s", areas]).stdout.utf8))
        #expect(listed["areas"]?[0]?["id"] == "south-west" && listed["areas"]?[0]?["ready"] == false, "\(listed)")

        // The office prepares the area beside the map definition; the server offers it at once.
        let packages = dir.file("services/field-crews.preplanned")
        let prepared = try await outpost(["offline", "prepare", "--map", mapURL, "--out", packages.path, "--json"])
        #expect(prepared.succeeded, "\(prepared.stderr)")
        #expect(try JSONValue.parse(Data(prepared.stdout.utf8))["areas"]?[0]?["prepared"] == true)
        let package = try JSONValue.parse(Data(try await ExternalTools.run("curl", ["-s", "\(areas)/south-west"]).stdout.utf8))
        #expect(package["ready"] == true)
        let files = package["files"]?.arrayValue?.compactMap { $0["path"]?.stringValue } ?? []
        #expect(files.contains("map.json") && files.contains("basemap.tpkx") && files.contains("data/field_inspection.gpkg"), "\(files)")
        #expect(!files.contains { $0.hasSuffix("-wal") || $0.hasPrefix(".") }, "the package is its files, nothing else")
        #expect(try await OfflineMapTests.registeredReplicas(fieldInspection) == 1, "the package's own replica")
        let again = try await outpost(["offline", "prepare", "--map", mapURL, "--out", packages.path])
        #expect(again.succeeded && again.stdout.contains("already prepared"), "\(again.stdout)")

        // Crew A: killed after the first file arrived; a half-written file is cut shorter still;
        // the same command continues the downloads (HTTP Range) and finishes.
        let crewA = dir.file("crew-a"), jobsA = dir.file("jobs-a")
        let download = { (folder: URL, jobs: URL) in ["offline", "create", "--map", mapURL, "--area", "south-west", "--out", folder.path, "--job-dir", jobs.path] }
        let killed = try await OfflineMapTests.runOrKill(download(crewA, jobsA), after: .seconds(120), environment: ["OUTPOST_FAULT": "offline.afterDownload:kill"])
        #expect(!killed)
        let staging = URL(fileURLWithPath: crewA.path + ".partial")
        let partials = (FileManager.default.enumerator(at: staging, includingPropertiesForKeys: nil)?.allObjects as? [URL] ?? []).filter { $0.lastPathComponent.hasSuffix(".partial") }
        #expect(!partials.isEmpty, "a file was downloaded but not yet moved into place")
        for partial in partials {
            let data = try Data(contentsOf: partial)
            try data.prefix(data.count / 2).write(to: partial)
        }
        #expect(try await outpost(download(crewA, jobsA)).succeeded)
        #expect(try Data(contentsOf: crewA.appendingPathComponent("basemap.tpkx")) == Data(contentsOf: packages.appendingPathComponent("south-west/basemap.tpkx")))

        // Crew B: killed between registering its replica and taking its id; no second registration.
        let crewB = dir.file("crew-b"), jobsB = dir.file("jobs-b")
        #expect(!(try await OfflineMapTests.runOrKill(download(crewB, jobsB), after: .seconds(120), environment: ["OUTPOST_FAULT": "offline.afterRegister:kill"])))
        let resumed = try await outpost(download(crewB, jobsB) + ["--json"])
        #expect(resumed.succeeded, "\(resumed.stderr)")
        let a = try await OfflineMapTests.status(crewA), b = try await OfflineMapTests.status(crewB)
        let packaged = try await OfflineMapTests.status(packages.appendingPathComponent("south-west"))
        let ids = [a, b, packaged].map { $0["replicas"]?[0]?["replicaId"]?.stringValue ?? "" }
        #expect(Set(ids).count == 3, "each crew is a replica of its own: \(ids)")
        #expect(a["preplannedArea"] == "south-west" && a["replicas"]?[0]?["layers"]?[0]?["features"] == 111)
        #expect(try await OfflineMapTests.registeredReplicas(fieldInspection) == 3, "the package's and one per crew")

        // Crew A's edit reaches the service and crew B, once; the office's reaches both.
        #expect(
            try await SyncCommandTests.sqlite(
                crewA.appendingPathComponent("data/field_inspection.gpkg").path,
                "INSERT INTO inspection_points (asset_id, asset_type, condition, status, geom) VALUES ('CREW-A', 'hydrant', 3, 'open', AsGPB(GeomFromText('POINT(-122.66 45.51)', 4326)));"
            ).succeeded)
        let office = try await applyEdits(
            fieldInspection, layer: 0, "adds",
            #"[{"geometry":{"x":-122.68,"y":45.52,"spatialReference":{"wkid":4326}},"attributes":{"asset_id":"OFFICE-P","asset_type":"valve","condition":1,"status":"open"}}]"#)
        #expect(office["addResults"]?[0]?["success"] == true)
        for crew in [crewA, crewB, crewA] {
            let synced = try await outpost(["offline", "sync", crew.path])
            #expect(synced.succeeded, "\(synced.stderr)")
        }
        #expect(try await OfflineMapTests.serverCount(fieldInspection, layer: 0, where: "asset_id = 'CREW-A'") == 1)
        for crew in [crewA, crewB] {
            let rows = try await SyncCommandTests.sqlite(
                crew.appendingPathComponent("data/field_inspection.gpkg").path,
                "SELECT count(*) FROM inspection_points WHERE asset_id IN ('CREW-A', 'OFFICE-P');")
            #expect(rows.stdout.split(separator: "\n").last == "2", "\(crew.lastPathComponent): \(rows.stdout)")
        }

        // Refreshed: a new package with its own replica; the old one's is unregistered, and the
        // crews' copies are untouched.
        let refreshed = try await outpost(["offline", "prepare", "--map", mapURL, "--out", packages.path, "--refresh", "--json"])
        #expect(refreshed.succeeded, "\(refreshed.stderr)")
        let renewed = try await OfflineMapTests.status(packages.appendingPathComponent("south-west"))
        #expect(renewed["replicas"]?[0]?["replicaId"]?.stringValue != ids[2])
        #expect(try await OfflineMapTests.registeredReplicas(fieldInspection) == 3)
        #expect(!FileManager.default.fileExists(atPath: packages.appendingPathComponent(".south-west.new").path))
        #expect(try await outpost(["offline", "sync", crewB.path]).succeeded)
    }

    /// `outpost serve --prepare-areas` makes the missing packages itself, and crews download them.
    @Test(.scaledTimeLimit(minutes: 3))
    func theServerPreparesMissingAreasItself() async throws {
        let dir = TemporaryDirectory()
        let (server, mapURL) = try await OfflineMapTests.served(in: dir, arguments: ["--prepare-areas"])
        defer { Task { await server.stop() } }
        let area = "\(server.url.absoluteString)/arcgis/rest/maps/field-crews/areas/south-west"
        var ready = false
        for _ in 0..<600 where !ready {
            let answer = try await ExternalTools.run("curl", ["-s", area])
            ready = (try? JSONValue.parse(Data(answer.stdout.utf8)))?["ready"] == true
            if !ready { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(ready, "the server prepared the area within a minute")
        #expect(FileManager.default.fileExists(atPath: dir.file("services/field-crews.preplanned/south-west/map.json").path))
        let crew = try await outpost(["offline", "create", "--map", mapURL, "--area", "south-west", "--out", dir.file("crew").path, "--json"])
        #expect(crew.succeeded, "\(crew.stderr)")
        #expect(try JSONValue.parse(Data(crew.stdout.utf8))["preplannedArea"] == "south-west")
    }

    /// On a server with a token, maps, packages and their files need it; the offline commands
    /// carry it (`--token`) through every part: replicas, tiles, file downloads, copies.
    @Test(.scaledTimeLimit(minutes: 3))
    func aServerWithATokenGuardsMapsAndPackages() async throws {
        let dir = TemporaryDirectory()
        let (server, mapURL) = try await OfflineMapTests.served(in: dir, arguments: ["--token", "s3cret", "--prepare-areas"])
        defer { Task { await server.stop() } }
        let area = "\(server.url.absoluteString)/arcgis/rest/maps/field-crews/areas/south-west"
        var ready = false
        for _ in 0..<600 where !ready {
            let answer = try await ExternalTools.run("curl", ["-s", "\(area)?token=s3cret"])
            ready = (try? JSONValue.parse(Data(answer.stdout.utf8)))?["ready"] == true
            if !ready { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(ready, "the server prepared the area with its own token")
        for url in [mapURL, "\(area)/files/map.json"] {
            let refused = try await ExternalTools.run("curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", url])
            #expect(["401", "403", "499"].contains(refused.stdout), "\(url) without the token: \(refused.stdout)")
            let allowed = try await ExternalTools.run("curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "\(url)?token=s3cret"])
            #expect(allowed.stdout == "200", "\(url) with the token: \(allowed.stdout)")
        }
        let without = try await outpost(["offline", "create", "--map", mapURL, "--area", "south-west", "--out", dir.file("no-token").path])
        #expect(!without.succeeded)
        let crew = try await outpost(["offline", "create", "--map", mapURL, "--area", "south-west", "--token", "s3cret", "--out", dir.file("crew").path])
        #expect(crew.succeeded, "\(crew.stderr)")
        let generated = try await outpost(
            ["offline", "create", "--map", mapURL, "--extent", "-122.70,45.49,-122.64,45.53", "--max-scale", "70000", "--token", "s3cret", "--out", dir.file("generated").path, "--json"])
        #expect(generated.succeeded, "\(generated.stderr)")
        #expect(try JSONValue.parse(Data(generated.stdout.utf8))["layerErrors"] == [])
        #expect(try await outpost(["offline", "sync", dir.file("crew").path, "--token", "s3cret"]).succeeded)
    }
}
