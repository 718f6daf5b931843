import Foundation
import OutpostCore
import OutpostTestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// An Outpost site on a network of its own, built on this machine out of Linux network
/// namespaces, and crews syncing through it while a host is killed and the database fails over.
///
/// Each machine is a namespace with its own address on one bridge (`SiteNetwork`):
/// - `db1` and `db2`: a PostgreSQL primary with PostGIS and its hot standby, following it by
///   synchronous streaming replication (a commit is acknowledged once the standby has it);
/// - `h1`…`hN`: `outpost serve --postgres postgres://…@db1,db2/outpost`, one per machine;
/// - `balancer`: HAProxy, sending requests round-robin to the hosts that answer `/ready`, and
///   sending a request again to another host when the one it went to refused the connection or
///   closed it without an answer (safe for sync: every upload is applied once by its ledger);
/// - `crews`: ``CrewLoad``'s crews, syncing through the balancer only, in a process of their own
///   (the driver, ``driverMain(_:)``).
///
/// Geoprocessing jobs are submitted through one host as the crews start and polled through the
/// balancer. While the crews sync, at fractions of their syncs: a tile export and more
/// geoprocessing jobs are submitted to one host
/// and, once it runs, that host is killed with SIGKILL (the export must finish on another host,
/// polled through the balancer) and later started again; and the primary is stopped at once
/// (SIGQUIT, as a crash) and the standby promoted (`pg_ctl promote`). The run then checks ``CrewLoad``'s oracles against the promoted
/// database, and that every answer with a 5xx status came while the database was switching:
/// from the primary's stop until every running host answered `/ready` again, plus the hosts'
/// database timeout (a request waiting on the lost primary is answered 503 at that timeout).
///
/// Needs root (namespaces, and PostgreSQL run as the `postgres` user), iproute2, HAProxy,
/// PostgreSQL with PostGIS, `setpriv` and curl: ``unavailableReason`` says what is missing.
public enum SiteLab {
    /// What a run does.
    public struct Configuration: Sendable {
        /// The crews' load; its `progress` is set by the run.
        public var load: CrewLoad.Configuration
        /// Server hosts behind the balancer.
        public var hosts = 2
        /// The `outpost` executable the hosts run.
        public var outpost: URL
        /// The command that runs ``driverMain(_:)`` (its arguments follow).
        public var driver: [String]
        /// Where the run keeps its files (removed and made again).
        public var directory: URL
        /// The fraction of the concurrent phase's syncs after which the first host is killed.
        public var killAt = 0.25
        /// …after which it is started again.
        public var reviveAt = 0.45
        /// …after which the primary is stopped and the standby promoted.
        public var promoteAt = 0.6
        /// The hosts' `--database-timeout`, in seconds.
        public var databaseTimeout = 5
        /// The levels of the tile export submitted to the first host just before it is killed
        /// (drawn from the crews' GeoPackage over a 10 km square of their area): enough tiles
        /// that it is still running then, and finishes on another host. nil: no export (the
        /// hosts' CPU time is then the crews' alone).
        public var exportLevels: String? = "12-15"
        /// Told each step of the run as it happens.
        public var log: @Sendable (String) -> Void = { _ in }

        /// A run of `crews` crews with `outpost` as the hosts' server and `driver` as the crews'.
        public init(crews: Int, outpost: URL, driver: [String], directory: URL) {
            load = CrewLoad.Configuration(crews: crews)
            self.outpost = outpost
            self.driver = driver
            self.directory = directory
        }
    }

