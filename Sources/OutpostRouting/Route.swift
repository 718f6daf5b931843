import Foundation
import GRDB
import OutpostCore
import OutpostGeoprocessing

/// How to route (ArcGIS `RouteParameters`, the parts the solver reads).
public struct RouteOptions: Sendable, Hashable {
    /// Most stops a route takes.
    public static let maximumStops = 10_000
    /// Most stops the best-sequence search orders (it builds the cost matrix between them).
    public static let maximumSequencedStops = 200

    /// How the route is measured (time or distance) and who travels it.
    public var mode: TravelMode
    /// Metres a stop (or barrier) may be from the nearest street.
    public var snapDistance: Double
    /// Points that close the street they stand on.
    public var barriers: [Position]
    /// Visit the stops in the cheapest order found (a heuristic: nearest neighbour, then 2-opt
    /// and moves of single stops until nothing improves).
    public var findsBestSequence: Bool
    /// With `findsBestSequence`: the first stop stays first.
    public var preserveFirstStop: Bool
    /// With `findsBestSequence`: the last stop stays last.
    public var preserveLastStop: Bool

    /// Options of these values.
    public init(
        mode: TravelMode = .drivingTime, snapDistance: Double = 500, barriers: [Position] = [], findsBestSequence: Bool = false,
        preserveFirstStop: Bool = true, preserveLastStop: Bool = true
    ) {
        self.mode = mode
        self.snapDistance = snapDistance
        self.barriers = barriers
        self.findsBestSequence = findsBestSequence
        self.preserveFirstStop = preserveFirstStop
        self.preserveLastStop = preserveLastStop
    }
}

/// A place to visit.
public struct RouteStop: Sendable, Hashable {
    /// Where the stop is.
    public var location: Position
    /// The stop's name, for directions and results.
    public var name: String?

    /// A stop at `location`.
    public init(_ location: Position, name: String? = nil) {
        self.location = location
        self.name = name
    }
}

/// A stop placed on the network: the nearest point of the nearest edge a mode may use.
public struct NetworkSnap: Sendable, Hashable {
    /// The edge the stop is placed on.
    public var edge: Int
    /// Where along the edge, 0 at `from_node`, 1 at `to_node` (exactly, for a stop within a
    /// centimetre of a node: it stands on that junction).
    public var fraction: Double
    /// The point on the edge.
    public var point: Position
    /// Metres from the stop to the edge.
    public var distance: Double
}

/// One street a route runs along, in the direction it runs.
public struct RouteStep: Sendable, Hashable {
    /// The edge.
    public var edge: Int
    /// The street's name.
    public var name: String?
    /// Metres and seconds (for the route's travel mode) on this part.
    public var length: Double
    /// Seconds on this part, for the route's travel mode.
    public var time: Double
    /// The line of this part, in the direction travelled.
    public var geometry: [Position]
}

/// A route through its stops in order.
public struct SolvedRoute: Sendable {
    /// The stops, in the request's order.
    public var stops: [RouteStop]
    /// Where each stop met the network.
    public var snaps: [NetworkSnap]
    /// The steps between consecutive stops (`legs[i]` from stop i to stop i + 1).
    public var legs: [[RouteStep]]
    /// The cost (seconds or metres, by mode) from the first stop to each stop.
    public var cumulativeCosts: [Double]
    /// The stops' positions in the request, in the order visited (`0, 1, 2…` unless the
    /// sequence was optimised).
    public var sequence: [Int]
    /// Metres of the whole route.
    public var totalLength: Double { legs.joined().reduce(0) { $0 + $1.length } }
    /// Seconds of the whole route.
    public var totalTime: Double { legs.joined().reduce(0) { $0 + $1.time } }
    /// The whole route's line.
    public var geometry: [Position] {
        var out: [Position] = []
        for step in legs.joined() {
            for p in step.geometry where out.last != p { out.append(p) }
        }
        return out
    }
}

