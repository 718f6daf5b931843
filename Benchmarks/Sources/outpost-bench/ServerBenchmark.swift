import AsyncHTTPClient
import Foundation
import NIOCore
import OutpostCore
import OutpostSQLiteService
import OutpostServer
import OutpostStorage
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Feature-service figures: a 100k-point layer streamed as JSON, applyEdits throughput, and
/// requests/s with p99 latency under 64 concurrent connections (wrk).
enum ServerBenchmark {
    static let schema: ServiceSchema = {
        var s = ImportBenchmark.schema
        s.name = "bench"
        s.maxRecordCount = 100_000
        return s
    }()

    /// A service of `count` points (the import benchmark's rows) with `schema`; global ids are
    /// given when the schema has a global id field (a synced layer).
    static func createService(count: Int, at url: URL, schema: ServiceSchema = schema, seed: UInt64 = 3) throws {
        Geodatabase.removeFiles(at: url)
        var random = FastRandomGenerator(seed: seed)
        let synced = schema.layers.first?.globalIDField != nil
        try SQLiteServiceBackend.create(at: url, schema: schema) { conn in
            let table = try conn.geodatabase.table(named: "points")
            try table.importFeatures(in: conn) { importer in
                for i in 0..<count {
                    let (x, y) = ImportBenchmark.coordinates(i)
                    try importer.add(
                        values: [.integer(Int64(i)), .double(Double(i) * 0.5), .string(ImportBenchmark.label(i)),
                                 .date(ImportBenchmark.epoch.addingTimeInterval(Double(i))), .string(GlobalID.make(using: &random))],
                        globalID: synced ? GlobalID.make(using: &random) : nil, geometry: .point(try Point(x: x, y: y)))
                }
            }
        }
    }


    /// The server as a child process (its own CPU time and memory), printing its URL.
    static func serve(_ file: URL) async throws {
        // BENCH_NO_READ_AHEAD: a batch's runs read on the writer only (A/B against reading ahead).
        if ProcessInfo.processInfo.environment["BENCH_NO_READ_AHEAD"] != nil { BatchApplier.readsAhead.store(false, ordering: .relaxed) }
        let services = ServiceDirectory([try SQLiteServiceBackend(url: file)])
        // BENCH_PORT: a fixed port, so replicas made for profiling by hand reach a restarted server.
        let port = ProcessInfo.processInfo.environment["BENCH_PORT"].flatMap { Int($0) } ?? 0
        let app = try OutpostApplication.make(services: services, configuration: ServerConfiguration(port: port)) { url in
            FileHandle.standardOutput.write(Data("listening on \(url)\n".utf8))
        }
        try await app.runService()
        await services.closeAll()
    }