    /// What a run measured and found.
    public struct Report: Sendable {
        /// The crews' own report (syncs, latencies, the oracles' findings).
        public var crews: CrewLoad.Report
        /// Server hosts behind the balancer.
        public var hosts = 0
        /// The run's steps, each with its time from the start of the crews' run.
        public var timeline: [String] = []
        /// From the primary's stop until the hosts could be answered again, in seconds since 1970.
        public var switching: ClosedRange<Double> = 0...0
        /// Answers with a 5xx status while the database was switching.
        public var serverErrorsWhileSwitching = 0
        /// Answers with a 5xx status at any other time.
        public var serverErrorsOtherwise: [CrewLoad.ServerError] = []
        /// The export that was running on the killed host: its final status through the balancer,
        /// and the size of its package fetched there.
        public var export: (status: String, bytes: Int) = ("", 0)
        /// The geoprocessing jobs by how they ended (polled through the balancer): some submitted
        /// through h2, some through h1 just before it was killed.
        public var gpJobs: [String: Int] = [:]
        /// Everything that did not hold: the oracles' findings, steps that did not happen, 5xx
        /// answers outside the switch. Empty when the run is correct.
        public var problems: [String] = []
        /// CPU time (user and system) the server hosts spent during the crews' run, in seconds.
        public var hostCPUSeconds = 0.0
        /// CPU time the PostgreSQL servers spent meanwhile (every server process, the standby's
        /// replay included), in seconds.
        public var databaseCPUSeconds = 0.0
        /// CPU time HAProxy spent meanwhile, in seconds.
        public var balancerCPUSeconds = 0.0
        /// The syncs of the whole crews' run: the concurrent phase's and the two closing rounds'
        /// (each crew's replica was also created in the run, one request each).
        public var allSyncs: Int { crews.syncs + 2 * crews.crews }
    }

    /// Raised when the site cannot be built or run.
    public struct Failure: Error, CustomStringConvertible {
        /// What failed, and what the failing tool said.
        public var description: String
        /// A failure saying `description`.
        public init(_ description: String) { self.description = description }
    }

    /// Why a site cannot be built on this machine, or nil when it can.
    public static var unavailableReason: String? {
        if getuid() != 0 { return "a site of network namespaces needs root" }
        for tool in ["ip", "haproxy", "setpriv", "curl"] where ExternalTools.which(tool) == nil { return "\(tool) is not installed (run ./scripts/test)" }
        if PostgresCluster.binaries == nil { return "PostgreSQL is not installed (run ./scripts/test)" }
        return nil
    }

    static let primaryHost = 11, standbyHost = 12, balancerHost = 5, crewsHost = 100
    static func serverHost(_ i: Int) -> Int { 20 + i }
    static let port = 8080

    /// Builds the site, runs the crews through it with a host killed and a failover, checks
    /// the outcome and removes everything it made.
    public static func run(_ configuration: Configuration) async throws -> Report {
        if let reason = unavailableReason { throw Failure(reason) }
        let network = SiteNetwork()
        let run = try Run(configuration, network)
        defer { try? FileManager.default.removeItem(at: run.databases) }
        do {
            let report = try await run.go()
            await network.tearDown()
            return report
        } catch {
            await network.tearDown()
            throw error
        }
    }

    /// One run's state.
    final class Run: @unchecked Sendable {
        // @unchecked: used by the one task that runs it.
        let configuration: Configuration
        let network: SiteNetwork
        let bin: URL
        let work: URL
        /// The databases' files, in a directory of their own that the `postgres` user can reach
        /// (the caller's may not be).
        let databases: URL
        var hosts: [Int: SpawnedProcess] = [:]
        var balancerProcess: SpawnedProcess?
        var standbyProcess: SpawnedProcess?
        var report: Report
        let started = Date()

        init(_ configuration: Configuration, _ network: SiteNetwork) throws {
            self.configuration = configuration
            self.network = network
            guard let bin = PostgresCluster.binaries else { throw Failure("PostgreSQL is not installed") }
            self.bin = bin
            work = configuration.directory
            databases = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("\(network.prefix)-databases")
            report = Report(crews: CrewLoad.Report())
            report.hosts = configuration.hosts
        }

