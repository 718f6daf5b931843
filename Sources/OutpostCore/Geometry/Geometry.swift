/// A simple-feature geometry (OGC 06-103r4): one of the seven types GeoPackage core allows.
///
/// Geometries are immutable values. Every part of a geometry shares one ``CoordinateLayout``;
/// the initialisers of the part types reject mixed layouts, non-finite coordinates and invalid
/// polygon rings, so a `Geometry` value is always well-formed.
///
/// ```swift
/// let p = Geometry.point(Point(x: 174.77, y: -41.29))
/// let bytes = WKB.encode(p)
/// ```
// Not `indirect`: only GeometryCollection nests, and it does so through an array, which is
// already a heap reference. Boxing every case would cost an allocation per point.
public enum Geometry: Hashable, Sendable {
    /// A point.
    case point(Point)
    /// A line.
    case lineString(LineString)
    /// An area.
    case polygon(Polygon)
    /// Several points.
    case multiPoint(MultiPoint)
    /// Several lines.
    case multiLineString(MultiLineString)
    /// Several areas.
    case multiPolygon(MultiPolygon)
    /// Geometries of any types.
    case geometryCollection(GeometryCollection)

    /// Which kind of geometry it is.
    public var type: GeometryType {
        switch self {
        case .point: .point
        case .lineString: .lineString
        case .polygon: .polygon
        case .multiPoint: .multiPoint
        case .multiLineString: .multiLineString
        case .multiPolygon: .multiPolygon
        case .geometryCollection: .geometryCollection
        }
    }

    /// Which ordinates its positions have.
    public var layout: CoordinateLayout {
        switch self {
        case .point(let g): g.layout
        case .lineString(let g): g.layout
        case .polygon(let g): g.layout
        case .multiPoint(let g): g.layout
        case .multiLineString(let g): g.layout
        case .multiPolygon(let g): g.layout
        case .geometryCollection(let g): g.layout
        }
    }

    /// True when the geometry has no positions at all (`POINT EMPTY`, `POLYGON EMPTY`, …).
    public var isEmpty: Bool {
        switch self {
        case .point(let g): return g.position == nil
        case .lineString(let g): return g.positions.isEmpty
        case .polygon(let g): return g.rings.allSatisfy(\.isEmpty)
        default:
            var empty = true
            forEachPosition { _ in empty = false }
            return empty
        }
    }

    /// Calls `body` for every position, in encoding order.
    public func forEachPosition(_ body: (Position) -> Void) {
        switch self {
        case .point(let g): if let p = g.position { body(p) }
        case .lineString(let g): g.positions.forEach(body)
        case .polygon(let g): g.rings.forEach { $0.forEach(body) }
        case .multiPoint(let g): g.points.forEach { if let p = $0.position { body(p) } }
        case .multiLineString(let g): g.lineStrings.forEach { $0.positions.forEach(body) }
        case .multiPolygon(let g): g.polygons.forEach { $0.rings.forEach { $0.forEach(body) } }
        case .geometryCollection(let g): g.geometries.forEach { $0.forEachPosition(body) }
        }
    }

    /// The bounding box of all positions, or nil for an empty geometry.
    public var envelope: Envelope? {
        if case .point(let g) = self, let p = g.position {
            return Envelope(
                xmin: p.x, ymin: p.y, xmax: p.x, ymax: p.y, zRange: p.z.map { $0...$0 }, mRange: p.m.map { $0...$0 })
        }
        var builder = Envelope.Builder()
        forEachPosition { builder.add($0) }
        return builder.envelope
    }

    /// The same geometry with every position transformed by `transform`.
    ///
    /// - Throws: ``GeometryError`` when a transformed position is not finite or rings stop closing.
    public func mapPositions(_ transform: (Position) throws -> Position) throws -> Geometry {
        switch self {
        case .point(let g):
            guard let p = g.position else { return self }
            return .point(try Point(try transform(p)))
        case .lineString(let g):
            return .lineString(try LineString(try g.positions.map(transform), layout: g.layout))
        case .polygon(let g):
            return .polygon(try Polygon(rings: try g.rings.map { try $0.map(transform) }, layout: g.layout))
        case .multiPoint(let g):
            return .multiPoint(
                try MultiPoint(
                    try g.points.map { p in try p.position.map { try Point(try transform($0)) } ?? p },
                    layout: g.layout))
        case .multiLineString(let g):
            return .multiLineString(
                try MultiLineString(
                    try g.lineStrings.map { try LineString(try $0.positions.map(transform), layout: g.layout) },
                    layout: g.layout))
        case .multiPolygon(let g):
            return .multiPolygon(
                try MultiPolygon(
                    try g.polygons.map { try Polygon(rings: try $0.rings.map { try $0.map(transform) }, layout: g.layout) },
                    layout: g.layout))
        case .geometryCollection(let g):
            return .geometryCollection(
                try GeometryCollection(try g.geometries.map { try $0.mapPositions(transform) }, layout: g.layout))
        }
    }

