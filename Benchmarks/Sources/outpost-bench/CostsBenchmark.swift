import AsyncHTTPClient
import Foundation
import NIOCore
import OutpostCore
import OutpostLoadTesting
import OutpostPostgres
import OutpostStorage
import OutpostSync

#if canImport(Glibc)
    import Glibc
#endif

/// `outpost-bench costs` (PostgreSQL at `OUTPOST_POSTGRES`, on this machine): what one operation
/// costs a site host and its database. One real `outpost serve --postgres` (the release build
/// beside the bench) serves a 20,000-feature service from a scratch database, the drawn map and
/// the geoprocessing service a site's hosts serve; each kind of operation runs many times in a
/// row, and the host's and the database's CPU time (user and system, from `/proc`; the database
/// is its postmaster and every backend) over the run, divided by the operations, is its cost.
/// The inputs of docs/scaling.md's capacity model.
enum CostsBenchmark {
    static func run(postgres: String, executable: String, workDirectory: URL) async throws {
        let outpost = try SiteBenchmark.outpostExecutable(bench: executable)
        let server = try PostgresLocation(url: postgres)
        let database = "outpost_costs_\(getpid())"
        let location = try await PostgresServiceStore.createDatabase(database, at: server)
        defer { PostgresBenchmark.dropDatabase(database, at: server) }
        let work = workDirectory.appendingPathComponent("costs")
        try? FileManager.default.removeItem(at: work)
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)

        // The crews' service: 10 areas of 2,000 points.
        var load = CrewLoad.Configuration(crews: 10)
        load.featuresPerCrew = 2_000
        let serviceFile = work.appendingPathComponent("\(CrewLoad.serviceName).gpkg")
        try CrewLoad.createService(at: serviceFile, load)
        try await PostgresBenchmark.load(serviceFile, named: CrewLoad.serviceName, into: location)
        let points = work.appendingPathComponent("points.json")
        try SiteLab.writeFileServices(work.appendingPathComponent("services"), basemap: serviceFile, points: points)

        let (process, base) = try startServer(
            executable: outpost.path,
            arguments: [
                "serve", "--postgres", location.url, "--service", work.appendingPathComponent("services").path, "--port", "0", "--site-directory",
                work.appendingPathComponent("site").path,
            ])
        defer {
            kill(process.processIdentifier, SIGTERM)
            process.waitUntilExit()
        }
        let meter = Meter(server: process.processIdentifier, database: try await postmaster(location))
        print("outpost serve at \(base) (pid \(process.processIdentifier)); PostgreSQL \(server), postmaster \(meter.database.map(String.init) ?? "not on this machine: no database CPU")")
        var rows: [[String]] = []
        let featureServer = "\(base)/arcgis/rest/services/\(CrewLoad.serviceName)/FeatureServer"

        // Replicas: A edits and syncs; B has the same area and reads the feed A's edits make.
        let task = try GeodatabaseSyncTask(url: URL(string: featureServer)!)
        func replica(_ name: String, crew: Int) async throws -> Geodatabase {
            var parameters = try await task.makeDefaultGenerateGeodatabaseParameters(extent: CrewLoad.area(crew: crew))
            parameters.replicaName = name
            let job = task.makeGenerateGeodatabaseJob(parameters: parameters, downloadFileURL: work.appendingPathComponent("\(name).gpkg"))
            try job.start()
            return try await job.output
        }
        var created = 0
        rows.append(
            try await meter.measure("createReplica of a 2,000-feature area (async job, download)", count: 10) { _ in
                created += 1
                try await replica("r\(created)", crew: created % 10).close()
            })
        let a = try await replica("a", crew: 0), b = try await replica("b", crew: 0)
        defer {
            try? a.close()
            try? b.close()
        }
        let table = try a.table(named: "assets")
        let ids = try await table.features(matching: FeatureQuery(returnGeometry: false)).compactMap(\.objectID)
        guard ids.count >= 1_000 else { throw BenchError("replica a has \(ids.count) features, fewer than 1,000") }
        var round = 0
        func sync(edits: Int) async throws {
            round += 1
            let changed = (0..<edits).map { i -> Feature in
                var f = Feature(objectID: ids[(round * edits + i) % ids.count])
                f.attributes = ["condition": .integer(Int64(round % 5 + 1)), "note": .string("round \(round)")]
                return f
            }
            try await table.update(changed)
            let job = task.makeSyncGeodatabaseJob(parameters: SyncGeodatabaseParameters(), geodatabase: a)
            try job.start()
            _ = try await job.output
        }
        func cursor() async throws -> Int64 {
            guard let state = try await a.read({ try $0.replicaState() }) else { throw BenchError("replica a lost its state") }
            return state.layers.map(\.cursor).max() ?? state.cursor
        }
        try await sync(edits: 10)
        for edits in [10, 1_000] {
            let before = try await Metrics.scrape(base)
            var row = try await meter.measure("sync of \(edits) edits (upload, checksums, download)", count: edits == 10 ? 100 : 10) { _ in try await sync(edits: edits) }
            let after = try await Metrics.scrape(base)
            let held = after["outpost_sync_commit_lock_held_seconds_sum", default: 0] - before["outpost_sync_commit_lock_held_seconds_sum", default: 0]
            let batches = after["outpost_sync_commit_lock_held_seconds_count", default: 0] - before["outpost_sync_commit_lock_held_seconds_count", default: 0]
            row[row.count - 1] = (batches > 0 ? "commit lock held \(format(held * 1000 / batches, 1)) ms a batch (\(Int(batches)) batches)" : "")
            rows.append(row)
        }