        var databaseURL: String {
            let servers = [primaryHost, standbyHost].map { "\(SiteNetwork.address($0)):5432" }.joined(separator: ",")
            return "postgres://outpost@\(servers)/outpost"
        }
        var balancer: String { "http://\(SiteNetwork.address(balancerHost)):\(port)" }
        func hostURL(_ i: Int) -> String { "http://\(SiteNetwork.address(serverHost(i))):\(port)" }

        func say(_ step: String) {
            let line = String(format: "%7.1f s  ", Date().timeIntervalSince(started)) + step
            report.timeline.append(line)
            configuration.log(line)
        }

        func go() async throws -> Report {
            try? FileManager.default.removeItem(at: work)
            try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
            try FileManager.default.createDirectory(at: databases, withIntermediateDirectories: true)
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: databases.path)
            var machines: [(name: String, host: Int)] = [("db1", primaryHost), ("db2", standbyHost), ("balancer", balancerHost), ("crews", crewsHost)]
            for i in 1...configuration.hosts { machines.append(("h\(i)", serverHost(i))) }
            try await network.build(machines)
            say("network: \(machines.map { "\($0.name) \(SiteNetwork.address($0.host))" }.joined(separator: ", "))")
            let primary = try await startPrimary()
            try await startStandby()
            say("PostgreSQL: primary on db1, synchronous standby on db2")
            try await network.must("crews", configuration.driver + ["prepare", "--postgres", databaseURL] + loadArguments(), timeout: 300)
            try writeFileServices()
            say("service '\(CrewLoad.serviceName)' loaded")
            for i in 1...configuration.hosts { try await startHost(i) }
            try await startBalancer()
            say("\(configuration.hosts) hosts behind HAProxy at \(balancer)")
            try await runCrews(primary: primary)
            // Every host serves at the end (the killed one came back); a host busy a moment
            // gets ten seconds.
            for i in 1...configuration.hosts {
                do {
                    try await network.wait("host h\(i) ready at the end", seconds: 10) { await network.status(from: "crews", "\(hostURL(i))/ready") == 200 }
                } catch {
                    report.problems.append("host h\(i) is not ready at the end: \(await hostState(i))")
                }
            }
            return report
        }

        /// What host `i` answers on `/ready` (with the reason: the hosts have no security),
        /// whether it runs, and the end of its log: for a failure's message.
        func hostState(_ i: Int) async -> String {
            let answer = try? await network.run("crews", ["curl", "-s", "--noproxy", "*", "-m", "5", "\(hostURL(i))/ready"])
            let running = hosts[i]?.isRunning == true ? "running" : "exited"
            let log = (try? String(contentsOf: work.appendingPathComponent("h\(i).log"), encoding: .utf8)) ?? ""
            return "(\(running)), /ready: \(answer?.stdout.prefix(300) ?? "") log: \(log.suffix(1500))"
        }

        func loadArguments() -> [String] {
            let load = configuration.load
            return [
                "--directory", work.appendingPathComponent("crews").path, "--crews", "\(load.crews)", "--edits", "\(load.editsPerCrew)", "--syncs",
                "\(load.syncsPerCrew)", "--features", "\(load.featuresPerCrew)", "--seed", "\(load.seed)", "--attempts", "\(load.attempts)",
            ]
        }

        /// A directory the `postgres` user owns.
        func databaseDirectory(_ name: String) async throws -> URL {
            let directory = databases.appendingPathComponent(name)
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let owned = try await ExternalTools.run("chown", ["postgres", directory.path])
            guard owned.succeeded else { throw Failure("chown postgres \(directory.path): \(owned.stderr)") }
            return directory
        }

        func startDatabase(_ machine: String, _ directory: URL, host: Int) throws -> SpawnedProcess {
            try network.start(
                machine,
                [
                    bin.appendingPathComponent("postgres").path, "-D", directory.appendingPathComponent("data").path, "-p", "5432", "-k", directory.path,
                    "-c", "listen_addresses=\(SiteNetwork.address(host))", "-c", "fsync=off", "-c", "max_connections=300",
                ], as: "postgres", log: directory.appendingPathComponent("log"))
        }

