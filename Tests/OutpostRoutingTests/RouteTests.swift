import Foundation
import OutpostCore
import OutpostRouting
import OutpostStorage
import OutpostTestSupport
import Testing

/// Routes between stops on the Helsinki network, their directions, and bad stops.
@Suite struct RouteTests {
    /// Mannerheimintie 12 (by Stockmann) and Aleksanterinkatu 11, from the sample's addresses.
    static let stockmann = Position(x: 24.9405705, y: 60.1680605)
    static let aleksanterinkatu = Position(x: 24.9470227, y: 60.1690372)

    /// Hand-checked on the map: from Mannerheimintie's south-bound carriageway (one way) to
    /// Aleksanterinkatu, a car goes on south, comes round at Bulevardi, drives back north on
    /// Mannerheimintie and turns right (east) into Aleksanterinkatu.
    @Test func aDriveReadsAsItIsDriven() throws {
        let directory = TemporaryDirectory("outpost-route-streets")
        let (_, url, _) = try NetworkTests.network(in: directory)
        let network = try RoadNetwork(url: url)
        let route = try network.solve(
            [RouteStop(Position(x: 24.941428, y: 60.167769), name: "A"), RouteStop(Position(x: 24.947429, y: 60.168943), name: "B")],
            mode: .drivingDistance)
        let directions = route.directions
        let lines = directions.map { "\($0.type.rawValue) \($0.text) \(Int($0.length)) m" }
        #expect(directions.map(\.type) == [.depart, .straight, .turnLeft, .bearLeft, .turnRight, .stop], "\(lines)")
        #expect(directions.map(\.streetName) == ["Mannerheimintie", nil, "Bulevardi", "Mannerheimintie", "Aleksanterinkatu", nil], "\(lines)")
        #expect(directions.first?.text == "Start at A and go southeast on Mannerheimintie")
        #expect(directions[4].text == "Turn right onto Aleksanterinkatu" && directions.last?.text == "Finish at B")
        // The parts add up to the route, which is the cheapest by distance.
        #expect(abs(directions.reduce(0) { $0 + $1.length } - route.totalLength) < 1e-6)
        #expect(abs(route.cumulativeCosts[1] - route.totalLength) < 1e-6)
        #expect(route.totalLength > 700 && route.totalLength < 900, "\(route.totalLength)")
        // Geometry runs from the first stop's snap to the last's.
        let line = route.geometry
        #expect(line.first == route.snaps[0].point && line.last == route.snaps[1].point)
    }

    /// A walk between two address points: the stops snap to the nearest walkable street (here a
    /// service lane behind the second building), and the walk costs its length at 5 km/h.
    @Test func aWalkAddsUpAndCostsItsLengthAtWalkingSpeed() throws {
        let directory = TemporaryDirectory("outpost-route-walk")
        let (_, url, _) = try NetworkTests.network(in: directory)
        let network = try RoadNetwork(url: url)
        let route = try network.solve([RouteStop(Self.stockmann, name: "Stockmann"), RouteStop(Self.aleksanterinkatu, name: "Burger King")], mode: .walking)
        let directions = route.directions
        #expect(directions.first?.type == .depart && directions.last?.type == .stop)
        #expect(directions.first?.text.hasPrefix("Start at Stockmann") == true && directions.last?.text == "Finish at Burger King")
        #expect(abs(directions.reduce(0) { $0 + $1.length } - route.totalLength) < 1e-6)
        #expect(route.snaps.allSatisfy { $0.distance < 10 })
        #expect(abs(route.totalTime - route.totalLength / (5_000.0 / 3_600)) < 1e-6)
        #expect(abs(route.cumulativeCosts[1] - route.totalTime) < 1e-6)
        // No cheaper walk exists between the two snapped points' edge ends than the one found.
        let a = route.snaps[0], b = route.snaps[1]
        #expect(route.totalLength >= StraightLine.metres(a.point, b.point) - 1e-6)
    }

    /// A street grid (5 × 5 junctions, blocks of about 55 m, every other street one way, the
    /// one-way streets alternating direction): a stop exactly on a junction is that junction, so
    /// the route between two junction stops costs what the cheapest path between the two nodes
    /// costs, whichever edge the stops snapped to (a one-way block starting there included). The
    /// 600 solves run off the cooperative pool (other tests' waits need its two threads).
    @Test(arguments: [TravelMode.drivingTime, .drivingDistance])
    func aStopOnAJunctionLeavesAndArrivesByAnyStreetThere(mode: TravelMode) async throws {
        let directory = TemporaryDirectory("outpost-route-grid")
        let url = try Self.grid(in: directory)
        let (count, starts, worse) = try await runBlocking { () throws -> (Int, Int, [String]) in
            let network = try RoadNetwork(url: url)
            var nodes: [Int: Position] = [:]
            var oneWayStarts = Set<Int>()
            var ids: [Int] = []
            try network.forEachEdge { ids.append($0.id) }
            for id in ids {
                let edge = try network.edge(id)
                nodes[edge.from] = edge.line.first
                nodes[edge.to] = edge.line.last
                if edge.oneway != 0 { oneWayStarts.insert(edge.oneway == 1 ? edge.from : edge.to) }
            }
            var worse: [String] = []
            for (a, pa) in nodes.sorted(by: { $0.key < $1.key }) {
                for (b, pb) in nodes.sorted(by: { $0.key < $1.key }) where a != b {
                    guard let best = network.shortestPath(from: a, to: b, mode: mode) else { continue }
                    let route = try network.solve([RouteStop(pa), RouteStop(pb)], mode: mode)
                    let cost = mode == .drivingTime ? route.totalTime : route.totalLength
                    if abs(cost - best.cost) > 1e-6 { worse.append("\(a)→\(b): \(cost) vs \(best.cost)") }
                }
            }
            return (nodes.count, oneWayStarts.count, worse)
        }
        #expect(count == 25 && starts > 5)
        #expect(worse.isEmpty, "\(worse.count) routes between junctions cost more than the cheapest path: \(worse.prefix(5))")
    }

