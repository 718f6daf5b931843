import CPROJ
import OutpostCore

/// Coordinates from one coordinate reference system to another through PROJ: any EPSG code PROJ
/// knows. Axis order is always x = easting/longitude, y = northing/latitude (PROJ's
/// "normalized for visualization"), as in GeoPackage and Esri JSON. One transform belongs to one
/// task at a time (it holds its own PROJ context).
public final class CoordinateTransform {
    /// Why PROJ could not make or apply a transform.
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// The system coordinates come from.
    public let source: SpatialReference
    /// The system coordinates go to.
    public let target: SpatialReference
    private let context: OpaquePointer
    private let operation: OpaquePointer

    /// The systems as PROJ names them (`EPSG:4326`, or a PROJ string such as a local
    /// azimuthal equidistant projection).
    private let sourceName: String, targetName: String

    /// A transform between two EPSG systems.
    public convenience init(from source: SpatialReference, to target: SpatialReference) throws {
        try self.init(from: "EPSG:\(source.wkid)", to: "EPSG:\(target.wkid)")
    }

    /// Between any two systems PROJ understands by name: `EPSG:3067`, `+proj=aeqd +lat_0=60 …`.
    public init(from source: String, to target: String) throws {
        sourceName = source
        targetName = target
        self.source = SpatialReference(wkid: Self.epsg(source) ?? 0)
        self.target = SpatialReference(wkid: Self.epsg(target) ?? 0)
        guard let context = Self.makeContext() else { throw Failure(description: "cannot start PROJ") }
        self.context = context
        guard let raw = proj_create_crs_to_crs(context, source, target, nil) else {
            let reason = String(cString: proj_context_errno_string(context, proj_context_errno(context)))
            proj_context_destroy(context)
            throw Failure(description: "PROJ knows no transformation from \(source) to \(target) (\(reason))")
        }
        guard let normalized = proj_normalize_for_visualization(context, raw) else {
            proj_destroy(raw)
            proj_context_destroy(context)
            throw Failure(description: "PROJ cannot order the axes of \(source) → \(target)")
        }
        proj_destroy(raw)
        operation = normalized
    }

    /// A PROJ context that keeps quiet: its errors come back as our errors, not as lines on
    /// the process's stderr ("proj_create: crs not found").
    static func makeContext() -> OpaquePointer? {
        guard let context = proj_context_create() else { return nil }
        proj_log_level(context, PJ_LOG_NONE)
        return context
    }

    private static func epsg(_ name: String) -> Int? { name.hasPrefix("EPSG:") ? Int(name.dropFirst(5)) : nil }

    deinit {
        proj_destroy(operation)
        proj_context_destroy(context)
    }

    /// The position in the target system (Z transformed when it has one, M kept).
    /// - Throws: ``CoordinateTransform/Failure`` for a position with no place in the target system.
    public func transform(_ position: Position) throws -> Position {
        var c = PJ_COORD()
        c.xyzt = PJ_XYZT(x: position.x, y: position.y, z: position.z ?? 0, t: .infinity)
        let out = proj_trans(operation, PJ_FWD, c)
        guard out.xyzt.x.isFinite, out.xyzt.y.isFinite else {
            throw Failure(description: "(\(position.x), \(position.y)) has no place in \(targetName)")
        }
        return Position(x: out.xyzt.x, y: out.xyzt.y, z: position.z == nil ? nil : out.xyzt.z, m: position.m)
    }

    /// The geometry with every position transformed.
    public func transform(_ geometry: Geometry) throws -> Geometry {
        try geometry.mapPositions { try transform($0) }
    }
}

/// Azimuthal equidistant projections on WGS 84 centred where asked (distances from the centre
/// are true), made straight from PROJ's projection definition: no search of PROJ's database for
/// a transformation, which costs milliseconds each and would dominate a geodesic buffer of many
/// features. One instance makes any number of them; one task uses it at a time.
public final class LocalProjections {
    private let context: OpaquePointer

    /// A maker of local projections, with a PROJ context of its own.
    public init() throws {
        guard let context = CoordinateTransform.makeContext() else { throw CoordinateTransform.Failure(description: "cannot start PROJ") }
        self.context = context
    }

    deinit { proj_context_destroy(context) }

