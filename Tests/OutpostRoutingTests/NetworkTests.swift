import Foundation
import OutpostCore
import OutpostRouting
import OutpostStorage
import OutpostTestSupport
import Testing

/// The Helsinki street network (OpenStreetMap, ODbL), checked against networkx on the same graph.
@Suite struct NetworkTests {
    /// Python: `graph(path, closed=None)` reads `u,v,cost[,edge]` arcs (a header line first) into a
    /// networkx DiGraph, the cheapest of parallel arcs kept, leaving out the arcs of edge `closed`.
    static let networkxGraph = """
        def graph(path, closed=None):
            g = nx.DiGraph()
            for line in list(open(path))[1:]:
                parts = line.strip().split(",")
                if closed is not None and int(parts[3]) == closed:
                    continue
                u, v, c = int(parts[0]), int(parts[1]), float(parts[2])
                if not g.has_edge(u, v) or g[u][v]["w"] > c:
                    g.add_edge(u, v, w=c)
            return g
        """

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
        var arcs = "u,v,cost\n"
        var touched = Set<Int>()
        for arc in graph.arcs {
            arcs += "\(arc.from),\(arc.to),\(String(format: "%.17g", arc.cost))\n"
            touched.insert(arc.from)
        }
        let nodes = touched.sorted()
        var rng = FastRandomGenerator(seed: 24 + UInt64(count))
        var pairs: [(Int, Int)] = []
        for _ in 0..<count { pairs.append((nodes[Int(rng.next() % UInt64(nodes.count))], nodes[Int(rng.next() % UInt64(nodes.count))])) }
        try Data(arcs.utf8).write(to: directory.file("arcs.csv"))
        try Data(pairs.map { "\($0.0),\($0.1)" }.joined(separator: "\n").utf8).write(to: directory.file("pairs.csv"))
        let python = try await ExternalTools.python("""
            import sys, networkx as nx
            \(Self.networkxGraph)
            g = graph(sys.argv[1])
            for line in open(sys.argv[2]):
                s, t = map(int, line.split(","))
                try:
                    print(repr(nx.dijkstra_path_length(g, s, t, weight="w")))
                except (nx.NetworkXNoPath, nx.NodeNotFound):
                    print("inf")
            """, [directory.file("arcs.csv").path, directory.file("pairs.csv").path])
        #expect(python.succeeded, "\(python.stderr)")
        let expected = python.stdout.split(separator: "\n").map { Double($0) ?? .infinity }
        #expect(expected.count == count)
        var reachable = 0, mismatches: [String] = []
        for (i, pair) in pairs.enumerated() where i < expected.count {
            let ours = network.shortestPath(from: pair.0, to: pair.1, mode: mode)?.cost ?? .infinity
            if expected[i].isFinite { reachable += 1 }
            if !(ours == expected[i] || abs(ours - expected[i]) <= 1e-6) { mismatches.append("\(pair): \(ours) vs \(expected[i])") }
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
        let (_, url, _) = try NetworkTests.network(in: directory)
        let network = try RoadNetwork(url: url)
        let graph = network.graph(mode)
        let hierarchy = ContractionHierarchy(graph: graph)
        var costs: [Int: Double] = [:]
        for arc in graph.arcs { costs[arc.edge] = min(costs[arc.edge] ?? .infinity, arc.cost) }
        var rng = FastRandomGenerator(seed: 77)
        // Nodes the mode can leave (footway-only nodes are islands for a car).
        let nodes = Array(Set(graph.arcs.map(\.from))).sorted()
        var reachable = 0
        for _ in 0..<1_000 {
            let s = nodes[Int(rng.next() % UInt64(nodes.count))], t = nodes[Int(rng.next() % UInt64(nodes.count))]
            let reference = network.shortestPath(from: s, to: t, mode: mode)
            let fast = hierarchy.shortestPath(from: s, to: t)
            #expect((reference == nil) == (fast == nil), "\(s) → \(t)")
            guard let reference, let fast else { continue }
            reachable += 1
            #expect(abs(reference.cost - fast.cost) <= 1e-6, "\(s) → \(t): \(reference.cost) vs \(fast.cost)")
            // The unpacked edges are a path of that cost.
            #expect(abs(fast.edges.reduce(0) { $0 + (costs[$1] ?? .infinity) } - fast.cost) <= 1e-6)
        }
        #expect(reachable > 300)
    }
}
