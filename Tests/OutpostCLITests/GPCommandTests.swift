import Foundation
import OutpostCore
import OutpostTestSupport
import OutpostServiceTestSupport
import Testing

/// `outpost gp info|run` against `outpost serve` (its own process, real HTTP) and offline, with
/// the outputs read back by GDAL's GeoJSON driver (pyogrio).
@Suite("outpost gp")
struct GPCommandTests {
    static let service: JSONValue = [
        "executionType": "esriExecutionTypeAsynchronous",
        "tasks": [["tool": "Buffer"], ["tool": "Dissolve"]],
    ]

    /// Four points around Helsinki's railway station, as GeoJSON.
    static let points: JSONValue = [
        "type": "FeatureCollection",
        "features": .array([(24.9414, 60.1719), (24.9450, 60.1700), (24.9380, 60.1690), (24.9600, 60.1750)].enumerated().map { i, p in
            ["type": "Feature", "geometry": ["type": "Point", "coordinates": [.number(p.0), .number(p.1)]], "properties": ["id": .integer(Int64(i))]]
        }),
    ]

    @Test func infoAndRunAgainstAServerAndOfflineAgree() async throws {
        let directory = TemporaryDirectory("outpost-gp-cli")
        let services = directory.file("services")
        try FileManager.default.createDirectory(at: services, withIntermediateDirectories: true)
        try Self.service.jsonData.write(to: services.appendingPathComponent("analysis.gp.json"))
        let created = try await outpost(["service", "create", Repository.sampleData("field_inspection").path, "--out", services.appendingPathComponent("fi.gpkg").path])
        #expect(created.succeeded, "\(created.stderr)")
        try Self.points.jsonData.write(to: directory.file("points.geojson"))
        let server = try await ServeProcess.start(service: services)
        defer { Task { await server.stop() } }
        let task = server.url.appendingPathComponent("arcgis/rest/services/analysis/GPServer/Buffer").absoluteString

        let info = try await outpost(["gp", "info", task, "--json"])
        #expect(info.succeeded, "\(info.stderr)")
        let described = try JSONValue.parse(Data(info.stdout.utf8))
        #expect(described["executionType"] == "esriExecutionTypeAsynchronous")
        let names = (described["parameters"]?.arrayValue ?? []).compactMap { $0["name"]?.stringValue }
        #expect(names.contains("Distance_Field"))
        let table = try await outpost(["gp", "info", task])
        #expect(table.stdout.contains("Distance") && table.stdout.contains("PLANAR|GEODESIC"))

        let distance = #"Distance={"distance":150,"units":"esriMeters"}"#
        let remote = try await outpost([
            "gp", "run", task, "--param", "Input_Features=@\(directory.file("points.geojson").path)", "--param", distance,
            "--poll-ms", "50", "--out", directory.file("remote").path, "--json",
        ])
        #expect(remote.succeeded, "\(remote.stderr)")
        let answer = try JSONValue.parse(Data(remote.stdout.utf8))
        #expect(answer["status"] == "succeeded" && answer["jobId"]?.stringValue?.hasPrefix("j") == true)
        #expect(answer["outputs"]?["Output_Features"]?["features"] == 4)
        let offline = try await outpost([
            "gp", "run", "Buffer", "--param", "Input_Features=@\(directory.file("points.geojson").path)", "--param", distance,
            "--out", directory.file("offline").path,
        ])
        #expect(offline.succeeded, "\(offline.stderr)")
        #expect(offline.stdout.contains("Output_Features: 4 features"))
        // GDAL reads both; the server's polygons are the offline ones.
        let script = """
            import sys, pyogrio.raw, shapely, pyproj
            from shapely.ops import transform
            ma, _, ga, _ = pyogrio.raw.read(sys.argv[1]); mb, _, gb, _ = pyogrio.raw.read(sys.argv[2])
            a = shapely.from_wkb(ga); b = shapely.from_wkb(gb)
            assert len(a) == 4 and len(b) == 4, (len(a), len(b))
            assert ma["crs"] == "EPSG:4326", ma["crs"]
            assert all(x.equals_exact(y, 1e-12) for x, y in zip(a, b))
            to3067 = pyproj.Transformer.from_crs(4326, 3067, always_xy=True).transform
            areas = [transform(to3067, g).area for g in a]
            assert all(abs(s - 3.14159 * 150 ** 2) / (3.14159 * 150 ** 2) < 0.02 for s in areas), areas
            print("ok")
            """
        let check = try await ExternalTools.python(script, [directory.file("remote/Output_Features.geojson").path, directory.file("offline/Output_Features.geojson").path])
        #expect(check.succeeded, "\(check.stderr)")

        // A layer the server serves, by URL.
        let layer = server.url.appendingPathComponent("arcgis/rest/services/fi/FeatureServer/2").absoluteString
        let dissolved = try await outpost([
            "gp", "run", server.url.appendingPathComponent("arcgis/rest/services/analysis/GPServer/Dissolve").absoluteString,
            "--param", #"Input_Features={"url":"\#(layer)"}"#, "--param", #"Dissolve_Fields=["crew"]"#, "--poll-ms", "50", "--json",
        ])
        #expect(dissolved.succeeded, "\(dissolved.stderr)")
        #expect((try JSONValue.parse(Data(dissolved.stdout.utf8)))["outputs"]?["Output_Features"]?["features"]?.integerValue ?? 0 >= 1)

        // A failing job: exit 1 with the server's reason.
        let failing = try await outpost([
            "gp", "run", task, "--param", "Input_Features=@\(directory.file("points.geojson").path)", "--param", "Distance_Field=nosuch", "--poll-ms", "50",
        ])
        #expect(failing.status == 1 && failing.stderr.contains("nosuch"), "\(failing.stderr)")
        // Bad arguments: an unknown input, a task that does not exist.
        let unknown = try await outpost(["gp", "run", "Buffer", "--param", "Radius=5"])
        #expect(unknown.status == 1 && unknown.stderr.contains("Buffer has no input Radius"))
        let missing = try await outpost(["gp", "info", "Teleport"])
        #expect(missing.status == 1 && missing.stderr.contains("neither a task URL"))
    }

