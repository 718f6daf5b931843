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
        try out.appendWritten { try writeEsri(feature, fields: fields, includeGeometry: includeGeometry, to: &$0) }
    }

    /// ``writeEsri(_:fields:includeGeometry:to:)-(_,_,_,String)`` as UTF-8 bytes: what a streamed
    /// query writes.
    public static func writeEsri(
        _ feature: Feature, fields: [FieldDefinition], includeGeometry: Bool, to out: inout [UInt8]
    ) throws {
        out.append(utf8: "{\"attributes\":{")
        writeAttributes(feature, fields: fields, to: &out)
        out.append(utf8: "}")
        if includeGeometry {
            out.append(utf8: ",\"geometry\":")
            if let g = feature.geometry { try EsriJSON.write(g, to: &out) } else { out.append(utf8: "null") }
        }
        out.append(utf8: "}")
    }

    /// Writes a GeoJSON Feature: `id` is the object id, properties are the attributes (dates as
    /// ISO 8601 text, which GeoJSON readers expect).
    public static func writeGeoJSON(
        _ feature: Feature, fields: [FieldDefinition], includeGeometry: Bool, to out: inout String
    ) {
        out.appendWritten { writeGeoJSON(feature, fields: fields, includeGeometry: includeGeometry, to: &$0) }
    }

    /// ``writeGeoJSON(_:fields:includeGeometry:to:)-(_,_,_,String)`` as UTF-8 bytes.
    public static func writeGeoJSON(
        _ feature: Feature, fields: [FieldDefinition], includeGeometry: Bool, to out: inout [UInt8]
    ) {
        out.append(utf8: "{\"type\":\"Feature\"")
        if let id = feature.objectID {
            out.append(utf8: ",\"id\":")
            JSONValue.writeInteger(id, to: &out)
        }
        out.append(utf8: ",\"geometry\":")
        if includeGeometry, let g = feature.geometry {
            GeoJSON.write(g, to: &out)
        } else {
            out.append(utf8: "null")
        }
        out.append(utf8: ",\"properties\":{")
        writeAttributes(feature, fields: fields, dateAsText: true, to: &out)
        out.append(utf8: "}}")
    }

    /// `"name":value` for each field, straight from the stored values (no JSON value built).
    static func writeAttributes(_ feature: Feature, fields: [FieldDefinition], dateAsText: Bool = false, to out: inout [UInt8]) {
        for (i, field) in fields.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            JSONValue.writeString(field.name, to: &out)
            out.append(UInt8(ascii: ":"))
            switch field.type {
            case .oid:
                if let id = feature.objectID { JSONValue.writeInteger(id, to: &out) } else { out.append(utf8: "null") }
            case .globalID:
                if let id = feature.globalID { JSONValue.writeString(id, to: &out) } else { out.append(utf8: "null") }
            default:
                switch feature.attributes[field.name] ?? .null {
                case .null: out.append(utf8: "null")
                case .integer(let i): JSONValue.writeInteger(i, to: &out)
                case .double(let d): JSONValue.writeNumber(d, to: &out)
                case .string(let s): JSONValue.writeString(s, to: &out)
                case .date(let d) where dateAsText:
                    let text = GeoPackageDate.format(d)
                    JSONValue.writeString(field.type == .dateOnly ? String(text.prefix(10)) : text, to: &out)
                case let value: value.jsonValue.write(to: &out)
                }
            }
        }
    }
}