    /// An empty geometry of `type` with `layout`.
    public static func empty(_ type: GeometryType, layout: CoordinateLayout = .xy) -> Geometry {
        switch type {
        case .point: .point(Point(empty: layout))
        case .lineString: .lineString(LineString(empty: layout))
        case .polygon: .polygon(Polygon(empty: layout))
        case .multiPoint: .multiPoint(MultiPoint(empty: layout))
        case .multiLineString: .multiLineString(MultiLineString(empty: layout))
        case .multiPolygon: .multiPolygon(MultiPolygon(empty: layout))
        case .geometryCollection: .geometryCollection(GeometryCollection(empty: layout))
        }
    }
}

// MARK: - Validation helpers

func checkPositions(_ positions: [Position], layout: CoordinateLayout) throws {
    for p in positions {
        guard p.isFinite else {
            throw GeometryError(.invalidCoordinate, "coordinate (\(p.x), \(p.y)) is not a finite number")
        }
        guard p.layout == layout else {
            throw GeometryError(
                .mixedLayout, "a position has layout \(p.layout.rawValue) in a geometry of layout \(layout.rawValue)")
        }
    }
}

func inferLayout(_ positions: [Position], default fallback: CoordinateLayout?) -> CoordinateLayout {
    fallback ?? positions.first?.layout ?? .xy
}

func checkPartLayout(_ partLayout: CoordinateLayout, in layout: CoordinateLayout) throws {
    guard partLayout == layout else {
        throw GeometryError(
            .mixedLayout, "a part has layout \(partLayout.rawValue) in a geometry of layout \(layout.rawValue)")
    }
}

// MARK: - Part types

/// A point, or an empty point (`POINT EMPTY`) when `position` is nil.
public struct Point: Hashable, Sendable {
    /// Which ordinates the point has.
    public let layout: CoordinateLayout
    /// Where the point is (nil for an empty point).
    public let position: Position?

    /// - Throws: ``GeometryError/Code/invalidCoordinate`` for a non-finite ordinate.
    public init(_ position: Position) throws {
        /// A point at `position`.
        try checkPositions([position], layout: position.layout)
        self.layout = position.layout
        self.position = position
    }

    /// A point at the coordinates; its layout follows from which of `z` and `m` are given.
    public init(x: Double, y: Double, z: Double? = nil, m: Double? = nil) throws {
        try self.init(Position(x: x, y: y, z: z, m: m))
    }

    /// An empty point.
    public init(empty layout: CoordinateLayout) {
        self.layout = layout
        self.position = nil
    }
}

/// A line string: none (empty) or at least two positions.
public struct LineString: Hashable, Sendable {
    /// Which ordinates the positions have.
    public let layout: CoordinateLayout
    /// The line's vertices in order.
    public let positions: [Position]

    /// - Throws: ``GeometryError`` for a single position, non-finite ordinates or mixed layouts.
    public init(_ positions: [Position], layout: CoordinateLayout? = nil) throws {
        /// A line through `positions`; `layout` is taken from the first position when not given.
        let layout = inferLayout(positions, default: layout)
        try checkPositions(positions, layout: layout)
        guard positions.count != 1 else {
            throw GeometryError(.invalidCount, "a line string needs at least two positions, got one")
        }
        self.layout = layout
        self.positions = positions
    }

    /// An empty line.
    public init(empty layout: CoordinateLayout) {
        self.layout = layout
        self.positions = []
    }
}

/// A polygon: an exterior ring followed by interior rings (holes); no rings when empty.
///
/// Each ring is closed (first position equals last in x and y) and has at least four positions
/// (OGC 06-103r4 §6.1.7.1). Ring orientation is not enforced: encoders that need one fix it.
public struct Polygon: Hashable, Sendable {
    /// Which ordinates the positions have.
    public let layout: CoordinateLayout
    /// The rings: the exterior first, then the holes; each closed (its last position is its first).
    public let rings: [[Position]]

    /// - Throws: ``GeometryError/Code/invalidRing`` for an open or too-short ring.
    public init(rings: [[Position]], layout: CoordinateLayout? = nil) throws {
        /// A polygon of these rings; `layout` is taken from the first position when not given.
        let layout = inferLayout(rings.first ?? [], default: layout)
        for (index, ring) in rings.enumerated() {
            try checkPositions(ring, layout: layout)
            guard ring.count >= 4 else {
                throw GeometryError(
                    .invalidRing, "ring \(index) has \(ring.count) positions; a closed ring needs at least 4")
            }
            guard let first = ring.first, let last = ring.last, first.x == last.x, first.y == last.y else {
                throw GeometryError(.invalidRing, "ring \(index) is not closed (first and last positions differ)")
            }
        }
        self.layout = layout
        self.rings = rings
    }