        func psql(_ host: Int, _ database: String, _ statements: [String]) async throws -> String {
            try await network.must(
                "crews", [bin.appendingPathComponent("psql").path, "-h", SiteNetwork.address(host), "-U", "outpost", "-d", database, "-XAtq", "-v", "ON_ERROR_STOP=1"] + statements.flatMap { ["-c", $0] })
        }

        func waitForDatabase(_ host: Int) async throws {
            try await network.wait("PostgreSQL at \(SiteNetwork.address(host))", seconds: 60) {
                try await network.run("crews", [bin.appendingPathComponent("pg_isready").path, "-q", "-h", SiteNetwork.address(host), "-p", "5432"]).succeeded
            }
        }

        func startPrimary() async throws -> SpawnedProcess {
            let directory = try await databaseDirectory("db1")
            let data = directory.appendingPathComponent("data")
            try await network.must("db1", [bin.appendingPathComponent("initdb").path, "-D", data.path, "-U", "outpost", "--auth=trust", "-E", "UTF8"], as: "postgres")
            // The site's machines may connect, for queries and for replication.
            let hba = data.appendingPathComponent("pg_hba.conf")
            let rules = "\nhost all all \(SiteNetwork.subnet).0/24 trust\nhost replication all \(SiteNetwork.subnet).0/24 trust\n"
            let handle = try FileHandle(forWritingTo: hba)
            try handle.seekToEnd()
            try handle.write(contentsOf: Data(rules.utf8))
            try handle.close()
            let process = try startDatabase("db1", directory, host: primaryHost)
            try await waitForDatabase(primaryHost)
            _ = try await psql(primaryHost, "template1", ["CREATE EXTENSION postgis"])
            _ = try await psql(primaryHost, "postgres", ["CREATE DATABASE outpost"])
            return process
        }

        func startStandby() async throws {
            let directory = try await databaseDirectory("db2")
            try await network.must(
                "db2",
                [
                    bin.appendingPathComponent("pg_basebackup").path, "-h", SiteNetwork.address(primaryHost), "-p", "5432", "-U", "outpost", "-D",
                    directory.appendingPathComponent("data").path, "-R", "-X", "stream", "-c", "fast",
                ], as: "postgres", timeout: 300)
            standbyProcess = try startDatabase("db2", directory, host: standbyHost)
            try await waitForDatabase(standbyHost)
            _ = try await psql(primaryHost, "postgres", ["ALTER SYSTEM SET synchronous_standby_names = '*'", "SELECT pg_reload_conf()"])
            try await network.wait("the standby streaming synchronously", seconds: 60) {
                try await psql(primaryHost, "postgres", ["SELECT sync_state FROM pg_stat_replication WHERE state = 'streaming'"]).contains("sync")
            }
        }

        func startHost(_ i: Int) async throws {
            hosts[i] = try network.start(
                "h\(i)",
                [
                    configuration.outpost.path, "serve", "--postgres", databaseURL, "--service", work.appendingPathComponent("services").path, "--host", SiteNetwork.address(serverHost(i)), "--port", "\(port)",
                    "--database-timeout", "\(configuration.databaseTimeout)", "--site-directory", work.appendingPathComponent("site").path,
                ], log: work.appendingPathComponent("h\(i).log"))
            try await network.wait("host h\(i) ready", seconds: 120) { await network.status(from: "crews", "\(hostURL(i))/ready") == 200 }
        }

