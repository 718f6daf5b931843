import Foundation
import Logging
import OutpostCore
import OutpostDigest
import OutpostStorage
import PostgresNIO

/// A feature service in PostgreSQL with PostGIS (docs/postgres.md): each service is a PostgreSQL schema
/// holding one table per layer — geometry columns with their SRID, a GiST index, the global id
/// unique — plus Outpost's own bookkeeping, created and upgraded by numbered migrations recorded
/// in `outpost_migrations`.
public enum PostgresServiceStore {
    /// Outpost's own tables, by migration version (each applied once, in a transaction).
    static let migrations: [(version: Int, sql: [String])] = [
        (1, [
            """
            CREATE TABLE IF NOT EXISTS outpost_services (
              name text PRIMARY KEY,
              schema_json jsonb NOT NULL,
              generation bigint NOT NULL DEFAULT 1,
              schema_version integer NOT NULL,
              created_at timestamptz NOT NULL DEFAULT now()
            )
            """,
            """
            CREATE TABLE IF NOT EXISTS outpost_change_log (
              change_id bigserial PRIMARY KEY,
              service text NOT NULL REFERENCES outpost_services (name) ON DELETE CASCADE,
              generation bigint NOT NULL,
              layer_id integer NOT NULL,
              globalid text NOT NULL,
              op text NOT NULL CHECK (op IN ('insert', 'update', 'delete')),
              changed_columns jsonb,
              origin_replica text,
              origin_seq bigint,
              edited_at timestamptz,
              changed_at timestamptz NOT NULL DEFAULT now()
            )
            """,
            "CREATE INDEX IF NOT EXISTS outpost_change_log_feed ON outpost_change_log (service, layer_id, generation)",
        ]),
        // What edits through the feature service keep besides the log: deleted features with
        // their last values, and per feature the generation of each column (conflict detection).
        (2, [
            """
            CREATE TABLE outpost_tombstones (
              service text NOT NULL REFERENCES outpost_services (name) ON DELETE CASCADE,
              layer_id integer NOT NULL,
              globalid text NOT NULL,
              generation bigint NOT NULL,
              row jsonb,
              PRIMARY KEY (service, layer_id, globalid)
            )
            """,
            """
            CREATE TABLE outpost_feature_versions (
              service text NOT NULL REFERENCES outpost_services (name) ON DELETE CASCADE,
              layer_id integer NOT NULL,
              globalid text NOT NULL,
              generation bigint NOT NULL,
              column_generations jsonb NOT NULL,
              PRIMARY KEY (service, layer_id, globalid)
            )
            """,
            "CREATE INDEX outpost_change_log_feature ON outpost_change_log (service, layer_id, globalid, generation)",
        ]),
        // Sync: replicas and their batch ledger (one row per replica: its last applied batch and
        // the answer it got), conflict records, stored answers for retried synchronizeReplica
        // requests, and attachment content uploaded by hash (large objects).
        (3, [
            """
            CREATE TABLE outpost_replicas (
              replica_id text PRIMARY KEY,
              service text NOT NULL REFERENCES outpost_services (name) ON DELETE CASCADE,
              name text NOT NULL,
              definition jsonb NOT NULL,
              replica_gen bigint NOT NULL,
              last_seq bigint NOT NULL DEFAULT 0,
              created_at bigint NOT NULL,
              last_sync_at bigint
            )
            """,
            "CREATE INDEX outpost_replicas_service ON outpost_replicas (service, created_at)",
            """
            CREATE TABLE outpost_batch_ledger (
              replica_id text NOT NULL REFERENCES outpost_replicas (replica_id) ON DELETE CASCADE,
              seq bigint NOT NULL,
              batch_id text NOT NULL,
              hash text NOT NULL,
              result text NOT NULL,
              generation bigint,
              PRIMARY KEY (replica_id, seq)
            )
            """,
            """
            CREATE TABLE outpost_conflicts (
              conflict_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
              service text NOT NULL REFERENCES outpost_services (name) ON DELETE CASCADE,
              layer_id integer NOT NULL,
              globalid text NOT NULL,
              kind text NOT NULL,
              record jsonb NOT NULL,
              replica_id text,
              seq bigint,
              generation bigint,
              state text
            )
            """,
            "CREATE INDEX outpost_conflicts_open ON outpost_conflicts (service, layer_id, globalid) WHERE state = 'open'",
            """
            CREATE TABLE outpost_request_replay (
              service text NOT NULL REFERENCES outpost_services (name) ON DELETE CASCADE,
              request_key text NOT NULL,
              response text NOT NULL,
              created_at timestamptz NOT NULL DEFAULT now(),
              PRIMARY KEY (service, request_key)
            )
            """,
            """
            CREATE TABLE outpost_blobs (
              service text NOT NULL REFERENCES outpost_services (name) ON DELETE CASCADE,
              sha256 text NOT NULL,
              total bigint NOT NULL,
              received bigint NOT NULL,
              complete boolean NOT NULL DEFAULT false,
              content oid NOT NULL,
              PRIMARY KEY (service, sha256)
            )
            """,
        ]),
        // Schema changes of a service, with the steps each took (batches made against an older
        // schema keep the values of dropped fields in conflict records).
        (4, [
            """
            CREATE TABLE outpost_schema_migrations (
              service text NOT NULL REFERENCES outpost_services (name) ON DELETE CASCADE,
              schema_version integer NOT NULL,
              generation bigint NOT NULL,
              changes jsonb NOT NULL,
              schema jsonb NOT NULL,
              applied_at timestamptz NOT NULL DEFAULT now(),
              PRIMARY KEY (service, schema_version)
            )
            """,
        ]),
        // Server jobs, visible to every process serving the database.
        (5, [
            """
            CREATE TABLE outpost_jobs (
              job_id text PRIMARY KEY,
              status text NOT NULL,
              response_type text NOT NULL,
              submission_time bigint NOT NULL,
              last_updated_time bigint NOT NULL,
              result jsonb,
              error text,
              cancel_requested boolean NOT NULL DEFAULT false
            )
            """,
        ]),
        // Per-feature column generations were written with every change and never read
        // (conflict detection reads the change log): dropped.
        (6, ["DROP TABLE IF EXISTS outpost_feature_versions"]),
        // Geoprocessing jobs of a site: any host answers them; the host holding a job renews its
        // lease, and another takes the job when the lease runs out.
        (7, [
            """
            CREATE TABLE outpost_gp_jobs (
              service text NOT NULL,
              job_id text NOT NULL,
              task text NOT NULL,
              status text NOT NULL,
              finished boolean NOT NULL DEFAULT false,
              submitted bigint NOT NULL,
              updated bigint NOT NULL,
              inputs jsonb NOT NULL,
              environment jsonb NOT NULL,
              results jsonb,
              host text,
              lease_until bigint NOT NULL DEFAULT 0,
              cancel_requested boolean NOT NULL DEFAULT false,
              PRIMARY KEY (service, job_id)
            )
            """,
            "CREATE INDEX outpost_gp_jobs_unfinished ON outpost_gp_jobs (service, lease_until) WHERE NOT finished",
            """
            CREATE TABLE outpost_gp_messages (
              seq bigserial PRIMARY KEY,
              service text NOT NULL,
              job_id text NOT NULL,
              type text NOT NULL,
              description text NOT NULL,
              FOREIGN KEY (service, job_id) REFERENCES outpost_gp_jobs ON DELETE CASCADE
            )
            """,
            "CREATE INDEX outpost_gp_messages_job ON outpost_gp_messages (service, job_id, seq)",
        ]),
        // A site's users, roles and token key (one document, as a users file holds them), and
        // the failed sign-ins every host of the site counts together.
        (8, [
            """
            CREATE TABLE outpost_security (
              id smallint PRIMARY KEY CHECK (id = 1),
              document jsonb NOT NULL,
              version bigint NOT NULL
            )
            """,
            "CREATE TABLE outpost_failed_sign_ins (key text NOT NULL, at bigint NOT NULL)",
            "CREATE INDEX outpost_failed_sign_ins_key ON outpost_failed_sign_ins (key, at)",
        ]),
        // Server jobs held under a lease by their host, so a host's stopping ends its jobs
        // (failed by another host) instead of leaving them running nowhere. A job recorded
        // before this has no lease and is never taken as abandoned.
        (9, [
            "ALTER TABLE outpost_jobs ADD COLUMN host text, ADD COLUMN lease_until bigint",
            "CREATE INDEX outpost_jobs_running ON outpost_jobs (lease_until) WHERE status IN ('Pending', 'InProgress')",
        ]),
        // A server job another host can run again from its start when its own stopped: what
        // kind of job it is, its input, and how many times it was started (a job that stops
        // every host it runs on is failed after a few).
        (10, ["ALTER TABLE outpost_jobs ADD COLUMN kind text, ADD COLUMN input jsonb, ADD COLUMN starts integer NOT NULL DEFAULT 1"]),
        // The files every host of a site serves from its site directory (outpost site publish):
        // one per kind and name, whatever the name's case.
        (11, [
            """
            CREATE TABLE outpost_site_files (
              kind text NOT NULL, name text NOT NULL, path text NOT NULL, bytes bigint NOT NULL, sha256 text NOT NULL,
              published_at bigint NOT NULL
            )
            """,
            "CREATE UNIQUE INDEX outpost_site_files_name ON outpost_site_files (kind, lower(name))",
        ]),
    ]