    @Test func aModelRunsOfflineOnAReplicasLayer() async throws {
        let directory = TemporaryDirectory("outpost-gp-model")
        let gpkg = directory.file("crew.gpkg")
        let created = try await outpost(["service", "create", Repository.sampleData("field_inspection").path, "--out", gpkg.path])
        #expect(created.succeeded, "\(created.stderr)")
        let model: JSONValue = [
            "name": "CoverageByCrew",
            "parameters": [
                ["name": "Sites", "dataType": "GPFeatureRecordSetLayer"],
                ["name": "Coverage", "dataType": "GPFeatureRecordSetLayer", "direction": "esriGPParameterDirectionOutput"],
            ],
            "steps": [
                ["id": "reach", "tool": "Buffer", "inputs": ["Input_Features": ["parameter": "Sites"], "Distance": ["value": ["distance": 200, "units": "esriMeters"]]]],
                ["id": "merge", "tool": "Dissolve", "inputs": ["Input_Features": ["step": "reach", "output": "Output_Features"], "Dissolve_Fields": ["value": ["status"]]]],
            ],
            "outputs": ["Coverage": ["step": "merge", "output": "Output_Features"]],
        ]
        try model.jsonData.write(to: directory.file("coverage.model.json"))
        let run = try await outpost([
            "gp", "run", directory.file("coverage.model.json").path, "--input", gpkg.path, "--param", "Sites=layer:inspection_points",
            "--out", directory.file("out").path,
        ])
        #expect(run.succeeded, "\(run.stderr)")
        #expect(run.stderr.contains("reach: Buffered") && run.stderr.contains("merge: Dissolved"))
        let check = try await ExternalTools.python(
            """
            import sys, pyogrio.raw
            meta, _, geometry, fields = pyogrio.raw.read(sys.argv[1])
            status = list(fields[list(meta["fields"]).index("status")])
            assert set(status) == {"open", "closed", "in_progress"} and len(status) == 3, status
            assert all(g is not None for g in geometry)
            print(len(status))
            """, [directory.file("out/Coverage.geojson").path])
        #expect(check.succeeded, "\(check.stderr)")
    }
}

