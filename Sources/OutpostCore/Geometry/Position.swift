/// Which ordinates a coordinate carries beyond x and y.
///
/// Matches the four ISO 19125 / ISO WKB coordinate families: XY, XYZ, XYM and XYZM.
public enum CoordinateLayout: String, Sendable, Hashable, Codable, CaseIterable {
    /// The ordinates each position has.
    case xy, xyz, xym, xyzm

    /// The layout with Z and M as given.
    public init(hasZ: Bool, hasM: Bool) {
        switch (hasZ, hasM) {
        case (false, false): self = .xy
        case (true, false): self = .xyz
        case (false, true): self = .xym
        case (true, true): self = .xyzm
        }
    }

    /// Whether positions have a Z (height).
    public var hasZ: Bool { self == .xyz || self == .xyzm }
    /// Whether positions have an M (measure).
    public var hasM: Bool { self == .xym || self == .xyzm }
    /// Number of ordinates per position (2, 3 or 4).
    public var dimension: Int { 2 + (hasZ ? 1 : 0) + (hasM ? 1 : 0) }
}

/// One coordinate: x (easting or longitude), y (northing or latitude), and optional z and m.
///
/// Axis order is always x then y, whatever the spatial reference's axis order says (GeoPackage
/// §2.1.3 and RFC 7946 §3.1.1 agree on this).
public struct Position: Hashable, Sendable {
    /// Easting or longitude.
    public var x: Double
    /// Northing or latitude.
    public var y: Double
    /// Height, when the layout has Z.
    public var z: Double?
    /// Measure, when the layout has M.
    public var m: Double?

    /// A position; its layout follows from which of `z` and `m` are given.
    public init(x: Double, y: Double, z: Double? = nil, m: Double? = nil) {
        self.x = x
        self.y = y
        self.z = z
        self.m = m
    }

    /// Which ordinates the position has.
    public var layout: CoordinateLayout { CoordinateLayout(hasZ: z != nil, hasM: m != nil) }

    /// True when every ordinate present is a finite number.
    public var isFinite: Bool {
        x.isFinite && y.isFinite && (z?.isFinite ?? true) && (m?.isFinite ?? true)
    }

    /// The same position with only the ordinates of `layout`; missing ones become 0.
    public func conformed(to layout: CoordinateLayout) -> Position {
        Position(
            x: x, y: y,
            z: layout.hasZ ? (z ?? 0) : nil,
            m: layout.hasM ? (m ?? 0) : nil
        )
    }
}
