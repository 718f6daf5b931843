import Foundation
import GRDB
import OutpostCore

/// Contraction hierarchies over one travel mode's graph.
///
/// Preprocessing contracts the nodes one by one, least important first (importance: shortcuts
/// the contraction would add less the arcs it removes, plus contracted neighbours and the depth
/// of the hierarchy below the node, updated for the neighbours after each contraction). A
/// contraction adds a shortcut u → w over v unless a witness path u ⇝ w avoiding v costs no more
/// (found by a Dijkstra bounded in cost and in settled nodes: a search that gives up adds the
/// shortcut, never wrong, at worst one too many). The arcs a node keeps when contracted lead
/// upwards; a query searches only upwards from both ends (pruned by stall-on-demand) and unpacks
/// the shortcuts on the best path into the graph's edges.
public final class ContractionHierarchy: Sendable {
    /// Nodes of the graph.
    public let nodeCount: Int
    /// Shortcuts the hierarchy added to the graph's arcs.
    public let shortcutCount: Int
    /// Upward arcs leaving each node (`up`), and upward arcs entering each node stored reversed
    /// (`down`: target is the arc's start), in compressed rows.
    let up: Arcs
    let down: Arcs
    /// Scratch space of finished queries, reused by the next ones.
    private let searchers = Locked<[Searcher]>([])

    /// Arcs in compressed rows: those of node n are `offsets[n]..<offsets[n + 1]`. `via` ≥ 0 is
    /// the graph edge an original arc runs along; a shortcut over node m has `via = -1 - m`.
    struct Arcs: Sendable {
        var offsets: [Int32]
        var targets: [Int32]
        var costs: [Double]
        var vias: [Int32]

        func range(_ n: Int32) -> Range<Int> { Int(offsets[Int(n)])..<Int(offsets[Int(n) + 1]) }
    }

    /// Preprocesses `graph`.
    /// - Parameters:
    ///   - witnessSettleLimit: nodes a witness search may settle before it gives up.
    /// - Parameter graph: the travel mode's graph to contract.
    public convenience init(graph: ArcGraph, witnessSettleLimit: Int = 500) {
        var builder = HierarchyBuilder(graph: graph, settleLimit: witnessSettleLimit)
        builder.contractAll()
        self.init(nodeCount: graph.nodeCount, up: builder.finish(builder.upLists), down: builder.finish(builder.downLists), shortcuts: builder.shortcuts)
    }

    init(nodeCount: Int, up: Arcs, down: Arcs, shortcuts: Int) {
        self.nodeCount = nodeCount
        self.up = up
        self.down = down
        shortcutCount = shortcuts
    }

    /// The hierarchies of several graphs, built side by side on the machine's cores.
    static func build(_ graphs: [TravelMode: ArcGraph]) -> [TravelMode: ContractionHierarchy] {
        let modes = Array(graphs.keys)
        let built = Locked<[TravelMode: ContractionHierarchy]>([:])
        DispatchQueue.concurrentPerform(iterations: modes.count) { i in
            let hierarchy = ContractionHierarchy(graph: graphs[modes[i]]!)
            built.withLock { $0[modes[i]] = hierarchy }
        }
        return built.withLock { $0 }
    }

    /// Every arc the hierarchy keeps (original and shortcut).
    public var arcCount: Int { up.targets.count + down.targets.count }

    /// The cheapest path between two nodes and its edges, or nil.
    public func shortestPath(from source: Int, to target: Int) -> (cost: Double, edges: [Int])? {
        guard (0..<nodeCount).contains(source), (0..<nodeCount).contains(target) else { return nil }
        if source == target { return (0, []) }
        return search(sources: [(source, 0)], targets: [(target, 0)]).map { ($0.cost, $0.edges) }
    }

    /// From any of `sources` to any of `targets`, each with the cost already spent reaching it:
    /// the cost, the edges in order, and the nodes the path starts and ends at (as
    /// ``BidirectionalDijkstra/run(forward:backward:sources:targets:blocked:)`` answers).
    public func search(sources: [(Int, Double)], targets: [(Int, Double)]) -> (cost: Double, edges: [Int], start: Int, end: Int)? {
        var searcher = searchers.withLock { $0.popLast() } ?? Searcher(nodeCount: nodeCount)
        defer {
            searcher.reset()
            // Keep a few for the next queries (more only under concurrent load).
            searchers.withLock { if $0.count < 8 { $0.append(searcher) } }
        }
        return searcher.run(self, sources: sources, targets: targets)
    }