    /// An empty polygon.
    public init(empty layout: CoordinateLayout) {
        self.layout = layout
        self.rings = []
    }

    /// The exterior ring (nil for an empty polygon).
    public var exterior: [Position]? { rings.first }
    /// The holes.
    public var holes: ArraySlice<[Position]> { rings.dropFirst() }
}

/// Several points as one geometry.
public struct MultiPoint: Hashable, Sendable {
    /// Which ordinates the points have.
    public let layout: CoordinateLayout
    /// The points.
    public let points: [Point]

    /// Points as one geometry; `layout` defaults to the first point's. Throws ``GeometryError`` when the
    /// layouts differ.
    public init(_ points: [Point], layout: CoordinateLayout? = nil) throws {
        let layout = layout ?? points.first?.layout ?? .xy
        for p in points { try checkPartLayout(p.layout, in: layout) }
        self.layout = layout
        self.points = points
    }

    /// An empty multipoint.
    public init(empty layout: CoordinateLayout) {
        self.layout = layout
        self.points = []
    }
}

/// Several lines as one geometry.
public struct MultiLineString: Hashable, Sendable {
    /// Which ordinates the lines have.
    public let layout: CoordinateLayout
    /// The lines.
    public let lineStrings: [LineString]

    /// Lines as one geometry; `layout` defaults to the first line's. Throws ``GeometryError`` when the layouts
    /// differ.
    public init(_ lineStrings: [LineString], layout: CoordinateLayout? = nil) throws {
        let layout = layout ?? lineStrings.first?.layout ?? .xy
        for l in lineStrings { try checkPartLayout(l.layout, in: layout) }
        self.layout = layout
        self.lineStrings = lineStrings
    }

    /// An empty multilinestring.
    public init(empty layout: CoordinateLayout) {
        self.layout = layout
        self.lineStrings = []
    }
}

/// Several areas as one geometry.
public struct MultiPolygon: Hashable, Sendable {
    /// Which ordinates the polygons have.
    public let layout: CoordinateLayout
    /// The polygons.
    public let polygons: [Polygon]

    /// Polygons as one geometry; `layout` defaults to the first polygon's. Throws ``GeometryError`` when the
    /// layouts differ.
    public init(_ polygons: [Polygon], layout: CoordinateLayout? = nil) throws {
        let layout = layout ?? polygons.first?.layout ?? .xy
        for p in polygons { try checkPartLayout(p.layout, in: layout) }
        self.layout = layout
        self.polygons = polygons
    }

    /// An empty multipolygon.
    public init(empty layout: CoordinateLayout) {
        self.layout = layout
        self.polygons = []
    }
}

/// Geometries of any types as one.
public struct GeometryCollection: Hashable, Sendable {
    /// Which ordinates the geometries have.
    public let layout: CoordinateLayout
    /// The geometries.
    public let geometries: [Geometry]

    /// Geometries as one; `layout` defaults to the first one's. Throws ``GeometryError`` when the layouts
    /// differ.
    public init(_ geometries: [Geometry], layout: CoordinateLayout? = nil) throws {
        let layout = layout ?? geometries.first?.layout ?? .xy
        for g in geometries { try checkPartLayout(g.layout, in: layout) }
        self.layout = layout
        self.geometries = geometries
    }

    /// An empty collection.
    public init(empty layout: CoordinateLayout) {
        self.layout = layout
        self.geometries = []
    }
}

// MARK: - Conversions between single and multi-part types

extension Geometry {
    /// This geometry as the multi-part type of `type` when that is lossless
    /// (`.polygon` → `.multiPolygon` with one part), or the geometry itself when it already is.
    public func promoted(to type: GeometryType) -> Geometry? {
        if self.type == type { return self }
        switch (self, type) {
        case (.point(let p), .multiPoint):
            return try? .multiPoint(MultiPoint(p.position == nil ? [] : [p], layout: layout))
        case (.lineString(let l), .multiLineString):
            return try? .multiLineString(MultiLineString(l.positions.isEmpty ? [] : [l], layout: layout))
        case (.polygon(let p), .multiPolygon):
            return try? .multiPolygon(MultiPolygon(p.rings.isEmpty ? [] : [p], layout: layout))
        case (_, .geometryCollection):
            return try? .geometryCollection(GeometryCollection(isEmpty ? [] : [self], layout: layout))
        default:
            return nil
        }
    }
}
