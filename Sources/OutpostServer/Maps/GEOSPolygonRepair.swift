import OutpostCore
import OutpostGeoprocessing
import OutpostVectorTiles

/// GEOS as `PolygonRepair`'s repair: a polygon GEOS finds invalid is replaced by the polygons
/// of `GEOSMakeValid`'s answer (lines and points it may add, where a ring collapsed, are left
/// out). The `outpost` command and server install it, so vector tiles made from an invalid
/// source (Natural Earth's Sudan, the United States) hold valid polygons.
public enum GEOSPolygonRepair {
    /// Installs the repair (once per process; later calls do nothing).
    public static func install() { _ = installed }

    private static let installed: Void = {
        PolygonRepair.install { geometry in
            // GEOS contexts are not thread-safe: one per call (each polygon is checked once).
            let engine = GeometryEngine()
            guard let validity = try? engine.validity(geometry), !validity.valid, let fixed = try? engine.makeValid(geometry) else { return nil }
            let parts = polygons(of: fixed)
            return .multiPolygon((try? MultiPolygon(parts, layout: parts.isEmpty ? geometry.layout : nil)) ?? MultiPolygon(empty: geometry.layout))
        }
    }()

    static func polygons(of geometry: Geometry) -> [Polygon] {
        switch geometry {
        case .polygon(let p): [p]
        case .multiPolygon(let m): m.polygons
        case .geometryCollection(let c): c.geometries.flatMap(polygons(of:))
        default: []
        }
    }
}