/// The planning sample (SampleData/planning): its feature service and geoprocessing service
/// served as a user would, the SDK's two sample models run through `outpost gp run`.
@Suite("Planning sample")
struct PlanningSampleTests {
    static let sample = Repository.sampleData("planning")

    /// The planning feature service and geoprocessing service in a directory `outpost serve` reads.
    static func services(in directory: TemporaryDirectory) async throws -> URL {
        let services = directory.file("services")
        try FileManager.default.createDirectory(at: services, withIntermediateDirectories: true)
        let created = try await outpost(["service", "create", sample.path, "--out", services.appendingPathComponent("planning.gpkg").path])
        #expect(created.succeeded, "\(created.stderr)")
        try FileManager.default.copyItem(at: sample.appendingPathComponent("planning.gp.json"), to: services.appendingPathComponent("planning.gp.json"))
        return services
    }

    @Test func elevationContoursAndMailingListRunOnTheSampleService() async throws {
        let directory = TemporaryDirectory("outpost-planning")
        let sample = Self.sample
        let server = try await ServeProcess.start(service: try await Self.services(in: directory))
        defer { Task { await server.stop() } }
        let base = server.url.appendingPathComponent("arcgis/rest/services/planning/GPServer").absoluteString

        // Spot heights → IDW surface → contours, the layer read from the feature service.
        let terrain = directory.file("terrain")
        let contours = try await outpost(["gp", "run", "\(base)/ElevationContours", "--param", "Interval=5", "--poll-ms", "50", "--out", terrain.path, "--json"])
        #expect(contours.succeeded, "\(contours.stderr)")
        let surface = try #require(try FileManager.default.contentsOfDirectory(atPath: terrain.path).first { $0.hasSuffix(".tif") })
        let info = try await ExternalTools.run("gdalinfo", ["-json", terrain.appendingPathComponent(surface).path])
        #expect(info.succeeded, "\(info.stderr)")
        let raster = try JSONValue.parse(info.stdout)
        #expect(raster["coordinateSystem"]?["wkt"]?.stringValue?.contains("ETRS89 / TM35FIN") == true)
        #expect((raster["geoTransform"]?.arrayValue ?? []).compactMap(\.doubleValue)[1] == 10)
        let lines = try await ExternalTools.run("ogrinfo", ["-so", "-al", terrain.appendingPathComponent("Contours.geojson").path])
        #expect(lines.succeeded && lines.stdout.contains("Line String") && lines.stdout.contains("Contour: "), "\(lines.stdout)")

        // The downloaded surface goes back up (uploads/upload, then its item id) to Contour.
        let again = try await outpost([
            "gp", "run", "\(base)/Contour", "--param", "In_Raster=\(terrain.appendingPathComponent(surface).path)", "--param", "Contour_Interval=10",
            "--poll-ms", "50", "--json",
        ])
        #expect(again.succeeded, "\(again.stderr)")
        #expect(((try JSONValue.parse(Data(again.stdout.utf8)))["outputs"]?["Output_Features"]?["features"]?.integerValue ?? 0) > 0)
        #expect(again.stderr.isEmpty || !again.stderr.contains("error"))

        // The mailing list around one parcel: the same parcels shapely finds within 100 m.
        let mail = directory.file("mail")
        let parcel = "091-011-0011-0003"
        let listed = try await outpost(["gp", "run", "\(base)/MailingList", "--param", "Parcel_ID=\(parcel)", "--poll-ms", "50", "--out", mail.path, "--json"])
        #expect(listed.succeeded, "\(listed.stderr)")
        let answer = try JSONValue.parse(Data(listed.stdout.utf8))
        let count = try #require(answer["outputs"]?["Owners"]?["features"]?.integerValue)
        let check = try await ExternalTools.python("""
            import sys, json, csv, shapely, pyproj
            from shapely.ops import transform
            to3067 = pyproj.Transformer.from_crs(4326, 3067, always_xy=True).transform
            fs = json.load(open(sys.argv[1]))["features"]
            shapes = {f["properties"]["parcel_id"]: transform(to3067, shapely.geometry.shape(f["geometry"])) for f in fs}
            target = shapes[sys.argv[2]]
            near = sorted(k for k, g in shapes.items() if g.distance(target) <= 100)
            rows = list(csv.DictReader(open(sys.argv[3], encoding="utf-8")))
            assert sorted(r["parcel_id"] for r in rows) == near, (len(rows), len(near))
            assert all(r["owner"] and r["address"].endswith("Helsinki") for r in rows)
            print(len(near))
            """, [sample.appendingPathComponent("data/parcels.geojson").path, parcel, mail.appendingPathComponent("mailing-list.csv").path])
        #expect(check.succeeded, "\(check.stderr)")
        #expect(Int64(check.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) == count)
        // A parcel id that is not there selects nothing, and the job still succeeds.
        let none = try await outpost(["gp", "run", "\(base)/MailingList", "--param", "Parcel_ID=no-such-parcel'; --", "--poll-ms", "50", "--json"])
        #expect(none.succeeded, "\(none.stderr)")
        #expect((try JSONValue.parse(Data(none.stdout.utf8)))["outputs"]?["Owners"]?["features"] == 0)
    }

