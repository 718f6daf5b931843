import Foundation

/// Contraction hierarchies over one travel mode's graph: nodes are contracted one by one in
/// order of importance (edge difference, lazily updated), each contraction adding the shortcuts
/// that keep every shortest path between the remaining nodes (unless a witness path as cheap
/// exists, found by a bounded Dijkstra). A query then searches only upwards from both ends —
/// a few hundred nodes instead of most of the graph — and unpacks the shortcuts into edges.
public final class ContractionHierarchy: Sendable {
    /// An arc of the hierarchy: an original arc (`edge` ≥ 0) or a shortcut over `middle`.
    struct Arc {
        var target: Int32
        var cost: Double
        var edge: Int32
        var middle: Int32
    }

    let nodeCount: Int
    /// Each node's place in the contraction order.
    let rank: [Int32]
    /// Upward arcs leaving each node (to higher rank), and the upward arcs entering each node
    /// reversed (for the backward search), in compressed rows.
    let upOffsets: [Int32]
    let up: [Arc]
    let downOffsets: [Int32]
    let down: [Arc]
    /// Every arc, original and shortcut, by (from, to): to unpack shortcuts.
    let arcs: [Int64: Arc]

    /// Preprocesses `graph`.
    /// - Parameters:
    ///   - witnessSettleLimit: nodes a witness search may settle before it gives up (a shortcut
    ///     is then added: never wrong, at worst one too many).
    public init(graph: ArcGraph, witnessSettleLimit: Int = 200) {
        let n = graph.nodeCount
        nodeCount = n
        // Mutable adjacency in arrays (degrees are small: a linear search beats hashing):
        // outgoing and incoming arcs per node, cheapest per neighbour.
        var outgoing = [[Arc]](repeating: [], count: n)
        var incoming = [[Arc]](repeating: [], count: n)
        var all: [Int64: Arc] = [:]
        func key(_ u: Int32, _ v: Int32) -> Int64 { Int64(u) << 32 | Int64(v) }
        /// Sets arc u → v (cost, edge, middle) if cheaper than the one there; true if set.
        @discardableResult
        func put(_ u: Int32, _ v: Int32, _ cost: Double, _ edge: Int32, _ middle: Int32) -> Bool {
            if let i = outgoing[Int(u)].firstIndex(where: { $0.target == v }) {
                guard cost < outgoing[Int(u)][i].cost else { return false }
                outgoing[Int(u)][i] = Arc(target: v, cost: cost, edge: edge, middle: middle)
                if let j = incoming[Int(v)].firstIndex(where: { $0.target == u }) {
                    incoming[Int(v)][j] = Arc(target: u, cost: cost, edge: edge, middle: middle)
                }
            } else {
                outgoing[Int(u)].append(Arc(target: v, cost: cost, edge: edge, middle: middle))
                incoming[Int(v)].append(Arc(target: u, cost: cost, edge: edge, middle: middle))
            }
            all[key(u, v)] = Arc(target: v, cost: cost, edge: edge, middle: middle)
            return true
        }
        for u in 0..<n {
            for a in Int(graph.offsets[u])..<Int(graph.offsets[u + 1]) where graph.targets[a] != Int32(u) {
                put(Int32(u), graph.targets[a], graph.costs[a], graph.edges[a], -1)
            }
        }
        var contracted = [Bool](repeating: false, count: n)
        var rank = [Int32](repeating: 0, count: n)
        var deleted = [Int32](repeating: 0, count: n)  // contracted neighbours, for the priority

        // The witness search's state, reused (only touched entries are reset).
        var dist = [Double](repeating: .infinity, count: n)
        var touched: [Int32] = []
        var heap = BinaryHeap()

        /// Shortcuts needed to contract v: (from, to, cost); only counted when `countOnly`.
        func shortcuts(_ v: Int32) -> [(Int32, Int32, Double)] {
            var out: [(Int32, Int32, Double)] = []
            let targets = outgoing[Int(v)].filter { !contracted[Int($0.target)] }
            guard !targets.isEmpty else { return out }
            let maxOut = targets.reduce(0) { max($0, $1.cost) }
            for inArc in incoming[Int(v)] where !contracted[Int(inArc.target)] {
                let u = inArc.target
                // Dijkstra from u without v, up to the dearest path through v.
                let limit = inArc.cost + maxOut
                heap = BinaryHeap()
                dist[Int(u)] = 0
                touched.append(u)
                heap.push(0, u)
                var settled = 0
                while let (d, x) = heap.pop() {
                    if d > dist[Int(x)] { continue }
                    if d > limit || settled >= witnessSettleLimit { break }
                    settled += 1
                    for arc in outgoing[Int(x)] where arc.target != v && !contracted[Int(arc.target)] {
                        let y = arc.target
                        let nd = d + arc.cost
                        if nd < dist[Int(y)] {
                            if dist[Int(y)] == .infinity { touched.append(y) }
                            dist[Int(y)] = nd
                            heap.push(nd, y)
                        }
                    }
                }
                for outArc in targets where outArc.target != u {
                    let via = inArc.cost + outArc.cost
                    if dist[Int(outArc.target)] > via { out.append((u, outArc.target, via)) }
                }
                for t in touched { dist[Int(t)] = .infinity }
                touched.removeAll(keepingCapacity: true)
            }
            return out
        }

        func priority(_ v: Int32) -> Double {
            let degree = outgoing[Int(v)].reduce(0) { $0 + (contracted[Int($1.target)] ? 0 : 1) }
                + incoming[Int(v)].reduce(0) { $0 + (contracted[Int($1.target)] ? 0 : 1) }
            return 2 * Double(shortcuts(v).count) - Double(degree) + Double(deleted[Int(v)])
        }

        var queue = BinaryHeap()
        for v in 0..<n { queue.push(priority(Int32(v)), Int32(v)) }
        var order: Int32 = 0
        while let (p, v) = queue.pop() {
            if contracted[Int(v)] { continue }
            // Lazy update: contract only if still the least important.
            let current = priority(v)
            if current > p, let next = queue.peekKey, current > next {
                queue.push(current, v)
                continue
            }
            for (u, w, cost) in shortcuts(v) { put(u, w, cost, -1, v) }
            contracted[Int(v)] = true
            rank[Int(v)] = order
            order += 1
            for arc in outgoing[Int(v)] where !contracted[Int(arc.target)] { deleted[Int(arc.target)] += 1 }
            for arc in incoming[Int(v)] where !contracted[Int(arc.target)] { deleted[Int(arc.target)] += 1 }
        }
        self.rank = rank
        // Upward arcs from each node; the backward search walks incoming arcs from higher ranks.
        var upLists = [[Arc]](repeating: [], count: n), downLists = [[Arc]](repeating: [], count: n)
        for (k, arc) in all {
            let u = Int32(truncatingIfNeeded: k >> 32), w = arc.target
            if rank[Int(w)] > rank[Int(u)] {
                upLists[Int(u)].append(arc)
            } else {
                downLists[Int(w)].append(Arc(target: u, cost: arc.cost, edge: arc.edge, middle: arc.middle))
            }
        }
        func compress(_ lists: [[Arc]]) -> ([Int32], [Arc]) {
            var offsets = [Int32](repeating: 0, count: n + 1)
            for i in 0..<n { offsets[i + 1] = offsets[i] + Int32(lists[i].count) }
            return (offsets, lists.flatMap { $0 })
        }
        (upOffsets, up) = compress(upLists)
        (downOffsets, down) = compress(downLists)
        arcs = all
    }

