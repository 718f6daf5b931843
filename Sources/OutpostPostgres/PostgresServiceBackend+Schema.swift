import Foundation
import Logging
import OutpostCore
import OutpostProtocol
import OutpostSyncService
import OutpostStorage
import PostgresNIO

/// Schema changes of a service in PostgreSQL (docs/sync.md, "Schema changes"), as for the
/// GeoPackage backend: additive steps, and dropped fields when allowed. The change commits under
/// the service's commit lock with a generation of its own; other server processes read the new
/// schema at their next commit, replica read or schema request, and replicas migrate at their
/// next download.
extension PostgresServiceBackend {
    @discardableResult
    public func migrate(to schema: ServiceSchema, allowDrop: Bool) async throws -> [SchemaChange] {
        let service = name, logger = logger
        let applied: (ServiceSchema, [SchemaChange])? = try await transaction { conn in
            let generation = try await self.lockGeneration(conn) + 1
            let current = self.serviceSchema
            var target = try schema.normalized()
            target.schemaVersion = current.schemaVersion + 1
            let steps = try SchemaChange.steps(from: current, to: target, allowDrop: allowDrop)
            guard !steps.isEmpty else { return nil }
            for step in steps {
                for sql in try Self.ddl(step, from: current, to: target, service: service) { try await conn.query(PostgresQuery(unsafeSQL: sql), logger: logger) }
            }
            let json = String(decoding: try target.encoded(), as: UTF8.self)
            let changes = try JSONValueEncoder().encode(steps).jsonString
            try await conn.query(
                """
                UPDATE outpost_services SET schema_json = \(json)::jsonb, schema_version = \(target.schemaVersion), generation = \(generation)
                WHERE name = \(service)
                """, logger: logger)
            try await conn.query(
                """
                INSERT INTO outpost_schema_migrations (service, schema_version, generation, changes, schema)
                VALUES (\(service), \(target.schemaVersion), \(generation), \(changes)::jsonb, \(json)::jsonb)
                """, logger: logger)
            return (target, steps)
        }
        guard let (_, steps) = applied else { return [] }
        _ = try await self.schema()
        return steps
    }

    /// The statements of one step.
    static func ddl(_ step: SchemaChange, from old: ServiceSchema, to new: ServiceSchema, service: String) throws -> [String] {
        switch step.kind {
        case .addField:
            guard let id = step.layerId, let layer = new.layer(id: id), let name = step.field, let field = layer.field(named: name) else { return [] }
            // Existing rows have no value for it: the column starts nullable.
            return ["ALTER TABLE \(PostgresServiceStore.quoted(service)).\(PostgresServiceStore.quoted(layer.name)) ADD COLUMN \(PostgresServiceStore.quoted(field.name)) \(PostgresServiceStore.columnType(field))"]
        case .dropField:
            guard let id = step.layerId, let layer = old.layer(id: id), let name = step.field, let field = layer.field(named: name) else { return [] }
            return ["ALTER TABLE \(PostgresServiceStore.quoted(service)).\(PostgresServiceStore.quoted(layer.name)) DROP COLUMN \(PostgresServiceStore.quoted(field.name))"]
        case .addLayer:
            guard let id = step.layerId, let layer = new.layer(id: id) else { return [] }
            return PostgresServiceStore.createTable(layer, service: service, srid: (layer.spatialReference ?? new.spatialReference).wkid)
        case .changeDomains, .addAttachments:
            // Attachments of every layer share the service's outpost_attachments table.
            return []
        }
    }

    /// Fields dropped from each layer by migrations after `version` (to keep an older batch's
    /// values of them in conflict records instead of refusing it).
    static func droppedFields(since version: Int, service: String, _ conn: PostgresConnection, logger: Logger) async throws -> [Int: Set<String>] {
        var out: [Int: Set<String>] = [:]
        for try await text in try await conn.query(
            "SELECT changes::text FROM outpost_schema_migrations WHERE service = \(service) AND schema_version > \(version)", logger: logger
        ).decode(String.self) {
            for step in try JSONValueDecoder().decode([SchemaChange].self, from: Data(text.utf8)) where step.kind == .dropField {
                if let layer = step.layerId, let field = step.field { out[layer, default: []].insert(field.lowercased()) }
            }
        }
        return out
    }
}