    /// Runs `body` with a pooled client that is shut down afterwards.
    public static func withClient<T: Sendable>(_ listed: PostgresLocation, _ body: @escaping @Sendable (PostgresClient) async throws -> T) async throws -> T {
        // Of several servers, the one that takes writes.
        guard let location = await listed.primary() else {
            throw PostgresServiceError("none of \(listed.servers.map(\.description).joined(separator: ", ")) answers as a PostgreSQL primary (down, or a standby not promoted yet)")
        }
        // One direct connection first: a pool retries a server that is not there for as long as
        // a query waits, where a person wants to hear at once.
        do {
            var configuration = PostgresConnection.Configuration(
                host: location.host, port: location.port, username: location.user, password: location.password, database: location.database, tls: .disable)
            configuration.options.connectTimeout = .seconds(10)
            let probe = try await PostgresConnection.connect(configuration: configuration, id: 0, logger: Logger(label: "outpost.postgres"))
            try await probe.close()
        } catch let error as PSQLError {
            throw PostgresServiceError("cannot reach PostgreSQL at \(location): \(error.serverInfo?[.message] ?? Self.describe(error))")
        }
        let client = PostgresClient(configuration: location.configuration)
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask {
                await client.run()
                return nil
            }
            defer { group.cancelAll() }
            do {
                return try await body(client)
            } catch let error as PSQLError {
                throw PostgresServiceError("PostgreSQL at \(location) failed: \(error.serverInfo?[.message] ?? Self.describe(error))")
            }
        }
    }

    /// Creates an empty database on the server of `location` (from `template1`, so with whatever
    /// extensions it has) and returns where it is.
    public static func createDatabase(_ name: String, at location: PostgresLocation) async throws -> PostgresLocation {
        _ = try await withClient(location) { client in
            try await client.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(quoted(name))"), logger: Logger(label: "outpost.postgres"))
        }
        var created = location
        created.database = name
        return created
    }

    /// What went wrong with a connection or query, without the bound values.
    static func describe(_ error: PSQLError) -> String {
        if let underlying = error.underlying { return "\(error.code): \(underlying)" }
        return "\(error.code)"
    }

    /// The advisory lock migrations hold (an arbitrary constant: "outpost").
    static let migrationLock: Int64 = 0x6f7574706f7374

    /// Applies the migrations not yet recorded; returns the version the database is at.
    @discardableResult
    public static func migrate(_ client: PostgresClient, logger: Logger = Logger(label: "outpost.postgres")) async throws -> Int {
        try await client.query("CREATE EXTENSION IF NOT EXISTS postgis", logger: logger)
        try await client.query(
            "CREATE TABLE IF NOT EXISTS outpost_migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())", logger: logger)
        var applied = Set<Int>()
        for try await version in try await client.query("SELECT version FROM outpost_migrations", logger: logger).decode(Int.self) { applied.insert(version) }
        for migration in migrations where !applied.contains(migration.version) {
            try await client.withTransaction(logger: logger) { conn in
                // Several server processes may start at once: one migrates, the others wait for
                // it and then find the version applied.
                try await conn.query("SELECT pg_advisory_xact_lock(\(Self.migrationLock))", logger: logger)
                var done = false
                for try await _ in try await conn.query("SELECT 1 FROM outpost_migrations WHERE version = \(migration.version)", logger: logger) { done = true }
                guard !done else { return }
                for sql in migration.sql { try await conn.query(PostgresQuery(unsafeSQL: sql), logger: logger) }
                try await conn.query("INSERT INTO outpost_migrations (version) VALUES (\(migration.version))", logger: logger)
            }
        }
        return migrations.map(\.version).max() ?? 0
    }

    /// The PostgreSQL column type of a field.
    static func columnType(_ field: FieldDefinition) -> String {
        switch field.type {
        case .oid: "bigint"
        // Text compares and sorts in byte order, as SQLite does; being the columns' own
        // collation, their indexes serve ordered paging by global id and text.
        case .globalID, .guid: "text COLLATE \"C\""
        case .string: (field.length.map { "varchar(\($0))" } ?? "text") + " COLLATE \"C\""
        case .smallInteger: "smallint"
        case .integer: "integer"
        case .bigInteger: "bigint"
        case .double: "double precision"
        // Single as double precision too: a value reads back exactly as written, so feature
        // digests match the replicas' (a real would round 1.1 to 1.100000023841858).
        case .single: "double precision"
        case .date: "timestamptz"
        case .dateOnly: "date"
        case .blob: "bytea"
        }
    }

    static func quoted(_ name: String) -> String { "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\"" }

    /// The DDL of a layer's table in schema `service`.
    static func createTable(_ layer: LayerDefinition, service: String, srid: Int) -> [String] {
        let table = "\(quoted(service)).\(quoted(layer.name))"
        var columns = layer.fields.map { field -> String in
            var column = "\(quoted(field.name)) \(columnType(field))"
            if field.type == .oid { column += " GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY" } else if !field.nullable && field.type != .globalID { column += " NOT NULL" }
            return column
        }
        if let type = layer.geometryType {
            let dims = (layer.hasZ ? "Z" : "") + (layer.hasM ? "M" : "")
            columns.append("\(quoted(layer.geometryColumn)) geometry(\(type.geoPackageName)\(dims), \(srid))")
        }
        var out = ["CREATE TABLE \(table) (\n  \(columns.joined(separator: ",\n  "))\n)"]
        if layer.isSpatial {
            out.append("CREATE INDEX \(quoted("\(layer.name)_\(layer.geometryColumn)_gist")) ON \(table) USING gist (\(quoted(layer.geometryColumn)))")
        }
        if let gid = layer.globalIDField {
            out.append("CREATE UNIQUE INDEX \(quoted("\(layer.name)_\(gid)_unique")) ON \(table) (\(quoted(gid)))")
        }
        return out
    }

    /// The service's attachments, content in a large object each: written a chunk at a time
    /// (`lo_put`) and read by range (`lo_get`), so no attachment is ever whole in memory on
    /// either side; deleting a row unlinks its object (the backend does both in one transaction).
    static func createAttachmentTable(service: String) -> [String] {
        let table = "\(quoted(service)).outpost_attachments"
        return [
            """
            CREATE TABLE \(table) (
              attachment_id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
              layer_id integer NOT NULL,
              feature_oid bigint NOT NULL,
              feature_globalid text,
              globalid text NOT NULL UNIQUE,
              name text NOT NULL,
              content_type text NOT NULL,
              size bigint NOT NULL,
              keywords text,
              sha256 text NOT NULL,
              content oid NOT NULL
            )
            """,
            "CREATE INDEX ON \(table) (layer_id, feature_oid)",
            "CREATE INDEX ON \(table) (layer_id, feature_globalid)",
        ]
    }

    /// Loads a service into PostgreSQL: its schema in a PostgreSQL schema of its own name, and
    /// the features of `source` (a service geodatabase, streamed layer by layer, a thousand rows
    /// per statement). Refuses a name already taken unless `replace`.
    /// - Returns: features loaded per layer.
    public static func createService(
        named name: String, from source: Geodatabase, at location: PostgresLocation, replace: Bool = false
    ) async throws -> [String: Int] {
        let schema = source.schema
        let json = String(decoding: try schema.encoded(), as: UTF8.self)
        return try await withClient(location) { client in
            try await migrate(client)
            let logger = Logger(label: "outpost.postgres")
            let exists = try await client.query("SELECT count(*) FROM outpost_services WHERE name = \(name)", logger: logger).decode(Int.self)
            var taken = 0
            for try await n in exists { taken = n }
            if taken > 0 && !replace { throw PostgresServiceError("a service named \(name) is already in \(location); pass --overwrite to replace it") }
            var counts: [String: Int] = [:]
            try await client.withTransaction(logger: logger) { conn in
                try await conn.query(PostgresQuery(unsafeSQL: "DROP SCHEMA IF EXISTS \(quoted(name)) CASCADE"), logger: logger)
                try await conn.query("DELETE FROM outpost_services WHERE name = \(name)", logger: logger)
                try await conn.query(PostgresQuery(unsafeSQL: "CREATE SCHEMA \(quoted(name))"), logger: logger)
                try await conn.query(
                    "INSERT INTO outpost_services (name, schema_json, schema_version) VALUES (\(name), \(json)::jsonb, \(schema.schemaVersion))", logger: logger)
                for sql in createAttachmentTable(service: name) { try await conn.query(PostgresQuery(unsafeSQL: sql), logger: logger) }
                for layer in schema.allLayers {
                    let srid = (layer.spatialReference ?? schema.spatialReference).wkid
                    for sql in createTable(layer, service: name, srid: srid) { try await conn.query(PostgresQuery(unsafeSQL: sql), logger: logger) }
                    counts[layer.name] = try await copy(layer, service: name, from: source, into: conn, logger: logger)
                    let table = "\(quoted(name)).\(quoted(layer.name))"
                    // New features take object ids after the loaded ones.
                    try await conn.query(
                        PostgresQuery(
                            unsafeSQL: "SELECT setval(pg_get_serial_sequence($1, $2), max(\(quoted(layer.objectIDField)))) FROM \(table)",
                            binds: try binds(table, layer.objectIDField)), logger: logger)
                    if layer.hasAttachments {
                        try await copyAttachments(layer, service: name, from: source, into: conn, logger: logger)
                    }
                }
            }
            return counts
        }
    }

    /// Inserts a layer's features in statements of up to a thousand rows, values bound.
    private static func copy(
        _ layer: LayerDefinition, service: String, from source: Geodatabase, into conn: PostgresConnection, logger: Logger
    ) async throws -> Int {
        let table = try source.table(named: layer.name)
        let target = PostgresLayer(layer, service: service, schema: source.schema)
        let columns = layer.fields.map(\.name) + (layer.isSpatial ? [layer.geometryColumn] : [])
        var total = 0
        var afterID: Int64?
        while true {
            var query = FeatureQuery()
            query.afterObjectID = afterID
            query.limit = 1000
            let page = try await table.features(matching: query)
            guard !page.isEmpty else { return total }
            var bindings = PostgresBindings(capacity: page.count * columns.count)
            var rows: [String] = []
            for feature in page {
                var placeholders: [String] = []
                for field in layer.fields {
                    let value: FieldValue =
                        switch field.type {
                        case .oid: feature.objectID.map { .integer($0) } ?? .null
                        case .globalID: feature.globalID.map { .string($0) } ?? .null
                        default: feature.attributes[field.name] ?? .null
                        }
                    try PostgresLayer.bind(value, field.type, &bindings)
                    placeholders.append("$\(bindings.count)")
                }
                if layer.isSpatial { placeholders.append(target.bind(feature.geometry, &bindings)) }
                rows.append("(" + placeholders.joined(separator: ", ") + ")")
            }
            let sql = "INSERT INTO \(quoted(service)).\(quoted(layer.name)) (\(columns.map(quoted).joined(separator: ", "))) VALUES " + rows.joined(separator: ", ")
            try await conn.query(PostgresQuery(unsafeSQL: sql, binds: bindings), logger: logger)
            total += page.count
            afterID = page.last?.objectID
        }
    }

    /// Copies a layer's attachments feature by feature, content a megabyte per statement.
    private static func copyAttachments(
        _ layer: LayerDefinition, service: String, from source: Geodatabase, into conn: PostgresConnection, logger: Logger
    ) async throws {
        let table = try source.table(named: layer.name)
        var afterID: Int64?
        while true {
            var query = FeatureQuery(outFields: [layer.objectIDField], returnGeometry: false)
            query.afterObjectID = afterID
            query.limit = 1000
            let page = try await table.features(matching: query)
            guard !page.isEmpty else { return }
            for feature in page {
                for attachment in try await table.attachments(forFeature: feature.objectID!) {
                    var hash = SHA256()
                    let id = try await conn.query(
                        """
                        INSERT INTO \(unescaped: quoted(service)).outpost_attachments
                          (layer_id, feature_oid, feature_globalid, globalid, name, content_type, size, keywords, sha256, data)
                        VALUES (\(layer.id), \(attachment.featureObjectID), \(attachment.featureGlobalID), \(attachment.globalID), \(attachment.name),
                          \(attachment.contentType), \(attachment.size), \(attachment.keywords), '', lo_create(0))
                        RETURNING content::bigint
                        """, logger: logger
                    ).decode(Int64.self)
                    var object: Int64 = 0
                    for try await i in id { object = i }
                    var offset: Int64 = 0
                    while true {
                        let at = offset
                        let chunk = try await source.read { c in try table.readAttachment(id: attachment.id, offset: at, length: 1 << 20, in: c) }
                        guard !chunk.isEmpty else { break }
                        hash.update([UInt8](chunk))
                        try await conn.query("SELECT lo_put(\(object)::oid, \(offset), \(ByteBuffer(bytes: chunk)))", logger: logger)
                        offset += Int64(chunk.count)
                    }
                    try await conn.query(
                        "UPDATE \(unescaped: quoted(service)).outpost_attachments SET sha256 = \(SHA256.hexString(hash.finalize())) WHERE content = \(object)::oid", logger: logger)
                }
            }
            afterID = page.last?.objectID
        }
    }

    static func binds(_ values: any PostgresEncodable...) throws -> PostgresBindings {
        var b = PostgresBindings()
        for v in values { try b.append(v) }
        return b
    }
}
