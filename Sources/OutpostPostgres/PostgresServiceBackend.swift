import Foundation
import Logging
import OutpostCore
import OutpostDigest
import OutpostProtocol
import OutpostSyncService
import OutpostStorage
import PostgresNIO
import _ConnectionPoolModule

/// A feature service whose data lives in PostgreSQL/PostGIS (docs/postgres.md), loaded there by
/// ``PostgresServiceStore/createService(named:from:at:replace:)``. Holds no state of its own
/// beyond a connection pool, so several server processes can serve one database.
///
/// Commits of edits are serialised per service by a row lock on the service's row in
/// `outpost_services`, taken at the start of the transaction and held to its commit: the
/// generation read under that lock plus one is what the transaction commits, so generations
/// increase in commit order across every process (invariant I5), and a reader that sees
/// generation G sees every change up to G.
public final class PostgresServiceBackend: FeatureServiceBackend {
    public let name: String
    /// The database the service lives in.
    public let location: PostgresLocation
    /// The service schema as this process last read it, with a table mapping per layer. Another
    /// process may migrate the service: every commit, replica read and schema request compares
    /// the stored schema version and reads the schema again when it moved.
    private let current: Locked<(schema: ServiceSchema, layers: [Int: PostgresLayer])>
    private let lastSchemaCheck = Locked<ContinuousClock.Instant?>(nil)
    var serviceSchema: ServiceSchema { current.withLock { $0.schema } }
    var layers: [Int: PostgresLayer] { current.withLock { $0.layers } }
    let pool: PostgresPool
    var client: PostgresClient { pool.client }
    private let closed = Locked(false)
    /// The longest a request waits for the database (a connection, then its queries).
    let timeout: Duration
    let logger = Logger(label: "outpost.postgres")
    /// Fault points for tests (`server.beforeCommit`: after a batch is applied, before it commits).
    public let faults: FaultInjector
    /// Where the store reads the time (replicas' creation and last sync).
    public let clock: ServiceClock

    private init(name: String, location: PostgresLocation, schema: ServiceSchema, pool: PostgresPool, timeout: Duration, faults: FaultInjector, clock: ServiceClock) {
        self.faults = faults
        self.clock = clock
        self.name = name
        self.location = location
        current = Locked((schema, Self.tables(schema, service: name)))
        self.pool = pool
        pool.retain()
        self.timeout = timeout
    }

    /// Opens one service of the database.
    /// - Throws: ``PostgresServiceError`` when the database cannot be reached or has no such service.
    public static func open(
        service: String, at location: PostgresLocation, timeout: Duration = .seconds(30), faults: FaultInjector = FaultInjector(), clock: ServiceClock = .system
    ) async throws -> PostgresServiceBackend {
        try await openAll(at: location, only: service, timeout: timeout, faults: faults, clock: clock)[0]
    }

    /// Opens every service of the database (or only `only`), after applying pending migrations.
    /// - Parameter faults: fault points for tests, shared by the services.
    /// - Parameter location: the database to connect to.
    /// - Parameter only: the one service to open, when not every one.
    /// - Parameter timeout: the longest a connection attempt may take.
    /// - Parameter clock: where the services read the time.
    public static func openAll(
        at location: PostgresLocation, only: String? = nil, timeout: Duration = .seconds(30), faults: FaultInjector = FaultInjector(),
        clock: ServiceClock = .system
    ) async throws -> [PostgresServiceBackend] {
        let stored: [(String, String)] = try await PostgresServiceStore.withClient(location) { client in
            try await PostgresServiceStore.migrate(client)
            var out: [(String, String)] = []
            for try await (name, json) in try await client.query("SELECT name, schema_json::text FROM outpost_services ORDER BY name").decode((String, String).self) {
                if only == nil || only == name { out.append((name, json)) }
            }
            return out
        }
        if let only, stored.isEmpty { throw PostgresServiceError("\(location) has no service named \(only); load one with: outpost service create --postgres") }
        // The services share one pool: connections go to whichever service is busy.
        let pool = await PostgresPool.connect(location)
        return try stored.map { name, json in
            PostgresServiceBackend(name: name, location: location, schema: try ServiceSchema.decode(Data(json.utf8)), pool: pool, timeout: timeout, faults: faults, clock: clock)
        }
    }

