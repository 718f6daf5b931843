/// Simplification and rounding to the tile's integer grid.
enum TileGrid {
    /// Douglas–Peucker: the points of `line` needed to keep it within `tolerance` of where it
    /// was (the ends always kept).
    static func simplify(_ line: [TileCoordinate], tolerance: Double) -> [TileCoordinate] {
        guard tolerance > 0, line.count > 2 else { return line }
        var keep = [Bool](repeating: false, count: line.count)
        keep[0] = true
        keep[line.count - 1] = true
        let squared = tolerance * tolerance
        var stack = [(0, line.count - 1)]
        while let (first, last) = stack.popLast() {
            guard last > first + 1 else { continue }
            let a = line[first], b = line[last]
            let dx = b.x - a.x, dy = b.y - a.y
            let length = dx * dx + dy * dy
            var farthest = -1.0, index = first
            for i in (first + 1)..<last {
                let p = line[i]
                var d: Double
                if length == 0 {
                    d = (p.x - a.x) * (p.x - a.x) + (p.y - a.y) * (p.y - a.y)
                } else {
                    let t = max(0, min(1, ((p.x - a.x) * dx + (p.y - a.y) * dy) / length))
                    let qx = a.x + t * dx - p.x, qy = a.y + t * dy - p.y
                    d = qx * qx + qy * qy
                }
                if d > farthest {
                    farthest = d
                    index = i
                }
            }
            if farthest > squared {
                keep[index] = true
                stack.append((first, index))
                stack.append((index, last))
            }
        }
        var out: [TileCoordinate] = []
        out.reserveCapacity(line.count)
        for i in line.indices where keep[i] { out.append(line[i]) }
        return out
    }

    /// A ring simplified as two halves split at the point farthest from its first, so its
    /// shape (not just its ends) anchors the result.
    static func simplifyRing(_ ring: [TileCoordinate], tolerance: Double) -> [TileCoordinate] {
        guard tolerance > 0, ring.count > 4 else { return ring }
        let a = ring[0]
        var far = 1, best = -1.0
        for (i, p) in ring.enumerated() {
            let d = (p.x - a.x) * (p.x - a.x) + (p.y - a.y) * (p.y - a.y)
            if d > best {
                best = d
                far = i
            }
        }
        let first = simplify(Array(ring[0...far]), tolerance: tolerance)
        let second = simplify(Array(ring[far...]) + [a], tolerance: tolerance)
        return first + second.dropFirst().dropLast()
    }

    static func round(_ p: TileCoordinate) -> TilePoint {
        TilePoint(Int32(clamping: Int64(p.x.rounded())), Int32(clamping: Int64(p.y.rounded())))
    }

    /// A line on the grid, repeated points left out; nil when fewer than two remain.
    static func line(_ line: [TileCoordinate]) -> [TilePoint]? {
        var out: [TilePoint] = []
        out.reserveCapacity(line.count)
        for p in line {
            let q = round(p)
            if out.last != q { out.append(q) }
        }
        return out.count >= 2 ? out : nil
    }

    /// A ring on the grid with repeated points and spikes (A–B–A) left out; nil when it no
    /// longer encloses any area or its orientation turned (a sliver the grid cannot hold).
    static func ring(_ ring: [TileCoordinate], exterior: Bool) -> [TilePoint]? {
        var out: [TilePoint] = []
        out.reserveCapacity(ring.count)
        for p in ring {
            let q = round(p)
            if out.last == q { continue }
            // A–B–A: B is a spike; drop it and do not repeat A.
            if out.count >= 2, out[out.count - 2] == q {
                out.removeLast()
                continue
            }
            out.append(q)
        }
        // The same around the seam where the ring closes.
        var changed = true
        while changed, out.count >= 3 {
            changed = false
            if out.first == out.last {
                out.removeLast()
                changed = true
            } else if out[out.count - 2] == out[0] {
                out.removeLast()
                changed = true
            } else if out[1] == out[out.count - 1] {
                out.removeFirst()
                changed = true
            }
        }
        out = withoutCollinear(out)
        guard out.count >= 3 else { return nil }
        let area = VectorTileGeometry.doubleArea(out)
        return exterior ? (area > 0 ? out : nil) : (area < 0 ? out : nil)
    }

    /// A ring without the points that lie on the line through their neighbours: on the way
    /// they add nothing, and turning back (a spike along a tile edge, say) they make the ring
    /// overlap itself.
    static func withoutCollinear(_ ring: [TilePoint]) -> [TilePoint] {
        var out = ring
        var changed = true
        while changed, out.count >= 3 {
            changed = false
            var kept: [TilePoint] = []
            kept.reserveCapacity(out.count)
            let n = out.count
            for i in 0..<n {
                let prev = kept.last ?? out[(i + n - 1) % n], p = out[i], next = out[(i + 1) % n]
                let cross = Int64(p.x - prev.x) * Int64(next.y - p.y) - Int64(p.y - prev.y) * Int64(next.x - p.x)
                if cross == 0 || p == prev {
                    changed = true
                } else {
                    kept.append(p)
                }
            }
            out = kept
        }
        return out
    }

