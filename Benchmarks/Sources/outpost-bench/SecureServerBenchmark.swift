import AsyncHTTPClient
import Foundation
import NIOCore
import NIOSSL
import OutpostCore
import OutpostSQLiteService
import OutpostServer
import OutpostStorage

#if canImport(Glibc)
    import Glibc
#endif

/// What HTTPS and tokens cost a server people use, next to plain HTTP in the same run: one-feature
/// queries under load (wrk) over HTTP, HTTPS, and HTTP with a token checked on every request; a
/// 100,000-feature query streamed as JSON over each, and the floor of that stream: the same rows
/// read and the same bytes written in one process, without HTTP.
enum SecureServerBenchmark {
    /// `worker-serve-secure <service> <tls|plain> <users file or ->`: a server child process.
    static func serve(_ file: URL, tls: Bool, users: String?, directory: URL) async throws {
        let services = ServiceDirectory([try SQLiteServiceBackend(url: file)])
        var configuration = ServerConfiguration(port: 0)
        if tls {
            configuration.tls = TLSFiles(certificateChain: directory.appendingPathComponent("cert.pem"), privateKey: directory.appendingPathComponent("key.pem"))
        }
        configuration.usersFile = users.map { URL(fileURLWithPath: $0) }
        let app = try OutpostApplication.make(services: services, configuration: configuration) { url in
            FileHandle.standardOutput.write(Data("listening on \(url)\n".utf8))
        }
        try await app.runService()
        await services.closeAll()
    }

    static func run(executable: String, workDirectory: URL) async throws {
        let directory = workDirectory.appendingPathComponent("secure")
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let file = directory.appendingPathComponent("bench.gpkg")
        try ServerBenchmark.createService(count: 100_000, at: file)
        let openssl = Process()
        openssl.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        openssl.arguments = [
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-subj", "/CN=127.0.0.1",
            "-keyout", directory.appendingPathComponent("key.pem").path, "-out", directory.appendingPathComponent("cert.pem").path, "-days", "2",
        ]
        openssl.standardError = FileHandle.nullDevice
        try openssl.run()
        openssl.waitUntilExit()
        var users = UserFile()
        try users.setUser("bench", role: .viewer, password: "benchmark password")
        let usersURL = directory.appendingPathComponent("users.json")
        try users.save(to: usersURL)

        func start(_ mode: String, _ users: String) throws -> (Process, String) {
            try startServer(executable: executable, arguments: ["worker-serve-secure", file.path, mode, users, directory.path])
        }
        let (plain, plainURL) = try start("plain", "-")
        let (secure, secureURL) = try start("tls", "-")
        let (guarded, guardedURL) = try start("plain", usersURL.path)
        defer {
            for p in [plain, secure, guarded] { kill(p.processIdentifier, SIGTERM); p.waitUntilExit() }
        }
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.certificateVerification = .none  // a throwaway self-signed certificate
        // Process-lifetime, like HTTPClient.shared: the benchmark exits after it.
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: HTTPClient.Configuration(tlsConfiguration: tls))

        // A token for the guarded server (bound to no client, so wrk may use it).
        var request = HTTPClientRequest(url: guardedURL + "/arcgis/tokens/generateToken")
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
        request.body = .bytes(ByteBuffer(string: "username=bench&password=benchmark%20password&client=none&f=json"))
        let answer = try await client.execute(request, timeout: .seconds(30))
        let token = try JSONValue.parse(Data(buffer: try await answer.body.collect(upTo: 1 << 20)))["token"]?.stringValue ?? ""

