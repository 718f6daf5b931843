/// An axis-aligned bounding box in x and y, with optional z and m ranges.
public struct Envelope: Hashable, Sendable, Codable {
    /// The least x.
    public var xmin: Double
    /// The least y.
    public var ymin: Double
    /// The greatest x.
    public var xmax: Double
    /// The greatest y.
    public var ymax: Double
    /// The least and greatest z, when the geometry has Z.
    public var zRange: ClosedRange<Double>?
    /// The least and greatest m, when the geometry has M.
    public var mRange: ClosedRange<Double>?

    /// A box of these bounds.
    /// - Precondition: none; an inverted box (`xmin > xmax`) is kept as given and ``isValid`` is false.
    public init(
        xmin: Double, ymin: Double, xmax: Double, ymax: Double,
        zRange: ClosedRange<Double>? = nil, mRange: ClosedRange<Double>? = nil
    ) {
        self.xmin = xmin
        self.ymin = ymin
        self.xmax = xmax
        self.ymax = ymax
        self.zRange = zRange
        self.mRange = mRange
    }

    /// True for finite bounds with min ≤ max on both axes.
    public var isValid: Bool {
        [xmin, ymin, xmax, ymax].allSatisfy(\.isFinite) && xmin <= xmax && ymin <= ymax
    }

    /// `xmax - xmin`.
    public var width: Double { xmax - xmin }
    /// `ymax - ymin`.
    public var height: Double { ymax - ymin }

    /// Whether the two envelopes share a point (touching counts).
    public func intersects(_ other: Envelope) -> Bool {
        xmin <= other.xmax && other.xmin <= xmax && ymin <= other.ymax && other.ymin <= ymax
    }

    /// Whether the point is inside or on the edge.
    public func contains(x: Double, y: Double) -> Bool {
        x >= xmin && x <= xmax && y >= ymin && y <= ymax
    }

    /// The smallest envelope holding both (z and m ranges are merged when both have them).
    public func union(_ other: Envelope) -> Envelope {
        Envelope(
            xmin: min(xmin, other.xmin), ymin: min(ymin, other.ymin),
            xmax: max(xmax, other.xmax), ymax: max(ymax, other.ymax),
            zRange: Self.merge(zRange, other.zRange), mRange: Self.merge(mRange, other.mRange))
    }

    private static func merge(_ a: ClosedRange<Double>?, _ b: ClosedRange<Double>?) -> ClosedRange<Double>? {
        guard let a, let b else { return a ?? b }
        return min(a.lowerBound, b.lowerBound)...max(a.upperBound, b.upperBound)
    }

    /// The envelope as a closed polygon ring, counter-clockwise from the lower-left corner.
    public var polygon: Polygon {
        let ring = [
            Position(x: xmin, y: ymin), Position(x: xmax, y: ymin), Position(x: xmax, y: ymax),
            Position(x: xmin, y: ymax), Position(x: xmin, y: ymin),
        ]
        // Finite corners always make a valid closed ring.
        return (try? Polygon(rings: [ring])) ?? Polygon(empty: .xy)
    }

    /// Accumulates positions into an envelope.
    public struct Builder: Sendable {
        private var bounds: (xmin: Double, ymin: Double, xmax: Double, ymax: Double)?
        private var z: ClosedRange<Double>?
        private var m: ClosedRange<Double>?

        /// A builder that has seen nothing yet.
        public init() {}

        /// Grows the envelope to take in a position.
        public mutating func add(_ p: Position) {
            if let b = bounds {
                bounds = (min(b.xmin, p.x), min(b.ymin, p.y), max(b.xmax, p.x), max(b.ymax, p.y))
            } else {
                bounds = (p.x, p.y, p.x, p.y)
            }
            if let pz = p.z { z = z.map { min($0.lowerBound, pz)...max($0.upperBound, pz) } ?? pz...pz }
            if let pm = p.m { m = m.map { min($0.lowerBound, pm)...max($0.upperBound, pm) } ?? pm...pm }
        }

        /// Grows the envelope to take in positions.
        public mutating func add(_ e: Envelope) {
            add(Position(x: e.xmin, y: e.ymin))
            add(Position(x: e.xmax, y: e.ymax))
        }

        /// The envelope of what was added; nil when nothing was.
        public var envelope: Envelope? {
            bounds.map { Envelope(xmin: $0.xmin, ymin: $0.ymin, xmax: $0.xmax, ymax: $0.ymax, zRange: z, mRange: m) }
        }
    }
}
