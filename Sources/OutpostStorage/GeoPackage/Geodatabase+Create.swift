import Foundation
import GRDB
import OutpostCore

extension Geodatabase {
    /// Creates a new geodatabase file from a service schema: a GeoPackage 1.3 with one table per
    /// layer, their R-tree indexes, the attachments media table when a layer has attachments, and
    /// change capture on synced layers.
    ///
    /// The file is built beside `url` under a temporary name and renamed into place only when
    /// complete, so a crash never leaves a half-made geodatabase at `url`.
    ///
    /// - Parameter populate: fills the new file before it appears (an initial import). It runs in
    ///   one transaction on the temporary file with an in-memory rollback journal and no fsync per
    ///   commit: the rename, not a journal, is what makes creation atomic, so the data is written
    ///   once instead of through the WAL and again at checkpoint. If it throws, no file appears.
    /// - Throws: ``StorageError`` `.invalidSchema`, `.alreadyExists` (unless `overwrite`), `.io`, or
    ///   what `populate` throws.
    ///
    /// - Parameter changeCapture: install the triggers that record local edits for upload (true for
    ///   client geodatabases; a service's own store logs changes itself and passes false).
    /// - Parameter url: where the GeoPackage is created.
    /// - Parameter schema: the layers, fields, domains and spatial references to create.
    /// - Parameter overwrite: replace a file already at `url` (refused otherwise).
    public static func create(
        at url: URL, schema: ServiceSchema, overwrite: Bool = false, changeCapture: Bool = true,
        populate: ((GeodatabaseConnection) throws -> Void)? = nil
    ) throws -> Geodatabase {
        let schema = try schema.normalized()
        guard url.pathExtension.lowercased() == "gpkg" else {
            throw StorageError(.invalidSchema, "a GeoPackage file name ends in .gpkg (GeoPackage r3): \(url.lastPathComponent)")
        }
        let fm = FileManager.default
        if fm.fileExists(atPath: url.path), !overwrite {
            throw StorageError(.alreadyExists, "\(url.path) already exists")
        }
        let partial = url.deletingLastPathComponent()
            .appendingPathComponent(".\(url.lastPathComponent).partial-\(UUID().uuidString.prefix(8))")
        defer { removeFiles(at: partial) }
        do {
            let queue = try DatabaseQueue(path: partial.path, configuration: configuration(readOnly: false))
            try queue.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA application_id = \(GeoPackageDDL.applicationID)")
                try db.execute(sql: "PRAGMA user_version = \(GeoPackageDDL.userVersion)")
                try db.execute(sql: "PRAGMA journal_mode = MEMORY")
                try db.execute(sql: "PRAGMA synchronous = OFF")
                try db.inTransaction {
                    try GeoPackageWriter.createStructure(db, schema: schema, changeCapture: changeCapture)
                    return .commit
                }
            }
            if let populate {
                let building = Geodatabase(url: partial, writer: queue, schema: schema, isReadOnly: false, isManaged: true)
                try building.write { conn in try populate(conn) }
            }
            try queue.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA journal_mode = WAL")
            }
            try queue.close()
        } catch {
            throw StorageError.from(error, "cannot create \(url.lastPathComponent)")
        }
        do {
            // Durable before it becomes visible.
            let handle = try FileHandle(forUpdating: partial)
            try handle.synchronize()
            try handle.close()
            removeFiles(at: url)
            try fm.moveItem(at: partial, to: url)
        } catch {
            throw StorageError(.io, "cannot move the new geodatabase into place at \(url.path): \(error.localizedDescription)")
        }
        return try open(at: url)
    }

    /// Deletes a geodatabase file and its SQLite companions (`-wal`, `-shm`, `-journal`). Close
    /// the geodatabase first.
    public static func removeFiles(at url: URL) {
        for suffix in ["", "-wal", "-shm", "-journal"] {
            try? FileManager.default.removeItem(atPath: url.path + suffix)
        }
    }
}

/// Writes GeoPackage structures for a schema.
enum GeoPackageWriter {
    static func createStructure(_ db: Database, schema: ServiceSchema, changeCapture: Bool) throws {
        try db.execute(sql: GeoPackageDDL.coreTables)
        for row in SpatialReferenceSystems.all {
            try db.execute(
                sql: """
                    INSERT INTO gpkg_spatial_ref_sys (srs_name, srs_id, organization, organization_coordsys_id, definition, description)
                    VALUES (?, ?, ?, ?, ?, ?)
                    """,
                arguments: [row.name, row.id, row.organization, row.organizationID, row.definition, row.description])
        }
        // GDAL lists tables missing from gpkg_contents (our outpost_* tables) as layers unless the
        // file has an attributes table or this row (docs/geopackage-extension.md): the media
        // table is made only when a layer has attachments.
        try registerExtension(
            db, table: nil, column: nil, name: GeoPackageDDL.aspatialExtensionName,
            definition: GeoPackageDDL.aspatialExtensionDefinition, scope: "read-write")
        try db.execute(sql: ChangeCapture.tables)
        if changeCapture { try ReplicaTables.install(db) }
        for table in ChangeCapture.ownTables {
            try registerExtension(
                db, table: table, column: nil, name: ChangeCapture.extensionName,
                definition: ChangeCapture.extensionDefinition, scope: "write-only")
        }
        for layer in schema.allLayers {
            try createLayer(db, layer, schema: schema, changeCapture: changeCapture)
        }
        try SchemaStore.save(schema, db)
    }

