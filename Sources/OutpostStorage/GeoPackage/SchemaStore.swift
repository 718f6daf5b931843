import Foundation
import GRDB
import OutpostCore

/// Reads the schema of an open GeoPackage: Outpost's own from `outpost_schema`, or one derived
/// from `gpkg_contents`, `gpkg_geometry_columns` and `PRAGMA table_info` for files written by
/// other tools.
enum SchemaStore {
    static func load(_ db: Database, fileStem: String) throws -> (ServiceSchema, managed: Bool) {
        for required in ["gpkg_contents", "gpkg_spatial_ref_sys"] {
            guard try db.tableExists(required) else {
                throw StorageError(.corrupt, "the GeoPackage has no \(required) table (GeoPackage r10, r13)")
            }
        }
        if try db.tableExists("outpost_schema") {
            guard let json = try String.fetchOne(db, sql: "SELECT schema_json FROM outpost_schema WHERE id = 1") else {
                throw StorageError(.corrupt, "outpost_schema is empty")
            }
            do {
                return (try ServiceSchema.decode(Data(json.utf8)), true)
            } catch let error as StorageError {
                throw StorageError(.corrupt, "the stored service schema is invalid: \(error.message)")
            }
        }
        return (try derive(db, name: fileStem), false)
    }

    static func save(_ schema: ServiceSchema, _ db: Database) throws {
        let json = String(decoding: try schema.encoded(), as: UTF8.self)
        try db.execute(
            sql: """
                INSERT INTO outpost_schema (id, format_version, schema_version, schema_json) VALUES (1, ?, ?, ?)
                ON CONFLICT (id) DO UPDATE SET format_version = excluded.format_version,
                  schema_version = excluded.schema_version, schema_json = excluded.schema_json
                """,
            arguments: [ServiceSchema.currentFormatVersion, schema.schemaVersion, json])
    }

    /// A schema for a GeoPackage written by another tool. Layers are not synced (no change
    /// capture): they read, query and edit like any layer.
    static func derive(_ db: Database, name: String) throws -> ServiceSchema {
        let contents = try Row.fetchAll(
            db, sql: "SELECT table_name, data_type, identifier, description, srs_id FROM gpkg_contents ORDER BY rowid")
        let geometryColumns: [String: Row] =
            try db.tableExists("gpkg_geometry_columns")
            ? Dictionary(
                try Row.fetchAll(db, sql: "SELECT table_name, column_name, geometry_type_name, srs_id, z, m FROM gpkg_geometry_columns")
                    .map { (($0["table_name"] as String).lowercased(), $0) }, uniquingKeysWith: { a, _ in a })
            : [:]
        var layers: [LayerDefinition] = [], tables: [LayerDefinition] = []
        var nextID = 0
        for row in contents {
            let tableName: String = row["table_name"]
            let dataType: String = row["data_type"]
            guard dataType == "features" || dataType == "attributes" else { continue }
            guard try db.tableExists(tableName) || (try db.viewExists(tableName)) else {
                throw StorageError(.corrupt, "gpkg_contents lists \"\(tableName)\" but there is no such table (r14)")
            }
            let geometry = geometryColumns[tableName.lowercased()]
            if dataType == "features", geometry == nil {
                throw StorageError(.corrupt, "features table \"\(tableName)\" has no gpkg_geometry_columns row (r22)")
            }
            var layer = try deriveLayer(db, table: tableName, id: nextID, geometry: geometry)
            layer.title = row["identifier"]
            nextID += 1
            if layer.isSpatial { layers.append(layer) } else { tables.append(layer) }
        }
        let srsIDs = Set(layers.compactMap { $0.spatialReference?.wkid })
        var schema = ServiceSchema(
            name: name.isEmpty ? "geopackage" : name, layers: layers, tables: tables,
            spatialReference: srsIDs.count == 1 ? SpatialReference(wkid: srsIDs.first!) : .wgs84,
            capabilities: ["Query", "Create", "Update", "Delete"])
        schema.description = "derived from the GeoPackage's own tables"
        return schema
    }

    private static func deriveLayer(_ db: Database, table: String, id: Int, geometry: Row?) throws -> LayerDefinition {
        let columns = try Row.fetchAll(db, sql: "PRAGMA table_info(\(quoted(table)))")
        let geometryColumn: String? = geometry?["column_name"]
        var fields: [FieldDefinition] = []
        var sawPrimaryKey = false
        for column in columns {
            let name: String = column["name"]
            let declared = (column["type"] as String? ?? "").uppercased()
            let notNull: Bool = column["notnull"]
            let primaryKey: Int = column["pk"]
            if name.lowercased() == geometryColumn?.lowercased() { continue }
            if primaryKey > 0, declared == "INTEGER", !sawPrimaryKey {
                sawPrimaryKey = true
                fields.append(FieldDefinition(name: name, type: .oid, nullable: false, editable: false))
                continue
            }
            let (type, length) = fieldType(declared: declared)
            fields.append(FieldDefinition(name: name, type: type, length: length, nullable: !notNull))
        }
        guard sawPrimaryKey else {
            throw StorageError(.unsupportedContent, "table \"\(table)\" has no INTEGER PRIMARY KEY column (GeoPackage r29/r119)", table: table)
        }
        var geometryType: LayerGeometryType?
        var spatialReference: SpatialReference?
        var hasZ = false, hasM = false
        if let geometry {
            let typeName: String = geometry["geometry_type_name"]
            guard let t = LayerGeometryType(name: typeName.uppercased()) else {
                throw StorageError(
                    .unsupportedContent,
                    "geometry type \(typeName) is not supported; Outpost reads POINT, LINESTRING, POLYGON, their MULTI forms, GEOMETRYCOLLECTION and GEOMETRY (convert curves to linear geometries, e.g. with ogr2ogr -nlt CONVERT_TO_LINEAR)",
                    table: table)
            }
            geometryType = t
            let srs: Int = geometry["srs_id"]
            spatialReference = SpatialReference(wkid: srs)
            hasZ = (geometry["z"] as Int) == 1
            hasM = (geometry["m"] as Int) == 1
        }
        var layer = LayerDefinition(
            id: id, name: table, geometryType: nil, fields: fields, hasZ: hasZ, hasM: hasM,
            spatialReference: spatialReference, sync: false)
        layer.geometryType = geometryType
        // Other writers name it "geometry", "shape", …: remember the real name.
        layer.geometryColumnName = geometryColumn == LayerDefinition.defaultGeometryColumn ? nil : geometryColumn
        return layer
    }

    /// GeoPackage r5 column types (and GDAL's spellings) to ArcGIS field types.
    static func fieldType(declared: String) -> (FieldType, Int?) {
        if declared.hasPrefix("TEXT") || declared.hasPrefix("VARCHAR") || declared.hasPrefix("CHAR") {
            let digits = declared.drop { !$0.isNumber }.prefix { $0.isNumber }
            return (.string, Int(digits))
        }
        switch declared {
        case "INTEGER", "INT", "BIGINT": return (.bigInteger, nil)
        case "MEDIUMINT": return (.integer, nil)
        case "SMALLINT", "TINYINT", "BOOLEAN": return (.smallInteger, nil)
        case "FLOAT": return (.single, nil)
        case "DOUBLE", "REAL": return (.double, nil)
        case "DATE": return (.dateOnly, nil)
        case "DATETIME": return (.date, nil)
        case "BLOB": return (.blob, nil)
        default: return declared.hasPrefix("BLOB") ? (.blob, nil) : (.string, nil)
        }
    }
}
