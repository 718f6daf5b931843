import Foundation
import OutpostRouting
import OutpostStorage

/// Shortest paths on the Helsinki network and on synthetic street grids (rows × columns, both
/// ways, blocks 50–150 m with 10% one-way streets): contraction hierarchy preprocessing (time,
/// peak memory) and query latency, next to the bidirectional Dijkstra reference, scipy's
/// Dijkstra (single source, the target read off) and networkx in the same run. The "street"
/// grid has the hierarchy cities have (every 8th street an arterial at twice the speed, every
/// 64th a highway at four times); the "uniform" grid has none, the hard case for any hierarchy.
/// Targets (issue 24): queries ≥ 100× faster than scipy's Dijkstra; 1M edges preprocessed
/// under 60 s and 2 GB.
enum RouteBenchmark {
    static func grid(rows: Int, columns: Int, streets: Bool) -> ArcGraph {
        var random = GeoprocessingBenchmark.FastRandom(seed: 24)
        var arcs: [(Int32, Int32, Double, Int32)] = []
        var edge: Int32 = 0
        func node(_ r: Int, _ c: Int) -> Int32 { Int32(r * columns + c) }
        for r in 0..<rows {
            for c in 0..<columns {
                for (dr, dc) in [(0, 1), (1, 0)] where r + dr < rows && c + dc < columns {
                    var cost = 50 + random.unit() * 100
                    if streets {
                        let line = dr == 0 ? r : c
                        if line % 64 == 0 { cost /= 4 } else if line % 8 == 0 { cost /= 2 }
                    }
                    let oneway = random.unit() < 0.1
                    arcs.append((node(r, c), node(r + dr, c + dc), cost, edge))
                    if !oneway { arcs.append((node(r + dr, c + dc), node(r, c), cost, edge)) }
                    edge += 1
                }
            }
        }
        return ArcGraph(nodeCount: rows * columns, arcs: arcs)
    }

    /// The Helsinki sample's driving-time graph (its network built in `folder`).
    static func helsinki(folder: URL) throws -> ArcGraph {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let gpkg = folder.appendingPathComponent("helsinki.gpkg"), url = folder.appendingPathComponent("helsinki.network")
        try? FileManager.default.removeItem(at: gpkg)
        let (gdb, _) = try ServiceDirectoryImport.createGeodatabase(from: root.appendingPathComponent("SampleData/helsinki"), at: gpkg)
        defer { try? gdb.close() }
        try NetworkBuilder.create(
            from: gdb, layer: "streets", fields: NetworkFieldMap(name: "name", oneway: "oneway", speed: "maxspeed", roadClass: "highway"), at: url,
            overwrite: true)
        return try RoadNetwork(url: url).graph(.drivingTime)
    }

    /// The worker: preprocesses, then times queries; prints figures and its peak memory.
    /// `kind` is `helsinki`, `streets` or `uniform`.
    static func worker(kind: String, rows: Int, columns: Int, folder: URL) throws {
        let graph = kind == "helsinki" ? try helsinki(folder: folder) : grid(rows: rows, columns: columns, streets: kind == "streets")
        let reverse = graph.reversed()
        let started = ContinuousClock.now
        let hierarchy = ContractionHierarchy(graph: graph)
        let preprocessing = seconds(ContinuousClock.now - started)
        let sources = Array(Set(graph.arcs.map(\.from))).sorted()
        var random = GeoprocessingBenchmark.FastRandom(seed: 7)
        let pairs = (0..<1_000).map { _ in (sources[Int(random.unit() * Double(sources.count))], sources[Int(random.unit() * Double(sources.count))]) }
        var ch: [Double] = [], dijkstra: [Double] = []
        for (i, (s, t)) in pairs.enumerated() {
            var start = ContinuousClock.now
            let fast = hierarchy.shortestPath(from: s, to: t)
            ch.append(seconds(ContinuousClock.now - start) * 1_000)
            if i < 100 {
                start = ContinuousClock.now
                let slow = BidirectionalDijkstra.run(forward: graph, backward: reverse, sources: [(s, 0)], targets: [(t, 0)])
                dijkstra.append(seconds(ContinuousClock.now - start) * 1_000)
                if (fast == nil) != (slow == nil) { print("MISMATCH \(s) \(t) \(String(describing: fast?.cost)) \(String(describing: slow?.cost))") }
                if let a = fast?.cost, let b = slow?.cost, abs(a - b) > 1e-6 { print("MISMATCH \(s) \(t) \(a) \(b)") }
            }
        }
        let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        let peak = status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") }?.split(separator: " ").dropFirst().first ?? "0"
        // The graph and the pairs for the Python peers.
        var csv = ""
        for arc in graph.arcs { csv += "\(arc.from) \(arc.to) \(arc.cost)\n" }
        try Data(csv.utf8).write(to: folder.appendingPathComponent("arcs.txt"))
        try Data(pairs.prefix(100).map { "\($0.0) \($0.1)" }.joined(separator: "\n").utf8).write(to: folder.appendingPathComponent("pairs.txt"))
        ch.sort()
        dijkstra.sort()
        print("nodes \(graph.nodeCount) arcs \(graph.arcs.count) shortcuts \(hierarchy.shortcutCount)")
        print("preprocess \(preprocessing)")
        print("ch \(ch[ch.count / 2]) \(ch[ch.count * 99 / 100])")
        print("dijkstra \(dijkstra[dijkstra.count / 2]) \(dijkstra[dijkstra.count * 99 / 100])")
        print("vmhwm-kb \(peak)")
    }