    /// Appends the graph edges arc `u → w` (of the hierarchy) stands for.
    func unpack(_ u: Int32, _ w: Int32, via: Int32, into edges: inout [Int]) {
        if via >= 0 {
            edges.append(Int(via))
            return
        }
        let m = -1 - via
        // u → m is an upward arc entering m (m's `down` row), m → w an upward arc leaving m.
        guard let a = down.range(m).first(where: { down.targets[$0] == u }),
              let b = up.range(m).first(where: { up.targets[$0] == w })
        else { return }
        unpack(u, m, via: down.vias[a], into: &edges)
        unpack(m, w, via: up.vias[b], into: &edges)
    }

    /// A query's distances, parents and heaps for both directions; only touched entries are
    /// reset between queries.
    struct Searcher {
        var dist: [[Double]]
        var parent: [[Int32]]
        var parentArc: [[Int32]]
        var touched: [[Int32]] = [[], []]
        var heaps = [BinaryHeap(), BinaryHeap()]

        init(nodeCount n: Int) {
            dist = [[Double]](repeating: [Double](repeating: .infinity, count: n), count: 2)
            parent = [[Int32]](repeating: [Int32](repeating: -1, count: n), count: 2)
            parentArc = [[Int32]](repeating: [Int32](repeating: -1, count: n), count: 2)
        }

        mutating func reset() {
            for side in 0..<2 {
                for node in touched[side] {
                    dist[side][Int(node)] = .infinity
                    parent[side][Int(node)] = -1
                }
                touched[side].removeAll(keepingCapacity: true)
                heaps[side].removeAll()
            }
        }

        mutating func run(
            _ ch: ContractionHierarchy, sources: [(Int, Double)], targets: [(Int, Double)]
        ) -> (cost: Double, edges: [Int], start: Int, end: Int)? {
            let n = ch.nodeCount
            for (side, seeds) in [(0, sources), (1, targets)] {
                for (node, cost) in seeds where (0..<n).contains(node) && cost < dist[side][node] {
                    if dist[side][node] == .infinity { touched[side].append(Int32(node)) }
                    dist[side][node] = cost
                    heaps[side].push(cost, Int32(node))
                }
            }
            var best = Double.infinity, meeting: Int32 = -1
            var side = 0
            while true {
                // Alternate; a side is done when its smallest key cannot beat the best meeting.
                let open0 = (heaps[0].peekKey ?? .infinity) < best, open1 = (heaps[1].peekKey ?? .infinity) < best
                if !open0 && !open1 { break }
                if side == 0 ? !open0 : !open1 { side = 1 - side }
                guard let (d, u) = heaps[side].pop() else { break }
                let ui = Int(u)
                if d > dist[side][ui] { continue }
                let other = dist[1 - side][ui]
                if d + other < best {
                    best = d + other
                    meeting = u
                }
                // The search's own arcs, and the arcs that would reach u from above in it.
                let (arcs, reverse) = side == 0 ? (ch.up, ch.down) : (ch.down, ch.up)
                // Stall on demand: a higher node already reached reaches u cheaper, so u's
                // distance is not final and nothing beyond it through u is worth relaxing.
                var stalled = false
                for a in reverse.range(u) where dist[side][Int(reverse.targets[a])] + reverse.costs[a] < d {
                    stalled = true
                    break
                }
                if !stalled {
                    for a in arcs.range(u) {
                        let w = Int(arcs.targets[a])
                        let nd = d + arcs.costs[a]
                        if nd < dist[side][w] {
                            if dist[side][w] == .infinity { touched[side].append(Int32(w)) }
                            dist[side][w] = nd
                            parent[side][w] = u
                            parentArc[side][w] = Int32(a)
                            heaps[side].push(nd, Int32(w))
                        }
                    }
                }
                side = 1 - side
            }
            guard meeting >= 0 else { return nil }
            // Hops from the meeting back to the source, then on to the target, unpacked.
            var hops: [(Int32, Int32, Int32)] = []
            var v = meeting
            while parent[0][Int(v)] >= 0 {
                let p = parent[0][Int(v)]
                hops.append((p, v, ch.up.vias[Int(parentArc[0][Int(v)])]))
                v = p
            }
            let start = v
            hops.reverse()
            v = meeting
            while parent[1][Int(v)] >= 0 {
                let p = parent[1][Int(v)]
                hops.append((v, p, ch.down.vias[Int(parentArc[1][Int(v)])]))
                v = p
            }
            var edges: [Int] = []
            for (a, b, via) in hops { ch.unpack(a, b, via: via, into: &edges) }
            return (best, edges, Int(start), Int(v))
        }
    }
}

