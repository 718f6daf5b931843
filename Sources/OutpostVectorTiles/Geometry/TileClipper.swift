/// A point in tile coordinates before rounding to the grid.
struct TileCoordinate: Equatable {
    var x: Double
    var y: Double

    init(_ x: Double, _ y: Double) {
        self.x = x
        self.y = y
    }
}

/// Cuts geometry to a tile's square plus its buffer, in tile coordinates: points outside are
/// left out, lines are cut into the parts inside, and polygons are cut and stitched along the
/// square's edge so that what comes out is valid (no zero-width bridges along the edge, as
/// clipping each ring on its own would leave).
struct TileClipper {
    let lo: Double
    let hi: Double

    init(extent: Int, buffer: Int) {
        lo = -Double(buffer)
        hi = Double(extent + buffer)
    }

    func contains(_ p: TileCoordinate) -> Bool { p.x >= lo && p.x <= hi && p.y >= lo && p.y <= hi }

    /// The part of segment a→b inside the square as parameters along it (Liang–Barsky), or nil.
    func clip(_ a: TileCoordinate, _ b: TileCoordinate) -> (Double, Double)? {
        var t0 = 0.0, t1 = 1.0
        let dx = b.x - a.x, dy = b.y - a.y
        // One edge of the square at a time (no array of them: this runs for every segment).
        func edge(_ p: Double, _ q: Double) -> Bool {
            if p == 0 { return q >= 0 }
            let r = q / p
            if p < 0 {
                if r > t1 { return false }
                if r > t0 { t0 = r }
            } else {
                if r < t0 { return false }
                if r < t1 { t1 = r }
            }
            return true
        }
        guard edge(-dx, a.x - lo), edge(dx, hi - a.x), edge(-dy, a.y - lo), edge(dy, hi - a.y) else { return nil }
        return (t0, t1)
    }

    /// The point at `t` along a→b, put exactly on the square's nearest edge (it lies on one).
    func onEdge(_ a: TileCoordinate, _ b: TileCoordinate, _ t: Double) -> TileCoordinate {
        var p = TileCoordinate(a.x + (b.x - a.x) * t, a.y + (b.y - a.y) * t)
        p.x = min(max(p.x, lo), hi)
        p.y = min(max(p.y, lo), hi)
        let d = [abs(p.y - lo), abs(p.x - hi), abs(p.y - hi), abs(p.x - lo)]
        switch d.firstIndex(of: d.min()!)! {
        case 0: p.y = lo
        case 1: p.x = hi
        case 2: p.y = hi
        default: p.x = lo
        }
        return p
    }

    /// Where a point on the edge lies going round the square anticlockwise (the direction of an
    /// exterior ring, positive area) from (lo, lo): 0…4, a unit per side.
    func position(_ p: TileCoordinate) -> Double {
        let w = hi - lo
        let d = [abs(p.y - lo), abs(p.x - hi), abs(p.y - hi), abs(p.x - lo)]
        switch d.firstIndex(of: d.min()!)! {
        case 0: return (p.x - lo) / w
        case 1: return 1 + (p.y - lo) / w
        case 2: return 2 + (hi - p.x) / w
        default: return 3 + (hi - p.y) / w
        }
    }

    func corner(_ k: Int) -> TileCoordinate {
        switch k % 4 {
        case 0: TileCoordinate(lo, lo)
        case 1: TileCoordinate(hi, lo)
        case 2: TileCoordinate(hi, hi)
        default: TileCoordinate(lo, hi)
        }
    }

    func points(_ points: [TileCoordinate]) -> [TileCoordinate] { points.filter(contains) }

    /// The parts of a line inside the square.
    func line(_ line: [TileCoordinate]) -> [[TileCoordinate]] {
        guard line.count >= 2 else { return [] }
        var parts: [[TileCoordinate]] = []
        var current: [TileCoordinate] = []
        for i in 0..<(line.count - 1) {
            let a = line[i], b = line[i + 1]
            guard let (t0, t1) = clip(a, b) else {
                if current.count >= 2 { parts.append(current) }
                current = []
                continue
            }
            let pa = t0 > 0 ? onEdge(a, b, t0) : a
            let pb = t1 < 1 ? onEdge(a, b, t1) : b
            if current.isEmpty || t0 > 0 {
                if current.count >= 2 { parts.append(current) }
                current = [pa]
            }
            current.append(pb)
            if t1 < 1 {
                parts.append(current)
                current = []
            }
        }
        if current.count >= 2 { parts.append(current) }
        return parts
    }

    /// A run of a ring inside the square, from where it enters to where it leaves.
    private struct Chain {
        var points: [TileCoordinate]
        var entry: Double
        var exit: Double
    }