extension RoadNetwork {
    /// The edge nearest `point` within `maxDistance` metres that `mode` may use, or nil. Looks
    /// within 25 m first, then 100 m, then the whole distance: in a city centre the first box
    /// holds a handful of edges where the last holds hundreds.
    public func snap(_ point: Position, mode: TravelMode, maxDistance: Double = 500) throws -> NetworkSnap? {
        let geographic = spatialReference.wkid == 4326
        var radii = [25.0, 100.0].filter { $0 < maxDistance }
        radii.append(maxDistance)
        return try queue.read { db -> NetworkSnap? in
            for radius in radii {
                let dy = geographic ? radius / 111_320 : radius
                let dx = geographic ? radius / (111_320 * max(cos(point.y * .pi / 180), 0.01)) : radius
                let rows = try Row.fetchAll(db, sql: """
                    SELECT e.id, e.line, e.drive_seconds, e.walk_seconds FROM edge_rtree r JOIN edges e ON e.id = r.id
                    WHERE r.minx <= ? AND r.maxx >= ? AND r.miny <= ? AND r.maxy >= ?
                    """, arguments: [point.x + dx, point.x - dx, point.y + dy, point.y - dy])
                var best: (snap: NetworkSnap, line: [Position])?
                for row in rows {
                    let drive: Double? = row[2], walk: Double? = row[3]
                    guard mode == .walking ? walk != nil : drive != nil else { continue }
                    let line = NetworkGeometry.decode(row[1])
                    let (q, fraction, d) = NetworkGeometry.nearest(on: line, to: point, geographic: geographic)
                    if d <= radius, d < (best?.snap.distance ?? .infinity) { best = (NetworkSnap(edge: row[0], fraction: fraction, point: q, distance: d), line) }
                }
                // Nothing outside the box is nearer than its radius: the nearest within it is the nearest.
                guard let (snap, line) = best else { continue }
                var found = snap
                // A stop within the build's tolerance of an edge's end stands on that node.
                for (end, node) in [(0.0, line.first), (1.0, line.last)] {
                    guard let node, NetworkGeometry.distance(found.point, node, geographic: geographic) <= Self.nodeTolerance else { continue }
                    (found.fraction, found.point) = (end, node)
                    found.distance = NetworkGeometry.distance(point, node, geographic: geographic)
                    break
                }
                return found
            }
            return nil
        }
    }

    /// The cheapest route through `stops` in order.
    /// - Throws: ``RoutingError`` `.invalidInput` naming a stop too far from any street it may
    ///   use, `.noRoute` naming two stops nothing joins.
    public func solve(_ stops: [RouteStop], mode: TravelMode, snapDistance: Double = 500) throws -> SolvedRoute {
        try solve(stops, parameters: RouteOptions(mode: mode, snapDistance: snapDistance))
    }

