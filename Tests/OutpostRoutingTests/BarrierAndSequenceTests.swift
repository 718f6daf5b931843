import Foundation
import OutpostCore
import OutpostRouting
import OutpostStorage
import OutpostTestSupport
import Testing

/// Closed streets and the best order of stops, on the Helsinki network.
@Suite struct BarrierAndSequenceTests {
    /// A closed edge: the detour costs what networkx finds with that edge taken out of the graph.
    @Test func aClosedStreetForcesTheDetourNetworkxFinds() async throws {
        let directory = TemporaryDirectory("outpost-network-barrier")
        let (_, url, _) = try NetworkTests.network(in: directory)
        let network = try RoadNetwork(url: url)
        let graph = network.graph(.drivingTime)
        let nodes = Array(Set(graph.arcs.map(\.from))).sorted()
        var rng = FastRandomGenerator(seed: 2_424)
        var cases: [(Int, Int, Int, Double)] = []  // source, target, closed edge, our cost
        while cases.count < 25 {
            let s = nodes[Int(rng.next() % UInt64(nodes.count))], t = nodes[Int(rng.next() % UInt64(nodes.count))]
            guard let path = network.shortestPath(from: s, to: t, mode: .drivingTime), path.edges.count >= 3 else { continue }
            let closed = path.edges[path.edges.count / 2]
            let detour = network.shortestPath(from: s, to: t, mode: .drivingTime, closedEdges: [closed])
            #expect(detour.map { !$0.edges.contains(closed) && $0.cost >= path.cost - 1e-9 } ?? true)
            cases.append((s, t, closed, detour?.cost ?? .infinity))
        }
        let expected = try await NetworkTests.networkxLengths(graph, cases.map { ($0.0, $0.1, $0.2) }, in: directory)
        for (i, c) in cases.enumerated() where i < expected.count {
            #expect(c.3 == expected[i] || abs(c.3 - expected[i]) <= 1e-6, "\(c): \(expected[i])")
        }
    }

    /// A barrier on the street a route used: the route goes round it.
    @Test func aBarrierOnTheRouteSendsItRound() throws {
        let directory = TemporaryDirectory("outpost-route-barrier")
        let (_, url, _) = try NetworkTests.network(in: directory)
        let network = try RoadNetwork(url: url)
        let stops = [RouteStop(Position(x: 24.941428, y: 60.167769)), RouteStop(Position(x: 24.947429, y: 60.168943))]
        let plain = try network.solve(stops, parameters: RouteOptions(mode: .drivingDistance))
        // The Aleksanterinkatu stretch the plain route drives.
        let step = try #require(plain.legs[0].first { $0.name == "Aleksanterinkatu" && $0.length > 50 })
        let middle = step.geometry[step.geometry.count / 2]
        let around = try network.solve(stops, parameters: RouteOptions(mode: .drivingDistance, barriers: [middle]))
        #expect(!around.legs[0].contains { $0.edge == step.edge })
        #expect(around.totalLength > plain.totalLength)
        #expect { try network.solve(stops, parameters: RouteOptions(mode: .drivingDistance, barriers: [Position(x: 25.5, y: 60.5)])) } throws: {
            ($0 as? RoutingError)?.message == "barrier 1 is more than 500 m from any street"
        }
    }

    /// Ten stops: the order found costs within 5% of the best of all 362,880 orders.
    @Test(arguments: [false, true])
    func theBestSequenceIsWithinFivePercentOfTheOptimum(preserveLast: Bool) throws {
        let directory = TemporaryDirectory("outpost-route-sequence")
        let (_, url, _) = try NetworkTests.network(in: directory)
        let network = try RoadNetwork(url: url)
        let addresses = try JSONValue.parse(try Data(contentsOf: Repository.sampleData("helsinki/data/addresses.geojson")))["features"]?.arrayValue ?? []
        var rng = FastRandomGenerator(seed: preserveLast ? 10 : 11)
        var stops: [RouteStop] = []
        while stops.count < 10 {
            let c = addresses[Int(rng.next() % UInt64(addresses.count))]["geometry"]?["coordinates"]?.arrayValue ?? []
            stops.append(RouteStop(Position(x: c[0].doubleValue ?? 0, y: c[1].doubleValue ?? 0), name: "s\(stops.count)"))
        }
        let options = RouteOptions(mode: .walking, findsBestSequence: true, preserveFirstStop: true, preserveLastStop: preserveLast)
        let route = try network.solve(stops, parameters: options)
        #expect(route.sequence.first == 0 && (!preserveLast || route.sequence.last == 9))
        #expect(Set(route.sequence) == Set(0..<10))
        let snaps = try stops.map { try #require(try network.snap($0.location, mode: .walking)) }
        let matrix = try network.costMatrix(snaps, mode: .walking)
        let found = zip(route.sequence, route.sequence.dropFirst()).reduce(0) { $0 + matrix[$1.0][$1.1] }
        #expect(abs(found - (route.cumulativeCosts.last ?? 0)) < 1e-6)
        // Every order with the first stop first (and the last last, when kept).
        var best = Double.infinity
        var middle = Array(1..<(preserveLast ? 9 : 10))
        func permute(_ k: Int) {
            if k == middle.count {
                var order = [0] + middle
                if preserveLast { order.append(9) }
                best = min(best, zip(order, order.dropFirst()).reduce(0) { $0 + matrix[$1.0][$1.1] })
                return
            }
            for i in k..<middle.count {
                middle.swapAt(k, i)
                permute(k + 1)
                middle.swapAt(k, i)
            }
        }
        permute(0)
        #expect(found <= best * 1.05, "found \(found), optimum \(best)")
    }

    /// The limits: 10,000 stops route (each leg by the hierarchy), one more is refused, as are
    /// 201 stops to order; barriers on every street leave no route, said as such.
    @Test func theLimitsAreClearAndBounded() throws {
        let directory = TemporaryDirectory("outpost-route-limits")
        let (_, url, _) = try NetworkTests.network(in: directory)
        let network = try RoadNetwork(url: url)
        // A point on each walkable edge: halfway along its first stretch.
        // Walkable edges joined to the first one (the sample has small islands of footway).
        var edges: [NetworkEdge] = []
        try network.forEachEdge { if $0.walkSeconds != nil, $0.from != $0.to { edges.append($0) } }
        let walkable = edges.filter { network.shortestPath(from: edges[0].from, to: $0.from, mode: .walking) != nil }.map(\.id)
        let middles = try walkable.map { id in
            let line = try network.edge(id).line
            return Position(x: (line[0].x + line[1].x) / 2, y: (line[0].y + line[1].y) / 2)
        }
        #expect(middles.count > 4_000)
        let stops = (0..<RouteOptions.maximumStops).map { RouteStop(middles[($0 * 37) % middles.count]) }
        let long = try network.solve(stops, mode: .walking)
        #expect(long.legs.count == RouteOptions.maximumStops - 1 && long.cumulativeCosts.last! > 0)
        #expect { try network.solve(stops + [stops[0]], mode: .walking) } throws: {
            ($0 as? RoutingError)?.message.contains("more than the 10000 a route takes") == true
        }
        #expect { try network.solve(Array(stops.prefix(201)), parameters: RouteOptions(mode: .walking, findsBestSequence: true)) } throws: {
            ($0 as? RoutingError)?.message.contains("at most 200 stops") == true
        }
        // A barrier on every street.
        let barriers = middles
        #expect { try network.solve(Array(stops.prefix(2)), parameters: RouteOptions(mode: .walking, barriers: barriers)) } throws: {
            ($0 as? RoutingError)?.message == "no route between stop 1 and stop 2"
        }
    }
}