    /// A ring split where it passes the same grid point twice (rounding brings two nearby
    /// points of a ring together, which readers take as a ring crossing itself): the loops,
    /// each passing its points once, with their own orientation; loops without area left out.
    static func loops(_ ring: [TilePoint]) -> [[TilePoint]] {
        var seen: [TilePoint: Int] = [:]
        var stack: [TilePoint] = []
        var loops: [[TilePoint]] = []
        for p in ring {
            if let i = seen[p] {
                let loop = Array(stack[i...])
                for q in stack[(i + 1)...] { seen[q] = nil }
                stack.removeSubrange((i + 1)...)
                if loop.count >= 3, VectorTileGeometry.doubleArea(loop) != 0 { loops.append(loop) }
            } else {
                seen[p] = stack.count
                stack.append(p)
            }
        }
        if stack.count >= 3, VectorTileGeometry.doubleArea(stack) != 0 { loops.append(stack) }
        return loops
    }

    /// `ring` (closed, no closing point) with a vertex added where two of its edges cross, at
    /// the crossing rounded to the grid, so ``loops(_:)`` can split it there: rounding on the grid
    /// can make a valid ring cross itself (and an invalid source comes crossing already). Rounding
    /// a crossing can make another; a few rounds settle it. Edges are swept by their left end,
    /// so a ring of n edges costs about n log n plus the pairs that overlap in x.
    static func noded(_ ring: [TilePoint]) -> [TilePoint] {
        var ring = ring
        for _ in 0..<4 {
            let crossings = self.crossings(ring)
            guard !crossings.isEmpty else { return ring }
            var out: [TilePoint] = []
            out.reserveCapacity(ring.count + 2 * crossings.count)
            for i in ring.indices {
                out.append(ring[i])
                let a = ring[i]
                // Added along the edge from its start, each once.
                let added = (crossings[i] ?? []).sorted {
                    (Int64($0.x - a.x) * Int64($0.x - a.x) + Int64($0.y - a.y) * Int64($0.y - a.y))
                        < (Int64($1.x - a.x) * Int64($1.x - a.x) + Int64($1.y - a.y) * Int64($1.y - a.y))
                }
                for p in added where p != out.last && p != ring[(i + 1) % ring.count] { out.append(p) }
            }
            ring = out
        }
        return ring
    }

    /// For each edge (by its first vertex's index) crossing another, the crossings on it, rounded.
    private static func crossings(_ ring: [TilePoint]) -> [Int: [TilePoint]] {
        let n = ring.count
        guard n >= 4 else { return [:] }
        func cross(_ o: TilePoint, _ a: TilePoint, _ b: TilePoint) -> Int64 {
            Int64(a.x - o.x) * Int64(b.y - o.y) - Int64(a.y - o.y) * Int64(b.x - o.x)
        }
        let order = (0..<n).sorted { min(ring[$0].x, ring[($0 + 1) % n].x) < min(ring[$1].x, ring[($1 + 1) % n].x) }
        var active: [Int] = []
        var found: [Int: [TilePoint]] = [:]
        for i in order {
            let a = ring[i], b = ring[(i + 1) % n]
            let left = min(a.x, b.x)
            active.removeAll { max(ring[$0].x, ring[($0 + 1) % n].x) < left }
            for j in active {
                // Neighbouring edges share a vertex: not a crossing.
                guard j != (i + 1) % n, i != (j + 1) % n else { continue }
                let c = ring[j], d = ring[(j + 1) % n]
                guard max(c.y, d.y) >= min(a.y, b.y), max(a.y, b.y) >= min(c.y, d.y) else { continue }
                let d1 = cross(a, b, c), d2 = cross(a, b, d), d3 = cross(c, d, a), d4 = cross(c, d, b)
                // Proper crossings only: each edge's ends strictly on both sides of the other.
                guard (d1 > 0) != (d2 > 0), d1 != 0, d2 != 0, (d3 > 0) != (d4 > 0), d3 != 0, d4 != 0 else { continue }
                let t = Double(d3) / Double(d3 - d4)
                let p = TilePoint(Int32((Double(a.x) + t * Double(b.x - a.x)).rounded()), Int32((Double(a.y) + t * Double(b.y - a.y)).rounded()))
                found[i, default: []].append(p)
                found[j, default: []].append(p)
            }
            active.append(i)
        }
        return found
    }
}