        func startBalancer() async throws {
            let servers = (1...configuration.hosts).map { "    server h\($0) \(SiteNetwork.address(serverHost($0))):\(port) check" }
            let text = """
                global
                    maxconn 4000
                    # Big enough to hold a whole sync request, so one cut off by a host's death
                    # can be sent again.
                    tune.bufsize 262144
                defaults
                    mode http
                    timeout connect 2s
                    timeout client 120s
                    timeout server 120s
                    retries 3
                    option redispatch 1
                    retry-on conn-failure empty-response
                frontend site
                    bind \(SiteNetwork.address(balancerHost)):\(port)
                    default_backend hosts
                backend hosts
                    balance roundrobin
                    option httpchk GET /ready
                    http-check expect status 200
                    # A host slow to answer on a loaded machine is not down: a check may take 3 s.
                    timeout check 3s
                    default-server inter 500ms fall 3 rise 2
                \(servers.joined(separator: "\n"))

                """
            let file = work.appendingPathComponent("haproxy.cfg")
            try text.write(to: file, atomically: true, encoding: .utf8)
            balancerProcess = try network.start("balancer", ["haproxy", "-db", "-f", file.path], log: work.appendingPathComponent("haproxy.log"))
            try await network.wait("HAProxy ready", seconds: 60) { await network.status(from: "crews", "\(balancer)/ready") == 200 }
        }

        /// The crews' run, with the kill, the revival and the failover at their moments.
        func runCrews(primary: SpawnedProcess) async throws {
            let (read, write) = try SpawnedProcess.pipe()
            let crews: SpawnedProcess
            do {
                defer { close(write) }
                crews = try network.start(
                    "crews", configuration.driver + ["crews", "--url", balancer, "--postgres", databaseURL] + loadArguments(),
                    log: work.appendingPathComponent("crews.log"), stdout: write)
            }
            let lines = Self.lines(read)
            let total = Double(configuration.load.crews * configuration.load.syncsPerCrew)
            // CPU time from here on: each process's total now, subtracted at its end.
            var cpuAtStart: [pid_t: Double] = [:]
            func spent(_ process: SpawnedProcess?) -> Double {
                guard let process else { return 0 }
                let now = CPUTime.seconds(ofTree: process.pid)
                defer { cpuAtStart[process.pid] = now }
                return now - (cpuAtStart[process.pid] ?? now)
            }
            for process in Array(hosts.values) + [primary, standbyProcess, balancerProcess].compactMap({ $0 }) { _ = spent(process) }
            var (killed, revived, switched) = (false, false, false)
            var exportJob = ""
            var crewReport: CrewLoad.Report?
            say("\(configuration.load.crews) crews started")
            let gpThroughH2 = try await submitGPJobs(4, through: hostURL(2))
            var gpThroughH1: [String] = []
            for await line in lines {
                if line.hasPrefix("report "), let data = line.dropFirst(7).data(using: .utf8) {
                    crewReport = try JSONDecoder().decode(CrewLoad.Report.self, from: data)
                    continue
                }
                guard line.hasPrefix("synced "), let count = Int(line.dropFirst(7)) else { continue }
                if !killed, Double(count) >= total * configuration.killAt {
                    if let levels = configuration.exportLevels { exportJob = try await startExport(levels: levels) }
                    gpThroughH1 = try await submitGPJobs(3, through: hostURL(1))
                    report.hostCPUSeconds += spent(hosts[1])
                    hosts[1]?.signal(SIGKILL)
                    hosts[1]?.wait()
                    killed = true
                    say("after \(count) syncs: host h1 killed (SIGKILL)" + (exportJob.isEmpty ? "" : " while its export \(exportJob) ran"))
                }
                if killed, !revived, Double(count) >= total * configuration.reviveAt {
                    try await startHost(1)
                    _ = spent(hosts[1])
                    revived = true
                    say("after \(count) syncs: host h1 started again and ready")
                }
                if !switched, Double(count) >= total * configuration.promoteAt {
                    report.databaseCPUSeconds += spent(primary)
                    try await failOver(primary, after: count)
                    switched = true
                }
            }
            let status = crews.wait()
            for process in hosts.values where process.isRunning { report.hostCPUSeconds += spent(process) }
            if primary.isRunning { report.databaseCPUSeconds += spent(primary) }
            report.databaseCPUSeconds += spent(standbyProcess)
            report.balancerCPUSeconds += spent(balancerProcess)
            guard var crewReport else {
                let log = (try? String(contentsOf: work.appendingPathComponent("crews.log"), encoding: .utf8)) ?? ""
                throw Failure("the crews' driver ended (status \(status)) without a report: \(log.suffix(2000))")
            }
            say("crews done: \(crewReport.syncs) syncs, \(crewReport.failedAttempts) failed tries")
            for (done, step) in [(killed, "the kill"), (revived, "the revival"), (switched, "the failover")] where !done {
                report.problems.append("the crews finished before \(step)")
            }
            if !exportJob.isEmpty { try await finishExport(exportJob) }
            try await finishGPJobs(gpThroughH2 + gpThroughH1, mayFail: Set(gpThroughH1))
            say("GP jobs: \(report.gpJobs.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", "))")
            let window = report.switching
            report.serverErrorsWhileSwitching = crewReport.serverErrors.filter { window.contains($0.time) }.count
            report.serverErrorsOtherwise = crewReport.serverErrors.filter { !window.contains($0.time) }
            for e in report.serverErrorsOtherwise.prefix(10) {
                report.problems.append(
                    String(format: "%d for %@ at %.1f s, outside the switch: ", e.status, e.request, e.time - started.timeIntervalSince1970)
                        + e.body.replacingOccurrences(of: "\n", with: " "))
            }
            report.problems += crewReport.problems
            crewReport.problems = []
            report.crews = crewReport
        }

