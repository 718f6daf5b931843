import Foundation
import GRDB
import OutpostCore

/// One step between two versions of a service schema. Additive steps (a nullable or defaulted
/// field, a new layer, new coded values or other domain changes) never strand data; dropping a
/// field is the only destructive step allowed, and only when asked for.
public struct SchemaChange: Codable, Hashable, Sendable, CustomStringConvertible {
    /// What kind of step a change is.
    public enum Kind: String, Codable, Hashable, Sendable {
        /// A field added, a field dropped, a layer added, domains changed.
        case addField, dropField, addLayer, changeDomains
        /// A layer gains attachments (the media table is made with the first such layer).
        case addAttachments
    }

    /// What kind of step it is.
    public var kind: Kind
    /// The layer it concerns, if one.
    public var layerId: Int?
    /// The field it concerns, if one.
    public var field: String?

    /// A change of these values.
    public init(kind: Kind, layerId: Int? = nil, field: String? = nil) {
        self.kind = kind
        self.layerId = layerId
        self.field = field
    }

    public var description: String {
        switch kind {
        case .addField: "add field \(field ?? "") to layer \(layerId ?? -1)"
        case .dropField: "drop field \(field ?? "") of layer \(layerId ?? -1)"
        case .addLayer: "add layer \(layerId ?? -1)"
        case .changeDomains: "change domains"
        case .addAttachments: "add attachments to layer \(layerId ?? -1)"
        }
    }

    /// Whether the step loses data (dropping a field).
    public var isDestructive: Bool { kind == .dropField }

    /// The steps from `old` to `new` (both normalised).
    /// - Throws: ``StorageError`` `.invalidSchema` naming the first change that is not a step
    ///   above: a changed field type, length or nullability, a removed layer, a changed geometry
    ///   type or spatial reference, a new field that is required without a default, a layer that
    ///   loses its attachments, a drop when `allowDrop` is false.
    public static func steps(from old: ServiceSchema, to new: ServiceSchema, allowDrop: Bool) throws -> [SchemaChange] {
        func refuse(_ message: String) -> StorageError {
            StorageError(.invalidSchema, "\(message); a migration may add nullable or defaulted fields, layers and coded values, and drop fields with --allow-drop")
        }
        var out: [SchemaChange] = []
        for layer in old.allLayers {
            guard let next = new.layer(id: layer.id) else { throw refuse("layer \(layer.id) (\(layer.name)) is missing from the new schema") }
            guard next.name == layer.name else { throw refuse("layer \(layer.id) is renamed from \(layer.name) to \(next.name)") }
            guard next.geometryType == layer.geometryType, next.hasZ == layer.hasZ, next.hasM == layer.hasM,
                (next.spatialReference ?? new.spatialReference) == (layer.spatialReference ?? old.spatialReference)
            else { throw refuse("layer \(layer.name) changes its geometry type or spatial reference") }
            guard next.sync == layer.sync else { throw refuse("layer \(layer.name) changes whether it syncs") }
            if layer.hasAttachments != next.hasAttachments {
                guard next.hasAttachments else { throw refuse("layer \(layer.name) loses its attachments") }
                out.append(SchemaChange(kind: .addAttachments, layerId: layer.id))
            }
            for field in layer.fields {
                guard let updated = next.field(named: field.name) else {
                    guard field.type != .oid, field.type != .globalID else { throw refuse("\(layer.name).\(field.name) is an id field") }
                    guard allowDrop else { throw refuse("\(layer.name).\(field.name) is dropped") }
                    out.append(SchemaChange(kind: .dropField, layerId: layer.id, field: field.name))
                    continue
                }
                guard updated.type == field.type, updated.length == field.length, updated.nullable == field.nullable else {
                    throw refuse("\(layer.name).\(field.name) changes its type, length or nullability")
                }
            }
            for field in next.fields where layer.field(named: field.name) == nil {
                guard field.nullable || (field.defaultValue.map { !$0.isNull } ?? false) else {
                    throw refuse("the new field \(layer.name).\(field.name) is required but has no default for the existing rows")
                }
                out.append(SchemaChange(kind: .addField, layerId: layer.id, field: field.name))
            }
        }
        for layer in new.allLayers where old.layer(id: layer.id) == nil {
            guard old.layer(named: layer.name) == nil else { throw refuse("layer \(layer.name) changes its id") }
            out.append(SchemaChange(kind: .addLayer, layerId: layer.id))
        }
        if new.domains != old.domains || new.allLayers.contains(where: { l in l.fields.contains { f in old.layer(id: l.id)?.field(named: f.name)?.domain != f.domain } }) {
            out.append(SchemaChange(kind: .changeDomains))
        }
        return out
    }
}