    /// The polygons a polygon (exterior with positive area first, then holes with negative
    /// area; rings not closed) becomes inside the square.
    func polygon(_ rings: [[TileCoordinate]]) -> [[[TileCoordinate]]] {
        var inside: [[TileCoordinate]] = []
        var chains: [Chain] = []
        var exteriorEncloses = false, holeEncloses = false
        let centre = TileCoordinate((lo + hi) / 2, (lo + hi) / 2)
        for (index, ring) in rings.enumerated() where ring.count >= 3 {
            var minX = Double.infinity, minY = Double.infinity, maxX = -Double.infinity, maxY = -Double.infinity
            for p in ring {
                minX = min(minX, p.x)
                minY = min(minY, p.y)
                maxX = max(maxX, p.x)
                maxY = max(maxY, p.y)
            }
            if minX >= lo, maxX <= hi, minY >= lo, maxY <= hi {
                inside.append(ring)
                continue
            }
            if maxX < lo || minX > hi || maxY < lo || minY > hi { continue }
            let found = walk(ring)
            chains += found
            if found.isEmpty, Self.contains(ring, centre) {
                if index == 0 { exteriorEncloses = true } else { holeEncloses = true }
            }
        }
        var exteriors: [[TileCoordinate]] = []
        var holes: [[TileCoordinate]] = []
        for ring in inside {
            if Self.doubleArea(ring) > 0 { exteriors.append(ring) } else { holes.append(ring) }
        }
        if chains.isEmpty {
            if exteriorEncloses && !holeEncloses { exteriors.append((0..<4).map(corner)) }
        } else {
            exteriors += stitch(chains)
        }
        var polygons = exteriors.map { [$0] }
        for hole in holes {
            // A hole belongs to the exterior around a point of its own (the middle of its first edge).
            let probe = TileCoordinate((hole[0].x + hole[1].x) / 2, (hole[0].y + hole[1].y) / 2)
            if let i = polygons.firstIndex(where: { Self.contains($0[0], probe) }) { polygons[i].append(hole) }
        }
        return polygons
    }

    /// The runs of a ring inside the square (none when it does not cross the square's edge).
    private func walk(_ ring: [TileCoordinate]) -> [Chain] {
        let n = ring.count
        guard let start = ring.firstIndex(where: { !contains($0) }) else { return [] }
        var chains: [Chain] = []
        var current: [TileCoordinate] = []
        var entry = 0.0
        for step in 0..<n {
            let a = ring[(start + step) % n], b = ring[(start + step + 1) % n]
            guard let (t0, t1) = clip(a, b) else { continue }
            if current.isEmpty {
                let pa = t0 > 0 ? onEdge(a, b, t0) : a
                current = [pa]
                entry = position(pa)
            }
            if t1 < 1 {
                let pb = onEdge(a, b, t1)
                current.append(pb)
                // A run that only touches the edge adds nothing.
                if current.contains(where: { $0 != current[0] }) {
                    chains.append(Chain(points: current, entry: entry, exit: position(pb)))
                }
                current = []
            } else {
                current.append(b)
            }
        }
        return chains
    }

    /// Joins runs into rings: from where a run leaves, along the edge anticlockwise to the next
    /// place a run enters, taking the corners passed.
    private func stitch(_ chains: [Chain]) -> [[TileCoordinate]] {
        var used = [Bool](repeating: false, count: chains.count)
        var rings: [[TileCoordinate]] = []
        func ahead(_ from: Double, _ to: Double) -> Double {
            let d = (to - from).truncatingRemainder(dividingBy: 4)
            return d < 0 ? d + 4 : d
        }
        for first in chains.indices where !used[first] {
            var ring: [TileCoordinate] = []
            var c = first
            while true {
                used[c] = true
                ring += chains[c].points
                let exit = chains[c].exit
                var next = first, best = ahead(exit, chains[first].entry)
                for k in chains.indices where !used[k] {
                    let d = ahead(exit, chains[k].entry)
                    if d < best {
                        best = d
                        next = k
                    }
                }
                // Corners passed on the way.
                var cornersPassed: [(Double, Int)] = []
                for k in 0..<4 {
                    let d = ahead(exit, Double(k))
                    if d > 0, d < best { cornersPassed.append((d, k)) }
                }
                for (_, k) in cornersPassed.sorted(by: { $0.0 < $1.0 }) { ring.append(corner(k)) }
                if next == first { break }
                c = next
            }
            rings.append(ring)
        }
        return rings
    }

    static func doubleArea(_ ring: [TileCoordinate]) -> Double {
        guard ring.count >= 3 else { return 0 }
        var sum = 0.0
        var previous = ring[ring.count - 1]
        for p in ring {
            sum += previous.x * p.y - p.x * previous.y
            previous = p
        }
        return sum
    }

    /// Whether `p` lies inside `ring` (even–odd rule).
    static func contains(_ ring: [TileCoordinate], _ p: TileCoordinate) -> Bool {
        var inside = false
        var j = ring.count - 1
        for i in ring.indices {
            let a = ring[i], b = ring[j]
            if (a.y > p.y) != (b.y > p.y), p.x < (b.x - a.x) * (p.y - a.y) / (b.y - a.y) + a.x { inside.toggle() }
            j = i
        }
        return inside
    }
}
