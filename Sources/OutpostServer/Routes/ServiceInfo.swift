import Foundation
import OutpostCore
import OutpostStorage

/// The ArcGIS REST resource descriptions of a service and its layers, built from its schema.
enum ServiceInfo {
    static let currentVersion: JSONValue = 11.1

    static func spatialReference(_ sr: SpatialReference) -> JSONValue {
        sr.isWebMercator ? ["wkid": 102100, "latestWkid": 3857] : ["wkid": .integer(Int64(sr.wkid)), "latestWkid": .integer(Int64(sr.wkid))]
    }

    static func envelope(_ e: Envelope?, _ sr: SpatialReference) -> JSONValue {
        guard let e else { return ["xmin": .null, "ymin": .null, "xmax": .null, "ymax": .null, "spatialReference": spatialReference(sr)] }
        return ["xmin": .number(e.xmin), "ymin": .number(e.ymin), "xmax": .number(e.xmax), "ymax": .number(e.ymax), "spatialReference": spatialReference(sr)]
    }

    static func capabilities(_ schema: ServiceSchema) -> String { schema.capabilities.joined(separator: ",") }

    static func service(_ schema: ServiceSchema, fullExtent: Envelope?) -> JSONValue {
        let sync = schema.capabilities.contains("Sync")
        var info: [String: JSONValue] = [
            "currentVersion": currentVersion,
            "serviceDescription": .string(schema.description ?? ""),
            "hasVersionedData": false,
            "supportsDisconnectedEditing": .bool(sync),
            "syncEnabled": .bool(sync),
            "supportedQueryFormats": "JSON, geoJSON",
            "maxRecordCount": .integer(Int64(schema.maxRecordCount)),
            "capabilities": .string(capabilities(schema)),
            "spatialReference": spatialReference(schema.spatialReference),
            "fullExtent": envelope(fullExtent, schema.spatialReference),
            "initialExtent": envelope(fullExtent, schema.spatialReference),
            "units": schema.spatialReference.isGeographic ? "esriDecimalDegrees" : "esriMeters",
            "layers": .array(schema.layers.map { ["id": .integer(Int64($0.id)), "name": .string($0.name), "type": "Feature Layer", "geometryType": .string($0.geometryType?.esriName ?? "")] }),
            "tables": .array(schema.tables.map { ["id": .integer(Int64($0.id)), "name": .string($0.name), "type": "Table"] }),
            "schemaVersion": .integer(Int64(schema.schemaVersion)),
        ]
        if sync {
            info["syncCapabilities"] = [
                "supportsAsync": true, "supportsRegisteringExistingData": false, "supportsSyncDirectionControl": true,
                "supportsPerLayerSync": true, "supportsPerReplicaSync": true, "supportsSyncModelNone": true,
                "supportsRollbackOnFailure": true, "supportsAttachmentsSyncDirection": true,
                "supportsBiDirectionalSyncForServer": false,
            ]
        }
        return .object(info)
    }

    static func field(_ f: FieldDefinition, schema: ServiceSchema) -> JSONValue {
        var info: [String: JSONValue] = [
            "name": .string(f.name), "type": .string(f.type.esriName), "alias": .string(f.alias ?? f.name),
            "nullable": .bool(f.nullable), "editable": .bool(f.editable),
            "defaultValue": f.defaultValue ?? .null,
            "domain": .null,
        ]
        if let length = f.length { info["length"] = .integer(Int64(length)) }
        if f.type == .globalID || f.type == .guid { info["length"] = 38 }
        if let domain = schema.domain(for: f) {
            var d: [String: JSONValue] = ["type": .string(domain.type.rawValue), "name": .string(domain.name)]
            if let values = domain.codedValues {
                d["codedValues"] = .array(values.map { ["name": .string($0.name), "code": $0.code] })
            }
            if let range = domain.range { d["range"] = .array(range.map { .number($0) }) }
            info["domain"] = .object(d)
        }
        return .object(info)
    }

    static func layer(_ layer: LayerDefinition, schema: ServiceSchema, extent: Envelope?) -> JSONValue {
        let sr = layer.spatialReference ?? schema.spatialReference
        var info: [String: JSONValue] = [
            "currentVersion": currentVersion,
            "id": .integer(Int64(layer.id)),
            "name": .string(layer.name),
            "type": layer.isSpatial ? "Feature Layer" : "Table",
            "description": .string(layer.description ?? ""),
            "displayField": .string(layer.displayField ?? layer.objectIDField),
            "objectIdField": .string(layer.objectIDField),
            "globalIdField": .string(layer.globalIDField ?? ""),
            "fields": .array(layer.fields.map { field($0, schema: schema) }),
            "hasAttachments": .bool(layer.hasAttachments),
            "maxRecordCount": .integer(Int64(schema.maxRecordCount)),
            "supportsPagination": true,
            "supportsStatistics": false,
            "supportsAdvancedQueries": true,
            "advancedQueryCapabilities": [
                "supportsPagination": true, "supportsOrderBy": true, "supportsDistinct": false,
                "supportsQueryWithResultType": false, "supportsReturningQueryExtent": false, "supportsStatistics": false,
                "useStandardizedQueries": true,
            ],
            "capabilities": .string(capabilities(schema)),
            "supportedQueryFormats": "JSON, geoJSON",
            "supportsRollbackOnFailureParameter": true,
            "syncCanReturnChanges": .bool(layer.sync),
            "isDataVersioned": false,
            "hasZ": .bool(layer.hasZ),
            "hasM": .bool(layer.hasM),
        ]
        if layer.isSpatial {
            info["geometryType"] = .string(layer.geometryType?.esriName ?? "")
            info["extent"] = envelope(extent, sr)
            info["spatialReference"] = spatialReference(sr)
        }
        return .object(info)
    }
}