    /// Longitude/latitude (degrees, WGS 84) → metres east/north of `centre` (`inverse` the other
    /// way), applied to every position of `geometry`.
    public func azimuthalEquidistant(_ geometry: Geometry, centre: Position, inverse: Bool = false) throws -> Geometry {
        guard let projection = proj_create(context, "+proj=aeqd +lat_0=\(centre.y) +lon_0=\(centre.x) +ellps=WGS84") else {
            throw CoordinateTransform.Failure(description: "PROJ cannot centre a projection on (\(centre.x), \(centre.y))")
        }
        defer { proj_destroy(projection) }
        let radians = Double.pi / 180
        return try geometry.mapPositions { p in
            var c = PJ_COORD()
            c.xyzt = inverse ? PJ_XYZT(x: p.x, y: p.y, z: 0, t: .infinity) : PJ_XYZT(x: p.x * radians, y: p.y * radians, z: 0, t: .infinity)
            let out = proj_trans(projection, inverse ? PJ_INV : PJ_FWD, c).xyzt
            guard out.x.isFinite, out.y.isFinite else { throw CoordinateTransform.Failure(description: "(\(p.x), \(p.y)) cannot be projected") }
            return inverse ? Position(x: out.x / radians, y: out.y / radians, z: p.z, m: p.m) : Position(x: out.x, y: out.y, z: p.z, m: p.m)
        }
    }
}

/// What a coordinate reference system is, as PROJ describes it: geographic (degrees) or
/// projected, and how many metres one unit of its first axis is.
public struct CoordinateSystemInfo: Sendable, Hashable {
    /// Whether the system is geographic (degrees).
    public var isGeographic: Bool
    /// Metres per coordinate unit (nil for angular units).
    public var metresPerUnit: Double?

    /// The description of `reference`, as PROJ gives it.
    public init(_ reference: SpatialReference) throws {
        guard let context = CoordinateTransform.makeContext() else { throw CoordinateTransform.Failure(description: "cannot start PROJ") }
        defer { proj_context_destroy(context) }
        guard let crs = proj_create(context, "EPSG:\(reference.wkid)") else {
            throw CoordinateTransform.Failure(description: "PROJ does not know EPSG:\(reference.wkid)")
        }
        defer { proj_destroy(crs) }
        let type = proj_get_type(crs)
        isGeographic = type == PJ_TYPE_GEOGRAPHIC_2D_CRS || type == PJ_TYPE_GEOGRAPHIC_3D_CRS
        guard let cs = proj_crs_get_coordinate_system(context, crs) else {
            throw CoordinateTransform.Failure(description: "EPSG:\(reference.wkid) has no coordinate system")
        }
        defer { proj_destroy(cs) }
        var factor = 0.0
        guard proj_cs_get_axis_info(context, cs, 0, nil, nil, nil, &factor, nil, nil, nil) == 1 else {
            throw CoordinateTransform.Failure(description: "EPSG:\(reference.wkid): no axis information")
        }
        metresPerUnit = isGeographic ? nil : factor
    }
}

/// Distances and areas on the WGS 84 ellipsoid (Karney's geodesics, as PROJ ships them), for
/// longitude/latitude coordinates.
public enum Geodesic {
    private static func ellipsoid() -> geod_geodesic {
        var g = geod_geodesic()
        geod_init(&g, 6_378_137, 1 / 298.257_223_563)
        return g
    }

    /// Metres between two positions (x = longitude, y = latitude, degrees).
    public static func distance(_ a: Position, _ b: Position) -> Double {
        var g = ellipsoid()
        var s12 = 0.0
        geod_inverse(&g, a.y, a.x, b.y, b.x, &s12, nil, nil)
        return s12
    }

    /// Square metres inside a ring (x = longitude, y = latitude); positive whichever way it runs.
    public static func area(ring: [Position]) -> Double {
        var g = ellipsoid()
        var lats = ring.map(\.y), lons = ring.map(\.x)
        if let first = ring.first, let last = ring.last, first.x == last.x, first.y == last.y, ring.count > 1 {
            lats.removeLast()
            lons.removeLast()
        }
        var area = 0.0, perimeter = 0.0
        geod_polygonarea(&g, &lats, &lons, Int32(lats.count), &area, &perimeter)
        return abs(area)
    }
}