        // The feed: the first page of what A's last ten syncs changed, as replica B reads it.
        let upto = try await cursor()
        let since = max(upto - 10, 0)
        guard let bState = try await b.read({ try $0.replicaState() }) else { throw BenchError("replica b has no state") }
        let feed = "\(base)/outpost/v1/services/\(CrewLoad.serviceName)/replicas/\(bState.replicaID)/changes?layer=0&since=\(since)&upto=\(upto)&limit=1000"
        let pageChanges = try JSONValue.parse(try await Self.get(feed + "&f=json"))["changes"]?.arrayValue?.count ?? 0
        for (kind, accept) in [("JSON", "application/json"), ("binary", "application/vnd.outpost.changes")] {
            rows.append(try await meter.measure("change page of \(pageChanges) changes, \(kind)", count: 100) { _ in _ = try await Self.get(feed, accept: accept) })
        }

        // Queries.
        let area = CrewLoad.area(crew: 3)
        let quarter = "\(area.xmin),\(area.ymin),\(area.xmin + (area.xmax - area.xmin) / 2),\(area.ymin + (area.ymax - area.ymin) / 2)"
        let envelopeQuery =
            "\(featureServer)/0/query?where=1%3D1&geometry=\(quarter)&geometryType=esriGeometryEnvelope&inSR=4326&outFields=*&f=json"
        let found = try JSONValue.parse(try await Self.get(envelopeQuery))["features"]?.arrayValue?.count ?? 0
        rows.append(try await meter.measure("query, a quarter of an area (\(found) features, all fields)", count: 300) { _ in _ = try await Self.get(envelopeQuery) })
        rows.append(
            try await meter.measure("query, one feature by object id", count: 1_000) { i in
                _ = try await Self.get("\(featureServer)/0/query?objectIds=\(i % 20_000 + 1)&outFields=*&f=json")
            })

        // Tiles of the drawn map: each drawn once, then read where it was kept.
        let tiles = try await Self.tiles(base + "/arcgis/rest/services/basemap/MapServer", around: CrewLoad.area(crew: 5), count: 400)
        rows.append(try await meter.measure("map tile, drawn (levels \(tiles.levels))", count: tiles.paths.count) { i in _ = try await Self.get(tiles.paths[i]) })
        rows.append(try await meter.measure("map tile, drawn before and kept", count: tiles.paths.count) { i in _ = try await Self.get(tiles.paths[i]) })

