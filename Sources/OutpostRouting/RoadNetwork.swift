import Foundation
import GRDB
import OutpostCore

/// A directed graph in compressed rows: the arcs leaving node `n` are
/// `targets[offsets[n]..<offsets[n + 1]]`, with their costs and the edges they run along.
public struct ArcGraph: Sendable {
    public let nodeCount: Int
    var offsets: [Int32]
    var targets: [Int32]
    var costs: [Double]
    var edges: [Int32]

    /// Arcs as (from, to, cost, edge), nodes numbered from 0.
    public init(nodeCount: Int, arcs: [(Int32, Int32, Double, Int32)]) {
        self.nodeCount = nodeCount
        var counts = [Int32](repeating: 0, count: nodeCount + 1)
        for arc in arcs { counts[Int(arc.0) + 1] += 1 }
        for i in 0..<nodeCount { counts[i + 1] += counts[i] }
        offsets = counts
        var fill = counts
        targets = [Int32](repeating: 0, count: arcs.count)
        costs = [Double](repeating: 0, count: arcs.count)
        edges = [Int32](repeating: 0, count: arcs.count)
        for arc in arcs {
            let at = Int(fill[Int(arc.0)])
            fill[Int(arc.0)] += 1
            targets[at] = arc.1
            costs[at] = arc.2
            edges[at] = arc.3
        }
    }

    /// The same arcs, reversed (for searching backwards from a target).
    public func reversed() -> ArcGraph {
        var arcs: [(Int32, Int32, Double, Int32)] = []
        arcs.reserveCapacity(targets.count)
        for n in 0..<nodeCount {
            for a in Int(offsets[n])..<Int(offsets[n + 1]) { arcs.append((targets[a], Int32(n), costs[a], edges[a])) }
        }
        return ArcGraph(nodeCount: nodeCount, arcs: arcs)
    }

    /// Every arc as (from, to, cost, edge): what a test exports for another solver.
    public var arcs: [(from: Int, to: Int, cost: Double, edge: Int)] {
        var out: [(Int, Int, Double, Int)] = []
        for n in 0..<nodeCount {
            for a in Int(offsets[n])..<Int(offsets[n + 1]) { out.append((n, Int(targets[a]), costs[a], Int(edges[a]))) }
        }
        return out
    }
}

/// A street edge between two nodes (numbered from 0).
public struct NetworkEdge: Sendable, Hashable {
    public var id: Int
    public var from: Int
    public var to: Int
    /// Metres.
    public var length: Double
    /// Seconds by car; nil where cars may not go.
    public var driveSeconds: Double?
    /// Seconds on foot; nil where walking is not allowed.
    public var walkSeconds: Double?
    /// 0 both ways, 1 only from → to, −1 only to → from (driving).
    public var oneway: Int
    public var name: String?
    public var roadClass: String?
    /// The edge's line from `from` to `to` (read for the edges of a route only).
    public var line: [Position] = []
}

/// An open `.network` file with its graphs in memory, one per travel mode.
public final class RoadNetwork: Sendable {
    public let url: URL
    public let spatialReference: SpatialReference
    public let nodeCount: Int
    public let edgeCount: Int
    let forward: [TravelMode: ArcGraph]
    let backward: [TravelMode: ArcGraph]
    let queue: DatabaseQueue