    /// The cheapest route through `stops`: in order, or in the best order found
    /// (`findsBestSequence`), around the edges the barriers stand on.
    /// - Throws: ``RoutingError`` `.invalidInput` naming a stop too far from any street it may
    ///   use (or too many stops to order), `.noRoute` naming two stops nothing joins;
    ///   `CancellationError` once `cancellation` is cancelled (looked at before each leg and
    ///   each pair of stops the best sequence compares).
    public func solve(_ stops: [RouteStop], parameters: RouteOptions, cancellation: BlockingCancellation? = nil) throws -> SolvedRoute {
        let mode = parameters.mode
        guard stops.count >= 2 else { throw RoutingError(.invalidInput, "a route needs at least two stops (got \(stops.count))", input: .stops) }
        guard stops.count <= RouteOptions.maximumStops else {
            throw RoutingError(.invalidInput, "\(stops.count) stops are more than the \(RouteOptions.maximumStops) a route takes", input: .stops)
        }
        var snaps: [NetworkSnap] = []
        for (i, stop) in stops.enumerated() {
            guard let snap = try snap(stop.location, mode: mode, maxDistance: parameters.snapDistance) else {
                throw RoutingError(.invalidInput, "stop \(i + 1)\(stop.name.map { " (\($0))" } ?? "") is more than \(Int(parameters.snapDistance)) m from any street", input: .stops)
            }
            snaps.append(snap)
        }
        // Each barrier closes the edge it stands on (within the snapping distance), both ways.
        var blocked = Set<Int32>()
        for (i, barrier) in parameters.barriers.enumerated() {
            guard let snap = try snap(barrier, mode: mode, maxDistance: parameters.snapDistance) else {
                throw RoutingError(.invalidInput, "barrier \(i + 1) is more than \(Int(parameters.snapDistance)) m from any street", input: .barriers)
            }
            blocked.insert(Int32(snap.edge))
        }
        var order = Array(stops.indices)
        if parameters.findsBestSequence, stops.count > 2 {
            guard stops.count <= RouteOptions.maximumSequencedStops else {
                throw RoutingError(.invalidInput, "best sequence takes at most \(RouteOptions.maximumSequencedStops) stops (got \(stops.count))", input: .stops)
            }
            let matrix = try costMatrix(snaps, mode: mode, blocked: blocked, cancellation: cancellation)
            order = StopSequence.best(matrix, preserveFirst: parameters.preserveFirstStop, preserveLast: parameters.preserveLastStop)
        }
        var legs: [[RouteStep]] = []
        var cumulative: [Double] = [0]
        let edges = EdgeCache(self)
        for k in 0..<(order.count - 1) {
            try cancellation?.checkCancellation()
            let (i, j) = (order[k], order[k + 1])
            guard let leg = try leg(from: snaps[i], to: snaps[j], mode: mode, blocked: blocked, edges: edges) else {
                throw RoutingError(.noRoute, "no route between stop \(i + 1) and stop \(j + 1)")
            }
            legs.append(leg.steps)
            cumulative.append(cumulative[k] + leg.cost)
        }
        return SolvedRoute(stops: order.map { stops[$0] }, snaps: order.map { snaps[$0] }, legs: legs, cumulativeCosts: cumulative, sequence: order)
    }

    /// The cost from every snapped stop to every other (infinity where no path joins them).
    public func costMatrix(
        _ snaps: [NetworkSnap], mode: TravelMode, blocked: Set<Int32> = [], cancellation: BlockingCancellation? = nil
    ) throws -> [[Double]] {
        var matrix = [[Double]](repeating: [Double](repeating: 0, count: snaps.count), count: snaps.count)
        let edges = EdgeCache(self)
        for i in snaps.indices {
            for j in snaps.indices where i != j {
                try cancellation?.checkCancellation()
                matrix[i][j] = try leg(from: snaps[i], to: snaps[j], mode: mode, blocked: blocked, stepsWanted: false, edges: edges)?.cost ?? .infinity
            }
        }
        return matrix
    }

