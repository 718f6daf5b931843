import OutpostCore

/// The ArcGIS field types a service schema uses, with the GeoPackage column type each maps to.
public enum FieldType: String, Sendable, Hashable, CaseIterable, Codable {
    /// The object id, an integer the geodatabase assigns.
    case oid = "OID"
    /// The global id, a GUID that names the row on every copy.
    case globalID = "GlobalID"
    /// Text, up to the field's length.
    case string = "String"
    /// A 16-bit integer.
    case smallInteger = "SmallInteger"
    /// A 32-bit integer.
    case integer = "Integer"
    /// A 64-bit integer.
    case bigInteger = "BigInteger"
    /// A double-precision number.
    case double = "Double"
    /// A single-precision number.
    case single = "Single"
    /// A date and time.
    case date = "Date"
    /// A day without a time.
    case dateOnly = "DateOnly"
    /// A GUID that is not the global id.
    case guid = "GUID"
    /// Bytes.
    case blob = "Blob"

    /// `esriFieldTypeOID`, `esriFieldTypeString`, … as the ArcGIS REST API spells them.
    public var esriName: String {
        switch self {
        case .oid: "esriFieldTypeOID"
        case .globalID: "esriFieldTypeGlobalID"
        case .string: "esriFieldTypeString"
        case .smallInteger: "esriFieldTypeSmallInteger"
        case .integer: "esriFieldTypeInteger"
        case .bigInteger: "esriFieldTypeBigInteger"
        case .double: "esriFieldTypeDouble"
        case .single: "esriFieldTypeSingle"
        case .date: "esriFieldTypeDate"
        case .dateOnly: "esriFieldTypeDateOnly"
        case .guid: "esriFieldTypeGUID"
        case .blob: "esriFieldTypeBlob"
        }
    }

    /// Accepts the short name (`String`) or the ArcGIS name (`esriFieldTypeString`).
    public init?(name: String) {
        if let t = FieldType(rawValue: name) ?? FieldType.allCases.first(where: { $0.esriName == name }) {
            self = t
        } else {
            return nil
        }
    }

    public init(from decoder: any Decoder) throws {
        let name = try decoder.singleValueContainer().decode(String.self)
        guard let t = FieldType(name: name) else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: "unknown field type \"\(name)\""))
        }
        self = t
    }

    /// The declared column type, spelled as GeoPackage 1.3 §1.1.1.1.3 (r5) requires (upper case).
    public func columnType(length: Int?) -> String {
        switch self {
        case .oid: "INTEGER"
        case .globalID, .guid: "TEXT(38)"
        case .string: length.map { "TEXT(\($0))" } ?? "TEXT"
        case .smallInteger: "SMALLINT"
        case .integer: "MEDIUMINT"
        case .bigInteger: "INTEGER"
        case .double: "REAL"
        case .single: "FLOAT"
        case .date: "DATETIME"
        case .dateOnly: "DATE"
        case .blob: "BLOB"
        }
    }

    // Switches rather than `[…].contains(self)`: these are asked for every value of every row a
    // layer reads or writes, and an array literal is an allocation per call in a debug build.

    /// Whether values are numbers.
    public var isNumeric: Bool {
        switch self {
        case .oid, .smallInteger, .integer, .bigInteger, .double, .single: true
        default: false
        }
    }
    /// Whether values are integers.
    public var isInteger: Bool {
        switch self {
        case .oid, .smallInteger, .integer, .bigInteger: true
        default: false
        }
    }
    /// Whether values are dates.
    public var isDate: Bool { self == .date || self == .dateOnly }
    /// Whether values are text.
    public var isText: Bool {
        switch self {
        case .string, .globalID, .guid: true
        default: false
        }
    }
}

/// A layer's geometry type as a service schema names it: an ArcGIS name
/// (`esriGeometryPolyline`) or an OGC name (`LineString`).
///
/// ArcGIS polylines and polygons may have several parts, so `esriGeometryPolyline` and
/// `esriGeometryPolygon` store as MULTILINESTRING and MULTIPOLYGON; single-part inputs are promoted.
public struct LayerGeometryType: Hashable, Sendable, Codable {
    /// The declared type; for a generic column, `.geometryCollection` with ``acceptsAny`` set.
    public var type: GeometryType
    /// A GeoPackage `GEOMETRY` column (any type), as other writers create for mixed layers.
    /// Service schemas cannot declare it: ArcGIS layers have one geometry type.
    public var acceptsAny: Bool

    /// A column of exactly `type`.
    public init(_ type: GeometryType) {
        self.type = type
        self.acceptsAny = false
    }

    /// A generic `GEOMETRY` column.
    public static let any: LayerGeometryType = {
        var t = LayerGeometryType(.geometryCollection)
        t.acceptsAny = true
        return t
    }()

    /// The type a GeoPackage geometry type name stands for (`POINT`, `MULTIPOLYGON`, `GEOMETRY`, …); nil for an
    /// unknown name.
    public init?(name: String) {
        acceptsAny = false
        if name == "Geometry" || name == "GEOMETRY" {
            self = .any
            return
        }
        switch name {
        case "esriGeometryPoint": type = .point
        case "esriGeometryMultipoint": type = .multiPoint
        case "esriGeometryPolyline": type = .multiLineString
        case "esriGeometryPolygon": type = .multiPolygon
        default:
            guard let t = GeometryType(geoJSONName: name) ?? GeometryType(geoPackageName: name),
                t != .geometryCollection
            else { return nil }
            type = t
        }
    }

    public init(from decoder: any Decoder) throws {
        let name = try decoder.singleValueContainer().decode(String.self)
        guard let t = LayerGeometryType(name: name) else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: "unknown or unsupported geometry type \"\(name)\""))
        }
        self = t
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(acceptsAny ? "Geometry" : type.geoJSONName)
    }

    /// The ArcGIS REST name for layer info.
    public var esriName: String {
        acceptsAny ? "esriGeometryAny" : (EsriJSON.geometryTypeName(for: type) ?? "esriGeometryNull")
    }

    /// The `gpkg_geometry_columns.geometry_type_name` and declared column type.
    public var geoPackageName: String { acceptsAny ? "GEOMETRY" : type.geoPackageName }

    /// Whether a geometry of `other` may be stored: the same type, or any type in a generic column.
    public func accepts(_ other: GeometryType) -> Bool { acceptsAny || other == type }
}