    /// Opens and checks `url` and loads its graphs.
    /// - Throws: ``RoutingError`` `.notFound` or `.notANetwork`.
    public init(url: URL) throws {
        self.url = url
        guard FileManager.default.fileExists(atPath: url.path) else { throw RoutingError(.notFound, "no network at \(url.path)") }
        var config = Configuration()
        config.readonly = true
        do {
            queue = try DatabaseQueue(path: url.path, configuration: config)
            let loaded = try queue.read { db -> (Int, Int, Int, [TravelMode: ArcGraph]) in
                try NetworkLayout.check(db, name: url.lastPathComponent)
                let wkid = Int(try String.fetchOne(db, sql: "SELECT value FROM network_info WHERE key = 'wkid'") ?? "") ?? 4326
                let nodes = try Int.fetchOne(db, sql: "SELECT count(*) FROM nodes") ?? 0
                var arcs: [TravelMode: [(Int32, Int32, Double, Int32)]] = [:]
                var edges = 0
                let cursor = try Row.fetchCursor(db, sql: "SELECT id, from_node, to_node, length, drive_seconds, walk_seconds, oneway FROM edges")
                while let row = try cursor.next() {
                    edges += 1
                    let id = Int32(row[0] as Int64), from = Int32((row[1] as Int64) - 1), to = Int32((row[2] as Int64) - 1)
                    let length: Double = row[3], drive: Double? = row[4], walk: Double? = row[5], oneway: Int = row[6]
                    if let drive {
                        if oneway >= 0 {
                            arcs[.drivingTime, default: []].append((from, to, drive, id))
                            arcs[.drivingDistance, default: []].append((from, to, length, id))
                        }
                        if oneway <= 0 {
                            arcs[.drivingTime, default: []].append((to, from, drive, id))
                            arcs[.drivingDistance, default: []].append((to, from, length, id))
                        }
                    }
                    if let walk {
                        arcs[.walking, default: []].append((from, to, walk, id))
                        arcs[.walking, default: []].append((to, from, walk, id))
                    }
                }
                var graphs: [TravelMode: ArcGraph] = [:]
                for mode in TravelMode.allCases { graphs[mode] = ArcGraph(nodeCount: nodes, arcs: arcs[mode] ?? []) }
                return (wkid, nodes, edges, graphs)
            }
            spatialReference = SpatialReference(wkid: loaded.0)
            nodeCount = loaded.1
            edgeCount = loaded.2
            forward = loaded.3
            backward = loaded.3.mapValues { $0.reversed() }
        } catch let error as RoutingError {
            throw error
        } catch {
            throw RoutingError(.notANetwork, "\(url.lastPathComponent) is not a network file: \(error)")
        }
    }

    /// Every edge, in id order (streamed from the file).
    public func forEachEdge(_ body: (NetworkEdge) throws -> Void) throws {
        try queue.read { db in
            let cursor = try Row.fetchCursor(db, sql: "SELECT id, from_node, to_node, length, drive_seconds, walk_seconds, oneway, name, class FROM edges ORDER BY id")
            while let row = try cursor.next() {
                try body(NetworkEdge(
                    id: row[0], from: (row[1] as Int) - 1, to: (row[2] as Int) - 1, length: row[3], driveSeconds: row[4], walkSeconds: row[5],
                    oneway: row[6], name: row[7], roadClass: row[8]))
            }
        }
    }

    /// The graph of a travel mode (nodes numbered from 0: `nodes.id - 1`).
    public func graph(_ mode: TravelMode) -> ArcGraph { forward[mode]! }

    /// The cheapest path between two nodes (numbered from 0) and its edges in order, by
    /// bidirectional Dijkstra; nil when none joins them.
    public func shortestPath(from source: Int, to target: Int, mode: TravelMode, closedEdges: Set<Int> = []) -> (cost: Double, edges: [Int])? {
        guard (0..<nodeCount).contains(source), (0..<nodeCount).contains(target) else { return nil }
        if source == target { return (0, []) }
        guard let path = BidirectionalDijkstra.run(
            forward: forward[mode]!, backward: backward[mode]!, sources: [(source, 0)], targets: [(target, 0)], blocked: Set(closedEdges.map { Int32($0) }))
        else { return nil }
        return (path.cost, path.edges)
    }
}