    static func seconds(_ d: Duration) -> Double { Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18 }

    /// Helsinki, then the street grid, then (with `uniform`) the uniform grid.
    static func run(rows: Int, columns: Int, uniform: Bool, executable: String, workDirectory: URL) throws {
        try compare(kind: "helsinki", rows: 0, columns: 0, executable: executable, workDirectory: workDirectory)
        try compare(kind: "streets", rows: rows, columns: columns, executable: executable, workDirectory: workDirectory)
        if uniform { try compare(kind: "uniform", rows: rows, columns: columns, executable: executable, workDirectory: workDirectory) }
    }

    static func compare(kind: String, rows: Int, columns: Int, executable: String, workDirectory: URL) throws {
        let folder = workDirectory.appendingPathComponent("route-\(kind)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let m = try measure([executable, "worker-route", kind, String(rows), String(columns), folder.path])
        let lines = m.output.split(separator: "\n").map(String.init)
        func value(_ name: String) -> [String] { lines.first { $0.hasPrefix(name + " ") }?.split(separator: " ").dropFirst().map(String.init) ?? [] }
        let python = ProcessInfo.processInfo.environment["OUTPOST_PYTHON"] ?? "python3"
        let peers = try measure([python, "-c", """
            import sys, time, numpy, scipy.sparse, scipy.sparse.csgraph as cg, networkx as nx
            folder = sys.argv[1]
            a = numpy.loadtxt(folder + "/arcs.txt")
            n = int(max(a[:, 0].max(), a[:, 1].max())) + 1
            m = scipy.sparse.csr_matrix((a[:, 2], (a[:, 0].astype(int), a[:, 1].astype(int))), shape=(n, n))
            pairs = [tuple(map(int, l.split())) for l in open(folder + "/pairs.txt")]
            times = []
            for s, t in pairs[:20]:
                start = time.perf_counter(); d = cg.dijkstra(m, indices=s); times.append((time.perf_counter() - start) * 1000)
            times.sort(); print("scipy", times[len(times) // 2], times[-1])
            g = nx.DiGraph()
            for u, v, c in a: g.add_edge(int(u), int(v), w=c)
            times = []
            for s, t in pairs[:10]:
                start = time.perf_counter()
                try: nx.bidirectional_dijkstra(g, s, t, weight="w")
                except nx.NetworkXNoPath: pass
                times.append((time.perf_counter() - start) * 1000)
            times.sort(); print("networkx", times[len(times) // 2], times[-1])
            print(0)
            """, folder.path])
        let peerLines = peers.output.split(separator: "\n").map(String.init)
        func peer(_ name: String) -> [Double] { peerLines.first { $0.hasPrefix(name + " ") }?.split(separator: " ").dropFirst().compactMap { Double($0) } ?? [] }
        let ch = value("ch").compactMap(Double.init), dj = value("dijkstra").compactMap(Double.init)
        let scipy = peer("scipy"), nxTimes = peer("networkx")
        print("\n\(lines.first { $0.hasPrefix("nodes") } ?? "")")
        printTable(
            (kind == "helsinki" ? "Shortest paths on the Helsinki driving network" : "Shortest paths on a \(rows) × \(columns) \(kind) grid")
                + " (release build, one core; peak MB of the process: graph, reverse graph and hierarchy)",
            ["solver", "preprocess s", "peak MB", "p50 ms", "p99 ms", "CH speed-up at p50"],
            [
                ["contraction hierarchy", format(Double(value("preprocess").first ?? "") ?? 0, 1), format((Double(value("vmhwm-kb").first ?? "") ?? 0) / 1_024, 0), format(ch.first ?? 0, 3), format(ch.last ?? 0, 3), "1"],
                ["bidirectional Dijkstra (reference)", "–", "", format(dj.first ?? 0, 2), format(dj.last ?? 0, 2), format((dj.first ?? 0) / max(ch.first ?? 1, 1e-9), 0)],
                ["scipy csgraph.dijkstra (single source)", "–", "", format(scipy.first ?? 0, 1), format(scipy.last ?? 0, 1), format((scipy.first ?? 0) / max(ch.first ?? 1, 1e-9), 0)],
                ["networkx bidirectional_dijkstra", "–", "", format(nxTimes.first ?? 0, 1), format(nxTimes.last ?? 0, 1), format((nxTimes.first ?? 0) / max(ch.first ?? 1, 1e-9), 0)],
            ])
        if lines.contains(where: { $0.hasPrefix("MISMATCH") }) { print("MISMATCHES: \(lines.filter { $0.hasPrefix("MISMATCH") }.prefix(5))") }
    }
}
