import AsyncHTTPClient
import Foundation
import OutpostCore
import OutpostPostgres
import OutpostServer
import OutpostStorage
import OutpostSyncService

#if canImport(Glibc)
    import Glibc
#endif

/// `outpost-bench postgres [features]` (PostgreSQL at `OUTPOST_POSTGRES`): the same service on
/// the GeoPackage backend and on PostgreSQL — the sync round trip, query throughput, one-feature
/// requests/s — and requests/s with 1, 2 and 3 server processes on one PostgreSQL.
enum PostgresBenchmark {
    /// A server process serving every service of a database (as `outpost serve --postgres`).
    static func serve(_ url: String) async throws {
        let location = try PostgresLocation(url: url)
        let services = ServiceDirectory(try await PostgresServiceBackend.openAll(at: location).map { $0 as any FeatureServiceBackend })
        let app = try OutpostApplication.make(services: services, configuration: ServerConfiguration(port: 0)) { url in
            FileHandle.standardOutput.write(Data("listening on \(url)\n".utf8))
        }
        try await app.runService()
        await services.closeAll()
    }

    static func startPostgresServer(executable: String, _ url: String) throws -> (Process, String) {
        try startServer(executable: executable, arguments: ["worker-serve-postgres", url])
    }

    static func run(count: Int, postgres: String, executable: String, workDirectory: URL) async throws {
        let server = try PostgresLocation(url: postgres)
        let database = "outpost_bench_\(getpid())"
        let location = try await PostgresServiceStore.createDatabase(database, at: server)
        print("PostgreSQL: \(server) (database \(database), dropped at the end)")
        defer { dropDatabase(database, at: server) }

        // The sync round trip, each backend with a fresh service of the same features.
        let syncFile = workDirectory.appendingPathComponent("sync-service.gpkg")
        var syncRows: [[String]] = []
        for backend in ["GeoPackage", "PostgreSQL"] {
            try SyncBenchmark.createService(count: count, at: syncFile)
            let (process, url): (Process, String)
            if backend == "PostgreSQL" {
                try await load(syncFile, named: "sync-service", into: location)
                (process, url) = try startPostgresServer(executable: executable, location.url)
            } else {
                (process, url) = try startServer(executable: executable, service: syncFile)
            }
            let trip = try await SyncBenchmark.roundTrip(
                serviceURL: URL(string: url + "/arcgis/rest/services/sync-service/FeatureServer")!, count: count, executable: executable, workDirectory: workDirectory,
                serverPID: process.processIdentifier)
            let serverPeak = SyncBenchmark.peakMemoryMB(of: process.processIdentifier)
            kill(process.processIdentifier, SIGTERM)
            process.waitUntilExit()
            let total = trip.upload + trip.download
            syncRows.append([
                backend, format(trip.upload, 3), format(trip.download, 3), format(Double(trip.edits) / total), format(trip.clientPeakMB), format(serverPeak),
            ])
        }
        printTable(
            "Sync round trip on each backend: \(count / 10 + count / 100 + count / 20) edits of a \(count)-feature layer, loopback HTTP",
            ["server backend", "upload s", "download s", "edits/s end to end", "client peak MB", "server peak MB"], syncRows)

        // Query throughput: 100,000 features streamed, 50 pages of 2,000, and wrk on one feature.
        let queryFile = workDirectory.appendingPathComponent("bench.gpkg")
        try ServerBenchmark.createService(count: 100_000, at: queryFile)
        try await load(queryFile, named: "bench", into: location)
        var queryRows: [[String]] = []
        for backend in ["GeoPackage", "PostgreSQL"] {
            let (process, url) = backend == "PostgreSQL"
                ? try startPostgresServer(executable: executable, location.url) : try startServer(executable: executable, service: queryFile)
            let layer = url + "/arcgis/rest/services/bench/FeatureServer/0"
            let streamed = try await bestOf(3) { _ = try await get(layer + "/query?where=1%3D1&outFields=*&f=json&resultRecordCount=100000") }
            let paged = try await bestOf(3) {
                for offset in stride(from: 0, to: 100_000, by: 2000) {
                    _ = try await get(layer + "/query?where=1%3D1&outFields=*&f=json&resultOffset=\(offset)&resultRecordCount=2000")
                }
            }
            let byID = (try? ServerBenchmark.wrk(layer + "/query?objectIds=4242&outFields=*&f=json")) ?? ["?", "?", "?"]
            let envelope = (try? ServerBenchmark.wrk(layer + "/query?geometry=-1,-1,1,1&geometryType=esriGeometryEnvelope&outFields=*&f=json&resultRecordCount=100"))
                ?? ["?", "?", "?"]
            kill(process.processIdentifier, SIGTERM)
            process.waitUntilExit()
            queryRows.append([backend, format(100_000 / streamed), format(100_000 / paged), byID[0] + " (p99 " + byID[2] + ")", envelope[0] + " (p99 " + envelope[2] + ")"])
        }
        printTable(
            "Queries on a 100,000-point layer (features/s; wrk -t2 -c64 -d10s requests/s)",
            ["backend", "one streamed response", "50 pages of 2,000", "objectIds=4242", "envelope, 100 features"], queryRows)

        // Requests/s with 1, 2 and 3 processes on one PostgreSQL: one wrk per process, 64
        // connections shared among them, all at once; the sum of their requests/s.
        var scaleRows: [[String]] = []
        let processes = try (0..<3).map { _ in try startPostgresServer(executable: executable, location.url) }
        defer {
            for (p, _) in processes {
                kill(p.processIdentifier, SIGTERM)
                p.waitUntilExit()
            }
        }
        for n in 1...3 {
            let urls = processes.prefix(n).map { $0.1 + "/arcgis/rest/services/bench/FeatureServer/0/query?objectIds=4242&outFields=*&f=json" }
            let figures = try ServerBenchmark.wrk(urls, connections: 64 / n, threads: 1)
            let total = figures.reduce(0) { $0 + (Double($1[0]) ?? 0) }
            scaleRows.append(["\(n)", format(total), figures.map { $0[2] }.joined(separator: " / ")])
        }
        printTable("One PostgreSQL, 1-3 outpost server processes (objectIds=4242, 64 connections in all)", ["processes", "requests/s", "p99 per process"], scaleRows)
        print("Everything (PostgreSQL, the server processes and wrk) shares this machine's \(ProcessInfo.processInfo.activeProcessorCount) cores: this shows the mechanism, not the ceiling.")
    }

    /// Loads a service GeoPackage into the database.
    static func load(_ file: URL, named name: String, into location: PostgresLocation) async throws {
        let gdb = try Geodatabase.open(at: file)
        defer { try? gdb.close() }
        _ = try await PostgresServiceStore.createService(named: name, from: gdb, at: location, replace: true)
    }

    static func get(_ url: String) async throws -> Int {
        let response = try await HTTPClient.shared.execute(HTTPClientRequest(url: url), timeout: .seconds(300))
        var bytes = 0
        for try await chunk in response.body { bytes += chunk.readableBytes }
        guard response.status.code == 200 else { throw BenchError("\(url): \(response.status.code)") }
        return bytes
    }

    static func bestOf(_ n: Int, _ body: () async throws -> Void) async throws -> Double {
        var best = Double.infinity
        for _ in 0..<n {
            let start = Date()
            try await body()
            best = min(best, Date().timeIntervalSince(start))
        }
        return best
    }

    static func dropDatabase(_ name: String, at server: PostgresLocation) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/psql")
        process.arguments = [server.url, "-Xqc", "DROP DATABASE IF EXISTS \(name) WITH (FORCE)"]
        try? process.run()
        process.waitUntilExit()
    }
}