    static func run(executable: String, workDirectory: URL) async throws {
        let file = workDirectory.appendingPathComponent("bench.gpkg")
        try createService(count: 100_000, at: file)
        let (server, url) = try startServer(executable: executable, service: file)
        defer { kill(server.processIdentifier, SIGTERM); server.waitUntilExit() }
        let base = url + "/arcgis/rest/services/bench/FeatureServer/0"
        let client = HTTPClient.shared

        func get(_ url: String) async throws -> (Int, Int) {
            let response = try await client.execute(HTTPClientRequest(url: url), timeout: .seconds(300))
            var bytes = 0
            for try await chunk in response.body { bytes += chunk.readableBytes }
            return (Int(response.status.code), bytes)
        }
        var rows: [[String]] = []

        // One response streaming all 100,000 features.
        var best = Double.infinity, size = 0
        for _ in 0..<3 {
            let start = Date()
            let (status, bytes) = try await get(base + "/query?where=1%3D1&outFields=*&f=json&resultRecordCount=100000")
            guard status == 200 else { throw BenchError("query failed: \(status)") }
            best = min(best, Date().timeIntervalSince(start))
            size = bytes
        }
        rows.append(["query, 100,000 features in one streamed response", format(100_000 / best), format(Double(size) / best / 1_048_576, 1) + " MB/s"])

        // The same layer paged as clients do (2,000 per request, keyset-friendly offsets).
        best = .infinity
        for _ in 0..<3 {
            let start = Date()
            for offset in stride(from: 0, to: 100_000, by: 2000) {
                _ = try await get(base + "/query?where=1%3D1&outFields=*&f=json&resultOffset=\(offset)&resultRecordCount=2000")
            }
            best = min(best, Date().timeIntervalSince(start))
        }
        rows.append(["query, 50 pages of 2,000 (resultOffset)", format(100_000 / best), "-"])

        // applyEdits: 50 requests of 100 adds each, then 200 single-feature updates.
        func post(_ url: String, _ form: String) async throws {
            var request = HTTPClientRequest(url: url)
            request.method = .POST
            request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
            request.body = .bytes(ByteBuffer(string: form))
            let response = try await client.execute(request, timeout: .seconds(60))
            var text = ""
            for try await chunk in response.body { text += String(buffer: chunk) }
            guard response.status.code == 200, !text.contains("\"success\":false") else { throw BenchError("applyEdits failed: \(text.prefix(200))") }
        }
        let feature = { (i: Int) in
            "{\"attributes\":{\"id_int\":\(i),\"value\":1.5,\"label\":\"edit-\(i)\",\"observed\":1700000000000},\"geometry\":{\"x\":\(Double(i % 360) - 180),\"y\":\(Double(i % 170) - 85)}}"
        }
        var start = Date()
        for batch in 0..<50 {
            let adds = "[" + (0..<100).map { feature(batch * 100 + $0) }.joined(separator: ",") + "]"
            try await post(base + "/applyEdits", "f=json&adds=" + adds.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)
        }
        rows.append(["applyEdits, 50 requests x 100 adds", format(5000 / Date().timeIntervalSince(start)) + " edits/s", "-"])
        start = Date()
        for i in 0..<200 {
            let updates = "[{\"attributes\":{\"objectid\":\(i * 400 + 1),\"value\":\(i)}}]"
            try await post(base + "/applyEdits", "f=json&updates=" + updates.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)
        }
        rows.append(["applyEdits, 200 requests x 1 update", format(200 / Date().timeIntervalSince(start)) + " edits/s", "-"])
        printTable("Feature service on SQLite, 100,000-point layer (release build, loopback)", ["operation", "features/s", "throughput"], rows)

        // wrk: 64 connections for 10 s, on a query by attribute (a scan) and by object id.
        do {
            let scan = try wrk(base + "/query?where=id_int%3D4242&outFields=*&f=json")
            let byID = try wrk(base + "/query?objectIds=4242&outFields=*&f=json")
            printTable(
                "wrk -t2 -c64 -d10s, one-feature queries",
                ["query", "requests/s", "p50", "p99"],
                [["where id_int=4242 (no index: scans 100,000 rows)"] + scan, ["objectIds=4242 (primary key)"] + byID])
        } catch {
            print("wrk is not installed (apt-get install wrk): skipped the concurrency figures")
        }
        print("Server and load generator share the machine's 2 cores.")
    }

    /// Requests/s, p50 and p99 from `wrk -t2 -c64 -d10s --latency`.
    static func wrk(_ url: String) throws -> [String] {
        try wrk([url], connections: 64, threads: 2)[0]
    }

    /// `wrk` against each URL at the same time (`connections` and `threads` each); each one's
    /// requests/s, p50 and p99.
    static func wrk(_ urls: [String], connections: Int, threads: Int) throws -> [[String]] {
        let runs = try urls.map { url -> (Process, Pipe) in
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/wrk")
            process.arguments = ["-t\(threads)", "-c\(max(connections, threads))", "-d10s", "--latency", url]
            let out = Pipe()
            process.standardOutput = out
            try process.run()
            return (process, out)
        }
        return runs.map { process, out in
            let lines = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                .split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
            process.waitUntilExit()
            func value(_ prefix: String) -> String {
                lines.first { $0.hasPrefix(prefix) }.map { String($0.dropFirst(prefix.count)).trimmingCharacters(in: .whitespaces) } ?? "?"
            }
            return [value("Requests/sec:"), value("50%"), value("99%")]
        }
    }
}
