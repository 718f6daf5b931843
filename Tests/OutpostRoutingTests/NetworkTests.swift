import Foundation
import GRDB
import OutpostCore
import OutpostRouting
import OutpostStorage
import OutpostTestSupport
import Testing

/// The Helsinki street network (OpenStreetMap, ODbL), checked against networkx on the same graph.
@Suite struct NetworkTests {
    /// networkx's Dijkstra length for each query — a source, a target, and an edge to leave out
    /// of the graph or nil — on `graph`'s arcs (the cheapest of parallel arcs kept), infinity
    /// where nothing joins them.
    static func networkxLengths(_ graph: ArcGraph, _ queries: [(Int, Int, Int?)], in directory: TemporaryDirectory) async throws -> [Double] {
        var arcs = "u,v,cost,edge\n"
        for arc in graph.arcs { arcs += "\(arc.from),\(arc.to),\(String(format: "%.17g", arc.cost)),\(arc.edge)\n" }
        try Data(arcs.utf8).write(to: directory.file("arcs.csv"))
        try Data(queries.map { "\($0.0),\($0.1),\($0.2 ?? -1)" }.joined(separator: "\n").utf8).write(to: directory.file("queries.csv"))
        let python = try await ExternalTools.python("""
            import sys, networkx as nx
            def graph(path, closed):
                g = nx.DiGraph()
                for line in list(open(path))[1:]:
                    parts = line.strip().split(",")
                    if int(parts[3]) == closed:
                        continue
                    u, v, c = int(parts[0]), int(parts[1]), float(parts[2])
                    if not g.has_edge(u, v) or g[u][v]["w"] > c:
                        g.add_edge(u, v, w=c)
                return g
            whole = graph(sys.argv[1], -1)
            for line in open(sys.argv[2]):
                s, t, closed = map(int, line.split(","))
                g = whole if closed == -1 else graph(sys.argv[1], closed)
                try:
                    print(repr(nx.dijkstra_path_length(g, s, t, weight="w")))
                except (nx.NetworkXNoPath, nx.NodeNotFound):
                    print("inf")
            """, [directory.file("arcs.csv").path, directory.file("queries.csv").path])
        #expect(python.succeeded, "\(python.stderr)")
        let lengths = python.stdout.split(separator: "\n").map { Double($0) ?? .infinity }
        #expect(lengths.count == queries.count)
        return lengths
    }

    static func network(in directory: TemporaryDirectory) throws -> (Geodatabase, URL, NetworkBuildSummary) {
        let (gdb, _) = try ServiceDirectoryImport.createGeodatabase(from: Repository.sampleData("helsinki"), at: directory.file("helsinki.gpkg"))
        let url = directory.file("helsinki.network")
        let summary = try NetworkBuilder.create(
            from: gdb, layer: "streets", fields: NetworkFieldMap(name: "name", oneway: "oneway", speed: "maxspeed", roadClass: "highway"), at: url)
        return (gdb, url, summary)
    }

    @Test(arguments: [(TravelMode.drivingTime, 1_000), (.walking, 300), (.drivingDistance, 200)])
    func shortestPathsCostWhatNetworkxFindsOnTheSameGraph(mode: TravelMode, pairs count: Int) async throws {
        let directory = TemporaryDirectory("outpost-network-nx")
        let (_, url, summary) = try Self.network(in: directory)
        #expect(summary.edges > 2_500 && summary.nodes > 1_000, "\(summary)")
        let network = try RoadNetwork(url: url)
        let graph = network.graph(mode)
        let nodes = Array(Set(graph.arcs.map(\.from))).sorted()
        var rng = FastRandomGenerator(seed: 24 + UInt64(count))
        var pairs: [(Int, Int)] = []
        for _ in 0..<count { pairs.append((nodes[Int(rng.next() % UInt64(nodes.count))], nodes[Int(rng.next() % UInt64(nodes.count))])) }
        let expected = try await Self.networkxLengths(graph, pairs.map { ($0.0, $0.1, nil) }, in: directory)
        var reachable = 0, mismatches: [String] = []
        for (i, pair) in pairs.enumerated() where i < expected.count {
            if expected[i].isFinite { reachable += 1 }
            // The contraction hierarchy routes are solved with, and the Dijkstra reference.
            for solver in [PathSolver.hierarchy, .dijkstra] {
                let ours = network.shortestPath(from: pair.0, to: pair.1, mode: mode, solver: solver)?.cost ?? .infinity
                if !(ours == expected[i] || abs(ours - expected[i]) <= 1e-6) { mismatches.append("\(solver) \(pair): \(ours) vs \(expected[i])") }
            }
        }
        #expect(mismatches.isEmpty, "\(mismatches.count): \(mismatches.prefix(5))")
        #expect(reachable >= count / 2, "\(reachable) of \(count) pairs are joined")
    }

