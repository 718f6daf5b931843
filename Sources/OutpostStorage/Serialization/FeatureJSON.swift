import Foundation
import OutpostCore

/// Features as the ArcGIS REST API writes them (`{"attributes": {…}, "geometry": {…}}`) and as
/// GeoJSON Features: the shapes a feature service sends and receives.
public enum FeatureJSON {
    /// Decodes an ArcGIS feature for `layer`. The OID and GlobalID attributes become the feature's
    /// ids; dates are epoch milliseconds; the geometry is Esri JSON.
    /// - Throws: ``StorageError/Code/invalidEdit`` for unknown fields, wrong value types or a bad geometry.
    public static func decodeEsri(_ json: JSONValue, layer: LayerDefinition) throws -> Feature {
        guard let object = json.objectValue else {
            throw StorageError(.invalidEdit, "a feature must be a JSON object with \"attributes\" and \"geometry\"", table: layer.name)
        }
        var feature = Feature()
        if let attributes = object["attributes"], !attributes.isNull {
            guard let map = attributes.objectValue else {
                throw StorageError(.invalidEdit, "\"attributes\" must be an object", table: layer.name)
            }
            for (key, value) in map {
                guard let field = layer.field(named: key) else {
                    throw StorageError(.invalidEdit, "\(layer.name) has no field \"\(shortened(key))\"", table: layer.name, field: key)
                }
                switch field.type {
                case .oid:
                    guard value.isNull || value.integerValue != nil else {
                        throw StorageError(.invalidEdit, "\(field.name) must be an integer", table: layer.name, field: field.name)
                    }
                    feature.objectID = value.integerValue
                case .globalID:
                    if let s = value.stringValue { feature.globalID = s } else if !value.isNull {
                        throw StorageError(.invalidEdit, "\(field.name) must be a GUID string", table: layer.name, field: field.name)
                    }
                default:
                    do {
                        feature.attributes[field.name] = try FieldValue(json: value, type: field.type)
                    } catch var error as StorageError {
                        error.table = layer.name
                        error.field = field.name
                        throw error
                    }
                }
            }
        }
        if let geometry = object["geometry"], !geometry.isNull {
            guard layer.isSpatial else {
                throw StorageError(.invalidEdit, "\(layer.name) is a table without geometry", table: layer.name)
            }
            do {
                feature.geometry = try EsriJSON.decodeGeometry(geometry)
            } catch let error as GeometryError {
                throw StorageError(.invalidEdit, "invalid geometry: \(error)", table: layer.name, field: layer.geometryColumn, cause: error)
            }
        }
        return feature
    }

    /// Writes `{"attributes":{…},"geometry":{…}}` with `fields` in order (the OID and GlobalID
    /// come from the feature's ids).
    public static func writeEsri(
        _ feature: Feature, fields: [FieldDefinition], includeGeometry: Bool, to out: inout String
    ) throws {
        out += "{\"attributes\":{"
        writeAttributes(feature, fields: fields, to: &out)
        out += "}"
        if includeGeometry {
            out += ",\"geometry\":"
            if let g = feature.geometry { try EsriJSON.write(g, to: &out) } else { out += "null" }
        }
        out += "}"
    }

    /// Writes a GeoJSON Feature: `id` is the object id, properties are the attributes (dates as
    /// ISO 8601 text, which GeoJSON readers expect).
    public static func writeGeoJSON(
        _ feature: Feature, fields: [FieldDefinition], includeGeometry: Bool, to out: inout String
    ) {
        out += "{\"type\":\"Feature\""
        if let id = feature.objectID { out += ",\"id\":\(id)" }
        out += ",\"geometry\":"
        if includeGeometry, let g = feature.geometry {
            GeoJSON.write(g, to: &out)
        } else {
            out += "null"
        }
        out += ",\"properties\":{"
        writeAttributes(feature, fields: fields, dateAsText: true, to: &out)
        out += "}}"
    }

    static func writeAttributes(_ feature: Feature, fields: [FieldDefinition], dateAsText: Bool = false, to out: inout String) {
        var first = true
        for field in fields {
            let value: JSONValue
            switch field.type {
            case .oid: value = feature.objectID.map { .integer($0) } ?? .null
            case .globalID: value = feature.globalID.map { .string($0) } ?? .null
            default:
                let v = feature.attributes[field.name] ?? .null
                if dateAsText, case .date(let d) = v {
                    let text = GeoPackageDate.format(d)
                    value = .string(field.type == .dateOnly ? String(text.prefix(10)) : text)
                } else {
                    value = v.jsonValue
                }
            }
            if !first { out += "," }
            first = false
            JSONValue.writeString(field.name, to: &out)
            out += ":"
            value.write(to: &out)
        }
    }
}