    /// Shortcuts added (arcs beyond the graph's own).
    public var shortcutCount: Int { arcs.values.filter { $0.edge < 0 }.count }

    /// The cheapest path between two nodes and its edges, or nil.
    public func shortestPath(from source: Int, to target: Int) -> (cost: Double, edges: [Int])? {
        guard (0..<nodeCount).contains(source), (0..<nodeCount).contains(target) else { return nil }
        if source == target { return (0, []) }
        var dist = [[Int32: Double]](repeating: [:], count: 2)
        var parent = [[Int32: Int32]](repeating: [:], count: 2)
        var heaps = [BinaryHeap(), BinaryHeap()]
        dist[0][Int32(source)] = 0
        dist[1][Int32(target)] = 0
        heaps[0].push(0, Int32(source))
        heaps[1].push(0, Int32(target))
        var best = Double.infinity, meeting: Int32 = -1
        var side = 0
        while !heaps[0].isEmpty || !heaps[1].isEmpty {
            // Alternate; a side stops when its smallest key cannot beat the best meeting.
            if heaps[side].isEmpty || (heaps[side].peekKey ?? .infinity) >= best {
                if heaps[1 - side].isEmpty || (heaps[1 - side].peekKey ?? .infinity) >= best { break }
                side = 1 - side
            }
            guard let (d, u) = heaps[side].pop() else { break }
            if d > dist[side][u] ?? .infinity { continue }
            if let other = dist[1 - side][u], d + other < best {
                best = d + other
                meeting = u
            }
            let (offsets, list) = side == 0 ? (upOffsets, up) : (downOffsets, down)
            for a in Int(offsets[Int(u)])..<Int(offsets[Int(u) + 1]) {
                let arc = list[a]
                let nd = d + arc.cost
                if nd < dist[side][arc.target] ?? .infinity {
                    dist[side][arc.target] = nd
                    parent[side][arc.target] = u
                    heaps[side].push(nd, arc.target)
                }
            }
            side = 1 - side
        }
        guard meeting >= 0 else { return nil }
        // Node sequence source → meeting → target, then each hop unpacked into edges.
        var forward: [Int32] = []
        var v = meeting
        while let p = parent[0][v] {
            forward.append(p)
            v = p
        }
        var nodes = forward.reversed() + [meeting]
        v = meeting
        while let p = parent[1][v] {
            nodes.append(p)
            v = p
        }
        var edges: [Int] = []
        for (a, b) in zip(nodes, nodes.dropFirst()) { unpack(a, b, into: &edges) }
        return (best, edges)
    }

    private func unpack(_ u: Int32, _ w: Int32, into edges: inout [Int]) {
        guard let arc = arcs[Int64(u) << 32 | Int64(w)] else { return }
        if arc.edge >= 0 {
            edges.append(Int(arc.edge))
        } else {
            unpack(u, arc.middle, into: &edges)
            unpack(arc.middle, w, into: &edges)
        }
    }
}
