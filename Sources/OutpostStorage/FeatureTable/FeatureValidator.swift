import Foundation
import OutpostCore

/// The schema checks of an edit, apart from any storage engine: field names, editability, types,
/// ranges, lengths, domains, global ids, geometry type and Z/M. The GeoPackage tables and the
/// PostgreSQL backend check edits with the same rules, so both refuse the same edits with the
/// same messages.
public struct FeatureValidator: Sendable {
    /// The layer whose rules the validator applies.
    public let layer: LayerDefinition
    /// The spatial reference of the layer's geometries, nil for a table.
    public let spatialReference: SpatialReference?
    let rules: [String: FieldRules]
    /// Fields other than the object id, in table order, and their indexes in the layer's fields.
    public let attributeFields: [FieldDefinition]
    private let attributeIndices: [Int]
    /// Each field's rules in ``LayerDefinition/fields`` order, and the fields by name: an edit
    /// finds its fields and their rules without lower-casing names or scanning the list.
    private let fieldRules: [FieldRules]
    private let lookup: FieldLookup

    /// The validator of `layer`, with the domains of `schema`.
    public init(layer: LayerDefinition, schema: ServiceSchema) {
        self.layer = layer
        spatialReference = layer.isSpatial ? (layer.spatialReference ?? schema.spatialReference) : nil
        var rules: [String: FieldRules] = [:]
        for field in layer.fields {
            rules[field.name.lowercased()] = FieldRules(field: field, domain: schema.domain(for: field))
        }
        self.rules = rules
        fieldRules = layer.fields.map { rules[$0.name.lowercased()]! }
        lookup = FieldLookup(layer.fields)
        attributeIndices = layer.fields.indices.filter { layer.fields[$0].type != .oid }
        attributeFields = attributeIndices.map { layer.fields[$0] }
    }

    /// A checked row: the columns to write, in order, with their values (global ids normalised,
    /// integers in floating-point fields as doubles). The geometry column, when written, is last
    /// and its value is `geometry`.
    public struct Row: Sendable {
        /// The columns written, in order.
        public var columns: [String] = []
        /// The value of each column.
        public var values: [FieldValue] = []
        /// The field type of each column (`.blob` for the geometry column).
        public var types: [FieldType] = []
        /// Each column's index in the layer's fields (-1 for the geometry column): the same
        /// columns as `columns`, for a key that is cheaper to hash than their names.
        public var fieldIndices: [Int] = []
        /// The edit's global id, normalised, when the layer has a global id field.
        public var globalID: String?
        /// The geometry, brought to the layer's type and layout.
        public var geometry: Geometry?
        /// Whether the geometry column is among `columns` (last).
        public var writesGeometry = false

        /// An empty row whose arrays hold `capacity` columns without growing (each growth is a
        /// new buffer for each of the four).
        init(capacity: Int) {
            columns.reserveCapacity(capacity)
            values.reserveCapacity(capacity)
            types.reserveCapacity(capacity)
            fieldIndices.reserveCapacity(capacity)
        }
    }

    /// A ``StorageError`` (`invalidEdit`) for edit `index` of a request, naming the layer and `field`.
    public func error(_ index: Int, _ field: String?, _ message: String) -> StorageError {
        StorageError(.invalidEdit, message, table: layer.name, field: field, editIndex: index)
    }

    /// The geometries of `features` projected from `source` into the layer's spatial reference.
    public func projected(_ features: [Feature], from source: SpatialReference?) throws -> [Feature] {
        guard let source, let target = spatialReference, source != target else { return features }
        return try features.enumerated().map { index, feature in
            var f = feature
            do {
                f.geometry = try f.geometry.map { try WebMercator.convert($0, from: source, to: target) }
            } catch let error as GeometryError {
                throw StorageError(
                    .invalidEdit, "the geometry is in \(source) but \(layer.name) stores \(target): \(error.message)",
                    table: layer.name, field: layer.geometryColumn, editIndex: index, cause: error)
            }
            return f
        }
    }

    /// Every column of a new feature: given values, else field defaults, else null; a new global
    /// id unless one is supplied.
    public func add(_ feature: Feature, index: Int) throws -> Row {
        var row = Row(capacity: attributeIndices.count + (layer.isSpatial ? 1 : 0))
        let given = try resolveAttributes(feature, index: index)
        for i in attributeIndices {
            // Read in place: a copy of the field definition per column retains and releases its strings.
            let type = layer.fields[i].type
            if type == .globalID {
                let gid: String
                if let supplied = feature.globalID {
                    guard let normalized = GlobalID.normalized(supplied) else {
                        throw error(index, layer.fields[i].name, "\"\(shortened(supplied))\" is not a GUID")
                    }
                    gid = normalized
                } else {
                    gid = GlobalID.make()
                }
                row.globalID = gid
                row.columns.append(layer.fields[i].name)
                row.values.append(.string(gid))
                row.types.append(type)
                row.fieldIndices.append(i)
                continue
            }
            var value = given[i] ?? .null
            if given[i] == nil, let def = layer.fields[i].defaultValue {
                value = (try? FieldValue(json: def, type: type)) ?? .null
            }
            try check(value, i, index)
            row.columns.append(layer.fields[i].name)
            row.values.append(normalized(value, type))
            row.types.append(type)
            row.fieldIndices.append(i)
        }
        if layer.isSpatial {
            row.geometry = try checkGeometry(feature.geometry, index: index)
            row.columns.append(layer.geometryColumn)
            row.values.append(.null)
            row.types.append(.blob)
            row.fieldIndices.append(-1)
            row.writesGeometry = true
        } else if feature.geometry != nil {
            throw error(index, nil, "\(layer.name) is a table without geometry")
        }
        return row
    }