/// The contraction itself: adjacency that shrinks as nodes are contracted (arcs to contracted
/// nodes are removed from their neighbours), the witness search's scratch space, and the
/// priority queue.
struct HierarchyBuilder {
    struct Arc {
        var target: Int32
        var cost: Double
        var via: Int32
    }

    let n: Int
    let settleLimit: Int
    var outgoing: [[Arc]]
    var incoming: [[Arc]]
    var contracted: [Bool]
    var deleted: [Int32]
    var level: [Int32]
    var priority: [Double]
    var upLists: [[Arc]]
    var downLists: [[Arc]]
    var shortcuts = 0
    // Witness search scratch.
    let scratch: WitnessScratch
    var touched: [Int32] = []
    var heap = BinaryHeap()

    init(graph: ArcGraph, settleLimit: Int) {
        n = graph.nodeCount
        self.settleLimit = settleLimit
        outgoing = [[Arc]](repeating: [], count: n)
        incoming = [[Arc]](repeating: [], count: n)
        contracted = [Bool](repeating: false, count: n)
        deleted = [Int32](repeating: 0, count: n)
        level = [Int32](repeating: 0, count: n)
        priority = [Double](repeating: 0, count: n)
        upLists = [[Arc]](repeating: [], count: n)
        downLists = [[Arc]](repeating: [], count: n)
        scratch = WitnessScratch(nodeCount: n)
        for u in 0..<n {
            for a in Int(graph.offsets[u])..<Int(graph.offsets[u + 1]) where graph.targets[a] != Int32(u) {
                put(Int32(u), graph.targets[a], graph.costs[a], graph.edges[a])
            }
        }
    }

    /// Sets arc u → v unless one as cheap is there (one arc per ordered pair).
    mutating func put(_ u: Int32, _ v: Int32, _ cost: Double, _ via: Int32) {
        if let i = outgoing[Int(u)].firstIndex(where: { $0.target == v }) {
            guard cost < outgoing[Int(u)][i].cost else { return }
            outgoing[Int(u)][i] = Arc(target: v, cost: cost, via: via)
            if let j = incoming[Int(v)].firstIndex(where: { $0.target == u }) { incoming[Int(v)][j] = Arc(target: u, cost: cost, via: via) }
        } else {
            outgoing[Int(u)].append(Arc(target: v, cost: cost, via: via))
            incoming[Int(v)].append(Arc(target: u, cost: cost, via: via))
        }
    }

    /// Dijkstra from `source` avoiding `avoid`, up to cost `limit`, at most `settleLimit`
    /// settled nodes and `hopLimit` arcs; leaves `dist` set for the nodes it touched.
    /// Stops early once every node marked in `isTarget` (`targetCount` of them) is settled.
    mutating func witnessSearch(from source: Int32, avoid: Int32, limit: Double, settleLimit: Int, hopLimit: UInt8, targetCount: Int) {
        let dist = scratch.dist, hops = scratch.hops, isTarget = scratch.isTarget
        heap.removeAll()
        dist[Int(source)] = 0
        hops[Int(source)] = 0
        touched.append(source)
        heap.push(0, source)
        var settled = 0, targetsLeft = targetCount
        while let (d, x) = heap.pop() {
            if d > dist[Int(x)] { continue }
            if d > limit || settled >= settleLimit { break }
            settled += 1
            if isTarget[Int(x)] {
                targetsLeft -= 1
                if targetsLeft == 0 { break }
            }
            let h = hops[Int(x)]
            if h >= hopLimit { continue }
            outgoing[Int(x)].withUnsafeBufferPointer { arcs in
                for arc in arcs where arc.target != avoid {
                    let y = Int(arc.target)
                    let nd = d + arc.cost
                    if nd < dist[y] {
                        if dist[y] == .infinity { touched.append(arc.target) }
                        dist[y] = nd
                        hops[y] = h + 1
                        heap.push(nd, arc.target)
                    }
                }
            }
        }
    }

    mutating func clearWitness() {
        let dist = scratch.dist
        for t in touched { dist[Int(t)] = .infinity }
        touched.removeAll(keepingCapacity: true)
    }

