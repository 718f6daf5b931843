import Foundation
import GRDB
import OutpostCore

/// A directed graph in compressed rows: the arcs leaving node `n` are
/// `targets[offsets[n]..<offsets[n + 1]]`, with their costs and the edges they run along.
public struct ArcGraph: Sendable {
    /// Nodes of the graph.
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
    /// The edge's id.
    public var id: Int
    /// The node it starts at.
    public var from: Int
    /// The node it ends at.
    public var to: Int
    /// Metres.
    public var length: Double
    /// Seconds by car; nil where cars may not go.
    public var driveSeconds: Double?
    /// Seconds on foot; nil where walking is not allowed.
    public var walkSeconds: Double?
    /// 0 both ways, 1 only from → to, −1 only to → from (driving).
    public var oneway: Int
    /// The street's name.
    public var name: String?
    /// The road class (OpenStreetMap `highway`).
    public var roadClass: String?
    /// The edge's line from `from` to `to` (read for the edges of a route only).
    public var line: [Position] = []
}

/// An open `.network` file with its graphs in memory, one per travel mode.
public final class RoadNetwork: Sendable {
    /// The `.network` file.
    public let url: URL
    /// The spatial reference of its geometry.
    public let spatialReference: SpatialReference
    /// Nodes of the network.
    public let nodeCount: Int
    /// Edges of the network.
    public let edgeCount: Int
    /// The nodes' extent (nil for an empty network).
    public let extent: Envelope?
    let forward: [TravelMode: ArcGraph]
    let backward: [TravelMode: ArcGraph]
    /// The contraction hierarchy of each mode, stored in the file: what routes are solved with
    /// (the Dijkstra reference only where barriers close streets).
    let hierarchies: [TravelMode: ContractionHierarchy]
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
            let loaded = try queue.read { db -> (Int, Int, Int, [TravelMode: ArcGraph], [TravelMode: ContractionHierarchy], Envelope?) in
                let version = try NetworkLayout.check(db, name: url.lastPathComponent)
                let wkid = Int(try String.fetchOne(db, sql: "SELECT value FROM network_info WHERE key = 'wkid'") ?? "") ?? 4326
                let (nodes, edges, maxEdge, graphs) = try Self.loadGraphs(db)
                var hierarchies: [TravelMode: ContractionHierarchy] = [:]
                if version >= 2 {
                    for mode in TravelMode.allCases {
                        hierarchies[mode] = try ContractionHierarchy.read(
                            mode: mode, from: db, nodeCount: nodes, maxEdge: maxEdge, name: url.lastPathComponent)
                    }
                }
                let box = try Row.fetchOne(db, sql: "SELECT min(x), min(y), max(x), max(y) FROM nodes")
                let extent: Envelope? = (box?[0] as Double?).map { Envelope(xmin: $0, ymin: box![1], xmax: box![2], ymax: box![3]) }
                return (wkid, nodes, edges, graphs, hierarchies, extent)
            }
            spatialReference = SpatialReference(wkid: loaded.0)
            nodeCount = loaded.1
            edgeCount = loaded.2
            extent = loaded.5
            forward = loaded.3
            backward = loaded.3.mapValues { $0.reversed() }
            // A layout-1 file has no hierarchies: they are built here (seconds for a city).
            hierarchies = loaded.4.isEmpty ? ContractionHierarchy.build(loaded.3) : loaded.4
        } catch let error as RoutingError {
            throw error
        } catch {
            throw RoutingError(.notANetwork, "\(url.lastPathComponent) is not a network file: \(error)")
        }
    }

    /// The node count, edge count, largest edge id and each travel mode's graph of a network
    /// file's edges.
    static func loadGraphs(_ db: Database) throws -> (nodes: Int, edges: Int, maxEdge: Int, graphs: [TravelMode: ArcGraph]) {
        let nodes = try Int.fetchOne(db, sql: "SELECT count(*) FROM nodes") ?? 0
        var arcs: [TravelMode: [(Int32, Int32, Double, Int32)]] = [:]
        var edges = 0, maxEdge = 0
        let cursor = try Row.fetchCursor(db, sql: "SELECT id, from_node, to_node, length, drive_seconds, walk_seconds, oneway FROM edges")
        while let row = try cursor.next() {
            edges += 1
            let id = Int32(row[0] as Int64), from = Int32((row[1] as Int64) - 1), to = Int32((row[2] as Int64) - 1)
            guard from >= 0, Int(from) < nodes, to >= 0, Int(to) < nodes else { throw RoutingError(.notANetwork, "edge \(id) joins nodes the file does not have") }
            maxEdge = max(maxEdge, Int(id))
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
        return (nodes, edges, maxEdge, graphs)
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

    /// The contraction hierarchy of a travel mode.
    public func hierarchy(_ mode: TravelMode) -> ContractionHierarchy { hierarchies[mode]! }

    /// The cheapest path between two nodes (numbered from 0) and its edges in order; nil when
    /// none joins them.
    /// - Parameter solver: `.hierarchy` (the default) unless edges are closed, when the
    ///   bidirectional Dijkstra reference answers.
    /// - Parameter source: the node the path starts from.
    /// - Parameter target: the node the path ends at.
    /// - Parameter mode: the travel mode whose costs are minimised.
    /// - Parameter closedEdges: edges the path may not use (barriers).
    public func shortestPath(
        from source: Int, to target: Int, mode: TravelMode, closedEdges: Set<Int> = [], solver: PathSolver = .hierarchy
    ) -> (cost: Double, edges: [Int])? {
        guard (0..<nodeCount).contains(source), (0..<nodeCount).contains(target) else { return nil }
        if source == target { return (0, []) }
        return search(mode: mode, sources: [(source, 0)], targets: [(target, 0)], blocked: Set(closedEdges.map { Int32($0) }), solver: solver)
            .map { ($0.cost, $0.edges) }
    }

    /// From any source to any target node, with the costs already spent reaching them.
    func search(
        mode: TravelMode, sources: [(Int, Double)], targets: [(Int, Double)], blocked: Set<Int32>, solver: PathSolver = .hierarchy
    ) -> (cost: Double, edges: [Int], start: Int, end: Int)? {
        if solver == .hierarchy, blocked.isEmpty, let hierarchy = hierarchies[mode] {
            return hierarchy.search(sources: sources, targets: targets)
        }
        return BidirectionalDijkstra.run(forward: forward[mode]!, backward: backward[mode]!, sources: sources, targets: targets, blocked: blocked)
    }
}

/// Which shortest-path search answers.
public enum PathSolver: Sendable, Hashable {
    /// The contraction hierarchy (falls back to Dijkstra where streets are closed).
    case hierarchy
    /// Bidirectional Dijkstra on the whole graph: the reference.
    case dijkstra
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

/// A binary min-heap of (key, node), sifting a hole instead of swapping pairs.
struct BinaryHeap {
    private struct Entry {
        var key: Double
        var node: Int32
    }

    private var entries: [Entry] = []

    var isEmpty: Bool { entries.isEmpty }
    var peekKey: Double? { entries.first?.key }

    mutating func removeAll() { entries.removeAll(keepingCapacity: true) }

    mutating func push(_ key: Double, _ node: Int32) {
        entries.append(Entry(key: key, node: node))
        entries.withUnsafeMutableBufferPointer { e in
            var i = e.count - 1
            let item = e[i]
            while i > 0 {
                let parent = (i - 1) >> 1
                guard e[parent].key > item.key else { break }
                e[i] = e[parent]
                i = parent
            }
            e[i] = item
        }
    }

    mutating func pop() -> (Double, Int32)? {
        guard let top = entries.first else { return nil }
        let last = entries.removeLast()
        if !entries.isEmpty {
            entries.withUnsafeMutableBufferPointer { e in
                let count = e.count
                var i = 0
                while true {
                    var child = 2 * i + 1
                    if child >= count { break }
                    if child + 1 < count, e[child + 1].key < e[child].key { child += 1 }
                    guard e[child].key < last.key else { break }
                    e[i] = e[child]
                    i = child
                }
                e[i] = last
            }
        }
        return (top.key, top.node)
    }
}