        var exportURL: String { "/arcgis/rest/services/basemap/MapServer" }
        var bufferURL: String { "/arcgis/rest/services/work/GPServer/Buffer" }

        /// What every host serves from files beside the database (``SiteLab/writeFileServices(_:basemap:points:)``).
        func writeFileServices() throws {
            try SiteLab.writeFileServices(
                work.appendingPathComponent("services"), basemap: work.appendingPathComponent("crews/\(CrewLoad.serviceName).gpkg"),
                points: work.appendingPathComponent("points.json"))
        }

        /// Submits `count` Buffer jobs through `base` (a host, or the balancer); their ids.
        func submitGPJobs(_ count: Int, through base: String) async throws -> [String] {
            var ids: [String] = []
            for _ in 0..<count {
                let answer = try await network.must(
                    "crews", ["curl", "-s", "--noproxy", "*", "-X", "POST", "\(base)\(bufferURL)/submitJob", "--data-urlencode", "f=json",
                        "--data-urlencode", "Method=GEODESIC", "--data-urlencode", "Input_Features@\(work.appendingPathComponent("points.json").path)"])
                guard let id = try? JSONValue.parse(answer)["jobId"]?.stringValue else { throw Failure("submitJob through \(base) answered \(answer.prefix(300))") }
                ids.append(id)
            }
            return ids
        }

        /// Polls GP jobs through the balancer until each has ended; `mayFail` jobs (the killed
        /// host's) may end Failed, with the reason, when they were running there; any other end
        /// is a problem.
        func finishGPJobs(_ ids: [String], mayFail: Set<String>) async throws {
            var states: [String: JSONValue] = [:]
            let ended: Set<String> = ["esriJobSucceeded", "esriJobFailed", "esriJobCancelled", "esriJobTimedOut"]
            try? await network.wait("the GP jobs to end", seconds: 300) {
                for id in ids where !ended.contains(states[id]?["jobStatus"]?.stringValue ?? "") {
                    let answer = try await network.must("crews", ["curl", "-s", "--noproxy", "*", "\(balancer)\(bufferURL)/jobs/\(id)?f=json"])
                    states[id] = (try? JSONValue.parse(answer)) ?? .null
                }
                return ids.allSatisfy { ended.contains(states[$0]?["jobStatus"]?.stringValue ?? "") }
            }
            for id in ids {
                let status = states[id]?["jobStatus"]?.stringValue ?? "nothing"
                report.gpJobs[status, default: 0] += 1
                let stopped = (states[id]?["messages"]?.arrayValue ?? []).contains { $0["description"]?.stringValue?.contains("stopped") == true }
                if status == "esriJobSucceeded" || status == "esriJobFailed" && mayFail.contains(id) && stopped { continue }
                report.problems.append("GP job \(id) ended \(status): \(states[id]?.jsonString.prefix(300) ?? "")")
            }
        }