    public func close() async throws {
        guard closed.withLock({ was in defer { was = true }; return !was }) else { return }
        pool.release()
    }

    deinit { if !closed.withLock({ $0 }) { pool.release() } }

    static func tables(_ schema: ServiceSchema, service: String) -> [Int: PostgresLayer] {
        var layers: [Int: PostgresLayer] = [:]
        for layer in schema.allLayers { layers[layer.id] = PostgresLayer(layer, service: service, schema: schema) }
        return layers
    }

    /// The stored schema (read again when another process migrated the service).
    public func schema() async throws -> ServiceSchema {
        let service = name, logger = logger
        try await database { client in
            try await client.withConnection { conn in
                for try await version in try await conn.query("SELECT schema_version FROM outpost_services WHERE name = \(service)", logger: logger).decode(Int.self) {
                    try await self.adopt(version: version, conn)
                }
            }
        }
        return serviceSchema
    }

    /// A layer for a read, with the schema checked against the stored version at most once a
    /// second (another process may have migrated the service).
    func readingLayer(_ id: Int) async throws -> PostgresLayer {
        let due = lastSchemaCheck.withLock { last in
            let now = ContinuousClock.now
            guard last.map({ now - $0 > .seconds(1) }) ?? true else { return false }
            last = now
            return true
        }
        if due { _ = try await schema() }
        return try layer(id)
    }

    /// Runs a read; if it names what this process's schema lacks (a field just added by another
    /// process), the schema is read again and the read runs once more.
    func withCurrentSchema<T: Sendable>(_ layerID: Int, _ body: (PostgresLayer) async throws -> T) async throws -> T {
        do {
            return try await body(try await readingLayer(layerID))
        } catch let error as StorageError where error.code == .invalidQuery {
            let version = serviceSchema.schemaVersion
            guard try await schema().schemaVersion != version else { throw error }
            return try await body(try layer(layerID))
        }
    }

    /// Reads the stored schema when its version is not the one this process holds.
    func adopt(version: Int, _ conn: PostgresConnection) async throws {
        guard version != serviceSchema.schemaVersion else { return }
        for try await json in try await conn.query("SELECT schema_json::text FROM outpost_services WHERE name = \(name)", logger: logger).decode(String.self) {
            let schema = try ServiceSchema.decode(Data(json.utf8))
            current.withLock { $0 = (schema, Self.tables(schema, service: name)) }
        }
    }

    func layer(_ id: Int) throws -> PostgresLayer {
        guard let layer = layers[id] else { throw SyncServiceError.notFound("layer \(id)") }
        return layer
    }

    // MARK: - Talking to the database

    /// Runs `body` against the pool within the timeout; a database that is down or slow is `unavailable`
    /// (the server itself keeps running and serves again once the database is back).
    func database<T: Sendable>(_ body: @escaping @Sendable (PostgresClient) async throws -> T) async throws -> T {
        let client = client, pool = pool
        do {
            return try await pool.within(timeout) { try await body(client) }
        } catch let error as PSQLError {
            throw pool.failure(error)
        } catch let error as ConnectionPoolError {
            throw pool.failure(error)
        } catch let error as PostgresDecodingError {
            throw SyncServiceError(.failed, "unexpected data in PostgreSQL: \(error.postgresType) for \(error.targetType)")
        }
    }

    /// Runs `body` in a transaction on one pooled connection: committed when it returns, rolled
    /// back when it throws (the error passes through unchanged).
    @discardableResult
    func transaction<T: Sendable>(
        _ begin: String = "BEGIN", _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        let logger = logger
        return try await database { client in
            try await client.withConnection { conn in
                try await conn.query(PostgresQuery(unsafeSQL: begin), logger: logger)
                // Rolled back from a task of its own: this one may be cancelled, and the
                // connection must go back to the pool outside any transaction.
                let rollback = { await Task { _ = try? await conn.query("ROLLBACK", logger: logger) }.value }
                let value: T
                do {
                    value = try await body(conn)
                } catch {
                    await rollback()
                    throw error
                }
                // A request answered "unavailable" when its time ran out cancels this work: it
                // must not commit later, or a client that sends the edit again would apply it twice.
                if Task.isCancelled {
                    await rollback()
                    throw CancellationError()
                }
                try await conn.query("COMMIT", logger: logger)
                return value
            }
        }
    }