    @Test func oneWayStreetsAreDrivenOnlyTheirWay() throws {
        let directory = TemporaryDirectory("outpost-network-oneway")
        let (gdb, url, _) = try Self.network(in: directory)
        try gdb.close()
        let network = try RoadNetwork(url: url)
        var edges: [NetworkEdge] = []
        try network.forEachEdge { if $0.oneway == 1, $0.driveSeconds != nil, $0.from != $0.to { edges.append($0) } }
        #expect(edges.count > 50)
        var checked = 0
        for edge in edges.prefix(40) {
            let along = try #require(network.shortestPath(from: edge.from, to: edge.to, mode: .drivingTime))
            #expect(along.cost <= edge.driveSeconds! + 1e-9)
            // Against the arrow the car goes round, never along the edge; on foot it may.
            if let back = network.shortestPath(from: edge.to, to: edge.from, mode: .drivingTime) {
                #expect(!back.edges.contains(edge.id), "edge \(edge.id) driven against its direction")
                checked += 1
            }
            let walk = try #require(network.shortestPath(from: edge.to, to: edge.from, mode: .walking))
            #expect(walk.cost <= edge.length / (5_000.0 / 3_600) + 1e-9)
        }
        #expect(checked > 10)
    }

    /// Each mode uses every road class but those docs/routing.md lists for it (the table and
    /// the code agree): a layer with one line of each listed class, some used ones and one
    /// with no class gives edges driven and walked exactly as the table says; on the Helsinki
    /// sample the ways under construction are neither walked nor driven, and footways are walked.
    @Test func eachModeLeavesOutTheRoadClassesTheDocumentationLists() throws {
        let text = try String(contentsOf: Repository.root.appendingPathComponent("docs/routing.md"), encoding: .utf8)
        func listed(_ mode: String) -> Set<String> {
            guard let row = text.split(separator: "\n").first(where: { $0.hasPrefix("| \(mode) |") }) else { return [] }
            return Set(row.split(separator: "`").enumerated().filter { $0.offset % 2 == 1 }.map { String($0.element) })
        }
        #expect(listed("driving") == TravelMode.drivingTime.roadClassesLeftOut && listed("walking") == TravelMode.walking.roadClassesLeftOut)
        #expect(TravelMode.drivingDistance.roadClassesLeftOut == TravelMode.drivingTime.roadClassesLeftOut)
        #expect(TravelMode.walking.roadClassesLeftOut.contains("construction") && !TravelMode.walking.roadClassesLeftOut.contains("footway"))

        let directory = TemporaryDirectory("outpost-network-classes")
        let service = directory.file("classes")
        try FileManager.default.createDirectory(at: service.appendingPathComponent("data"), withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: Repository.sampleData("helsinki").appendingPathComponent("service.json"), to: service.appendingPathComponent("service.json"))
        let classes: [String?] = (listed("driving").union(listed("walking")).sorted() + ["residential", "primary", "service", "track", "somethingnew"]).map { $0 } + [nil]
        let features = classes.enumerated().map { i, highway in
            let properties = highway.map { #"{"highway":"\#($0)"}"# } ?? "{}"
            return #"{"type":"Feature","properties":\#(properties),"geometry":{"type":"LineString","coordinates":[[24.9,\#(60.1 + Double(i) * 0.001)],[24.901,\#(60.1 + Double(i) * 0.001)]]}}"#
        }
        try Data(#"{"type":"FeatureCollection","features":[\#(features.joined(separator: ","))]}"#.utf8).write(to: service.appendingPathComponent("data/streets.geojson"))
        try Data(#"{"type":"FeatureCollection","features":[]}"#.utf8).write(to: service.appendingPathComponent("data/addresses.geojson"))
        let (gdb, _) = try ServiceDirectoryImport.createGeodatabase(from: service, at: directory.file("classes.gpkg"))
        let url = directory.file("classes.network")
        try NetworkBuilder.create(from: gdb, layer: "streets", fields: NetworkFieldMap(roadClass: "highway"), at: url)
        var seen = 0
        try RoadNetwork(url: url).forEachEdge { edge in
            let cls = edge.roadClass ?? ""
            #expect((edge.driveSeconds != nil) == !TravelMode.drivingTime.roadClassesLeftOut.contains(cls), "\(cls) driven")
            #expect((edge.walkSeconds != nil) == !TravelMode.walking.roadClassesLeftOut.contains(cls), "\(cls) walked")
            seen += 1
        }
        #expect(seen == classes.count)

        let (helsinki, helsinkiNetwork, _) = try Self.network(in: directory)
        try helsinki.close()
        var construction = 0, footways = 0
        try RoadNetwork(url: helsinkiNetwork).forEachEdge { edge in
            if edge.roadClass == "construction" {
                construction += 1
                #expect(edge.walkSeconds == nil && edge.driveSeconds == nil)
            }
            if edge.roadClass == "footway" {
                footways += 1
                #expect(edge.walkSeconds != nil && edge.driveSeconds == nil)
            }
        }
        #expect(construction > 0 && footways > 100)
    }

    @Test func aDamagedOrForeignFileIsRefused() throws {
        let directory = TemporaryDirectory("outpost-network-bad")
        let (gdb, _, _) = try Self.network(in: directory)
        #expect { try RoadNetwork(url: gdb.url) } throws: { ($0 as? RoutingError)?.code == .notANetwork }
        #expect { try RoadNetwork(url: directory.file("none.network")) } throws: { ($0 as? RoutingError)?.code == .notFound }
        let text = directory.file("text.network")
        try Data("no".utf8).write(to: text)
        #expect { try RoadNetwork(url: text) } throws: { ($0 as? RoutingError)?.code == .notANetwork }
        #expect { try NetworkBuilder.create(from: gdb, layer: "addresses", fields: NetworkFieldMap(), at: directory.file("x.network")) } throws: {
            ($0 as? RoutingError)?.code == .invalidInput
        }
    }
}

/// Contraction hierarchies answer what the reference Dijkstra answers.
@Suite struct ContractionHierarchyTests {
    @Test(arguments: TravelMode.allCases)
    func hierarchiesCostWhatDijkstraFinds(mode: TravelMode) throws {
        let directory = TemporaryDirectory("outpost-network-ch")
        let (_, url, summary) = try NetworkTests.network(in: directory)
        #expect((summary.shortcuts[mode] ?? 0) > 0)
        let network = try RoadNetwork(url: url)
        let graph = network.graph(mode)
        // The hierarchy stored in the file, and one built here from the same graph.
        let stored = network.hierarchy(mode), fresh = ContractionHierarchy(graph: graph)
        #expect(stored.shortcutCount == fresh.shortcutCount && stored.arcCount == fresh.arcCount)
        var costs: [Int: Double] = [:]
        for arc in graph.arcs { costs[arc.edge] = min(costs[arc.edge] ?? .infinity, arc.cost) }
        var rng = FastRandomGenerator(seed: 77)
        // Nodes the mode can leave (footway-only nodes are islands for a car).
        let nodes = Array(Set(graph.arcs.map(\.from))).sorted()
        var reachable = 0
        for _ in 0..<1_000 {
            let s = nodes[Int(rng.next() % UInt64(nodes.count))], t = nodes[Int(rng.next() % UInt64(nodes.count))]
            let reference = network.shortestPath(from: s, to: t, mode: mode, solver: .dijkstra)
            for fast in [stored.shortestPath(from: s, to: t), fresh.shortestPath(from: s, to: t)] {
                #expect((reference == nil) == (fast == nil), "\(s) → \(t)")
                guard let reference, let fast else { continue }
                #expect(abs(reference.cost - fast.cost) <= 1e-6, "\(s) → \(t): \(reference.cost) vs \(fast.cost)")
                // The unpacked edges are a path of that cost.
                #expect(abs(fast.edges.reduce(0) { $0 + (costs[$1] ?? .infinity) } - fast.cost) <= 1e-6)
            }
            if reference != nil { reachable += 1 }
        }
        #expect(reachable > 300)
    }

    /// Several sources and targets with costs already spent (a stop part-way along an edge):
    /// the same cost and end nodes as the reference.
    @Test func seededSearchesMatchTheReference() throws {
        let directory = TemporaryDirectory("outpost-network-ch-seeds")
        let (_, url, _) = try NetworkTests.network(in: directory)
        let network = try RoadNetwork(url: url)
        let graph = network.graph(.drivingTime), reverse = graph.reversed()
        let nodes = Array(Set(graph.arcs.map(\.from))).sorted()
        var rng = FastRandomGenerator(seed: 5)
        func seeds() -> [(Int, Double)] {
            (0..<(1 + Int(rng.next() % 3))).map { _ in (nodes[Int(rng.next() % UInt64(nodes.count))], Double(rng.next() % 600) / 10) }
        }
        for _ in 0..<300 {
            let sources = seeds(), targets = seeds()
            let reference = BidirectionalDijkstra.run(forward: graph, backward: reverse, sources: sources, targets: targets)
            let fast = network.hierarchy(.drivingTime).search(sources: sources, targets: targets)
            #expect((reference == nil) == (fast == nil))
            guard let reference, let fast else { continue }
            #expect(abs(reference.cost - fast.cost) <= 1e-6, "\(sources) → \(targets)")
            // The path leaves a source and reaches a target whose seeds add up to its cost.
            let seedCost = (sources.filter { $0.0 == fast.start }.map(\.1).min() ?? .infinity) + (targets.filter { $0.0 == fast.end }.map(\.1).min() ?? .infinity)
            #expect(seedCost.isFinite)
        }
    }

    /// A layout-1 file (no stored hierarchies) still opens, building them; a damaged hierarchy
    /// is refused on open.
    @Test func olderFilesOpenAndDamagedHierarchiesAreRefused() throws {
        let directory = TemporaryDirectory("outpost-network-ch-layout")
        let (_, url, _) = try NetworkTests.network(in: directory)
        let old = directory.file("old.network"), bad = directory.file("bad.network")
        try FileManager.default.copyItem(at: url, to: old)
        try FileManager.default.copyItem(at: url, to: bad)
        let current = try RoadNetwork(url: url)
        do {
            let queue = try DatabaseQueue(path: old.path)
            try queue.writeWithoutTransaction { db in try db.execute(sql: "DROP TABLE hierarchies; PRAGMA user_version = 1; VACUUM") }
            try queue.close()
        }
        let reopened = try RoadNetwork(url: old)
        #expect(reopened.hierarchy(.walking).shortcutCount == current.hierarchy(.walking).shortcutCount)
        #expect(reopened.shortestPath(from: 10, to: 900, mode: .walking)?.cost == current.shortestPath(from: 10, to: 900, mode: .walking)?.cost)
        do {
            let queue = try DatabaseQueue(path: bad.path)
            // An arc pointing past the last node.
            try queue.write { db in
                try db.execute(sql: "UPDATE hierarchies SET up_targets = zeroblob(length(up_targets) - 4) || x'FFFFFF7F' WHERE mode = 'walking'")
            }
            try queue.close()
        }
        #expect { try RoadNetwork(url: bad) } throws: {
            let error = $0 as? RoutingError
            return error?.code == .notANetwork && error?.message.contains("walking hierarchy") == true
        }
    }
}