        // Geoprocessing jobs: submitted, run (Buffer of 10 points) and polled to their end.
        let tenPoints = try JSONValue.parse(try Data(contentsOf: points)).settingFeatures(10)
        let buffer = base + "/arcgis/rest/services/work/GPServer/Buffer"
        rows.append(
            try await meter.measure("GP job: submitJob, Buffer of 10 points, status until it ends", count: 50) { _ in
                let answer = try JSONValue.parse(try await Self.post("\(buffer)/submitJob", ["f": "json", "Method": "GEODESIC", "Input_Features": tenPoints.jsonString]))
                guard let id = answer["jobId"]?.stringValue else { throw BenchError("submitJob answered \(answer.jsonString.prefix(300))") }
                while true {
                    let status = try JSONValue.parse(try await Self.get("\(buffer)/jobs/\(id)?f=json"))["jobStatus"]?.stringValue ?? ""
                    if status == "esriJobSucceeded" { break }
                    guard ["esriJobSubmitted", "esriJobWaiting", "esriJobExecuting", "esriJobNew"].contains(status) else { throw BenchError("GP job \(id) ended \(status)") }
                    try await Task.sleep(for: .milliseconds(5))
                }
            })

        // What the database holds after all this: bytes per row of its largest tables.
        var sizes: [[String]] = []
        for line in try await psql(location, """
            SELECT c.relname, pg_total_relation_size(c.oid), c.reltuples::bigint
            FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE c.relkind = 'r' AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast') AND c.relname <> 'spatial_ref_sys'
            ORDER BY 2 DESC LIMIT 6
            """) {
            let f = line.split(separator: "|").map(String.init)
            guard f.count == 3, let bytes = Double(f[1]), let rows = Double(f[2]) else { continue }
            sizes.append([f[0], format(rows), format(bytes / 1_000_000, 1), rows > 0 ? format(bytes / rows) : "n/a"])
        }
        printTable("The database's largest tables afterwards (after ANALYZE; indexes and TOAST included)", ["table", "rows", "MB", "bytes a row"], sizes)

