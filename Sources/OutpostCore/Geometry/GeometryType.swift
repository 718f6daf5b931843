/// The seven simple-feature geometry types of OGC 06-103r4 that Outpost stores.
///
/// Raw values are the ISO WKB type codes for XY geometries (OGC 06-103r4 §8.2.3).
public enum GeometryType: UInt32, Sendable, Hashable, CaseIterable {
    /// A single point.
    case point = 1
    /// A line of connected segments.
    case lineString = 2
    /// An area: an exterior ring and holes.
    case polygon = 3
    /// Several points.
    case multiPoint = 4
    /// Several lines.
    case multiLineString = 5
    /// Several areas.
    case multiPolygon = 6
    /// Geometries of any types.
    case geometryCollection = 7

    /// The upper-case name GeoPackage uses in `gpkg_geometry_columns.geometry_type_name`.
    public var geoPackageName: String {
        switch self {
        case .point: "POINT"
        case .lineString: "LINESTRING"
        case .polygon: "POLYGON"
        case .multiPoint: "MULTIPOINT"
        case .multiLineString: "MULTILINESTRING"
        case .multiPolygon: "MULTIPOLYGON"
        case .geometryCollection: "GEOMETRYCOLLECTION"
        }
    }

    /// The GeoJSON `type` member (RFC 7946 §1.4).
    public var geoJSONName: String {
        switch self {
        case .point: "Point"
        case .lineString: "LineString"
        case .polygon: "Polygon"
        case .multiPoint: "MultiPoint"
        case .multiLineString: "MultiLineString"
        case .multiPolygon: "MultiPolygon"
        case .geometryCollection: "GeometryCollection"
        }
    }

    /// The type a GeoPackage `geometry_type_name` names (`POINT`, `MULTIPOLYGON`…); nil for another name.
    public init?(geoPackageName: String) {
        guard let match = Self.allCases.first(where: { $0.geoPackageName == geoPackageName.uppercased() })
        else { return nil }
        self = match
    }

    /// The type a GeoJSON `type` names (`Point`, `MultiPolygon`…); nil for another name.
    public init?(geoJSONName: String) {
        guard let match = Self.allCases.first(where: { $0.geoJSONName == geoJSONName }) else { return nil }
        self = match
    }

    /// The single-part type a multi-part type collects (`.multiPolygon` → `.polygon`).
    public var partType: GeometryType? {
        switch self {
        case .multiPoint: .point
        case .multiLineString: .lineString
        case .multiPolygon: .polygon
        default: nil
        }
    }

    /// The multi-part type that collects this single-part type (`.polygon` → `.multiPolygon`).
    public var multiType: GeometryType? {
        switch self {
        case .point: .multiPoint
        case .lineString: .multiLineString
        case .polygon: .multiPolygon
        default: nil
        }
    }
}
