import Foundation
import OutpostCore
import OutpostPostgres
import OutpostProtocol
import OutpostServer
import OutpostStorage
import OutpostSyncService
import OutpostTestSupport
import OutpostServiceTestSupport
import Testing

/// `outpost serve --postgres`: several processes on one database, and a database that goes away.
@Suite("PostgreSQL behind outpost serve", .enabled(if: BackendKind.postgresURL != nil, "run ./scripts/test: it starts PostgreSQL"))
struct PostgresServerTests {
    /// Invariant I5 across processes: two server processes commit edits concurrently while a
    /// reader, like the download feed, reads the service generation G and then the changes up to
    /// G. Had any commit taken a generation below one already visible, a reader would have seen G
    /// with a gap below it that filled in later; every observation must still hold at the end.
    @Test(.scaledTimeLimit(minutes: 3))
    func generationsFollowCommitOrderAcrossProcesses() async throws {
        let service = try await TestService.fieldInspection(.postgres)
        try await service.backend.close()
        let database = try #require(service.postgres)
        let servers = [try await ServeProcess.start(service), try await ServeProcess.start(service)]
        let writers = Task {
            try await withThrowingTaskGroup(of: Bool.self) { group in
                for i in 0..<16 {
                    group.addTask {
                        let base = servers[i % 2].featureServer("field_inspection").absoluteString
                        for j in 0..<6 {
                            let adds = #"[{"attributes":{"asset_id":"P-\#(i)-\#(j)","asset_type":"pole"},"geometry":{"x":-122.65,"y":45.52}}]"#
                            let r = try await ExternalTools.run("curl", ["-s", "--data-urlencode", "adds=\(adds)", base + "/0/applyEdits"])
                            guard r.stdout.contains("\"success\":true") else { return false }
                        }
                        return true
                    }
                }
                var all = true
                for try await ok in group { all = all && ok }
                return all
            }
        }
        var observations: [(generation: Int64, seen: Set<Int64>)] = []
        while true {
            let g = try await Self.query(database, "SELECT generation FROM outpost_services WHERE name = 'field_inspection'")
            let generation = Int64(g.first ?? "") ?? 0
            let seen = try await Self.query(database, "SELECT DISTINCT generation FROM outpost_change_log WHERE generation <= \(generation)")
            observations.append((generation, Set(seen.compactMap { Int64($0) })))
            // Done when the last commit is visible (or, should writers fail, after a while).
            if generation >= 97 || observations.count > 1500 { break }
        }
        #expect(try await writers.value, "every applyEdits succeeded")
        let final = try await Self.query(database, "SELECT DISTINCT generation FROM outpost_change_log")
        let all = Set(final.compactMap { Int64($0) })
        #expect(all == Set(2...97), "96 commits, generations 2…97 without gaps or repeats: \(all.sorted())")
        for (generation, seen) in observations {
            #expect(seen == all.filter { $0 <= generation }, "a reader at generation \(generation) missed a commit that appeared later below it")
        }
        #expect(observations.count > 3, "the reader ran alongside the writers")
        for server in servers { #expect(await server.stop() == 0) }
    }

    /// Exactly once across processes: every batch of a replica is sent to two server processes
    /// at the same moment. One applies it, the other answers with the stored result; each batch
    /// applies once, under one generation.
    @Test(.scaledTimeLimit(minutes: 3))
    func aBatchSentToTwoProcessesAtOnceAppliesOnce() async throws {
        let service = try await TestService.fieldInspection(.postgres)
        let sync = try #require(service.backend as? any SyncBackend)
        let info = try await sync.createReplica(
            ReplicaRequest(name: "twice", layers: [.init(id: 0, serverGen: 0, syncDirection: .bidirectional)]),
            serviceURL: "http://127.0.0.1/arcgis/rest/services/field_inspection/FeatureServer", format: .json,
            writingTo: service.directory.file("twice.json"))
        let before = try await service.backend.generation()
        try await service.backend.close()
        let servers = [try await ServeProcess.start(service), try await ServeProcess.start(service)]
        let batches = 12
        var replayed = 0
        for seq in 1...batches {
            let gid = String(format: "{0D0D0D0D-0000-4000-8000-%012d}", seq)
            let body = try UploadBatch(
                replicaId: info.replicaID, batchId: GlobalID.make(), seq: Int64(seq), schemaVersion: 1, rollbackOnFailure: true,
                layers: [BatchLayer(id: 0, edits: [BatchEdit(op: .insert, globalId: gid, attributes: ["asset_id": .string("T-\(seq)"), "asset_type": "valve"], geometry: ["x": -122.6, "y": 45.5])])]
            ).encoded()
            let file = service.directory.file("batch-\(seq).json")
            try body.write(to: file)
            let answers = try await withThrowingTaskGroup(of: CommandResult.self) { group in
                for server in servers {
                    let url = server.url.appendingPathComponent("outpost/v1/services/field_inspection/replicas/\(info.replicaID)/batches/\(seq)").absoluteString
                    group.addTask {
                        try await ExternalTools.run("curl", ["-s", "-X", "PUT", "-H", "Content-Type: application/json", "--data-binary", "@\(file.path)", url])
                    }
                }
                var out: [CommandResult] = []
                for try await answer in group { out.append(answer) }
                return out
            }
            let results = try answers.map { try JSONDecoder().decode(BatchResult.self, from: Data($0.stdout.utf8)) }
            #expect(results.allSatisfy { $0.layers.first?.results.first?.success == true }, "\(answers.map(\.stdout))")
            #expect(results.filter { $0.replayed == true }.count == 1, "one process applied batch \(seq), the other replayed it: \(answers.map(\.stdout))")
            replayed += results.filter { $0.replayed == true }.count
            #expect(Set(results.map(\.generation)).count == 1, "both answers name the same generation")
        }
        #expect(replayed == batches)
        let reopened = try await service.reopened()
        #expect(try await reopened.generation() == before + Int64(batches), "each batch committed once")
        #expect(try await reopened.count(layerID: 0, query: FeatureQuery(where: "asset_id LIKE 'T-%'")) == batches, "no duplicates")
        try await reopened.close()
        for server in servers { #expect(await server.stop() == 0) }
    }

    /// A schema change made with `outpost service migrate --postgres` reaches a server process that is already running: its
    /// next answer about the layer names the new field, and an edit may set it.
    @Test(.scaledTimeLimit(minutes: 2))
    func aSchemaChangeReachesRunningProcesses() async throws {
        let service = try await TestService.fieldInspection(.postgres)
        let server = try await ServeProcess.start(service)
        let layer = server.featureServer("field_inspection").absoluteString + "/0"
        #expect(try await ExternalTools.run("curl", ["-s", layer + "?f=json"]).stdout.contains("photo_count") == false)
        var next = try await service.backend.schema()
        next.layers[0].fields.append(FieldDefinition(name: "photo_count", type: .smallInteger, nullable: true))
        // Through the command line, while the server runs.
        let file = service.directory.file("next-schema.json")
        try next.encoded().write(to: file)
        let database = try #require(service.postgres)
        let migrate = try await ExternalTools.run(
            Repository.outpostExecutable.path, ["service", "migrate", "field_inspection", "--schema", file.path, "--postgres", database.url, "--json"])
        #expect(migrate.succeeded, "\(migrate.stderr)")
        #expect(try JSONValue.parse(migrate.stdout)["steps"]?.arrayValue?.count == 1, "\(migrate.stdout)")
        #expect(try await ExternalTools.run("curl", ["-s", layer + "?f=json"]).stdout.contains("photo_count"))
        let adds = #"[{"attributes":{"asset_id":"S-1","asset_type":"valve","photo_count":3},"geometry":{"x":-122.65,"y":45.52}}]"#
        let edit = try await ExternalTools.run("curl", ["-s", "--data-urlencode", "adds=\(adds)", layer + "/applyEdits"])
        #expect(edit.stdout.contains("\"success\":true"), "\(edit.stdout)")
        #expect(try await service.backend.count(layerID: 0, query: FeatureQuery(where: "photo_count = 3")) == 1)
        try await service.backend.close()
        #expect(await server.stop() == 0)
    }

    /// A job started by one process is seen by another: two processes with one database and one
    /// output directory; an async createReplica sent to the first is polled, and its file
    /// fetched, through the second.
    @Test(.scaledTimeLimit(minutes: 2))
    func jobStatusAndFilesAnswerFromAnyProcess() async throws {
        let service = try await TestService.fieldInspection(.postgres)
        try await service.backend.close()
        let shared = service.directory.file("server-files").path
        let servers = [
            try await ServeProcess.start(service, arguments: ["--output-directory", shared]),
            try await ServeProcess.start(service, arguments: ["--output-directory", shared]),
        ]
        let first = servers[0].featureServer("field_inspection").absoluteString, second = servers[1].featureServer("field_inspection").absoluteString
        let started = try await ExternalTools.run("curl", ["-s", "-d", "f=json", "-d", "layers=0", "-d", "dataFormat=json", "-d", "async=true", first + "/createReplica"])
        let statusURL = try #require(try JSONValue.parse(started.stdout)["statusUrl"]?.stringValue, "\(started.stdout)")
        let jobID = try #require(statusURL.split(separator: "/").last.map(String.init))
        var job = JSONValue.null
        for _ in 0..<100 {
            job = try JSONValue.parse(try await ExternalTools.run("curl", ["-s", second + "/jobs/\(jobID)?f=json"]).stdout)
            if ["Completed", "Failed"].contains(job["status"]?.stringValue ?? "") { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(job["status"] == "Completed", "the other process reports the job: \(job)")
        let result = try #require(job["resultUrl"]?.stringValue?.split(separator: "/").last.map(String.init))
        let replica = try await ExternalTools.run("curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", second + "/replicafiles/\(result)"])
        #expect(replica.stdout == "200", "the other process serves the file from the shared directory")
        #expect(try await ExternalTools.run("curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", second + "/jobs/nope?f=json"]).stdout == "404")
        for server in servers { #expect(await server.stop() == 0) }
    }

    /// `--site-directory`: two processes given one site directory hand out each other's replica
    /// files from its `results/`, and `/ready` checks the directory: a host whose site
    /// directory takes no file answers 503 with the reason, and ready again once it does.
    @Test(.scaledTimeLimit(minutes: 2))
    func theSiteDirectoryIsSharedAndCheckedForReadiness() async throws {
        let service = try await TestService.fieldInspection(.postgres)
        try await service.backend.close()
        let site = service.directory.file("site")
        let servers = [
            try await ServeProcess.start(service, arguments: ["--site-directory", site.path]),
            try await ServeProcess.start(service, arguments: ["--site-directory", site.path]),
        ]
        let first = servers[0].featureServer("field_inspection").absoluteString, second = servers[1].featureServer("field_inspection").absoluteString
        let made = try JSONValue.parse(
            try await ExternalTools.run("curl", ["-s", "-d", "f=json", "-d", "layers=0", "-d", "dataFormat=sqlite", first + "/createReplica"]).stdout)
        let name = try #require(made["URL"]?.stringValue?.split(separator: "/").last.map(String.init), "\(made)")
        #expect(FileManager.default.fileExists(atPath: site.appendingPathComponent("results/\(name)").path), "written in the site directory's results/")
        let fetched = service.directory.file("fetched.gpkg")
        let download = try await ExternalTools.run("curl", ["-s", "-o", fetched.path, "-w", "%{http_code}", second + "/replicafiles/\(name)"])
        #expect(download.stdout == "200", "the other host hands out the file")
        #expect(try Data(contentsOf: fetched).prefix(15) == Data("SQLite format 3".utf8))

        func ready(_ server: ServeProcess) async throws -> (status: String, body: JSONValue) {
            let r = try await ExternalTools.run("curl", ["-s", "-w", "\n%{http_code}", server.url.appendingPathComponent("ready").absoluteString])
            let lines = r.stdout.split(separator: "\n")
            return (String(lines.last ?? ""), try JSONValue.parse(String(lines.dropLast().joined(separator: "\n"))))
        }
        #expect(try await ready(servers[0]).status == "200")
        // The directory gone and a file in its place (a mount lost): neither host is ready.
        let moved = service.directory.file("site-away")
        try FileManager.default.moveItem(at: site, to: moved)
        try Data("not a directory".utf8).write(to: site)
        for server in servers {
            let (status, body) = try await ready(server)
            #expect(status == "503" && body["check"] == "site directory" && body["reason"]?.stringValue?.contains(site.path) == true, "\(body)")
        }
        try FileManager.default.removeItem(at: site)
        try FileManager.default.moveItem(at: moved, to: site)
        #expect(try await ready(servers[1]).status == "200")
        for server in servers { #expect(await server.stop() == 0) }

        let both = try await ExternalTools.run(
            Repository.outpostExecutable.path, ["serve", "--postgres", try #require(service.postgres).url, "--site-directory", site.path, "--output-directory", site.path],
            timeout: 60)
        #expect(!both.succeeded && both.stderr.contains("--site-directory holds the output directory"), "\(both.stderr)")
    }

    /// A cancel sent to another process reaches the running job through the database: a tile
    /// export (drawn from a GeoPackage service both processes serve) started on the first process
    /// and cancelled through the second stops, and both report it cancelled.
    @Test(.scaledTimeLimit(minutes: 2))
    func aCancelSentToAnotherProcessStopsTheJob() async throws {
        let service = try await TestService.fieldInspection(.postgres)
        try await service.backend.close()
        let drawn = try await TestService.fieldInspection(.sqlite)
        try await drawn.backend.close()
        let arguments = ["--service", drawn.file.path, "--name", "field"]
        let servers = [try await ServeProcess.start(service, arguments: arguments), try await ServeProcess.start(service, arguments: arguments)]
        let map = { (i: Int) in servers[i].url.appendingPathComponent("arcgis/rest/services/field/MapServer").absoluteString }
        func status(_ id: String, _ i: Int) async throws -> String {
            try JSONValue.parse(try await ExternalTools.run("curl", ["-s", map(i) + "/jobs/\(id)?f=json"]).stdout)["status"]?.stringValue ?? ""
        }
        let started = try await ExternalTools.run("curl", ["-s", map(0) + "/exportTiles?levels=10-17&exportExtent=-13680000,5690000,-13630000,5730000&f=json"])
        let id = try #require(try JSONValue.parse(started.stdout)["jobId"]?.stringValue, "\(started.stdout)")
        var seen = ""
        for _ in 0..<50 where seen != "InProgress" {
            seen = try await status(id, 1)
            if seen != "InProgress" { try await Task.sleep(for: .milliseconds(50)) }
        }
        #expect(seen == "InProgress", "the other process sees the job running")
        let cancel = try await ExternalTools.run("curl", ["-s", map(1) + "/jobs/\(id)/cancel?f=json"])
        #expect(cancel.stdout.contains("\"success\":true"), "\(cancel.stdout)")
        var final = ""
        for _ in 0..<100 where final != "Cancelled" {
            final = try await status(id, 0)
            if final != "Cancelled" { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(final == "Cancelled", "the running process stopped the job")
        #expect(try await status(id, 1) == "Cancelled")
        for server in servers { #expect(await server.stop() == 0) }
    }

    /// PostgreSQL stops under a running server: requests get a 503 with a message (not a hang,
    /// not a crash), the server stays up, and answers again once the database is back.
    @Test(.scaledTimeLimit(minutes: 3))
    func aDatabaseThatGoesAwayIs503AndTheServerRecovers() async throws {
        try await PostgresCluster.with { cluster in try await Self.outage(cluster) }
    }

    static func outage(_ cluster: PostgresCluster) async throws {
        let service = try await TestService.fieldInspection(.postgres, server: cluster.url())
        try await service.backend.close()
        let server = try await ServeProcess.start(service, arguments: ["--database-timeout", "3"])
        let query = server.featureServer("field_inspection").absoluteString + "/0/query?where=1%3D1&returnCountOnly=true&f=json"
        func get(_ url: String) async throws -> (status: String, body: String) {
            // Under the default --database-timeout (30 s) a request would outlast curl's limit.
            let r = try await ExternalTools.run("curl", ["-s", "-w", "\n%{http_code}", "--max-time", "28", url])
            let lines = r.stdout.split(separator: "\n", omittingEmptySubsequences: false)
            return (String(lines.last ?? ""), lines.dropLast().joined(separator: "\n"))
        }
        #expect(try await get(query) == ("200", #"{"count":300}"#))
        let ready = server.url.appendingPathComponent("ready").absoluteString
        #expect(try await get(ready).status == "200")

        try await cluster.stopServer()
        let unready = try await get(ready)
        #expect(unready.status == "503" && unready.body.contains("unavailable"), "readiness follows the database: \(unready)")
        let started = Date()
        let down = try await get(query)
        #expect(down.status == "503", "\(down)")
        #expect(down.body.contains("PostgreSQL") && down.body.contains("try again"), "\(down.body)")
        // The 3 s timeout, not the 30 s default: on two busy cores (a clean clone's whole suite)
        // the answer once took 23 s with curl's start and end, so the bound leaves room for load
        // and stays below the default.
        #expect(Date().timeIntervalSince(started) < 26, "answered within the database timeout, not hung")
        let edit = try await ExternalTools.run(
            "curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "--data-urlencode", #"adds=[{"attributes":{"asset_id":"X"}}]"#, server.featureServer("field_inspection").absoluteString + "/0/applyEdits"])
        #expect(edit.stdout == "503")
        #expect(try await get(server.url.appendingPathComponent("health").absoluteString).status == "200", "the server itself stays up")

        try await cluster.startServer()
        var recovered = false
        for _ in 0..<60 where !recovered {
            recovered = try await get(query) == ("200", #"{"count":300}"#)
            if !recovered { try await Task.sleep(for: .milliseconds(500)) }
        }
        #expect(recovered, "answers again once PostgreSQL is back")
        #expect(try await get(ready).status == "200")
        #expect(await server.stop() == 0)
    }

    /// Database failover under a serving process: PostgreSQL with a synchronous hot standby,
    /// the server given both (`postgres://…@primary,standby/db`), crews adding features the whole
    /// time. The primary is stopped at once and the standby promoted: requests in between get
    /// 503 (never another 5xx), the server moves to the new primary by itself, and every
    /// acknowledged feature is there exactly once.
    @Test(.scaledTimeLimit(minutes: 4))
    func editsCarryOnAcrossADatabaseFailover() async throws {
        try await PostgresCluster.with { primary in
            let standby = try await primary.startStandby(synchronous: true)
            do {
                try await Self.failover(primary, standby)
                await standby.destroy()
            } catch {
                await standby.destroy()
                throw error
            }
        }
    }

    static func failover(_ primary: PostgresCluster, _ standby: PostgresCluster) async throws {
        let service = try await TestService.fieldInspection(.postgres, server: primary.url())
        try await service.backend.close()
        var listed = try #require(service.postgres)
        listed.servers.append(.init(host: "127.0.0.1", port: standby.port))
        let log = service.directory.file("serve.log")
        let server = try await ServeProcess.start(source: ["--postgres", listed.url], arguments: ["--database-timeout", "3"], errorLog: log)
        let crews = 4, edits = 24
        let writers = FailoverWriters(layer: server.featureServer("field_inspection").absoluteString + "/0")
        let work = Task {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for crew in 0..<crews {
                    group.addTask {
                        for n in 0..<edits { try await writers.add("F-\(crew)-\(n)") }
                    }
                }
                try await group.waitForAll()
            }
        }
        while writers.state.withLock({ $0.acknowledged }) < crews * edits / 3 { try await Task.sleep(for: .milliseconds(50)) }
        try await primary.stopServer()
        try await Task.sleep(for: .seconds(1))
        try await standby.promote()
        try await work.value

        let counts = try await Self.query(
            try PostgresLocation(url: standby.url(database: listed.database)),
            "SELECT asset_id || '=' || count(*) FROM field_inspection.inspection_points WHERE asset_id LIKE 'F-%' GROUP BY asset_id ORDER BY asset_id")
        let expected = (0..<crews).flatMap { crew in (0..<edits).map { "F-\(crew)-\($0)=1" } }.sorted()
        #expect(counts.sorted() == expected, "every acknowledged feature once: \(counts.filter { !$0.hasSuffix("=1") }), \(counts.count) of \(expected.count)")
        let seen = writers.state.withLock { $0.statuses }
        let other = seen.filter { ![200, 503].contains($0.key) }
        let said = try String(contentsOf: log, encoding: .utf8)
        let faults = said.split(separator: "\n").filter { $0.contains("error") && !$0.contains("503") }.suffix(4)
        #expect(other.isEmpty, "only 503s while the database switched: \(seen) \(writers.state.withLock { $0.odd }) \(faults)")
        #expect(seen[503, default: 0] > 0, "the switch was seen: \(seen)")
        #expect(said.contains("primary moved"), "\(said.suffix(2000))")
        let stopped = await server.stop()
        #expect(stopped == 0, "\(said.suffix(2000))")
    }

    /// psql's rows for one query, as text.
    static func query(_ location: PostgresLocation, _ sql: String) async throws -> [String] {
        let run = try await ExternalTools.run("psql", [location.url, "-XAtq", "-v", "ON_ERROR_STOP=1", "-c", sql])
        guard run.succeeded else { throw ServiceError(500, run.stderr) }
        return run.stdout.split(separator: "\n").map(String.init)
    }
}

/// Crews adding features through a database failover, the way a careful client does: on a 503
/// or no answer, look whether the feature landed before sending it again.
final class FailoverWriters: Sendable {
    let layer: String
    /// Features acknowledged, and how often each HTTP status was answered.
    let state = Locked<(acknowledged: Int, statuses: [Int: Int], odd: [String])>((0, [:], []))

    init(layer: String) { self.layer = layer }

    /// An HTTP status and body.
    func call(_ arguments: [String]) async throws -> (status: Int, body: String) {
        let r = try await ExternalTools.run("curl", ["-s", "-w", "\n%{http_code}", "--max-time", "20"] + arguments)
        let lines = r.stdout.split(separator: "\n", omittingEmptySubsequences: false)
        let status = Int(lines.last ?? "") ?? 0
        let body = lines.dropLast().joined(separator: "\n")
        state.withLock {
            $0.statuses[status, default: 0] += 1
            if ![200, 503].contains(status) { $0.odd.append("\(status): \(body.prefix(300))") }
        }
        return (status, body)
    }

    /// Adds the feature `id`; returns once it is acknowledged.
    func add(_ id: String) async throws {
        while true {
            let r = try await call(["--data-urlencode", #"adds=[{"attributes":{"asset_id":"\#(id)","asset_type":"valve"},"geometry":{"x":-122.65,"y":45.52}}]"#, "-d", "f=json", layer + "/applyEdits"])
            if r.status == 200, r.body.contains("\"success\":true") { break }
            if try await landed(id) { break }
        }
        state.withLock { $0.acknowledged += 1 }
    }

    /// Whether the feature `id` is stored, asked until the server answers: an add whose answer
    /// was lost may have committed (the old primary commits, then stops before it answers, and
    /// the promoted standby has the row), so it is sent again only on an answer that it is not.
    func landed(_ id: String) async throws -> Bool {
        while true {
            try await Task.sleep(for: .milliseconds(200))
            let count = try await call([layer + "/query?where=asset_id%3D%27\(id)%27&returnCountOnly=true&f=json"])
            if count.status == 200, count.body.contains("\"count\":") { return count.body.contains("\"count\":1") }
        }
    }
}

extension PostgresServerTests {
    /// Server jobs handed from host to host: one test at a time, as each keeps tile exports
    /// running in two processes for a while (beside each other and the rest of the suite on 2
    /// cores they starved the database other tests wait on).
    @Suite(.serialized) struct JobHandOver {
        /// A process killed while it runs a tile export: once its lease has run out, another
        /// process serving the database takes the job and runs it again from its start, and the
        /// job's client, polling on, sees it complete there and fetches its package from the site
        /// directory; a job the live process runs is left running.
        @Test(.scaledTimeLimit(minutes: 5))
        func aKilledProcesssJobIsRunAgainByAnother() async throws {
            let service = try await TestService.fieldInspection(.postgres)
            try await service.backend.close()
            let drawn = try await TestService.fieldInspection(.sqlite)
            try await drawn.backend.close()
            let site = service.directory.file("site")
            let arguments = ["--service", drawn.file.path, "--name", "field", "--job-lease", "1.5", "--site-directory", site.path]
            let servers = [try await ServeProcess.start(service, arguments: arguments), try await ServeProcess.start(service, arguments: arguments)]
            let map = { (i: Int) in servers[i].url.appendingPathComponent("arcgis/rest/services/field/MapServer").absoluteString }
            func status(_ id: String) async throws -> JSONValue {
                try JSONValue.parse(try await ExternalTools.run("curl", ["-s", map(1) + "/jobs/\(id)?f=json"]).stdout)
            }
            func export(_ i: Int, levels: String) async throws -> String {
                let started = try await ExternalTools.run("curl", ["-s", map(i) + "/exportTiles?levels=\(levels)&exportExtent=-13680000,5690000,-13630000,5730000&f=json"])
                return try #require(try JSONValue.parse(started.stdout)["jobId"]?.stringValue, "\(started.stdout)")
            }
            let orphan = try await export(0, levels: "10-13"), alive = try await export(1, levels: "10-17")
            var seen = JSONValue.null
            for _ in 0..<50 where seen["status"] != "InProgress" {
                seen = try await status(orphan)
                if seen["status"] != "InProgress" { try await Task.sleep(for: .milliseconds(50)) }
            }
            #expect(seen["status"] == "InProgress", "\(seen)")
            #expect(await servers[0].stop(signal: SIGKILL) != 0)
            // Polled for up to four minutes: the lease is 1.5 s, then the export runs again whole
            // (seen running before the kill, so only another process can complete it).
            let deadline = Date().addingTimeInterval(240)
            while seen["status"] == "InProgress" || seen["status"] == "Pending", Date() < deadline {
                try await Task.sleep(for: .milliseconds(200))
                seen = try await status(orphan)
            }
            #expect(seen["status"] == "Completed", "\(seen)")
            let package = try #require(seen["resultUrl"]?.stringValue?.split(separator: "/").last.map(String.init), "\(seen)")
            let fetched = try await ExternalTools.run("curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", map(1) + "/tilefiles/\(package)"])
            #expect(fetched.stdout == "200", "the package is in the site directory")
            // The live process's job was renewed all along: still running, or done, never failed.
            let other = try await status(alive)
            #expect(other["status"] == "InProgress" || other["status"] == "Completed", "\(other)")
            _ = try await ExternalTools.run("curl", ["-s", map(1) + "/jobs/\(alive)/cancel?f=json"])
            #expect(await servers[1].stop() == 0)
        }

        /// A drained host (SIGTERM) takes no new work, lets its jobs run until the drain's end, and
        /// then hands back those still running: their leases end at once, so another host runs them
        /// again at its next look instead of a lease later. The lease here is long (20 s) and the
        /// drain short (1 s): the job's row shows the hand-back (this host's, its lease ended), or
        /// the other host already holding it.
        @Test(.scaledTimeLimit(minutes: 5))
        func aDrainedHostHandsBackTheJobsItCouldNotFinish() async throws {
            let service = try await TestService.fieldInspection(.postgres)
            try await service.backend.close()
            let database = try #require(service.postgres)
            let drawn = try await TestService.fieldInspection(.sqlite)
            try await drawn.backend.close()
            let arguments = [
                "--service", drawn.file.path, "--name", "field", "--job-lease", "20", "--drain-seconds", "1", "--site-directory", service.directory.file("site").path,
            ]
            let servers = [try await ServeProcess.start(service, arguments: arguments), try await ServeProcess.start(service, arguments: arguments)]
            let map = { (i: Int) in servers[i].url.appendingPathComponent("arcgis/rest/services/field/MapServer").absoluteString }
            func status(_ id: String) async throws -> JSONValue {
                try JSONValue.parse(try await ExternalTools.run("curl", ["-s", map(1) + "/jobs/\(id)?f=json"]).stdout)
            }
            let started = try await ExternalTools.run("curl", ["-s", map(0) + "/exportTiles?levels=10-14&exportExtent=-13680000,5690000,-13630000,5730000&f=json"])
            let id = try #require(try JSONValue.parse(started.stdout)["jobId"]?.stringValue, "\(started.stdout)")
            var seen = JSONValue.null
            for _ in 0..<50 where seen["status"] != "InProgress" {
                seen = try await status(id)
                if seen["status"] != "InProgress" { try await Task.sleep(for: .milliseconds(50)) }
            }
            #expect(seen["status"] == "InProgress", "\(seen)")
            let holder = try await PostgresServerTests.query(database, "SELECT host FROM outpost_jobs WHERE job_id = '\(id)'")
            #expect(await servers[0].stop() == 0, "a drain ends the process cleanly")
            let row = try await PostgresServerTests.query(database, "SELECT host || ' ' || (lease_until = 0)::text FROM outpost_jobs WHERE job_id = '\(id)'")
            let handedBack = row == holder.map { "\($0) true" }
            let taken = row.first?.hasPrefix(holder.first ?? "?") == false
            #expect(handedBack || taken, "the drained host's job: \(row), held by \(holder) before")
            // Run again whole by the other host, to its end.
            let deadline = Date().addingTimeInterval(240)
            while seen["status"] == "InProgress" || seen["status"] == "Pending", Date() < deadline {
                try await Task.sleep(for: .milliseconds(200))
                seen = try await status(id)
            }
            #expect(seen["status"] == "Completed", "\(seen)")
            let starts = try await PostgresServerTests.query(database, "SELECT starts FROM outpost_jobs WHERE job_id = '\(id)'")
            #expect(starts == ["2"], "started by the drained host, then once by the other")
            #expect(await servers[1].stop() == 0)
        }
    }
}