    /// A database failure as the service says it: `unavailable` when the connection or server is
    /// the problem, otherwise `failed`, naming the SQL state but no internals.
    static func serviceError(_ error: PSQLError, _ location: PostgresLocation) -> SyncServiceError {
        if error.code == .server {
            let state = error.serverInfo?[.sqlState] ?? ""
            // 25006: a read-only transaction, on a standby (the primary moved).
            if state.hasPrefix("08") || state.hasPrefix("57P") || state.hasPrefix("53") || state == "40001" || state == "40P01" || state == "25006" {
                return SyncServiceError(.unavailable, "PostgreSQL at \(location) is unavailable (\(state)): \(error.serverInfo?[.message] ?? ""); try again shortly")
            }
            // The statement and PostgreSQL's words go to the log, not to the client.
            Logger(label: "outpost.postgres").error("PostgreSQL refused a statement (\(state)): \(error.serverInfo?[.message] ?? "")", metadata: ["query": "\(error.query?.sql ?? "")"])
            return SyncServiceError(.failed, "PostgreSQL refused a statement (SQL state \(state))")
        }
        return SyncServiceError(.unavailable, "PostgreSQL at \(location) is unavailable (\(error.code)); try again shortly")
    }

    /// Runs `body` in a read-only transaction that sees one snapshot of the database throughout
    /// (what a replica's data, the generation it starts from, a feed page and a checksum need).
    func snapshotRead<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) async throws -> T) async throws -> T {
        try await transaction("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", body)
    }

    /// All rows of a query (callers bound it with a limit).
    func rows(_ sql: String, _ binds: PostgresBindings) async throws -> [PostgresRow] {
        let logger = logger
        return try await database { client in
            var out: [PostgresRow] = []
            for try await row in try await client.query(PostgresQuery(unsafeSQL: sql, binds: binds), logger: logger) { out.append(row) }
            return out
        }
    }

    // MARK: - Reading

    public func extent(layerID: Int) async throws -> Envelope? {
        let layer = try await readingLayer(layerID)
        guard layer.definition.isSpatial else { return nil }
        let g = layer.geometryColumn
        let rows = try await rows(
            "SELECT ST_XMin(e), ST_YMin(e), ST_XMax(e), ST_YMax(e) FROM (SELECT ST_3DExtent(\(g)) AS e FROM \(layer.table)) AS x", PostgresBindings())
        guard let row = rows.first else { return nil }
        let (xmin, ymin, xmax, ymax) = try row.decode((Double?, Double?, Double?, Double?).self)
        guard let xmin, let ymin, let xmax, let ymax else { return nil }
        return Envelope(xmin: xmin, ymin: ymin, xmax: xmax, ymax: ymax)
    }

    public func count(layerID: Int, query: FeatureQuery) async throws -> Int {
        try await withCurrentSchema(layerID) { layer in
            var binds = PostgresBindings()
            let sql = "SELECT count(*) FROM \(layer.table)" + (try layer.filter(query, &binds))
            return try await self.rows(sql, binds).first?.decode(Int.self) ?? 0
        }
    }

    public func objectIDs(layerID: Int, query: FeatureQuery) async throws -> [Int64] {
        try await withCurrentSchema(layerID) { layer in
            var binds = PostgresBindings()
            var sql = "SELECT \(layer.pk) FROM \(layer.table)" + (try layer.filter(query, &binds))
            sql += try layer.order(query) + layer.paging(query, &binds)
            return try await self.rows(sql, binds).map { try $0.decode(Int64.self) }
        }
    }

    public func features(layerID: Int, query: FeatureQuery) async throws -> [Feature] {
        try await withCurrentSchema(layerID) { layer in
            let (sql, binds) = try Self.featuresSQL(layer, query)
            let fields = try layer.definition.selectedFields(outFields: query.outFields)
            return try await self.rows(sql, binds).map { try layer.decode($0, fields: fields, returnGeometry: query.returnGeometry) }
        }
    }

    /// The statement reading one page of a layer's features matching `query`.
    static func featuresSQL(_ layer: PostgresLayer, _ query: FeatureQuery) throws -> (String, PostgresBindings) {
        let fields = try layer.definition.selectedFields(outFields: query.outFields)
        var binds = PostgresBindings()
        var sql = "SELECT \(layer.selectList(fields, returnGeometry: query.returnGeometry)) FROM \(layer.table)" + (try layer.filter(query, &binds))
        sql += try layer.order(query) + layer.paging(query, &binds)
        return (sql, binds)
    }

    /// One page of features read on `conn` (inside a caller's transaction).
    static func features(_ conn: PostgresConnection, _ layer: PostgresLayer, _ query: FeatureQuery, logger: Logger) async throws -> [Feature] {
        let (sql, binds) = try featuresSQL(layer, query)
        let fields = try layer.definition.selectedFields(outFields: query.outFields)
        var out: [Feature] = []
        for try await row in try await conn.query(PostgresQuery(unsafeSQL: sql, binds: binds), logger: logger) {
            out.append(try layer.decode(row, fields: fields, returnGeometry: query.returnGeometry))
        }
        return out
    }

    public func generation() async throws -> Int64 {
        var binds = PostgresBindings()
        binds.append(name)
        return try await rows("SELECT generation FROM outpost_services WHERE name = $1", binds).first?.decode(Int64.self) ?? 0
    }

    // MARK: - Edits

    public func applyEdits(layerID: Int, edits: EditRequest, rollbackOnFailure: Bool) async throws -> ApplyEditsResponse {
        _ = try layer(layerID)
        let service = name, logger = logger
        return try await transaction { conn in
            let generation = try await self.lockGeneration(conn) + 1
            let layer = try self.layer(layerID)
            var applier = PostgresEditApplier(layer: layer, service: service, conn: conn, logger: logger, rollbackOnFailure: rollbackOnFailure, generation: generation)
            let response = try await applier.apply(edits)
            try await applier.finish()
            return response
        }
    }

    /// Takes the service's commit lock (its row in `outpost_services`, held to the end of the
    /// transaction) and returns the generation committed so far; the schema is read again first
    /// if another process migrated the service.
    func lockGeneration(_ conn: PostgresConnection) async throws -> Int64 {
        var found: (Int64, Int)?
        for try await row in try await conn.query(
            "SELECT generation, schema_version FROM outpost_services WHERE name = \(name) FOR UPDATE", logger: logger
        ).decode((Int64, Int).self) { found = row }
        guard let (generation, version) = found else { throw SyncServiceError(.unavailable, "service \(name) is no longer in the database") }
        try await adopt(version: version, conn)
        return generation
    }

    // MARK: - Attachments

    var attachmentTable: String { "\(PostgresServiceStore.quoted(name)).outpost_attachments" }

    public func attachments(layerID: Int, objectID: Int64) async throws -> [Attachment] {
        let layer = try layer(layerID)
        try await requireFeature(layer, objectID)
        var binds = PostgresBindings()
        binds.append(Int32(layerID))
        binds.append(objectID)
        return try await rows(
            "SELECT attachment_id, globalid, feature_oid, feature_globalid, name, content_type, size, keywords FROM \(attachmentTable) WHERE layer_id = $1 AND feature_oid = $2 ORDER BY attachment_id",
            binds
        ).map { row in
            let (id, gid, oid, fgid, name, type, size, keywords) = try row.decode((Int64, String, Int64, String?, String, String, Int64, String?).self)
            return Attachment(id: id, globalID: gid, featureObjectID: oid, featureGlobalID: fgid, name: name, contentType: type, size: size, keywords: keywords)
        }
    }

    public func attachmentBytes(layerID: Int, attachmentID: Int64, offset: Int64, length: Int) async throws -> Data {
        _ = try layer(layerID)
        var binds = PostgresBindings()
        binds.append(offset)
        binds.append(Int32(clamping: length))
        binds.append(Int32(layerID))
        binds.append(attachmentID)
        let rows = try await transactionRows(
            "SELECT CASE WHEN $1 >= size THEN ''::bytea ELSE lo_get(content, $1, $2) END FROM \(attachmentTable) WHERE layer_id = $3 AND attachment_id = $4",
            binds)
        guard let row = rows.first else { throw SyncServiceError.notFound("attachment \(attachmentID) of layer \(layerID)") }
        var buffer = try row.decode(ByteBuffer.self)
        return Data(buffer.readBytes(length: buffer.readableBytes) ?? [])
    }

    /// Large objects are read inside a transaction.
    private func transactionRows(_ sql: String, _ binds: PostgresBindings) async throws -> [PostgresRow] {
        let logger = logger
        return try await transaction { conn in
            var out: [PostgresRow] = []
            for try await row in try await conn.query(PostgresQuery(unsafeSQL: sql, binds: binds), logger: logger) { out.append(row) }
            return out
        }
    }

    public func addAttachment(layerID: Int, objectID: Int64, name attachmentName: String, contentType: String, data: Data) async throws -> Attachment {
        let layer = try layer(layerID)
        guard layer.definition.hasAttachments else { throw SyncServiceError(.invalidRequest, "layer \(layerID) does not support attachments") }
        let service = name, table = attachmentTable, logger = logger
        let sha256 = SHA256.hex(data)
        return try await transaction { conn in
            let generation = try await self.lockGeneration(conn) + 1
            var owner: String??
            for try await gid in try await conn.query(
                PostgresQuery(unsafeSQL: "SELECT \(layer.definition.globalIDField.map(PostgresLayer.q) ?? "NULL::text") FROM \(layer.table) WHERE \(layer.pk) = $1", binds: try PostgresServiceStore.binds(objectID)),
                logger: logger
            ).decode(String?.self) { owner = .some(gid) }
            guard let owner else { throw SyncServiceError.notFound("feature \(objectID) of layer \(layerID)") }
            let globalID = GlobalID.make()
            var id: Int64 = 0
            for try await i in try await conn.query(
                """
                INSERT INTO \(unescaped: table) (layer_id, feature_oid, feature_globalid, globalid, name, content_type, size, sha256, content)
                VALUES (\(Int32(layerID)), \(objectID), \(owner), \(globalID), \(attachmentName), \(contentType), \(Int64(data.count)), \(sha256), lo_from_bytea(0, \(ByteBuffer(bytes: data))))
                RETURNING attachment_id
                """, logger: logger
            ).decode(Int64.self) { id = i }
            try await Self.attachmentsChanged(conn, service: service, layerID: layerID, feature: owner, generation: generation, logger: logger)
            return Attachment(
                id: id, globalID: globalID, featureObjectID: objectID, featureGlobalID: owner, name: attachmentName, contentType: contentType, size: Int64(data.count),
                keywords: nil)
        }
    }

    public func deleteAttachments(layerID: Int, objectID: Int64, attachmentIDs: [Int64]) async throws -> [EditResult] {
        let existing = try await attachments(layerID: layerID, objectID: objectID)
        let service = name, table = attachmentTable, logger = logger
        var results: [EditResult] = []
        for id in attachmentIDs {
            guard let attachment = existing.first(where: { $0.id == id }) else {
                results.append(EditResult(objectId: id, globalId: nil, success: false, error: .init(code: EditResult.Code.notFound, description: "attachment \(id) not found")))
                continue
            }
            // The delete, the content, and the log entry that tells replicas, in one transaction.
            try await transaction { conn in
                let generation = try await self.lockGeneration(conn) + 1
                try await conn.query("SELECT lo_unlink(content) FROM \(unescaped: table) WHERE attachment_id = \(id)", logger: logger)
                try await conn.query("DELETE FROM \(unescaped: table) WHERE attachment_id = \(id)", logger: logger)
                try await Self.attachmentsChanged(
                    conn, service: service, layerID: layerID, feature: attachment.featureGlobalID, generation: generation, logger: logger)
            }
            results.append(EditResult(objectId: id, globalId: nil, success: true))
        }
        return results
    }

    /// After an attachment of a feature was added or deleted: the feature is logged (no columns)
    /// at the transaction's generation, so replicas download its attachment list again.
    private static func attachmentsChanged(
        _ conn: PostgresConnection, service: String, layerID: Int, feature: String?, generation: Int64, logger: Logger
    ) async throws {
        guard let feature else { return }
        var log = PostgresChangeLog(service: service, layerID: layerID, generation: generation)
        log.append(globalID: feature, op: "update", columns: [])
        try await log.write(conn, logger: logger)
        try await PostgresChangeLog.setGeneration(conn, service: service, generation, logger: logger)
    }

    private func requireFeature(_ layer: PostgresLayer, _ objectID: Int64) async throws {
        var binds = PostgresBindings()
        binds.append(objectID)
        guard try await !rows("SELECT 1 FROM \(layer.table) WHERE \(layer.pk) = $1", binds).isEmpty else {
            throw SyncServiceError.notFound("feature \(objectID) of layer \(layer.definition.id)")
        }
    }
}