        /// A tile export submitted to h1, returned once h1 says it runs.
        func startExport(levels: String) async throws -> String {
            let h1 = hostURL(1) + exportURL
            // A 10 km square at the crews' south-west corner, in Web Mercator metres.
            let x = CrewLoad.origin.x * 20037508.34 / 180, y = log(tan((90 + CrewLoad.origin.y) * .pi / 360)) * 6378137
            let extent = [x, y, x + 10_000, y + 10_000].map { String(Int($0)) }.joined(separator: ",")
            let started = try await network.must("crews", ["curl", "-s", "--noproxy", "*", "\(h1)/exportTiles?levels=\(levels)&exportExtent=\(extent)&f=json"])
            guard let id = try? JSONValue.parse(started)["jobId"]?.stringValue else { throw Failure("exportTiles on h1 answered \(started.prefix(300))") }
            try await network.wait("the export running on h1", seconds: 30) {
                let status = try await network.must("crews", ["curl", "-s", "--noproxy", "*", "\(h1)/jobs/\(id)?f=json"])
                let state = (try? JSONValue.parse(status)["status"]?.stringValue) ?? ""
                if state == "Completed" || state == "Failed" { throw Failure("the export on h1 ended (\(state)) before h1 was killed: give it more levels") }
                return state == "InProgress"
            }
            return id
        }

        /// Polls the killed host's export through the balancer until it ends, and fetches its
        /// package there.
        func finishExport(_ id: String) async throws {
            var state = ""
            var answer = JSONValue.null
            try? await network.wait("the killed host's export to end", seconds: 300) {
                let status = try await network.must("crews", ["curl", "-s", "--noproxy", "*", "\(balancer)\(exportURL)/jobs/\(id)?f=json"])
                answer = (try? JSONValue.parse(status)) ?? .null
                state = answer["status"]?.stringValue ?? ""
                return state == "Completed" || state == "Failed" || state == "Cancelled"
            }
            report.export.status = state
            guard state == "Completed", let package = answer["resultUrl"]?.stringValue?.split(separator: "/").last else {
                report.problems.append("the export running on the killed host ended \(state.isEmpty ? "never" : state): \(answer.jsonString.prefix(300))")
                return
            }
            let fetched = try await network.run("crews", ["curl", "-s", "--noproxy", "*", "-o", "/dev/null", "-w", "%{http_code} %{size_download}", "\(balancer)\(exportURL)/tilefiles/\(package)"])
            let parts = fetched.stdout.split(separator: " ")
            report.export.bytes = parts.count == 2 && parts[0] == "200" ? Int(parts[1]) ?? 0 : 0
            if report.export.bytes == 0 { report.problems.append("the export's package did not come through the balancer: \(fetched.stdout)") }
            say("the killed host's export completed on another host: \(report.export.bytes) bytes through the balancer")
        }

        /// The primary stopped at once, the standby promoted; done when every running host answers
        /// `/ready` again.
        func failOver(_ primary: SpawnedProcess, after count: Int) async throws {
            let start = Date().timeIntervalSince1970
            primary.signal(SIGQUIT)
            primary.wait()
            say("after \(count) syncs: primary stopped (immediate shutdown)")
            try await network.must(
                "db2", [bin.appendingPathComponent("pg_ctl").path, "-D", databases.appendingPathComponent("db2/data").path, "-w", "promote"], as: "postgres")
            say("standby promoted")
            for (i, process) in hosts.sorted(by: { $0.key < $1.key }) where process.isRunning {
                do {
                    try await network.wait("host h\(i) ready after the failover", seconds: 120) { await network.status(from: "crews", "\(hostURL(i))/ready") == 200 }
                } catch {
                    throw Failure("\(error) \(await hostState(i))")
                }
            }
            let end = Date().timeIntervalSince1970 + Double(configuration.databaseTimeout)
            report.switching = start...end
            say("every host ready again")
        }