    /// Creates one layer's table with its GeoPackage registrations, index, capture and attachments.
    static func createLayer(_ db: Database, _ layer: LayerDefinition, schema: ServiceSchema, changeCapture: Bool) throws {
        try db.execute(sql: GeoPackageDDL.createTable(layer, schema: schema))
        if let index = GeoPackageDDL.globalIDIndex(layer) { try db.execute(sql: index) }
        let srs = (layer.spatialReference ?? schema.spatialReference).wkid
        try db.execute(
            sql: """
                INSERT INTO gpkg_contents (table_name, data_type, identifier, description, srs_id)
                VALUES (?, ?, ?, ?, ?)
                """,
            arguments: [layer.name, layer.isSpatial ? "features" : "attributes", layer.title ?? layer.name, layer.description ?? "", layer.isSpatial ? srs : 0])
        if let geometry = layer.geometryType {
            try db.execute(
                sql: "INSERT INTO gpkg_geometry_columns (table_name, column_name, geometry_type_name, srs_id, z, m) VALUES (?, ?, ?, ?, ?, ?)",
                arguments: [layer.name, layer.geometryColumn, geometry.geoPackageName, srs, layer.hasZ ? 1 : 0, layer.hasM ? 1 : 0])
            for statement in GeoPackageDDL.spatialIndex(table: layer.name, geometry: layer.geometryColumn, primaryKey: layer.objectIDField) {
                try db.execute(sql: statement)
            }
            try registerExtension(
                db, table: layer.name, column: layer.geometryColumn, name: "gpkg_rtree_index",
                definition: "http://www.geopackage.org/spec120/#extension_rtree", scope: "write-only")
        }
        let triggers = layer.sync && changeCapture ? ChangeCapture.triggers(for: layer) : ChangeCapture.globalIDFillTrigger(for: layer, always: !changeCapture)
        for trigger in triggers {
            try db.execute(sql: trigger)
        }
        if layer.hasAttachments {
            try addAttachmentRelation(db, layer)
        }
    }

    /// Gives a layer its attachments: the shared media table (made with the first layer that has
    /// attachments), the relation and the layer's mapping table.
    static func addAttachmentRelation(_ db: Database, _ layer: LayerDefinition) throws {
        if try !db.tableExists(MediaTable.name) {
            try db.execute(sql: MediaTable.create)
            try db.execute(
                sql: """
                    INSERT INTO gpkg_contents (table_name, data_type, identifier, description, srs_id)
                    VALUES (?, 'attributes', ?, 'Attachments of all layers (OGC Related Tables Extension media table)', 0)
                    """,
                arguments: [MediaTable.name, MediaTable.name])
        }
        if try !db.tableExists("gpkgext_relations") {
            try db.execute(sql: MediaTable.relationsTable)
            try registerExtension(
                db, table: "gpkgext_relations", column: nil, name: MediaTable.extensionName,
                definition: MediaTable.extensionDefinition, scope: "read-write")
        }
        let mapping = MediaTable.mappingTableName(for: layer.name)
        for statement in MediaTable.createMapping(for: layer) {
            try db.execute(sql: statement)
        }
        // GDAL registers mapping tables as attributes "for maximum compatibility"; Esri software
        // only opens listed tables.
        try db.execute(
            sql: "INSERT INTO gpkg_contents (table_name, data_type, identifier, description, srs_id) VALUES (?, 'attributes', ?, ?, 0)",
            arguments: [mapping, mapping, "Attachments of \(layer.name) (Related Tables Extension mapping table)"])
        try registerExtension(
            db, table: mapping, column: nil, name: MediaTable.extensionName,
            definition: MediaTable.extensionDefinition, scope: "read-write")
        try db.execute(
            sql: """
                INSERT INTO gpkgext_relations (base_table_name, base_primary_column, related_table_name, related_primary_column, relation_name, mapping_table_name)
                VALUES (?, ?, 'attachments', 'id', 'media', ?)
                """,
            arguments: [layer.name, layer.objectIDField, mapping])
    }

    static func registerExtension(
        _ db: Database, table: String?, column: String?, name: String, definition: String, scope: String
    ) throws {
        try db.execute(
            sql: "INSERT INTO gpkg_extensions (table_name, column_name, extension_name, definition, scope) VALUES (?, ?, ?, ?, ?)",
            arguments: [table, column, name, definition, scope])
    }
}