    /// The ArcGIS API for Python, signed in over HTTPS (its GIS needs a portal it reaches that
    /// way): import_toolbox builds a function per task from the task infos; calling one submits
    /// the job, polls it, reads the results, and opens the job's result map layer.
    @Test(.scaledTimeLimit(minutes: 3))
    func theArcGISAPIForPythonRunsTheSampleTasks() async throws {
        let directory = TemporaryDirectory("outpost-planning-python")
        let services = try await Self.services(in: directory)
        let (cert, key) = try await TLSServeTests.certificate(in: directory)
        let users = directory.file("users.json")
        let added = try await ExternalTools.run(
            Repository.outpostExecutable.path, ["users", "add", "planner", "--role", "viewer", "--users", users.path, "--password-stdin"], input: "a long pass phrase\n")
        #expect(added.succeeded, "\(added.stderr)")
        let server = try await ServeProcess.start(service: services, arguments: ["--tls-cert", cert.path, "--tls-key", key.path, "--users", users.path])
        defer { Task { await server.stop() } }
        let parcel = "091-011-0011-0003"
        let python = try await ExternalTools.python("""
            import sys, json
            from arcgis.gis import GIS
            from arcgis.geoprocessing import import_toolbox
            base, ca = sys.argv[1], sys.argv[2]
            gis = GIS(base + "/arcgis", "planner", "a long pass phrase", ca_bundles=ca, use_gen_token=True)
            tbx = import_toolbox(base + "/arcgis/rest/services/planning/GPServer", gis=gis)
            out = {"tasks": sorted(n for n in ("buffer", "mailing_list", "elevation_contours", "idw") if hasattr(tbx, n))}
            def rows(value):  # a FeatureSet, or the REST JSON as a dict
                features = value.features if hasattr(value, "features") else value["features"]
                return [f.attributes if hasattr(f, "attributes") else f["attributes"] for f in features]
            r = tbx.mailing_list(parcel_id=sys.argv[3])
            out["nearby"] = len(rows(r.nearby_parcels))
            out["owners"] = sorted(a["parcel_id"] for a in rows(r.owners))
            out["report"] = r.report.url if hasattr(r.report, "url") else (r.report.get("url") if isinstance(r.report, dict) else str(r.report))
            out["resultLayer"] = r.result_layer.url if hasattr(r, "result_layer") else None
            # The result map layer the client made: its image of the job's outputs.
            image = r.result_layer.export_map(bbox="24.93,60.17,24.97,60.19", bbox_sr=4326, size="200,200", f="json") if hasattr(r, "result_layer") else {}
            out["image"] = image.get("href", "")
            print(json.dumps(out))
            """, [server.url.absoluteString, cert.path, parcel])
        #expect(python.succeeded, "\(python.stderr.suffix(3000))")
        let out = try JSONValue.parse(python.stdout.split(separator: "\n").last.map(String.init) ?? "")
        #expect(out["tasks"] == ["buffer", "elevation_contours", "idw", "mailing_list"])
        let nearby = try #require(out["nearby"]?.integerValue)
        #expect(nearby > 1 && out["owners"]?.arrayValue?.count == Int(nearby))
        #expect(out["report"]?.stringValue?.hasSuffix("/mailing-list.csv") == true)
        #expect(out["resultLayer"]?.stringValue?.contains("/planning/MapServer/jobs/j") == true, "\(out)")
        #expect(out["image"]?.stringValue?.contains("/MapServer/jobs/j") == true, "\(out)")
    }
}

