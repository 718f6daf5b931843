import AsyncHTTPClient
import Foundation
import NIOCore
import OutpostCore
import OutpostServer

/// GPServer overhead around a trivial tool (Buffer of one point), the server in its own
/// process on loopback:
/// - `execute` latency, p50 and p99, with 16 clients each sending requests one after another;
/// - submit-to-succeeded of a trivial asynchronous job, a client polling every 20 ms.
enum GPServerBenchmark {
    static let point = #"{"geometryType":"esriGeometryPoint","spatialReference":{"wkid":3067},"fields":[],"features":[{"geometry":{"x":385000,"y":6672000},"attributes":{}}]}"#

    /// The worker: serves the geoprocessing services of `directory`.
    static func serve(_ directory: URL) async throws {
        let services = try await ServiceDirectory(loading: directory)
        let app = try OutpostApplication.make(services: services, configuration: ServerConfiguration(port: 0)) { url in
            FileHandle.standardOutput.write(Data("listening on \(url)\n".utf8))
        }
        try await app.runService()
    }

    static func run(executable: String, workDirectory: URL) async throws {
        let folder = workDirectory.appendingPathComponent("gp-server")
        try? FileManager.default.removeItem(at: folder)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let quick: JSONValue = ["executionType": "esriExecutionTypeSynchronous", "tasks": [["tool": "Buffer"]]]
        let batch: JSONValue = ["executionType": "esriExecutionTypeAsynchronous", "maximumConcurrentJobs": 4, "tasks": [["tool": "Buffer"]]]
        try quick.jsonData
            .write(to: folder.appendingPathComponent("quick.gp.json"))
        try batch.jsonData
            .write(to: folder.appendingPathComponent("batch.gp.json"))
        let (server, url) = try startServer(executable: executable, arguments: ["worker-serve-gp", folder.path])
        defer { kill(server.processIdentifier, SIGTERM); server.waitUntilExit() }
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(connectionPool: .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 32)))
        let form = "f=json&Input_Features=\(point.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)&Distance=%7B%22distance%22%3A10%2C%22units%22%3A%22esriMeters%22%7D"

        func post(_ path: String) async throws -> JSONValue {
            var request = HTTPClientRequest(url: url + path)
            request.method = .POST
            request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
            request.body = .bytes(ByteBuffer(string: form))
            let response = try await client.execute(request, timeout: .seconds(60))
            let body = try await response.body.collect(upTo: 1 << 20)
            return try JSONValue.parse(Data(buffer: body))
        }
        func get(_ path: String) async throws -> JSONValue {
            let response = try await client.execute(HTTPClientRequest(url: url + path), timeout: .seconds(60))
            return try JSONValue.parse(Data(buffer: try await response.body.collect(upTo: 1 << 20)))
        }
        func percentile(_ sorted: [Double], _ p: Double) -> Double { sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))] }

        // Warm up.
        for _ in 0..<50 { _ = try await post("/arcgis/rest/services/quick/GPServer/Buffer/execute") }

        let clients = 16, perClient = 250
        let started = ContinuousClock.now
        let latencies = try await withThrowingTaskGroup(of: [Double].self) { group in
            for _ in 0..<clients {
                group.addTask {
                    var mine: [Double] = []
                    for _ in 0..<perClient {
                        let t = ContinuousClock.now
                        let answer = try await post("/arcgis/rest/services/quick/GPServer/Buffer/execute")
                        guard answer["results"]?[0]?["value"]?["features"]?.arrayValue?.count == 1 else { throw GPBenchError("execute answered \(answer.jsonString.prefix(200))") }
                        mine.append((ContinuousClock.now - t).seconds * 1000)
                    }
                    return mine
                }
            }
            var all: [Double] = []
            for try await part in group { all += part }
            return all.sorted()
        }
        let elapsed = (ContinuousClock.now - started).seconds
        printTable(
            "GPServer execute, Buffer of one point, \(clients) concurrent clients × \(perClient) requests",
            ["requests/s", "p50 ms", "p99 ms"],
            [[format(Double(latencies.count) / elapsed), format(percentile(latencies, 0.5), 2), format(percentile(latencies, 0.99), 2)]])

        // Submit to succeeded, polling every 20 ms (as a client set to a 20 ms interval does).
        var overheads: [Double] = []
        for _ in 0..<100 {
            let t = ContinuousClock.now
            let submitted = try await post("/arcgis/rest/services/batch/GPServer/Buffer/submitJob")
            guard let id = submitted["jobId"]?.stringValue else { throw GPBenchError("submitJob answered \(submitted.jsonString.prefix(200))") }
            var status = submitted["jobStatus"]?.stringValue ?? ""
            while status != "esriJobSucceeded" {
                guard !["esriJobFailed", "esriJobCancelled", "esriJobTimedOut"].contains(status) else { throw GPBenchError("job \(id) ended \(status)") }
                try await Task.sleep(for: .milliseconds(20))
                status = try await get("/arcgis/rest/services/batch/GPServer/Buffer/jobs/\(id)?f=json&returnMessages=false")["jobStatus"]?.stringValue ?? ""
            }
            overheads.append((ContinuousClock.now - t).seconds * 1000)
        }
        overheads.sort()
        try await client.shutdown()
        printTable(
            "GPServer submitJob to esriJobSucceeded, Buffer of one point, polled every 20 ms (100 jobs one after another)",
            ["p50 ms", "p99 ms", "min ms"], [[format(percentile(overheads, 0.5), 1), format(percentile(overheads, 0.99), 1), format(overheads[0], 1)]])
    }
}

struct GPBenchError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
