import Foundation
import OutpostCore
import OutpostTiles
import OutpostVectorTiles

#if canImport(Glibc)
    import Glibc
#endif

/// Serving tiles under load (issue 58): `outpost serve` (release) answering wrk, 64 connections
/// for 10 s, each request the next tile of the same list (every tile of central Helsinki the
/// vector package holds at z12–16), from four services over the same sample:
/// - a `.vtpk` (VectorTileServer over the package's bundles, gzipped tiles sent as stored),
/// - a `.tpkx` of the drawn map (MapServer over Compact Cache V2 bundles, PNG),
/// - the feature service's VectorTileServer (tiles made on request and kept per generation, to
///   z14, its last; a first pass makes them, the figures are of the second),
/// - the feature service's drawn MapServer (PNG drawn on request and kept; likewise).
enum VectorTileServeBenchmark {
    static func run(executable: String, workDirectory: URL) async throws {
        guard let cli = CrewSyncBenchmark.outpostExecutable(beside: executable) else {
            throw BenchError("vtserve needs outpost beside outpost-bench: swift build -c release --package-path Benchmarks --product outpost")
        }
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/wrk") else { throw BenchError("vtserve needs wrk (apt-get install wrk)") }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let folder = workDirectory.appendingPathComponent("vtserve")
        try? FileManager.default.removeItem(at: folder)
        let services = folder.appendingPathComponent("services")
        try FileManager.default.createDirectory(at: services, withIntermediateDirectories: true)
        let gpkg = services.appendingPathComponent("helsinki.gpkg")
        _ = try measure([cli, "service", "create", root.appendingPathComponent("SampleData/helsinki").path, "--out", gpkg.path])
        let package = services.appendingPathComponent("streets.vtpk")
        _ = try measure([cli, "vtiles", "export", gpkg.path, "--max-zoom", "16", "--out", package.path])

        // The tiles asked for: the package's at z12–16, and the area they cover for the raster export.
        var keys: [TileKey] = []
        try await VectorTilePackageReader(url: package).forEachTile { key, _ in if (12...16).contains(key.level) { keys.append(key) } }
        keys.sort { ($0.level, $0.row, $0.col) < ($1.level, $1.row, $1.col) }
        guard !keys.isEmpty else { throw BenchError("the package has no tiles at z12–16") }
        var area = Envelope.Builder()
        for k in keys { if let e = TilingScheme.webMercator.envelope(of: k) { area.add(e) } }
        let e = try WebMercator.convert(try area.envelope.orThrow(), from: .webMercator, to: .wgs84)
        let extent = String(format: "%.6f,%.6f,%.6f,%.6f", e.xmin + 1e-6, e.ymin + 1e-6, e.xmax - 1e-6, e.ymax - 1e-6)

        // The drawn map as a .tpkx, exported from the feature service's MapServer.
        var (server, base) = try startServer(executable: cli, arguments: ["serve", "--service", services.path, "--port", "0"])
        _ = try measure([cli, "tiles", "export", "--url", "\(base)/arcgis/rest/services/helsinki/MapServer", "--extent=\(extent)", "--levels", "12-16",
                         "--out", services.appendingPathComponent("drawn.tpkx").path])
        kill(server.processIdentifier, SIGTERM)
        server.waitUntilExit()
        (server, base) = try startServer(executable: cli, arguments: ["serve", "--service", services.path, "--port", "0"])
        defer { kill(server.processIdentifier, SIGTERM); server.waitUntilExit() }

        let services_ = "\(URL(string: base)!.path)/arcgis/rest/services"
        let lists: [(String, String, [String])] = [
            (".vtpk, VectorTileServer", "pbf", keys.map { "\(services_)/streets/VectorTileServer/tile/\($0.level)/\($0.row)/\($0.col).pbf" }),
            (".tpkx, MapServer", "png", keys.map { "\(services_)/drawn/MapServer/tile/\($0.level)/\($0.row)/\($0.col)" }),
            ("feature service, VectorTileServer (kept; z12–14, its last)", "pbf", keys.filter { $0.level <= 14 }.map { "\(services_)/helsinki/VectorTileServer/tile/\($0.level)/\($0.row)/\($0.col).pbf" }),
            ("feature service, MapServer drawn (kept)", "png", keys.map { "\(services_)/helsinki/MapServer/tile/\($0.level)/\($0.row)/\($0.col)" }),
        ]
        var rows: [[String]] = []
        for (name, _, paths) in lists {
            let list = folder.appendingPathComponent("paths-\(rows.count).txt")
            try paths.joined(separator: "\n").write(to: list, atomically: true, encoding: .utf8)
            let script = folder.appendingPathComponent("paths-\(rows.count).lua")
            try """
                local paths = {}
                for line in io.lines("\(list.path)") do paths[#paths + 1] = line end
                local i = 0
                request = function()
                  i = i % #paths + 1
                  return wrk.format("GET", paths[i], {["Accept-Encoding"] = "gzip"})
                end
                """.write(to: script, atomically: true, encoding: .utf8)
            // Tiles made or drawn on request: a first pass makes and keeps them.
            if name.hasPrefix("feature service") { _ = try wrk(base, script: script) }
            let figures = try wrk(base, script: script)
            rows.append([name] + figures)
        }
        printTable(
            "Tiles served, wrk -t2 -c64 -d10s over \(keys.count) tiles of central Helsinki (z12–16), gzip accepted (release build, loopback)",
            ["service", "tiles/s", "p50", "p99", "transfer/s"], rows)
        print("Server and load generator share the machine's 2 cores.")
    }

    /// Requests/s, p50, p99 and transfer/s of `wrk --latency -s script` against `base`.
    static func wrk(_ base: String, script: URL) throws -> [String] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/wrk")
        process.arguments = ["-t2", "-c64", "-d10s", "--latency", "-s", script.path, base]
        let out = Pipe()
        process.standardOutput = out
        try process.run()
        let lines = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self).split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        process.waitUntilExit()
        func value(_ prefix: String) -> String {
            lines.first { $0.hasPrefix(prefix) }.map { String($0.dropFirst(prefix.count)).trimmingCharacters(in: .whitespaces) } ?? "?"
        }
        let errors = lines.first { $0.hasPrefix("Non-2xx") }.map { " (\($0))" } ?? ""
        return [value("Requests/sec:") + errors, value("50%"), value("99%"), value("Transfer/sec:")]
    }
}

extension Optional {
    fileprivate func orThrow() throws -> Wrapped {
        guard let self else { throw BenchError("no tiles") }
        return self
    }
}