    /// The columns an update sets: the attributes given and the geometry when one is given.
    public func update(_ feature: Feature, index: Int) throws -> Row {
        var row = Row(capacity: feature.attributes.count + (feature.geometry == nil ? 0 : 1))
        let given = try resolveAttributes(feature, index: index)
        for i in attributeIndices {
            guard let value = given[i] else { continue }
            try check(value, i, index)
            let type = layer.fields[i].type
            row.columns.append(layer.fields[i].name)
            row.values.append(normalized(value, type))
            row.types.append(type)
            row.fieldIndices.append(i)
        }
        if let geometry = feature.geometry {
            guard layer.isSpatial else { throw error(index, nil, "\(layer.name) is a table without geometry") }
            row.geometry = try checkGeometry(geometry, index: index)
            row.columns.append(layer.geometryColumn)
            row.values.append(.null)
            row.types.append(.blob)
            row.fieldIndices.append(-1)
            row.writesGeometry = true
        }
        return row
    }

    /// The normalised global id an update or delete names, checked.
    public func globalID(of feature: Feature, index: Int) throws -> String {
        guard let gidField = layer.globalIDField, let supplied = feature.globalID else {
            throw error(index, nil, "an update or delete needs the feature's object id\(layer.globalIDField == nil ? "" : " or global id")")
        }
        guard let gid = GlobalID.normalized(supplied) else {
            throw error(index, gidField, "\"\(shortened(supplied))\" is not a GUID")
        }
        return gid
    }

    /// nil when `value` may go in `field`, else what is wrong.
    public func problem(with value: FieldValue, in field: FieldDefinition) -> String? {
        rules[field.name.lowercased()]?.problem(with: value)
    }

    /// The attributes by field index (nil: not given), rejecting unknown and non-editable fields.
    /// An array, not a dictionary by name: the columns are then read without hashing their names.
    private func resolveAttributes(_ feature: Feature, index: Int) throws -> [FieldValue?] {
        var out = [FieldValue?](repeating: nil, count: layer.fields.count)
        for (key, value) in feature.attributes {
            guard let fieldIndex = lookup.index(of: key) else {
                throw error(index, key, "\(layer.name) has no field \"\(shortened(key))\"")
            }
            let type = layer.fields[fieldIndex].type
            if type == .oid || type == .globalID { continue }
            guard layer.fields[fieldIndex].editable else {
                let name = layer.fields[fieldIndex].name
                throw error(index, name, "field \(name) is not editable")
            }
            out[fieldIndex] = value
        }
        return out
    }

    /// Checks `value` against the rules of the layer's field number `fieldIndex`.
    private func check(_ value: FieldValue, _ fieldIndex: Int, _ index: Int) throws {
        if let problem = fieldRules[fieldIndex].problem(with: value) {
            let name = layer.fields[fieldIndex].name
            throw error(index, name, "\(name): \(problem)")
        }
    }

    private func normalized(_ value: FieldValue, _ type: FieldType) -> FieldValue {
        switch value {
        case .integer(let i) where type == .double || type == .single: .double(Double(i))
        case .string(let s) where type == .globalID || type == .guid: .string(GlobalID.normalized(s) ?? s)
        default: value
        }
    }

    /// Checks type and Z/M against the layer, promoting single-part geometries to the layer's
    /// multi-part type.
    public func checkGeometry(_ geometry: Geometry?, index: Int) throws -> Geometry? {
        guard let geometry, let layerType = layer.geometryType else { return nil }
        var g = geometry
        if !layerType.accepts(g.type) {
            guard let promoted = g.promoted(to: layerType.type) else {
                throw error(
                    index, layer.geometryColumn,
                    "a \(g.type.geoJSONName) cannot go in a \(layerType.acceptsAny ? "Geometry" : layerType.type.geoJSONName) layer")
            }
            g = promoted
        }
        if g.layout != layer.layout {
            if g.isEmpty {
                g = Geometry.empty(g.type, layout: layer.layout)
            } else {
                throw error(
                    index, layer.geometryColumn,
                    "the geometry has \(g.layout.rawValue.uppercased()) coordinates but the layer stores \(layer.layout.rawValue.uppercased())")
            }
        }
        return g
    }
}