        /// The lines written to `fd`, read on a thread of their own until the writer closes it.
        static func lines(_ fd: Int32) -> AsyncStream<String> {
            AsyncStream { continuation in
                ExternalTools.onOwnThread {
                    defer { close(fd) }
                    var pending = Data()
                    var buffer = [UInt8](repeating: 0, count: 65536)
                    while true {
                        let n = read(fd, &buffer, buffer.count)
                        if n < 0, errno == EINTR { continue }
                        guard n > 0 else { break }
                        pending.append(contentsOf: buffer[0..<n])
                        while let newline = pending.firstIndex(of: 0x0A) {
                            continuation.yield(String(decoding: pending[pending.startIndex..<newline], as: UTF8.self))
                            pending.removeSubrange(pending.startIndex...newline)
                        }
                    }
                    continuation.finish()
                }
            }
        }
    }
}

/// CPU time of processes, from `/proc`.
extension SiteLab {
    /// Writes what a site's hosts serve from files: `basemap` (a GeoPackage) copied in as the
    /// drawn map `basemap`, and the geoprocessing service `work` (Buffer, two jobs at a time per
    /// host); and, at `points`, a feature set of 2,000 points for its jobs (`Input_Features`).
    public static func writeFileServices(_ services: URL, basemap: URL, points: URL) throws {
        try FileManager.default.createDirectory(at: services, withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: basemap, to: services.appendingPathComponent("basemap.gpkg"))
        let definition: JSONValue = ["executionType": "esriExecutionTypeAsynchronous", "maximumRecords": 100_000, "maximumConcurrentJobs": 2, "tasks": [["tool": "Buffer"]]]
        try definition.jsonData.write(to: services.appendingPathComponent("work.gp.json"))
        var text = #"{"geometryType":"esriGeometryPoint","spatialReference":{"wkid":3067},"fields":[],"features":["#
        for i in 0..<2_000 { text += (i > 0 ? "," : "") + #"{"geometry":{"x":\#(385_000 + (i % 50) * 50),"y":\#(6_671_000 + (i / 50) * 50)},"attributes":{}}"# }
        try Data((text + "]}").utf8).write(to: points)
    }
}

/// Processes' CPU time, read from `/proc`.
public enum CPUTime {
    /// User and system seconds of `pid` and of its descendants, ended ones (that were waited
    /// for) included: a PostgreSQL postmaster's counts its backends'. 0 for a process this
    /// machine does not run.
    public static func seconds(ofTree pid: pid_t) -> Double {
        let all = table()
        var total = 0.0, pending = [pid]
        while let next = pending.popLast() {
            guard let entry = all[next] else { continue }
            total += entry.ticks
            pending += all.filter { $0.value.parent == next }.map(\.key)
        }
        return total / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// The parent of `pid`, nil when this machine runs no such process.
    public static func parent(of pid: pid_t) -> pid_t? { table()[pid]?.parent }

    /// Every process's parent and CPU ticks (its own and its waited-for children's).
    private static func table() -> [pid_t: (parent: pid_t, ticks: Double)] {
        var table: [pid_t: (parent: pid_t, ticks: Double)] = [:]
        for name in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let pid = pid_t(name), let text = try? String(contentsOfFile: "/proc/\(name)/stat", encoding: .utf8),
                let close = text.lastIndex(of: ")")
            else { continue }
            // After "pid (comm) ": state, ppid, …; utime, stime, cutime, cstime are fields 14-17.
            let fields = text[text.index(after: close)...].split(separator: " ")
            guard fields.count > 14, let parent = pid_t(fields[1]) else { continue }
            let ticks = fields[11..<15].compactMap { Double($0) }.reduce(0, +)
            table[pid] = (parent, ticks)
        }
        return table
    }
}