    /// The shortcuts contracting v needs, calling `add` for each; returns how many.
    @discardableResult
    mutating func shortcuts(of v: Int32, settleLimit: Int, hopLimit: UInt8, add: ((Int32, Int32, Double) -> Void)? = nil) -> Int {
        let outs = outgoing[Int(v)], ins = incoming[Int(v)]
        guard !outs.isEmpty, !ins.isEmpty else { return 0 }
        let maxOut = outs.reduce(0) { max($0, $1.cost) }
        var count = 0
        let dist = scratch.dist, isTarget = scratch.isTarget
        for arc in outs { isTarget[Int(arc.target)] = true }
        defer { for arc in outs { isTarget[Int(arc.target)] = false } }
        for inArc in ins {
            let u = inArc.target
            witnessSearch(from: u, avoid: v, limit: inArc.cost + maxOut, settleLimit: settleLimit, hopLimit: hopLimit, targetCount: outs.count)
            for outArc in outs where outArc.target != u {
                let via = inArc.cost + outArc.cost
                if dist[Int(outArc.target)] > via {
                    count += 1
                    add?(u, outArc.target, via)
                }
            }
            clearWitness()
        }
        return count
    }

    /// Importance: edge difference (a quick, bounded simulation), contracted neighbours and
    /// depth below.
    mutating func importance(_ v: Int32) -> Double {
        let added = shortcuts(of: v, settleLimit: 50, hopLimit: 5)
        let removed = outgoing[Int(v)].count + incoming[Int(v)].count
        return 2 * Double(added - removed) + Double(deleted[Int(v)]) + Double(level[Int(v)])
    }

    mutating func contractAll() {
        var queue = BinaryHeap()
        for v in 0..<n {
            priority[v] = importance(Int32(v))
            queue.push(priority[v], Int32(v))
        }
        var added: [(Int32, Int32, Double)] = []
        while let (p, v) = queue.pop() {
            let vi = Int(v)
            if contracted[vi] || p != priority[vi] { continue }
            // Lazy update: a node grown more important since it was queued goes back in line
            // (cheaper than recomputing every neighbour after each contraction, and the
            // hierarchy comes out much the same: 4% more shortcuts on a street grid).
            let current = importance(v)
            if current > p, let next = queue.peekKey, current > next {
                priority[vi] = current
                queue.push(current, v)
                continue
            }
            added.removeAll(keepingCapacity: true)
            shortcuts(of: v, settleLimit: settleLimit, hopLimit: 255) { added.append(($0, $1, $2)) }
            contracted[vi] = true
            // What v keeps leads upwards; remove v from its neighbours.
            upLists[vi] = outgoing[vi]
            downLists[vi] = incoming[vi]
            var neighbours: [Int32] = []
            for arc in outgoing[vi] {
                incoming[Int(arc.target)].removeAll { $0.target == v }
                neighbours.append(arc.target)
            }
            for arc in incoming[vi] {
                outgoing[Int(arc.target)].removeAll { $0.target == v }
                neighbours.append(arc.target)
            }
            outgoing[vi] = []
            incoming[vi] = []
            for (a, b, cost) in added { put(a, b, cost, -1 - v) }
            for w in Set(neighbours) {
                deleted[Int(w)] += 1
                level[Int(w)] = max(level[Int(w)], level[vi] + 1)
            }
        }
        // Shortcuts replaced later by cheaper ones are in no list: count what remains.
        shortcuts = upLists.reduce(0) { $0 + $1.count { $0.via < 0 } } + downLists.reduce(0) { $0 + $1.count { $0.via < 0 } }
    }

    func finish(_ lists: [[Arc]]) -> ContractionHierarchy.Arcs {
        var offsets = [Int32](repeating: 0, count: n + 1)
        for i in 0..<n { offsets[i + 1] = offsets[i] + Int32(lists[i].count) }
        var targets: [Int32] = [], costs: [Double] = [], vias: [Int32] = []
        let total = Int(offsets[n])
        targets.reserveCapacity(total)
        costs.reserveCapacity(total)
        vias.reserveCapacity(total)
        for list in lists {
            for arc in list {
                targets.append(arc.target)
                costs.append(arc.cost)
                vias.append(arc.via)
            }
        }
        return .init(offsets: offsets, targets: targets, costs: costs, vias: vias)
    }
}