        printTable(
            "What one operation costs an `outpost serve --postgres` host and its database (release build, one host, PostgreSQL on the same \(ProcessInfo.processInfo.activeProcessorCount) cores)",
            ["operation", "count", "wall ms", "host CPU ms", "db CPU ms", "note"], rows)
        print("CPU: user + system time over the operations run in a row, divided by their count; the database's counts its postmaster and every backend and background process.")
    }

    /// The CPU clocks of the serve process and of the database's postmaster.
    struct Meter {
        let server: pid_t
        let database: pid_t?

        /// Runs `body` `count` times in a row, the first run included (the caller warms up where it
        /// matters: one sync runs before the measured ones); its row: the name, the
        /// count, and wall time, host CPU and database CPU per run in milliseconds.
        func measure(_ name: String, count: Int, _ body: (Int) async throws -> Void) async throws -> [String] {
            let start = (ContinuousClock.now, CPUTime.seconds(ofTree: server), database.map { CPUTime.seconds(ofTree: $0) } ?? 0)
            for i in 0..<count { try await body(i) }
            let wall = (ContinuousClock.now - start.0).seconds
            let host = CPUTime.seconds(ofTree: server) - start.1
            let db = (database.map { CPUTime.seconds(ofTree: $0) } ?? 0) - start.2
            let per = { (s: Double) in format(s * 1000 / Double(count), 2) }
            print("  \(name): \(count) in \(format(wall, 1)) s")
            return [name, String(count), per(wall), per(host), database == nil ? "n/a" : per(db), ""]
        }
    }

    /// psql's rows for `sql` (ANALYZE first, so row estimates are current).
    static func psql(_ location: PostgresLocation, _ sql: String) async throws -> [String] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/psql")
        process.arguments = [location.url, "-XAtq", "-v", "ON_ERROR_STOP=1", "-c", "ANALYZE", "-c", sql]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw BenchError("psql failed on \(sql.prefix(80))") }
        return String(decoding: output, as: UTF8.self).split(separator: "\n").map(String.init)
    }

    /// The database server's postmaster: the parent of a backend, when the server runs on this
    /// machine.
    static func postmaster(_ location: PostgresLocation) async throws -> pid_t? {
        // A backend that lives while its parent is looked up.
        let probe = Process()
        probe.executableURL = URL(fileURLWithPath: "/usr/bin/psql")
        probe.arguments = [location.url, "-XAtq", "-c", "SELECT pg_backend_pid()", "-c", "SELECT pg_sleep(2)"]
        let probePipe = Pipe()
        probe.standardOutput = probePipe
        try probe.run()
        defer { probe.waitUntilExit() }
        var line = Data()
        while true {
            let byte = probePipe.fileHandleForReading.readData(ofLength: 1)
            if byte.isEmpty || byte.first == 10 { break }
            line.append(byte)
        }
        guard let live = pid_t(String(decoding: line, as: UTF8.self)) else { return nil }
        return CPUTime.parent(of: live)
    }

    /// `count` tiles of the map over `area`.
    static func tiles(_ mapServer: String, around area: Envelope, count: Int) async throws -> (levels: String, paths: [String]) {
        let info = try JSONValue.parse(try await get(mapServer + "?f=json"))
        guard let tileInfo = info["tileInfo"], let ox = tileInfo["origin"]?["x"]?.doubleValue, let oy = tileInfo["origin"]?["y"]?.doubleValue,
            let size = tileInfo["rows"]?.doubleValue, let lods = tileInfo["lods"]?.arrayValue
        else { throw BenchError("the map service has no tile scheme: \(info.jsonString.prefix(300))") }
        // The area is in degrees; a Web Mercator scheme's tiles are in metres.
        var area = area
        if [3857, 102100].contains(tileInfo["spatialReference"]?["wkid"]?.integerValue.map(Int.init) ?? 4326) {
            let r = 6_378_137.0
            func y(_ lat: Double) -> Double { r * log(tan((90 + lat) * .pi / 360)) }
            area = Envelope(xmin: area.xmin * .pi / 180 * r, ymin: y(area.ymin), xmax: area.xmax * .pi / 180 * r, ymax: y(area.ymax))
        }
        // Every tile over the area from the coarsest level on, until there are `count`: a map
        // viewer's mix, most of them of the finest levels reached.
        var paths: [String] = [], levels: [Int] = []
        for lod in lods {
            guard let level = lod["level"]?.integerValue.map(Int.init), let resolution = lod["resolution"]?.doubleValue else { continue }
            let span = resolution * size
            let c0 = Int(((area.xmin - ox) / span).rounded(.down)), c1 = Int(((area.xmax - ox) / span).rounded(.down))
            let r0 = Int(((oy - area.ymax) / span).rounded(.down)), r1 = Int(((oy - area.ymin) / span).rounded(.down))
            for r in r0...r1 { for c in c0...c1 where paths.count < count { paths.append("\(mapServer)/tile/\(level)/\(r)/\(c)") } }
            levels.append(level)
            if paths.count == count { return ("\(levels.first!)-\(level)", paths) }
        }
        throw BenchError("no level of the map has \(count) tiles around the area")
    }

    static func get(_ url: String, accept: String? = nil) async throws -> Data {
        var request = HTTPClientRequest(url: url)
        if let accept { request.headers.add(name: "Accept", value: accept) }
        return try await body(of: request, url)
    }

    static func post(_ url: String, _ form: [String: String]) async throws -> Data {
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        let text = form.map { "\($0.key)=\($0.value.addingPercentEncoding(withAllowedCharacters: allowed)!)" }.joined(separator: "&")
        request.body = .bytes(ByteBuffer(string: text))
        return try await body(of: request, url)
    }

    private static func body(of request: HTTPClientRequest, _ url: String) async throws -> Data {
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(300))
        var data = Data()
        for try await chunk in response.body { data.append(contentsOf: chunk.readableBytesView) }
        guard response.status.code == 200 else { throw BenchError("\(url.prefix(200)): \(response.status.code) \(String(decoding: data.prefix(300), as: UTF8.self))") }
        return data
    }

    /// A server's `/metrics` samples without labels, by name.
    enum Metrics {
        static func scrape(_ base: String) async throws -> [String: Double] {
            var values: [String: Double] = [:]
            for line in String(decoding: try await CostsBenchmark.get(base + "/metrics"), as: UTF8.self).split(separator: "\n") where !line.hasPrefix("#") {
                let parts = line.split(separator: " ")
                guard parts.count == 2, !parts[0].contains("{"), let value = Double(parts[1]) else { continue }
                values[String(parts[0])] = value
            }
            return values
        }
    }
}

extension JSONValue {
    /// A feature set with its first `count` features.
    fileprivate func settingFeatures(_ count: Int) -> JSONValue {
        guard var object = objectValue, let features = object["features"]?.arrayValue else { return self }
        object["features"] = .array(Array(features.prefix(count)))
        return .object(object)
    }
}
