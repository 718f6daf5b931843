/// Exact spatial predicates on x/y (the ArcGIS `esriSpatialRelIntersects` a feature service query
/// applies after its index has found candidates).
public enum GeometryRelations {
    /// Whether `a` and `b` share at least one point (boundaries included).
    public static func intersects(_ a: Geometry, _ b: Geometry) -> Bool {
        guard let ea = a.envelope, let eb = b.envelope, ea.intersects(eb) else { return false }
        let pa = Parts(a), pb = Parts(b)
        // A vertex of one inside (or on) the other covers containment of either in the other.
        for p in pa.vertices where pb.covers(p) { return true }
        for p in pb.vertices where pa.covers(p) { return true }
        // Otherwise they can only meet where edges cross.
        for s in pa.segments {
            for t in pb.segments where segmentsIntersect(s.0, s.1, t.0, t.1) { return true }
        }
        return false
    }

    /// Whether `envelope` and `geometry` share a point.
    public static func intersects(_ envelope: Envelope, _ geometry: Geometry) -> Bool {
        intersects(.polygon(envelope.polygon), geometry)
    }

    /// A geometry taken apart into what the tests need.
    struct Parts {
        var points: [Position] = []
        var segments: [(Position, Position)] = []
        var polygons: [[[Position]]] = []

        init(_ g: Geometry) { add(g) }

        var vertices: [Position] {
            points + segments.flatMap { [$0.0, $0.1] }
        }

        mutating func add(_ g: Geometry) {
            switch g {
            case .point(let p): if let q = p.position { points.append(q) }
            case .multiPoint(let m): points += m.points.compactMap(\.position)
            case .lineString(let l): addLine(l.positions)
            case .multiLineString(let m): m.lineStrings.forEach { addLine($0.positions) }
            case .polygon(let p): addPolygon(p.rings)
            case .multiPolygon(let m): m.polygons.forEach { addPolygon($0.rings) }
            case .geometryCollection(let c): c.geometries.forEach { add($0) }
            }
        }

        mutating func addLine(_ positions: [Position]) {
            if positions.count == 1 { points.append(positions[0]) }
            for i in positions.indices.dropFirst() { segments.append((positions[i - 1], positions[i])) }
        }

        mutating func addPolygon(_ rings: [[Position]]) {
            guard !rings.isEmpty else { return }
            polygons.append(rings)
            rings.forEach { addLine($0) }
        }

        /// The point lies on a part: equal to a point, on a segment, or inside a polygon.
        func covers(_ p: Position) -> Bool {
            if points.contains(where: { $0.x == p.x && $0.y == p.y }) { return true }
            if segments.contains(where: { onSegment(p, $0.0, $0.1) }) { return true }
            return polygons.contains { rings in
                guard RingOrientation.contains(rings[0], x: p.x, y: p.y) else { return false }
                return !rings.dropFirst().contains { RingOrientation.contains($0, x: p.x, y: p.y) }
            }
        }
    }

    static func cross(_ o: Position, _ a: Position, _ b: Position) -> Double {
        (a.x - o.x) * (b.y - o.y) - (a.y - o.y) * (b.x - o.x)
    }

    static func onSegment(_ p: Position, _ a: Position, _ b: Position) -> Bool {
        guard cross(a, b, p) == 0 else { return false }
        return min(a.x, b.x) <= p.x && p.x <= max(a.x, b.x) && min(a.y, b.y) <= p.y && p.y <= max(a.y, b.y)
    }

    static func segmentsIntersect(_ p1: Position, _ p2: Position, _ q1: Position, _ q2: Position) -> Bool {
        let d1 = cross(q1, q2, p1), d2 = cross(q1, q2, p2)
        let d3 = cross(p1, p2, q1), d4 = cross(p1, p2, q2)
        if ((d1 > 0 && d2 < 0) || (d1 < 0 && d2 > 0)) && ((d3 > 0 && d4 < 0) || (d3 < 0 && d4 > 0)) { return true }
        return onSegment(p1, q1, q2) || onSegment(p2, q1, q2) || onSegment(q1, p1, p2) || onSegment(q2, p1, p2)
    }
}