/// Per-node scratch of the witness searches, outside Swift arrays so the hot loop writes memory
/// without uniqueness checks.
final class WitnessScratch {
    let dist: UnsafeMutablePointer<Double>
    let hops: UnsafeMutablePointer<UInt8>
    let isTarget: UnsafeMutablePointer<Bool>
    let count: Int

    init(nodeCount: Int) {
        count = max(nodeCount, 1)
        dist = .allocate(capacity: count)
        dist.initialize(repeating: .infinity, count: count)
        hops = .allocate(capacity: count)
        hops.initialize(repeating: 0, count: count)
        isTarget = .allocate(capacity: count)
        isTarget.initialize(repeating: false, count: count)
    }

    deinit {
        dist.deallocate()
        hops.deallocate()
        isTarget.deallocate()
    }
}

// MARK: - Storage in a network file

extension ContractionHierarchy {
    /// The table a `.network` file keeps its hierarchies in (layout 2), one row per travel mode:
    /// the upward and downward arcs as little-endian arrays (offsets and targets Int32, costs
    /// Float64, vias Int32).
    static let schema = """
        CREATE TABLE hierarchies(
            mode TEXT PRIMARY KEY, node_count INTEGER NOT NULL, shortcuts INTEGER NOT NULL,
            up_offsets BLOB NOT NULL, up_targets BLOB NOT NULL, up_costs BLOB NOT NULL, up_vias BLOB NOT NULL,
            down_offsets BLOB NOT NULL, down_targets BLOB NOT NULL, down_costs BLOB NOT NULL, down_vias BLOB NOT NULL
        ) WITHOUT ROWID;
        """

    func write(mode: TravelMode, to db: Database) throws {
        func blob<T>(_ values: [T]) -> Data { values.withUnsafeBytes { Data($0) } }
        try db.execute(
            sql: "INSERT OR REPLACE INTO hierarchies VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            arguments: [
                mode.rawValue, nodeCount, shortcutCount,
                blob(up.offsets), blob(up.targets), blob(up.costs), blob(up.vias),
                blob(down.offsets), blob(down.targets), blob(down.costs), blob(down.vias),
            ])
    }

    /// The stored hierarchy of `mode`, checked against the network (`nodeCount` nodes, edge ids
    /// up to `maxEdge`); nil when the file has none for it.
    /// - Throws: ``RoutingError`` `.notANetwork` when the stored arrays do not make a hierarchy
    ///   of this network.
    static func read(mode: TravelMode, from db: Database, nodeCount: Int, maxEdge: Int, name: String) throws -> ContractionHierarchy? {
        guard let row = try Row.fetchOne(db, sql: "SELECT * FROM hierarchies WHERE mode = ?", arguments: [mode.rawValue]) else { return nil }
        let damaged = RoutingError(.notANetwork, "\(name) is damaged: its \(mode.rawValue) hierarchy does not fit the network")
        func array<T>(_ column: String, _: T.Type) throws -> [T] {
            guard let data = row[column] as Data?, data.count % MemoryLayout<T>.stride == 0 else { throw damaged }
            let count = data.count / MemoryLayout<T>.stride
            return [T](unsafeUninitializedCapacity: count) { buffer, initialized in
                data.withUnsafeBytes { UnsafeMutableRawBufferPointer(buffer).copyMemory(from: $0) }
                initialized = count
            }
        }
        func arcs(_ prefix: String) throws -> Arcs {
            let a = Arcs(
                offsets: try array(prefix + "_offsets", Int32.self), targets: try array(prefix + "_targets", Int32.self),
                costs: try array(prefix + "_costs", Double.self), vias: try array(prefix + "_vias", Int32.self))
            let count = a.targets.count
            guard a.offsets.count == nodeCount + 1, a.offsets.first == 0, Int(a.offsets.last ?? -1) == count,
                  a.costs.count == count, a.vias.count == count,
                  zip(a.offsets, a.offsets.dropFirst()).allSatisfy({ $0 <= $1 }),
                  a.targets.allSatisfy({ $0 >= 0 && Int($0) < nodeCount }),
                  a.costs.allSatisfy({ $0 >= 0 && $0.isFinite }),
                  a.vias.allSatisfy({ $0 < 0 ? Int(-1 - $0) < nodeCount : Int($0) <= maxEdge })
            else { throw damaged }
            return a
        }
        guard row["node_count"] as Int == nodeCount else { throw damaged }
        return ContractionHierarchy(nodeCount: nodeCount, up: try arcs("up"), down: try arcs("down"), shortcuts: row["shortcuts"])
    }
}
