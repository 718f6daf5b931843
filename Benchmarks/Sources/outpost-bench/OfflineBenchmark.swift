import Foundation
import OutpostCore
import OutpostStorage

#if canImport(Glibc)
    import Glibc
#endif

/// Offline maps (issue 25) on the sample: the field-inspection and Natural Earth services, the
/// basemap drawn from Natural Earth, a locator and a street network, served by `outpost serve`
/// on loopback; the map of `Schemas/examples/field-crews.map.json` over its south-west area down
/// to 1:70,000. Everything through the release `outpost` (process start included): one
/// `offline create` (the first draws the basemap's tiles on the server, later ones read them
/// from its tile cache), the same parts made one after another by hand (`replica create` ×2,
/// `tiles export`), `offline prepare` and a crew's download of the prepared package, and
/// `offline sync` with nothing to do and with 1,000 local inserts.
enum OfflineBenchmark {
    static let runs = 5

    static func run(maxScale: Int, executable: String, workDirectory: URL) async throws {
        guard let cli = CrewSyncBenchmark.outpostExecutable(beside: executable) else {
            throw BenchError("offline needs outpost beside outpost-bench: swift build -c release --package-path Benchmarks --product outpost")
        }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let folder = workDirectory.appendingPathComponent("offline")
        try? FileManager.default.removeItem(at: folder)
        let services = folder.appendingPathComponent("services")
        try FileManager.default.createDirectory(at: services, withIntermediateDirectories: true)
        let sample = services.appendingPathComponent("field_inspection.gpkg").path
        for name in ["field_inspection", "natural_earth"] {
            _ = try measure([cli, "service", "create", root.appendingPathComponent("SampleData/\(name)").path, "--out", services.appendingPathComponent("\(name).gpkg").path])
        }
        _ = try measure([cli, "locator", "create", sample, "--layer", "inspection_points", "--fields", "name=asset_id", "--out", services.appendingPathComponent("assets.locator").path])
        _ = try measure([cli, "network", "create", sample, "--layer", "pipelines", "--name-field", "pipe_id", "--out", services.appendingPathComponent("pipes.network").path])
        try FileManager.default.copyItem(at: root.appendingPathComponent("Schemas/examples/field-crews.map.json"), to: services.appendingPathComponent("field-crews.map.json"))
        let (server, base) = try startServer(executable: cli, arguments: ["serve", "--service", services.path, "--port", "0"])
        defer { kill(server.processIdentifier, SIGTERM); server.waitUntilExit() }
        let map = "\(base)/arcgis/rest/maps/field-crews.json"
        let area = ["--extent", "-122.70,45.49,-122.64,45.53", "--max-scale", String(maxScale)]

        var rows: [[String]] = []
        func out(_ name: String) -> String {
            let path = folder.appendingPathComponent(name).path
            try? FileManager.default.removeItem(atPath: path)
            return path
        }
        // The first draws the basemap's tiles on the server.
        let cold = try measure([cli, "offline", "create", "--map", map] + area + ["--out", out("cold")])
        let size = bytes(folder.appendingPathComponent("cold"))
        let inspected = try JSONValue.parse(Data(try measure([cli, "tiles", "inspect", folder.appendingPathComponent("cold/basemap.tpkx").path, "--json"]).output.utf8))
        let levels = inspected["levels"]?.arrayValue?.compactMap { $0["level"]?.integerValue } ?? []
        let tiles = inspected["tiles"]?.integerValue ?? 0
        rows.append(["offline create, basemap tiles drawn on the server", format(cold.seconds, 2), format(cold.seconds, 2), format(cold.peakMemoryMB), format(Double(size) / 1e6, 1)])
        var warm: [ProcessMeasurement] = []
        for i in 0..<runs { warm.append(try measure([cli, "offline", "create", "--map", map] + area + ["--out", out("warm-\(i)")])) }
        rows.append(row("offline create (one job: parts side by side)", warm, size))

        // The same parts one after another, as a crew did by hand before.
        var manual: [Double] = []
        for i in 0..<runs {
            let start = ContinuousClock.now
            let target = out("manual-\(i)")
            try FileManager.default.createDirectory(atPath: target + "/data", withIntermediateDirectories: true)
            for service in ["field_inspection", "natural_earth"] {
                _ = try measure([
                    cli, "replica", "create", "--url", "\(base)/arcgis/rest/services/\(service)/FeatureServer", "--extent", "-122.70,45.49,-122.64,45.53", "--attachments",
                    "--out", "\(target)/data/\(service).gpkg",
                ])
            }
            _ = try measure([cli, "tiles", "export", "--url", "\(base)/arcgis/rest/services/natural_earth/MapServer", "--extent", "-122.70,45.49,-122.64,45.53", "--levels", "\(levels.min() ?? 0)-\(levels.max() ?? 0)", "--out", "\(target)/basemap.tpkx"])
            manual.append(seconds(ContinuousClock.now - start))
        }
        rows.append(row("by hand: replica create ×2, tiles export (no locator, network)", manual.map { ProcessMeasurement(seconds: $0, peakMemoryMB: .nan, output: "") }, nil))

        let packages = services.appendingPathComponent("field-crews.preplanned")
        let prepare = try measure([cli, "offline", "prepare", "--map", map, "--out", packages.path])
        rows.append(["offline prepare (the area's package, on the office side)", format(prepare.seconds, 2), format(prepare.seconds, 2), format(prepare.peakMemoryMB), format(Double(bytes(packages)) / 1e6, 1)])
        var downloads: [ProcessMeasurement] = []
        for i in 0..<runs { downloads.append(try measure([cli, "offline", "create", "--map", map, "--area", "south-west", "--out", out("crew-\(i)")])) }
        rows.append(row("preplanned download (files, then the crew's own replicas)", downloads, bytes(folder.appendingPathComponent("crew-0"))))

        let crew = folder.appendingPathComponent("warm-0")
        var idle: [ProcessMeasurement] = []
        for _ in 0..<runs { idle.append(try measure([cli, "offline", "sync", crew.path])) }
        rows.append(row("offline sync, nothing to do (2 replicas)", idle, nil))
        var busy: [ProcessMeasurement] = []
        for run in 0..<runs {
            try await insert(1_000, into: crew.appendingPathComponent("data/field_inspection.gpkg"), run: run)
            busy.append(try measure([cli, "offline", "sync", crew.path]))
        }
        rows.append(row("offline sync, 1,000 local inserts", busy, nil))
        printTable(
            "Offline maps on the sample to 1:\(maxScale) (basemap levels \(levels.min() ?? 0)–\(levels.max() ?? 0), \(tiles) tiles; release outpost, process start included; \(runs) runs where a p50 is given)",
            ["operation", "p50 s", "best s", "peak MB", "MB on disk"], rows)
    }