    /// The cheapest way from one snapped stop to another: along their edges to the nodes at
    /// either end (as far as the edges' directions allow), and between those nodes by the
    /// hierarchy (or, around barriers, bidirectional Dijkstra) seeded with those partial costs.
    func leg(
        from a: NetworkSnap, to b: NetworkSnap, mode: TravelMode, blocked: Set<Int32> = [], stepsWanted: Bool = true, edges: EdgeCache? = nil
    ) throws -> (cost: Double, steps: [RouteStep])? {
        let cache = edges ?? EdgeCache(self)
        // A stop on a closed street cannot leave or reach it.
        if blocked.contains(Int32(a.edge)) || blocked.contains(Int32(b.edge)) { return nil }
        let ea = try cache.edge(a.edge), eb = try cache.edge(b.edge)
        let costA = cost(ea, mode), costB = cost(eb, mode)
        let (fa, ba) = directions(ea, mode), (fb, bb) = directions(eb, mode)
        // Sources: leaving stop a towards the edge's ends; targets: arriving at stop b from its ends.
        // A stop at an end of its edge (``snap(_:mode:maxDistance:)`` puts it exactly there when
        // it is that near) is that node: it may leave (or arrive) by any edge there, whichever
        // way its own edge runs; otherwise a stop on the junction where a one-way
        // street begins would have to leave along it and come round the block.
        var sources: [(Int, Double)] = [], targets: [(Int, Double)] = []
        let (aAtFrom, aAtTo) = (a.fraction == 0, a.fraction == 1)
        let (bAtFrom, bAtTo) = (b.fraction == 0, b.fraction == 1)
        if fa || aAtTo { sources.append((ea.to, aAtTo ? 0 : (1 - a.fraction) * costA)) }
        if ba || aAtFrom { sources.append((ea.from, aAtFrom ? 0 : a.fraction * costA)) }
        if fb || bAtFrom { targets.append((eb.from, bAtFrom ? 0 : b.fraction * costB)) }
        if bb || bAtTo { targets.append((eb.to, bAtTo ? 0 : (1 - b.fraction) * costB)) }
        var best: (cost: Double, path: (edges: [Int], start: Int, end: Int)?)? = nil
        // Both on one edge, the second ahead in a direction the edge may be travelled.
        if a.edge == b.edge, (b.fraction >= a.fraction && fa) || (b.fraction <= a.fraction && ba) {
            best = (abs(b.fraction - a.fraction) * costA, nil)
        }
        if let path = search(mode: mode, sources: sources, targets: targets, blocked: blocked),
           path.cost < best?.cost ?? .infinity
        {
            best = (path.cost, (path.edges, path.start, path.end))
        }
        guard let best else { return nil }
        guard stepsWanted else { return (best.cost, []) }
        guard let path = best.path else { return (best.cost, [step(ea, mode, from: a.fraction, to: b.fraction)]) }
        // Off stop a's edge towards the node the path starts from, along the path, onto b's edge.
        var steps = [step(ea, mode, from: a.fraction, to: path.start == ea.to ? 1 : 0)]
        var node = path.start
        for id in path.edges {
            let e = try cache.edge(id)
            let along = e.from == node
            steps.append(step(e, mode, from: along ? 0 : 1, to: along ? 1 : 0))
            node = along ? e.to : e.from
        }
        steps.append(step(eb, mode, from: path.end == eb.from ? 0 : 1, to: b.fraction))
        return (best.cost, steps.filter { $0.length > 0 })
    }

    /// Metres within which a stop at an edge's end stands on its node (the build's default
    /// snapping tolerance; see ``NetworkBuilder``).
    static let nodeTolerance = 0.01

    func cost(_ e: NetworkEdge, _ mode: TravelMode) -> Double {
        switch mode {
        case .drivingTime: e.driveSeconds ?? .infinity
        case .drivingDistance: e.length
        case .walking: e.walkSeconds ?? .infinity
        }
    }

    /// Whether the edge may be travelled from → to, and to → from.
    func directions(_ e: NetworkEdge, _ mode: TravelMode) -> (Bool, Bool) {
        mode == .walking ? (e.walkSeconds != nil, e.walkSeconds != nil) : (e.driveSeconds != nil && e.oneway >= 0, e.driveSeconds != nil && e.oneway <= 0)
    }

    /// The part of an edge between two fractions, in the direction travelled.
    func step(_ e: NetworkEdge, _ mode: TravelMode, from: Double, to: Double) -> RouteStep {
        let share = abs(to - from)
        let time = mode == .walking ? (e.walkSeconds ?? 0) : (e.driveSeconds ?? 0)
        let geographic = spatialReference.wkid == 4326
        return RouteStep(
            edge: e.id, name: e.name, length: e.length * share, time: time * share,
            geometry: NetworkGeometry.part(of: e.line, from: from, to: to, geographic: geographic))
    }