/// Dijkstra from both ends at once, stopping when the two frontiers' smallest keys together
/// reach the best meeting found: the reference the faster solvers are checked against.
public enum BidirectionalDijkstra {
    /// From any of `sources` to any of `targets`, each with the cost already spent reaching it
    /// (a stop part-way along an edge); the path's edges and the source and target nodes it
    /// runs between.
    public static func run(
        forward: ArcGraph, backward: ArcGraph, sources: [(Int, Double)], targets: [(Int, Double)], blocked: Set<Int32> = []
    ) -> (cost: Double, edges: [Int], start: Int, end: Int)? {
        let n = forward.nodeCount
        var dist = [[Double]](repeating: [Double](repeating: .infinity, count: n), count: 2)
        var parentArc = [[Int32]](repeating: [Int32](repeating: -1, count: n), count: 2)
        var parentNode = [[Int32]](repeating: [Int32](repeating: -1, count: n), count: 2)
        var settled = [[Bool]](repeating: [Bool](repeating: false, count: n), count: 2)
        var heaps = [BinaryHeap(), BinaryHeap()]
        for (side, seeds) in [(0, sources), (1, targets)] {
            for (node, cost) in seeds where (0..<n).contains(node) && cost < dist[side][node] {
                dist[side][node] = cost
                heaps[side].push(cost, Int32(node))
            }
        }
        // A source that is also a target meets at once.
        var best = Double.infinity, meeting = -1
        for (node, _) in sources where (0..<n).contains(node) && dist[0][node] + dist[1][node] < best {
            best = dist[0][node] + dist[1][node]
            meeting = node
        }
        let graphs = [forward, backward]
        while !heaps[0].isEmpty || !heaps[1].isEmpty {
            let top0 = heaps[0].peekKey ?? .infinity, top1 = heaps[1].peekKey ?? .infinity
            if top0 + top1 >= best { break }
            let side = top0 <= top1 ? 0 : 1
            guard let (d, u32) = heaps[side].pop() else { break }
            let u = Int(u32)
            if settled[side][u] || d > dist[side][u] { continue }
            settled[side][u] = true
            let g = graphs[side]
            for a in Int(g.offsets[u])..<Int(g.offsets[u + 1]) {
                if !blocked.isEmpty, blocked.contains(g.edges[a]) { continue }
                let v = Int(g.targets[a])
                let nd = d + g.costs[a]
                if nd < dist[side][v] {
                    dist[side][v] = nd
                    parentArc[side][v] = g.edges[a]
                    parentNode[side][v] = Int32(u)
                    heaps[side].push(nd, Int32(v))
                }
                let total = dist[side][v] + dist[1 - side][v]
                if total < best {
                    best = total
                    meeting = v
                }
            }
        }
        guard meeting >= 0, best.isFinite else { return nil }
        var path: [Int] = []
        var v = meeting
        while parentNode[0][v] >= 0 {
            path.append(Int(parentArc[0][v]))
            v = Int(parentNode[0][v])
        }
        let start = v
        path.reverse()
        v = meeting
        while parentNode[1][v] >= 0 {
            path.append(Int(parentArc[1][v]))
            v = Int(parentNode[1][v])
        }
        return (best, path, start, v)
    }
}

/// A binary min-heap of (key, node).
struct BinaryHeap {
    private var keys: [Double] = []
    private var nodes: [Int32] = []

    var isEmpty: Bool { keys.isEmpty }
    var peekKey: Double? { keys.first }

    mutating func push(_ key: Double, _ node: Int32) {
        keys.append(key)
        nodes.append(node)
        var i = keys.count - 1
        while i > 0 {
            let parent = (i - 1) / 2
            guard keys[parent] > keys[i] else { break }
            keys.swapAt(parent, i)
            nodes.swapAt(parent, i)
            i = parent
        }
    }

    mutating func pop() -> (Double, Int32)? {
        guard let key = keys.first, let node = nodes.first else { return nil }
        let last = keys.count - 1
        keys.swapAt(0, last)
        nodes.swapAt(0, last)
        keys.removeLast()
        nodes.removeLast()
        var i = 0
        while true {
            let l = 2 * i + 1, r = l + 1
            var smallest = i
            if l < keys.count, keys[l] < keys[smallest] { smallest = l }
            if r < keys.count, keys[r] < keys[smallest] { smallest = r }
            if smallest == i { break }
            keys.swapAt(i, smallest)
            nodes.swapAt(i, smallest)
            i = smallest
        }
        return (key, node)
    }
}