extension GeodatabaseConnection {
    /// Moves the geodatabase's schema to `target` inside the caller's transaction: new columns
    /// and tables, dropped columns, the stored schema, and (with change capture) the capture
    /// triggers rebuilt for the new columns. Only layers this geodatabase holds are touched; a
    /// replica does not gain layers it was not made with.
    ///
    /// `onDrop` runs before a column is dropped (a replica keeps pending values of it).
    /// The in-memory schema follows; if the transaction rolls back, call
    /// ``Geodatabase/reloadSchema()``.
    @discardableResult
    public func migrateSchema(
        to target: ServiceSchema, allowDrop: Bool, addLayers: Bool, onDrop: (LayerDefinition, String) throws -> Void = { _, _ in }
    ) throws -> [SchemaChange] {
        let old = geodatabase.schema
        let new = try target.normalized()
        // A replica holds some layers of the service: compare those only.
        var scoped = new
        if !addLayers {
            scoped.layers = new.layers.filter { old.layer(id: $0.id) != nil }
            scoped.tables = new.tables.filter { old.layer(id: $0.id) != nil }
        }
        let steps = try SchemaChange.steps(from: old, to: scoped, allowDrop: allowDrop)
        // A replica's stored checksums hash the old columns: its layers are hashed again.
        if !steps.isEmpty, var state = try replicaState(), state.layers.contains(where: { $0.checksum != nil }) {
            for i in state.layers.indices { state.layers[i].checksum = nil }
            try setReplicaState(state)
        }
        // Change capture is on when the file's synced tables carry the capture triggers (a
        // replica), off in a service's own store.
        let capture = try old.allLayers.contains { layer in
            try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'trigger' AND name = ?)", arguments: [ChangeCapture.triggerNames(for: layer)[1]]) ?? false
        }
        for step in steps {
            switch step.kind {
            case .addField, .dropField:
                guard let id = step.layerId, let before = old.layer(id: id), let after = scoped.layer(id: id), let name = step.field else { continue }
                // Capture triggers name every column: rebuild them around the change.
                let triggers = before.sync && capture ? ChangeCapture.triggerNames(for: before) : []
                for trigger in triggers { try db.execute(sql: "DROP TRIGGER IF EXISTS \(quoted(trigger))") }
                if step.kind == .addField, let field = after.field(named: name) {
                    try db.execute(sql: "ALTER TABLE \(quoted(after.name)) ADD COLUMN \(GeoPackageDDL.columnDefinition(field))")
                } else {
                    try onDrop(before, name)
                    try db.execute(sql: "ALTER TABLE \(quoted(before.name)) DROP COLUMN \(quoted(name))")
                }
                if !triggers.isEmpty { for trigger in ChangeCapture.triggers(for: after) { try db.execute(sql: trigger) } }
            case .addLayer:
                guard let id = step.layerId, let layer = scoped.layer(id: id) else { continue }
                try GeoPackageWriter.createLayer(db, layer, schema: scoped, changeCapture: capture)
            case .addAttachments:
                guard let id = step.layerId, let layer = scoped.layer(id: id) else { continue }
                try GeoPackageWriter.addAttachmentRelation(db, layer)
            case .changeDomains:
                break
            }
        }
        // A replica that uploads attachments captures them from the moment its media table exists.
        if let state = try replicaState(), state.attachmentsDirection == .upload || state.attachmentsDirection == .bidirectional {
            try installAttachmentCapture()
        }
        var stored = scoped
        stored.schemaVersion = max(target.schemaVersion, old.schemaVersion)
        try SchemaStore.save(stored, db)
        try db.execute(sql: "UPDATE gpkg_contents SET last_change = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')")
        geodatabase.replaceSchema(stored)
        return steps
    }
}

extension Geodatabase {
    /// Reads the stored schema again (after a rolled-back migration).
    public func reloadSchema() throws {
        let schema = try read { conn in try SchemaStore.load(conn.db, fileStem: url.deletingPathExtension().lastPathComponent).0 }
        replaceSchema(schema)
    }
}

extension GeodatabaseConnection {
    /// Before a migration drops `column` of `layer` on a replica: the values of it that local
    /// edits not yet uploaded set go into `outpost_conflicts` (kind `schemaDropped`), so dropping
    /// the column never loses a crew's value silently.
    public func archivePendingValues(of layer: LayerDefinition, column: String) throws {
        guard try db.tableExists(ChangeCapture.changesTable), let gid = layer.globalIDField else { return }
        try ReplicaTables.install(db)
        let rows = try Row.fetchAll(
            db,
            sql: """
                SELECT t.\(quoted(gid)), json_object(?, t.\(quoted(column)))
                FROM \(quoted(layer.name)) t
                WHERE t.\(quoted(gid)) IN (
                  SELECT globalid FROM outpost_changes
                  WHERE table_name = ? AND (op = 'insert' OR (op = 'update' AND EXISTS (SELECT 1 FROM json_each(changed_columns) WHERE value = ?))))
                  AND t.\(quoted(column)) IS NOT NULL
                """,
            arguments: [column, layer.name, column])
        for row in rows {
            let globalID: String = row[0]
            let values: String = row[1]
            let record: JSONValue = [
                "layerId": .integer(Int64(layer.id)), "globalId": .string(globalID), "kind": "schemaDropped", "columns": [.string(column)],
                "ours": (try? JSONValue.parse(values)) ?? .null, "policy": "schemaDropped", "winner": "theirs",
            ]
            try db.execute(
                sql: "INSERT INTO outpost_conflicts (server_id, table_name, globalid, kind, record, seq) VALUES (NULL, ?, ?, 'schemaDropped', ?, NULL)",
                arguments: [layer.name, globalID, record.jsonString])
        }
    }
}