/// A geoprocessing service of one Buffer task, at most one job at a time, for tests of jobs
/// across servers: a long input (40,000 points, a geodesic buffer of some seconds), a medium one
/// (8,000, under a second alone) and a short one, and its REST calls through curl.
struct BufferJobs {
    let directory = TemporaryDirectory("outpost-gp-jobs")
    var services: URL { directory.file("services") }
    let task = "arcgis/rest/services/work/GPServer/Buffer"

    init() throws {
        try FileManager.default.createDirectory(at: services, withIntermediateDirectories: true)
        let definition: JSONValue = ["executionType": "esriExecutionTypeAsynchronous", "maximumRecords": 100_000, "maximumConcurrentJobs": 1, "tasks": [["tool": "Buffer"]]]
        try definition.jsonData.write(to: services.appendingPathComponent("work.gp.json"))
        func points(_ n: Int) -> String {
            var s = #"{"geometryType":"esriGeometryPoint","spatialReference":{"wkid":3067},"fields":[],"features":["#
            for i in 0..<n { s += (i > 0 ? "," : "") + #"{"geometry":{"x":\#(385_000 + (i % 200) * 50),"y":\#(6_671_000 + (i / 200) * 50)},"attributes":{}}"# }
            return s + "]}"
        }
        try Data(points(40_000).utf8).write(to: directory.file("long.json"))
        try Data(points(8_000).utf8).write(to: directory.file("medium.json"))
        try Data(points(2).utf8).write(to: directory.file("short.json"))
    }

    /// Submits `long` or `short` through the server at `base`; the job's id.
    func submit(_ base: URL, _ input: String, geodesic: Bool = false) async throws -> String {
        var arguments = ["-s", "-X", "POST", "\(base)/\(task)/submitJob", "--data-urlencode", "f=json", "--data-urlencode", "Input_Features@\(directory.file(input + ".json").path)"]
        if geodesic { arguments += ["--data-urlencode", "Method=GEODESIC"] }
        let run = try await ExternalTools.run("curl", arguments)
        return try #require(try JSONValue.parse(run.stdout)["jobId"]?.stringValue, "\(run.stdout) \(run.stderr)")
    }

    /// GETs `path` below the task as JSON.
    func get(_ base: URL, _ path: String) async throws -> JSONValue {
        try JSONValue.parse(try await ExternalTools.run("curl", ["-s", "\(base)/\(task)/\(path)?f=json"]).stdout)
    }

    /// Polls job `id` until its status is one of `states`.
    func wait(_ base: URL, _ id: String, for states: Set<String>) async throws -> JSONValue {
        for _ in 0..<1_200 {
            let s = try await get(base, "jobs/\(id)")
            if states.contains(s["jobStatus"]?.stringValue ?? "") { return s }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw GPRestartError("job \(id) never reached \(states)")
    }

    /// Whether a status's messages hold `words`.
    static func said(_ status: JSONValue, _ words: String) -> Bool {
        (status["messages"]?.arrayValue ?? []).contains { $0["description"]?.stringValue?.contains(words) == true }
    }
}

/// `outpost serve` killed (SIGKILL) while a geoprocessing job runs, then started again on the
/// same directory: finished jobs keep their results, the running one is failed with a message,
/// the waiting one runs. Real processes, real HTTP (curl).
@Suite("GP jobs across a killed server")
struct GPRestartTests {
    @Test(.scaledTimeLimit(minutes: 3))
    func aKilledServersJobsAreTakenOverByTheNextOne() async throws {
        let jobs = try BufferJobs()
        let ended: Set<String> = ["esriJobSucceeded", "esriJobFailed"]
        let first = try await ServeProcess.start(service: jobs.services)
        let finished = try await jobs.submit(first.url, "short")
        #expect(try await jobs.wait(first.url, finished, for: ended)["jobStatus"] == "esriJobSucceeded")
        let running = try await jobs.submit(first.url, "long", geodesic: true)
        _ = try await jobs.wait(first.url, running, for: ["esriJobExecuting"])
        let waiting = try await jobs.submit(first.url, "short")
        #expect(try await jobs.get(first.url, "jobs/\(waiting)")["jobStatus"] == "esriJobWaiting")
        await first.stop(signal: SIGKILL)

        let second = try await ServeProcess.start(service: jobs.services)
        defer { Task { await second.stop() } }
        #expect(try await jobs.get(second.url, "jobs/\(finished)")["jobStatus"] == "esriJobSucceeded")
        #expect(try await jobs.get(second.url, "jobs/\(finished)/results/Output_Features")["value"]?["features"]?.arrayValue?.count == 2)
        let lost = try await jobs.get(second.url, "jobs/\(running)")
        #expect(lost["jobStatus"] == "esriJobFailed" && BufferJobs.said(lost, "server stopped while the job was executing"), "\(lost)")
        #expect(try await jobs.wait(second.url, waiting, for: ended)["jobStatus"] == "esriJobSucceeded")
    }
}

/// Two `outpost serve --postgres` processes serving one geoprocessing service, as two hosts of a
/// site: a job submitted through one is polled, read and cancelled through the other, and when
/// the host running jobs is killed the other takes them over once their lease runs out. Real
/// processes, a real PostgreSQL, real HTTP (curl).
@Suite("GP jobs across the hosts of a site", .enabled(if: BackendKind.postgresURL != nil, "run ./scripts/test: it starts PostgreSQL"))
struct GPSiteTests {
    @Test(.scaledTimeLimit(minutes: 6))
    func anyHostAnswersAJobAndTakesOverAStoppedHostsJobs() async throws {
        let jobs = try BufferJobs()
        let ended: Set<String> = ["esriJobSucceeded", "esriJobFailed", "esriJobCancelled"]
        let database = try await BackendKind.newPostgresDatabase()
        let arguments = ["--postgres", database, "--job-lease", "2"]
        let a = try await ServeProcess.start(service: jobs.services, arguments: arguments)
        let b = try await ServeProcess.start(service: jobs.services, arguments: arguments)
        defer { Task { await b.stop() } }

        // Submitted through A, polled and read through B.
        let quick = try await jobs.submit(a.url, "short")
        let done = try await jobs.wait(b.url, quick, for: ended)
        #expect(done["jobStatus"] == "esriJobSucceeded" && BufferJobs.said(done, "Succeeded"), "\(done)")
        #expect(try await jobs.get(b.url, "jobs/\(quick)/results/Output_Features")["value"]?["features"]?.arrayValue?.count == 2)
        #expect(try await jobs.get(b.url, "jobs/\(quick)/inputs/Input_Features")["value"]?["features"]?.arrayValue?.count == 2)

        // Running on A, cancelled through B: A stops it.
        let cancelled = try await jobs.submit(a.url, "long", geodesic: true)
        _ = try await jobs.wait(b.url, cancelled, for: ["esriJobExecuting"])
        let asked = try JSONValue.parse(try await ExternalTools.run("curl", ["-s", "-X", "POST", "\(b.url)/\(jobs.task)/jobs/\(cancelled)/cancel", "-d", "f=json"]).stdout)
        #expect(asked["jobStatus"] == "esriJobCancelling", "\(asked)")
        let stopped = try await jobs.wait(a.url, cancelled, for: ended)
        #expect(stopped["jobStatus"] == "esriJobCancelled" && stopped["results"]?.objectValue?.isEmpty != false, "\(stopped)")

        // A killed with one job running and one waiting: B fails the first (it cannot know how far
        // it got) and runs the second.
        let running = try await jobs.submit(a.url, "long", geodesic: true)
        _ = try await jobs.wait(b.url, running, for: ["esriJobExecuting"])
        let waiting = try await jobs.submit(a.url, "short")
        #expect(try await jobs.get(b.url, "jobs/\(waiting)")["jobStatus"] == "esriJobWaiting")
        await a.stop(signal: SIGKILL)
        let lost = try await jobs.wait(b.url, running, for: ended)
        #expect(lost["jobStatus"] == "esriJobFailed" && BufferJobs.said(lost, "server host running the job stopped"), "\(lost)")
        let takenOver = try await jobs.wait(b.url, waiting, for: ended)
        #expect(takenOver["jobStatus"] == "esriJobSucceeded" && BufferJobs.said(takenOver, "Queued again"), "\(takenOver)")
        #expect(try await jobs.get(b.url, "jobs/j0123456789abcdef0123456789abcdef")["error"]?["code"] == 404)

        // B drained (SIGTERM) with a job running and one waiting, a new host beside it: B
        // finishes the first and hands the second over, which the new host runs.
        let c = try await ServeProcess.start(service: jobs.services, arguments: arguments)
        defer { Task { await c.stop() } }
        // The medium job: long enough to be running when B is told to stop, short enough that
        // waiting for it stays cheap beside the rest of the suite.
        let finishing = try await jobs.submit(b.url, "medium", geodesic: true)
        _ = try await jobs.wait(c.url, finishing, for: ["esriJobExecuting"])
        let handed = try await jobs.submit(b.url, "short")
        #expect(try await jobs.get(c.url, "jobs/\(handed)")["jobStatus"] == "esriJobWaiting")
        #expect(await b.stop(timeout: 300) == 0, "B ends by itself once its job is done")
        #expect(try await jobs.get(c.url, "jobs/\(finishing)")["jobStatus"] == "esriJobSucceeded", "B finished what it ran before it stopped")
        let ran = try await jobs.wait(c.url, handed, for: ended)
        #expect(ran["jobStatus"] == "esriJobSucceeded" && BufferJobs.said(ran, "Queued again"), "\(ran)")
    }
}

struct GPRestartError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// The Helsinki sample (OpenStreetMap, ODbL) becomes a service as the other samples do.
@Suite("Helsinki sample")
struct HelsinkiSampleTests {
    @Test func theOpenStreetMapSampleLoadsAndKeepsItsAttribution() async throws {
        let directory = TemporaryDirectory("outpost-helsinki")
        let file = directory.file("helsinki.gpkg")
        let created = try await outpost(["service", "create", Repository.sampleData("helsinki").path, "--out", file.path])
        #expect(created.succeeded, "\(created.stderr)")
        for (layer, count) in [("addresses", 1_451), ("streets", 2_504)] {
            let info = try await ExternalTools.run("ogrinfo", ["-q", file.path, "-sql", "SELECT COUNT(*) AS n FROM \(layer)"])
            #expect(info.stdout.contains("n (Integer) = \(count)"), "\(layer): \(info.stdout)")
        }
        let named = try await ExternalTools.run("ogrinfo", ["-q", file.path, "-sql", "SELECT COUNT(*) AS n FROM addresses WHERE street = 'Mannerheimintie'"])
        #expect(!named.stdout.contains("n (Integer) = 0"), "\(named.stdout)")
        let readme = try String(contentsOf: Repository.sampleData("README.md"), encoding: .utf8)
        #expect(readme.contains("© OpenStreetMap contributors") && readme.contains("Open Database"))
    }
}