        // The stream of 100,000 features: best of three per server.
        func stream(_ url: String) async throws -> (Double, Int) {
            var best = Double.infinity, size = 0
            for _ in 0..<3 {
                let start = Date()
                let response = try await client.execute(HTTPClientRequest(url: url), timeout: .seconds(300))
                var bytes = 0
                for try await chunk in response.body { bytes += chunk.readableBytes }
                guard response.status.code == 200 else { throw BenchError("query failed: \(response.status.code)") }
                best = min(best, Date().timeIntervalSince(start))
                size = bytes
            }
            return (best, size)
        }
        let query = "/arcgis/rest/services/bench/FeatureServer/0/query?where=1%3D1&outFields=*&f=json&resultRecordCount=100000"
        let (plainTime, size) = try await stream(plainURL + query)
        let (secureTime, _) = try await stream(secureURL + query)
        let (floorTime, floorBytes) = try await floor(file)
        printTable(
            "100,000 features as one streamed JSON response (release build, loopback, best of 3)",
            ["path", "features/s", "MB/s", "vs floor"],
            [
                ["floor: the same rows read, the same JSON written, no HTTP", format(100_000 / floorTime), format(Double(floorBytes) / floorTime / 1_048_576, 1), "1.00x"],
                ["HTTP", format(100_000 / plainTime), format(Double(size) / plainTime / 1_048_576, 1), format(plainTime / floorTime, 2) + "x"],
                ["HTTPS (TLS 1.3, HTTP/1.1)", format(100_000 / secureTime), format(Double(size) / secureTime / 1_048_576, 1), format(secureTime / floorTime, 2) + "x"],
            ])

        // One-feature queries under load: 64 connections, 10 s each.
        do {
            let byID = "/arcgis/rest/services/bench/FeatureServer/0/query?objectIds=4242&outFields=*&f=json"
            let open = try ServerBenchmark.wrk(plainURL + byID)
            let https = try ServerBenchmark.wrk(secureURL + byID)
            let tokened = try ServerBenchmark.wrk(guardedURL + byID + "&token=" + token)
            let openRate = Double(open[0]) ?? 0, httpsRate = Double(https[0]) ?? 0, tokenRate = Double(tokened[0]) ?? 0
            printTable(
                "wrk -t2 -c64 -d10s, objectIds=4242 (server and wrk share 2 cores)",
                ["server", "requests/s", "p50", "p99", "vs HTTP"],
                [
                    ["HTTP"] + open + ["1.00"],
                    ["HTTPS"] + https + [format(httpsRate / max(openRate, 1), 2)],
                    ["HTTP, a token checked per request"] + tokened + [format(tokenRate / max(openRate, 1), 2)],
                ])
            if openRate > 0, tokenRate > 0 {
                print("token check: about \(format((1 / tokenRate - 1 / openRate) * 1_000_000 * 2, 1)) µs of server CPU per request (2 cores busy)")
            }
        } catch {
            print("wrk is not installed (apt-get install wrk): skipped the load figures")
        }
    }

    /// The floor of the streamed query: every row read through the backend in the route's pages
    /// of 500 (the next page read while one is written, as the route does) and written as the
    /// same Esri JSON bytes, in one process, nothing sent.
    static func floor(_ file: URL) async throws -> (Double, Int) {
        let backend = try SQLiteServiceBackend(url: file)
        defer { Task { try? await backend.close() } }
        let layer = try require(try await backend.schema().layers.first)
        let id = layer.id
        var best = Double.infinity, bytes = 0
        for _ in 0..<3 {
            let start = Date()
            var query = FeatureQuery()
            query.limit = 500
            var out: [UInt8] = [], written = 0
            out.reserveCapacity(1 << 17)
            let first = query
            var reading: Task<[Feature], any Error>? = Task { try await backend.features(layerID: id, query: first) }
            while let current = reading {
                let page = try await current.value
                reading = nil
                if page.count == 500 {
                    query.afterObjectID = page.last?.objectID
                    let next = query
                    reading = Task { try await backend.features(layerID: id, query: next) }
                }
                for feature in page {
                    if written > 0 { out.append(UInt8(ascii: ",")) }
                    try FeatureJSON.writeEsri(feature, fields: layer.fields, includeGeometry: true, to: &out)
                    written += 1
                    if out.count >= 64 * 1024 {
                        bytes += out.count
                        out.removeAll(keepingCapacity: true)
                    }
                }
            }
            bytes += out.count
            best = min(best, Date().timeIntervalSince(start))
            if written != 100_000 { throw BenchError("the floor read \(written) features") }
        }
        return (best, bytes / 3)
    }

    private static func require<T>(_ value: T?) throws -> T {
        guard let value else { throw BenchError("no layer") }
        return value
    }
}
