import Foundation
import GRDB
import OutpostCore

/// A layer or table of a ``Geodatabase``: schema-checked edits and streaming queries.
///
/// Every batch of edits is validated in full before anything is written: one bad edit throws a
/// ``StorageError`` with code `.invalidEdit` and the batch writes nothing.
public struct FeatureTable: Sendable {
    /// The geodatabase the table is in.
    public let geodatabase: Geodatabase
    /// The layer's schema.
    public let definition: LayerDefinition
    let schema: ServiceSchema
    /// The schema checks every edit passes.
    public let validator: FeatureValidator

    init(geodatabase: Geodatabase, definition: LayerDefinition, schema: ServiceSchema) {
        self.geodatabase = geodatabase
        self.definition = definition
        self.schema = schema
        validator = FeatureValidator(layer: definition, schema: schema)
    }

    var rules: [String: FieldRules] { validator.rules }

    /// The table's name.
    public var name: String { definition.name }
    /// The spatial reference of the geometries, nil for a table.
    public var spatialReference: SpatialReference? { validator.spatialReference }
    /// The spatial reference id its geometry blobs carry (0 for none).
    public var srsID: Int32 { Int32(spatialReference?.wkid ?? 0) }

    /// Fields other than the OID, in table order.
    var attributeFields: [FieldDefinition] { validator.attributeFields }

    // MARK: - Reading rows

    /// Columns selected for `outFields` (nil = all), OID first, geometry last.
    func selectColumns(outFields: [String]?, returnGeometry: Bool) throws -> [FieldDefinition] {
        try definition.selectedFields(outFields: outFields)
    }

    func selectList(_ fields: [FieldDefinition], returnGeometry: Bool) -> String {
        var columns = fields.map { quoted($0.name) }
        if returnGeometry && definition.isSpatial { columns.append(quoted(definition.geometryColumn)) }
        return columns.joined(separator: ", ")
    }

    /// Decodes a row selected with `selectList(fields, …)`.
    func decodeFeature(_ row: Row, fields: [FieldDefinition], returnGeometry: Bool) throws -> Feature {
        var feature = Feature()
        // Sized once: grown insert by insert, the dictionary was allocated and rehashed three times.
        feature.attributes.reserveCapacity(fields.count)
        // Fields read in place: a copy of each definition per row retains and releases its strings.
        for index in fields.indices {
            let type = fields[index].type
            let value = try Self.decodeValue(row, index, type)
            switch type {
            case .oid: feature.objectID = value.integerValue
            case .globalID: feature.globalID = value.stringValue
            default: feature.attributes[fields[index].name] = value
            }
        }
        if returnGeometry && definition.isSpatial {
            feature.geometry = try decodeGeometry(row, fields.count)
        }
        return feature
    }

    func decodeGeometry(_ row: Row, _ index: Int) throws -> Geometry? {
        try row.withUnsafeData(atIndex: index) { data -> Geometry? in
            guard let data else { return nil }
            return try data.withUnsafeBytes { try decodeGeometry($0) }
        }
    }

    /// A stored GeoPackage geometry blob's geometry (nil for an empty one).
    func decodeGeometry(_ bytes: UnsafeRawBufferPointer) throws -> Geometry? {
        do {
            return try GeoPackageBinary.decode(buffer: bytes).geometry
        } catch {
            throw StorageError(.corrupt, "a geometry of \(name) cannot be decoded: \(error)", table: name, cause: error as? GeometryError)
        }
    }

    static func decodeValue(_ row: Row, _ index: Int, _ type: FieldType) throws -> FieldValue {
        decodeValue(row[index], type)
    }

    /// A stored value as a field of `type` holds it (another writer's forms read as they mean).
    static func decodeValue(_ dbValue: DatabaseValue, _ type: FieldType) -> FieldValue {
        switch dbValue.storage {
        case .null: .null
        case .int64(let i): FieldValue(stored: .integer(i), as: type)
        case .double(let d): FieldValue(stored: .real(d), as: type)
        case .string(let s): FieldValue(stored: .text(s), as: type)
        case .blob(let data): .blob([UInt8](data))
        }
    }
}