    static func row(_ what: String, _ runs: [ProcessMeasurement], _ size: Int64?) -> [String] {
        let sorted = runs.map(\.seconds).sorted()
        let peak = runs.map(\.peakMemoryMB).filter { !$0.isNaN }.max()
        return [what, format(sorted[sorted.count / 2], 2), format(sorted[0], 2), peak.map { format($0) } ?? "–", size.map { format(Double($0) / 1e6, 1) } ?? "–"]
    }

    static func seconds(_ d: Duration) -> Double { Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18 }

    static func bytes(_ folder: URL) -> Int64 {
        var total: Int64 = 0
        let walker = FileManager.default.enumerator(at: folder, includingPropertiesForKeys: [.fileSizeKey])
        while let url = walker?.nextObject() as? URL { total += Int64((try? url.resourceValues(forKeys: [.fileSizeKey]).fileSize) ?? 0) }
        return total
    }

    /// `count` new inspection points in the crew's area.
    static func insert(_ count: Int, into file: URL, run: Int) async throws {
        let gdb = try Geodatabase.open(at: file)
        defer { try? gdb.close() }
        let table = try gdb.table(named: "inspection_points")
        var features: [Feature] = []
        for i in 0..<count {
            features.append(Feature(
                attributes: ["asset_id": .string("B-\(run)-\(i)"), "asset_type": .string("hydrant"), "condition": .integer(2), "status": .string("open")],
                geometry: .point(try Point(x: -122.69 + Double(i % 50) * 0.0008, y: 45.50 + Double(i / 50) * 0.0004))))
        }
        _ = try await table.add(features)
    }
}
