import CPROJ
import OutpostCore

/// Coordinates from one coordinate reference system to another through PROJ: any EPSG code PROJ
/// knows. Axis order is always x = easting/longitude, y = northing/latitude (PROJ's
/// "normalized for visualization"), as in GeoPackage and Esri JSON. One transform belongs to one
/// task at a time (it holds its own PROJ context).
public final class CoordinateTransform {
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    public let source: SpatialReference
    public let target: SpatialReference
    private let context: OpaquePointer
    private let operation: OpaquePointer

    public init(from source: SpatialReference, to target: SpatialReference) throws {
        self.source = source
        self.target = target
        guard let context = proj_context_create() else { throw Failure(description: "cannot start PROJ") }
        self.context = context
        guard let raw = proj_create_crs_to_crs(context, "EPSG:\(source.wkid)", "EPSG:\(target.wkid)", nil) else {
            let reason = String(cString: proj_context_errno_string(context, proj_context_errno(context)))
            proj_context_destroy(context)
            throw Failure(description: "PROJ knows no transformation from EPSG:\(source.wkid) to EPSG:\(target.wkid) (\(reason))")
        }
        guard let normalized = proj_normalize_for_visualization(context, raw) else {
            proj_destroy(raw)
            proj_context_destroy(context)
            throw Failure(description: "PROJ cannot order the axes of EPSG:\(source.wkid) → EPSG:\(target.wkid)")
        }
        proj_destroy(raw)
        operation = normalized
    }

    deinit {
        proj_destroy(operation)
        proj_context_destroy(context)
    }

    public func transform(_ position: Position) throws -> Position {
        var c = PJ_COORD()
        c.xyzt = PJ_XYZT(x: position.x, y: position.y, z: position.z ?? 0, t: .infinity)
        let out = proj_trans(operation, PJ_FWD, c)
        guard out.xyzt.x.isFinite, out.xyzt.y.isFinite else {
            throw Failure(description: "(\(position.x), \(position.y)) has no place in EPSG:\(target.wkid)")
        }
        return Position(x: out.xyzt.x, y: out.xyzt.y, z: position.z == nil ? nil : out.xyzt.z, m: position.m)
    }

    public func transform(_ geometry: Geometry) throws -> Geometry {
        try geometry.mapPositions { try transform($0) }
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