    /// A network of a 5 × 5 grid of junctions near Helsinki: a line per block, rows 1 and 3 one
    /// way east and west, columns 1 and 3 one way north and south.
    static func grid(in directory: TemporaryDirectory) throws -> URL {
        let service = directory.file("grid")
        try FileManager.default.createDirectory(at: service.appendingPathComponent("data"), withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: Repository.sampleData("helsinki").appendingPathComponent("service.json"), to: service.appendingPathComponent("service.json"))
        func point(_ i: Int, _ j: Int) -> String { "[\(24.90 + Double(i) * 0.001),\(60.20 + Double(j) * 0.0005)]" }
        var features: [String] = []
        func line(_ from: String, _ to: String, oneway: String?) {
            let flag = oneway.map { ",\"oneway\":\"\($0)\"" } ?? ""
            features.append(#"{"type":"Feature","properties":{"highway":"residential","name":"Street \#(features.count)"\#(flag)},"geometry":{"type":"LineString","coordinates":[\#(from),\#(to)]}}"#)
        }
        for j in 0..<5 {
            for i in 0..<4 { line(point(i, j), point(i + 1, j), oneway: j % 2 == 1 ? (j % 4 == 1 ? "yes" : "-1") : nil) }
        }
        for i in 0..<5 {
            for j in 0..<4 { line(point(i, j), point(i, j + 1), oneway: i % 2 == 1 ? (i % 4 == 1 ? "yes" : "-1") : nil) }
        }
        try Data(#"{"type":"FeatureCollection","features":[\#(features.joined(separator: ","))]}"#.utf8).write(to: service.appendingPathComponent("data/streets.geojson"))
        try Data(#"{"type":"FeatureCollection","features":[]}"#.utf8).write(to: service.appendingPathComponent("data/addresses.geojson"))
        let (gdb, _) = try ServiceDirectoryImport.createGeodatabase(from: service, at: directory.file("grid.gpkg"))
        defer { try? gdb.close() }
        let url = directory.file("grid.network")
        try NetworkBuilder.create(
            from: gdb, layer: "streets", fields: NetworkFieldMap(name: "name", oneway: "oneway", speed: "maxspeed", roadClass: "highway"), at: url)
        return url
    }

    @Test func badStopsGetClearErrors() throws {
        let directory = TemporaryDirectory("outpost-route-bad")
        let (_, url, _) = try NetworkTests.network(in: directory)
        let network = try RoadNetwork(url: url)
        #expect { try network.solve([RouteStop(Self.stockmann)], mode: .walking) } throws: {
            ($0 as? RoutingError)?.message.contains("at least two stops") == true
        }
        #expect { try network.solve([RouteStop(Self.stockmann), RouteStop(Position(x: 25.5, y: 60.5), name: "lake")], mode: .walking) } throws: {
            ($0 as? RoutingError)?.message == "stop 2 (lake) is more than 500 m from any street"
        }
        // Two streets that never meet.
        let fields = [FieldDefinition(name: "objectid", type: .oid), FieldDefinition(name: "name", type: .string)]
        let layer = LayerDefinition(id: 0, name: "streets", geometryType: .multiLineString, fields: fields, spatialReference: .wgs84, sync: false)
        let islands = try Geodatabase.create(at: directory.file("islands.gpkg"), schema: ServiceSchema(name: "islands", layers: [layer], tables: []), changeCapture: false)
        try islands.write { conn in
            _ = try islands.table(named: "streets").add([
                Feature(attributes: ["name": .string("Saarentie")], geometry: .multiLineString(try MultiLineString([try LineString([Position(x: 24.90, y: 60.20), Position(x: 24.91, y: 60.20)])]))),
                Feature(attributes: ["name": .string("Luodontie")], geometry: .multiLineString(try MultiLineString([try LineString([Position(x: 24.90, y: 60.21), Position(x: 24.91, y: 60.21)])]))),
            ], in: conn)
        }
        let apart = directory.file("islands.network")
        try NetworkBuilder.create(from: islands, layer: "streets", fields: NetworkFieldMap(name: "name"), at: apart)
        let islandNetwork = try RoadNetwork(url: apart)
        #expect {
            try islandNetwork.solve([RouteStop(Position(x: 24.905, y: 60.2001)), RouteStop(Position(x: 24.905, y: 60.2099)), RouteStop(Position(x: 24.906, y: 60.2099))], mode: .drivingTime)
        } throws: { ($0 as? RoutingError)?.message == "no route between stop 1 and stop 2" }
        let along = try islandNetwork.solve([RouteStop(Position(x: 24.902, y: 60.2001)), RouteStop(Position(x: 24.908, y: 60.2001))], mode: .drivingDistance)
        #expect(abs(along.totalLength - 0.6 * 555.8) < 5, "\(along.totalLength)")
        // Two stops on one spot: a route of no length.
        let same = try network.solve([RouteStop(Self.stockmann), RouteStop(Self.stockmann)], mode: .walking)
        #expect(same.totalLength < 1e-6)
    }
}

enum StraightLine {
    /// Metres as the crow flies (equirectangular; fine at street scale).
    static func metres(_ a: Position, _ b: Position) -> Double {
        let k = cos((a.y + b.y) / 2 * .pi / 180)
        return hypot((b.x - a.x) * k, b.y - a.y) * 111_320
    }
}