    /// One edge with its line.
    public func edge(_ id: Int) throws -> NetworkEdge {
        try queue.read { db in
            guard let row = try Row.fetchOne(
                db, sql: "SELECT id, from_node, to_node, length, drive_seconds, walk_seconds, oneway, name, class, line FROM edges WHERE id = ?",
                arguments: [id])
            else { throw RoutingError(.notANetwork, "\(url.lastPathComponent) has no edge \(id)") }
            var e = NetworkEdge(
                id: row[0], from: (row[1] as Int) - 1, to: (row[2] as Int) - 1, length: row[3], driveSeconds: row[4], walkSeconds: row[5],
                oneway: row[6], name: row[7], roadClass: row[8])
            e.line = NetworkGeometry.decode(row[9])
            return e
        }
    }
}

/// The edges one solve has read, so a route through many stops (or a cost matrix) reads each
/// street from the file once.
final class EdgeCache {
    let network: RoadNetwork
    private var edges: [Int: NetworkEdge] = [:]

    init(_ network: RoadNetwork) { self.network = network }

    func edge(_ id: Int) throws -> NetworkEdge {
        if let e = edges[id] { return e }
        let e = try network.edge(id)
        if edges.count > 100_000 { edges.removeAll(keepingCapacity: true) }
        edges[id] = e
        return e
    }
}

/// Lines stored in a network.
enum NetworkGeometry {
    static func decode(_ blob: Data) -> [Position] { PackedPositions.decode(blob) }

    static func distance(_ a: Position, _ b: Position, geographic: Bool) -> Double {
        geographic ? Geodesic.distance(a, b) : hypot(b.x - a.x, b.y - a.y)
    }

    /// The nearest point of `line` to `p`, its fraction of the line's length, and the distance.
    static func nearest(on line: [Position], to p: Position, geographic: Bool) -> (Position, Double, Double) {
        let scale = geographic ? cos(p.y * .pi / 180) : 1
        var lengths: [Double] = [0]
        for (a, b) in zip(line, line.dropFirst()) { lengths.append(lengths.last! + distance(a, b, geographic: geographic)) }
        let total = lengths.last ?? 0
        var best = (point: line.first ?? p, along: 0.0, distance: Double.infinity)
        for (i, (a, b)) in zip(line, line.dropFirst()).enumerated() {
            let ax = (a.x - p.x) * scale, ay = a.y - p.y, bx = (b.x - p.x) * scale, by = b.y - p.y
            let dx = bx - ax, dy = by - ay
            let len2 = dx * dx + dy * dy
            let t = len2 > 0 ? max(0, min(1, -(ax * dx + ay * dy) / len2)) : 0
            let q = Position(x: a.x + (b.x - a.x) * t, y: a.y + (b.y - a.y) * t)
            let d = distance(q, p, geographic: geographic)
            if d < best.distance { best = (q, lengths[i] + (lengths[i + 1] - lengths[i]) * t, d) }
        }
        return (best.point, total > 0 ? best.along / total : 0, best.distance)
    }

    /// The part of `line` between two fractions of its length, in that order.
    static func part(of line: [Position], from: Double, to: Double, geographic: Bool) -> [Position] {
        guard line.count >= 2 else { return line }
        if from > to { return part(of: line, from: to, to: from, geographic: geographic).reversed() }
        var lengths: [Double] = [0]
        for (a, b) in zip(line, line.dropFirst()) { lengths.append(lengths.last! + distance(a, b, geographic: geographic)) }
        let total = lengths.last ?? 0
        func point(_ f: Double) -> Position {
            let target = total * f
            for i in 1..<line.count where lengths[i] >= target {
                let span = lengths[i] - lengths[i - 1]
                let t = span > 0 ? (target - lengths[i - 1]) / span : 0
                return Position(x: line[i - 1].x + (line[i].x - line[i - 1].x) * t, y: line[i - 1].y + (line[i].y - line[i - 1].y) * t)
            }
            return line[line.count - 1]
        }
        var out = [point(from)]
        for i in 1..<(line.count - 1) where lengths[i] > total * from && lengths[i] < total * to { out.append(line[i]) }
        out.append(point(to))
        return out
    }
}
