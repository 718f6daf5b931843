import Foundation
import Logging
import OutpostCore
import OutpostDigest
import OutpostProtocol
import OutpostSyncService
import OutpostStorage
import PostgresNIO

/// Sync on PostgreSQL (docs/sync.md, docs/postgres.md): replicas, the batch ledger, the change feed, snapshots
/// and checksums, conflicts, and attachment content, all in the database so that any server
/// process can serve any request of any replica.
///
/// Exactly once across processes: a batch applies in the transaction that holds the service's
/// commit lock (its row in `outpost_services`), after reading the replica's ledger row under
/// that lock, so the same batch sent to two processes at once is applied by the first and
/// replayed by the second; the ledger's primary key (replica, seq) backs this up.
extension PostgresServiceBackend: SyncBackend {

    // MARK: - Replicas

    public func createReplica(_ request: ReplicaRequest, serviceURL: String, format: ReplicaFileFormat, writingTo url: URL) async throws -> ReplicaInfo {
        let schema = try await schema()
        try request.validate(against: schema)
        let replicaID = request.replicaID ?? GlobalID.make()
        let export = PostgresReplicaExport(backend: self, request: request, schema: schema, replicaID: replicaID, serviceURL: serviceURL)
        let service = name, logger = logger
        // One snapshot: the data written and the generation recorded agree.
        let generation = try await snapshotRead { conn in
            let generation = try await Self.generation(conn, service: service, logger: logger)
            switch format {
            case .geopackage: try await export.writeGeoPackage(conn, generation: generation, to: url)
            case .json: try await export.writeJSON(conn, generation: generation, to: url)
            }
            return generation
        }
        let info = try request.info(replicaID: replicaID, generation: generation, schema: schema, created: clock.milliseconds())
        guard request.syncModel != .none else { return info }
        let definition = try JSONValueEncoder().encode(info).jsonString
        try await transaction { conn in
            try await conn.query(
                """
                INSERT INTO outpost_replicas (replica_id, service, name, definition, replica_gen, last_seq, created_at)
                VALUES (\(replicaID), \(service), \(request.name), \(definition)::jsonb, \(generation), 0, \(info.creationDate))
                ON CONFLICT (replica_id) DO UPDATE SET replica_gen = least(outpost_replicas.replica_gen, EXCLUDED.replica_gen)
                WHERE outpost_replicas.service = EXCLUDED.service
                """, logger: logger)
        }
        return info
    }

    static func generation(_ conn: PostgresConnection, service: String, logger: Logger) async throws -> Int64 {
        for try await g in try await conn.query("SELECT generation FROM outpost_services WHERE name = \(service)", logger: logger).decode(Int64.self) { return g }
        throw SyncServiceError(.unavailable, "service \(service) is no longer in the database")
    }

    public func replica(id: String) async throws -> ReplicaInfo {
        let service = name, logger = logger
        return try await database { client in try await client.withConnection { try await Self.replica(id: id, service: service, $0, logger: logger) } }
    }

    /// A replica's info with its ledger position; `lock` holds its row to the end of the transaction.
    static func replica(id: String, service: String, _ conn: PostgresConnection, lock: Bool = false, logger: Logger) async throws -> ReplicaInfo {
        let normalized = ReplicaID.normalized(id)
        let found = try await replicas(conn, service: service, filter: "AND r.replica_id = $2" + (lock ? " FOR UPDATE OF r" : ""), binds: [normalized], logger: logger)
        guard let info = found.first else { throw SyncServiceError.notFound("replica \(id)") }
        return info
    }

    /// Replicas of a service with their ledger position and the service's generation and
    /// schema version, oldest first; `filter` narrows them (binds from $2).
    static func replicas(_ conn: PostgresConnection, service: String, filter: String, binds extra: [String], logger: Logger) async throws -> [ReplicaInfo] {
        var binds = PostgresBindings()
        binds.append(service)
        for value in extra { binds.append(value) }
        let rows = try await conn.query(
            PostgresQuery(
                unsafeSQL: """
                    SELECT r.definition::text, r.replica_gen, r.last_seq, r.last_sync_at, s.generation, s.schema_version
                    FROM outpost_replicas r JOIN outpost_services s ON s.name = r.service
                    WHERE r.service = $1 \(filter)
                    """ + (filter.contains("FOR UPDATE") ? "" : " ORDER BY r.created_at, r.replica_id"),
                binds: binds),
            logger: logger)
        var out: [ReplicaInfo] = []
        for try await (definition, replicaGen, lastSeq, lastSync, generation, version) in rows.decode((String, Int64, Int64, Int64?, Int64, Int).self) {
            var info = try JSONValueDecoder().decode(ReplicaInfo.self, from: Data(definition.utf8))
            info.replicaServerGen = replicaGen
            info.lastSeq = lastSeq
            info.lastSyncDate = lastSync
            info.serviceGeneration = generation
            info.serviceSchemaVersion = version
            out.append(info)
        }
        return out
    }

    public func replicas() async throws -> [ReplicaInfo] {
        let service = name, logger = logger
        return try await database { client in
            try await client.withConnection { conn in try await Self.replicas(conn, service: service, filter: "", binds: [], logger: logger) }
        }
    }

    public func copyReplica(id: String, name: String, generation: Int64) async throws -> ReplicaInfo {
        let service = self.name, logger = logger
        let copyID = GlobalID.make()
        return try await transaction { conn in
            let copy = try await Self.replica(id: id, service: service, conn, logger: logger).copy(id: copyID, name: name, generation: generation, created: self.clock.milliseconds())
            let definition = try JSONValueEncoder().encode(copy).jsonString
            try await conn.query(
                """
                INSERT INTO outpost_replicas (replica_id, service, name, definition, replica_gen, last_seq, created_at)
                VALUES (\(copyID), \(service), \(name), \(definition)::jsonb, \(generation), 0, \(copy.creationDate))
                """, logger: logger)
            return copy
        }
    }

    public func unregisterReplica(id: String) async throws {
        let service = name, logger = logger
        try await transaction { conn in
            _ = try await Self.replica(id: id, service: service, conn, lock: true, logger: logger)
            // The ledger goes with it (ON DELETE CASCADE).
            try await conn.query("DELETE FROM outpost_replicas WHERE replica_id = \(ReplicaID.normalized(id))", logger: logger)
        }
    }

    // MARK: - Change feed

    public func recordReceived(replicaID: String, upTo generation: Int64) async throws {
        let id = ReplicaID.normalized(replicaID)
        let logger = logger
        try await transaction { conn in
            // Informational, on every download's path: the commit does not wait for the WAL's
            // flush (as the SQLite backend's; a crash may take it, never another transaction).
            try await conn.query("SET LOCAL synchronous_commit = off", logger: logger)
            try await conn.query(
                "UPDATE outpost_replicas SET replica_gen = greatest(replica_gen, \(generation)), last_sync_at = \(self.clock.milliseconds()) WHERE replica_id = \(id)", logger: logger)
        }
    }

    public func windowRows(layerID: Int, since: Int64, upto: Int64, cap: Int) async throws -> Int {
        let service = name, logger = logger
        return try await snapshotRead { conn in
            try await Self.windowRows(conn, service: service, layerID: layerID, since: since, upto: upto, cap: cap, logger: logger)
        }
    }

    /// The layer's change-log rows in `since < generation ≤ upto`, counted no further than `cap`.
    static func windowRows(
        _ conn: PostgresConnection, service: String, layerID: Int, since: Int64, upto: Int64, cap: Int, logger: Logger
    ) async throws -> Int {
        var count: Int64 = 0
        for try await found in try await conn.query(
            """
            SELECT count(*) FROM (SELECT 1 FROM outpost_change_log WHERE service = \(service) AND layer_id = \(Int32(layerID))
              AND generation > \(since) AND generation <= \(upto) LIMIT \(Int64(cap))) w
            """, logger: logger
        ).decode(Int64.self) { count = found }
        return Int(count)
    }

    /// The schema as the replica's read sees it (read again if another process migrated the
    /// service) and the layer asked for.
    func scope(_ info: ReplicaInfo, _ layerID: Int, _ conn: PostgresConnection) async throws -> (ServiceSchema, PostgresLayer) {
        try await adopt(version: info.serviceSchemaVersion ?? 0, conn)
        return (serviceSchema, try layer(layerID))
    }

    static func layerInfo(_ id: Int, of info: ReplicaInfo) throws -> ReplicaInfo.Layer {
        guard let layerInfo = info.layers.first(where: { $0.id == id }) else { throw SyncServiceError.notFound("layer \(id) in replica \(info.replicaID)") }
        return layerInfo
    }

    public func snapshot(replicaID: String, layerID: Int, after: String?, limit: Int) async throws -> ChangePage {
        let service = name, logger = logger
        return try await snapshotRead { conn in
            let info = try await Self.replica(id: replicaID, service: service, conn, logger: logger)
            let (schema, layer) = try await self.scope(info, layerID, conn)
            let layerInfo = try Self.layerInfo(layerID, of: info)
            let generation = info.serviceGeneration
            var changes: [FeedChange] = []
            if var query = ReplicaScope(info: info, schema: schema).query(layerInfo, layer: layer.definition), let gid = layer.definition.globalIDField {
                query.afterGlobalID = after
                query.orderBy = [.init(gid)]
                query.limit = limit
                let fields = layer.definition.fields.filter { $0.type != .oid }
                for feature in try await Self.features(conn, layer, query, logger: logger) {
                    changes.append(try ReplicaRows.upsert(feature, fields: fields, generation: generation))
                }
                if info.attachmentsSyncDirection == .bidirectional && layer.definition.hasAttachments {
                    let attachments = try await Self.attachmentInfos(conn, service: service, layerID: layerID, features: changes.map(\.globalId), logger: logger)
                    for i in changes.indices { changes[i].attachments = attachments[changes[i].globalId] ?? [] }
                }
            }
            return ChangePage(layerId: layerID, since: 0, upto: generation, changes: changes, next: changes.count == limit ? changes.last?.globalId : nil)
        }
    }

    public func checksums(replicaID: String, layerIDs: [Int], since: Int64?) async throws -> ReplicaChecksums {
        let service = name, logger = logger
        return try await snapshotRead { conn in
            let info = try await Self.replica(id: replicaID, service: service, conn, logger: logger)
            try await self.adopt(version: info.serviceSchemaVersion ?? 0, conn)
            let schema = self.serviceSchema, layers = self.layers
            let scope = ReplicaScope(info: info, schema: schema)
            var out: [ReplicaChecksums.Layer] = []
            for id in layerIDs {
                guard let layer = layers[id], let layerInfo = info.layers.first(where: { $0.id == id }) else {
                    throw SyncServiceError.notFound("layer \(id) in replica \(replicaID)")
                }
                var acc = FeatureDigest.Accumulator()
                // The features changed in the window, when they are few: the checksum of those.
                var window: [String]?
                if let since, try await Self.windowRows(
                    conn, service: service, layerID: id, since: since, upto: info.serviceGeneration, cap: ReplicaChecksums.maxWindowRows + 1, logger: logger
                ) <= ReplicaChecksums.maxWindowRows {
                    var gids: [String] = []
                    for try await gid in try await conn.query(
                        """
                        SELECT DISTINCT globalid COLLATE "C" FROM outpost_change_log WHERE service = \(service) AND layer_id = \(Int32(id))
                          AND generation > \(since) AND generation <= \(info.serviceGeneration)
                        ORDER BY 1 LIMIT \(Int64(ReplicaChecksums.maxWindowFeatures + 1))
                        """, logger: logger
                    ).decode(String.self) { gids.append(gid) }
                    if gids.count <= ReplicaChecksums.maxWindowFeatures { window = gids }
                }
                if var query = scope.query(layerInfo, layer: layer.definition), window?.isEmpty != true {
                    if let window { query.globalIDs = window }
                    // A page at a time, by object id: never the whole layer in memory.
                    query.orderBy = [.init(layer.definition.objectIDField)]
                    query.limit = 2000
                    while true {
                        let page = try await Self.features(conn, layer, query, logger: logger)
                        for feature in page { acc.add(feature, layer: layer.definition) }
                        guard page.count == query.limit, let last = page.last?.objectID else { break }
                        query.afterObjectID = last
                    }
                }
                out.append(.init(id: id, count: acc.count, checksum: acc.hex, since: window == nil ? nil : since, globalIds: window))
            }
            return ReplicaChecksums(generation: info.serviceGeneration, layers: out)
        }
    }

    // MARK: - Retried synchronizeReplica requests

    public func replayedResponse(key: String) async throws -> String? {
        var binds = PostgresBindings()
        binds.append(name)
        binds.append(key)
        return try await rows("SELECT response FROM outpost_request_replay WHERE service = $1 AND request_key = $2", binds).first?.decode(String.self)
    }

    public func storeResponse(key: String, response: String, retention: Duration) async throws {
        let service = name, logger = logger, seconds = Double(retention.components.seconds)
        try await transaction { conn in
            try await conn.query(
                "DELETE FROM outpost_request_replay WHERE service = \(service) AND created_at < now() - make_interval(secs => \(seconds))", logger: logger)
            try await conn.query(
                """
                INSERT INTO outpost_request_replay (service, request_key, response) VALUES (\(service), \(key), \(response))
                ON CONFLICT (service, request_key) DO UPDATE SET response = excluded.response, created_at = now()
                """, logger: logger)
        }
    }

    // MARK: - Conflict records

    /// The conflict records kept on the server, oldest first, with their current state.
    public func conflictRecords() async throws -> [ConflictRecord] {
        var binds = PostgresBindings()
        binds.append(name)
        return try await rows("SELECT conflict_id, record::text, state FROM outpost_conflicts WHERE service = $1 ORDER BY conflict_id", binds).map { row in
            let (id, text, state) = try row.decode((Int64, String, String?).self)
            var record = try JSONValueDecoder().decode(ConflictRecord.self, from: Data(text.utf8))
            record.id = id
            record.state = state
            return record
        }
    }

    // MARK: - Attachments by global id

    /// The attachments of features (by the feature's global id), with their content hashes.
    static func attachmentInfos(_ conn: PostgresConnection, service: String, layerID: Int, features: [String], logger: Logger) async throws -> [String: [AttachmentInfo]] {
        guard !features.isEmpty else { return [:] }
        var out: [String: [AttachmentInfo]] = [:]
        let table = "\(PostgresServiceStore.quoted(service)).outpost_attachments"
        for try await (owner, gid, name, type, size, sha, keywords) in try await conn.query(
            """
            SELECT feature_globalid, globalid, name, content_type, size, sha256, keywords FROM \(unescaped: table)
            WHERE layer_id = \(Int32(layerID)) AND feature_globalid = ANY(\(features)) ORDER BY attachment_id
            """, logger: logger
        ).decode((String, String, String, String, Int64, String, String?).self) {
            out[owner, default: []].append(AttachmentInfo(globalId: gid, name: name, contentType: type, size: size, sha256: sha, keywords: keywords))
        }
        return out
    }

    public func attachmentInfo(globalID: String) async throws -> AttachmentInfo {
        guard let gid = GlobalID.normalized(globalID) else { throw SyncServiceError.notFound("attachment \(globalID)") }
        var binds = PostgresBindings()
        binds.append(gid)
        guard let row = try await rows("SELECT globalid, name, content_type, size, sha256, keywords FROM \(attachmentTable) WHERE globalid = $1", binds).first else {
            throw SyncServiceError.notFound("attachment \(globalID)")
        }
        let (id, name, type, size, sha, keywords) = try row.decode((String, String, String, Int64, String, String?).self)
        return AttachmentInfo(globalId: id, name: name, contentType: type, size: size, sha256: sha, keywords: keywords)
    }

    public func attachmentBytes(globalID: String, offset: Int64, length: Int) async throws -> Data {
        guard let gid = GlobalID.normalized(globalID) else { throw SyncServiceError.notFound("attachment \(globalID)") }
        let table = attachmentTable, logger = logger
        return try await transaction { conn in
            for try await buffer in try await conn.query(
                """
                SELECT CASE WHEN \(offset) >= size THEN ''::bytea ELSE lo_get(content, \(offset), \(Int32(clamping: length))) END
                FROM \(unescaped: table) WHERE globalid = \(gid)
                """, logger: logger
            ).decode(ByteBuffer.self) {
                var b = buffer
                return Data(b.readBytes(length: b.readableBytes) ?? [])
            }
            throw SyncServiceError.notFound("attachment \(globalID)")
        }
    }

    // MARK: - Attachment content uploaded by hash

    public func blobStatus(sha256: String) async throws -> BlobStatus {
        try Self.requireHash(sha256)
        let service = name, logger = logger
        return try await database { client in
            try await client.withConnection { try await Self.blobStatus(sha256, service: service, $0, logger: logger) }
        }
    }

    static func requireHash(_ sha: String) throws {
        guard sha.count == 64, sha.allSatisfy({ $0.isHexDigit && !$0.isUppercase }) else {
            throw SyncServiceError.invalidParameter("sha256", "expected 64 lower-case hex digits")
        }
    }

    static func blobStatus(_ sha: String, service: String, _ conn: PostgresConnection, lock: Bool = false, logger: Logger) async throws -> BlobStatus {
        for try await (received, complete) in try await conn.query(
            "SELECT received, complete FROM outpost_blobs WHERE service = \(service) AND sha256 = \(sha) \(unescaped: lock ? "FOR UPDATE" : "")", logger: logger
        ).decode((Int64, Bool).self) {
            return BlobStatus(sha256: sha, received: received, complete: complete)
        }
        return BlobStatus(sha256: sha, received: 0, complete: false)
    }

    /// Appends a chunk at `offset`: a `conflict` when the received bytes end elsewhere (its
    /// details say where), an `invalidParameter` past `total`, a `contentMismatch` when the
    /// complete content does not hash to `sha256` (it is discarded). The content is checked a megabyte at a time, never whole in memory here.
    public func appendBlob(sha256: String, offset: Int64, total: Int64, bytes: Data) async throws -> BlobStatus {
        try Self.requireHash(sha256)
        guard total >= 0, offset >= 0, offset + Int64(bytes.count) <= total else {
            throw SyncServiceError.invalidParameter("size", "\(offset) + \(bytes.count) bytes is past the declared size \(total)")
        }
        let service = name, logger = logger
        let sha = sha256
        let outcome: Result<BlobStatus, SyncServiceError> = try await transaction { conn in
            // Creating the row first (if absent) gives concurrent uploads of one content a row to queue on.
            try await conn.query(
                """
                INSERT INTO outpost_blobs (service, sha256, total, received, content) VALUES (\(service), \(sha), \(total), 0, lo_create(0))
                ON CONFLICT (service, sha256) DO NOTHING
                """, logger: logger)
            let status = try await Self.blobStatus(sha, service: service, conn, lock: true, logger: logger)
            if status.complete { return .success(status) }
            guard offset == status.received else {
                throw SyncServiceError(.conflict, "content \(sha.prefix(12))… continues at byte \(status.received), not \(offset)", details: ["received: \(status.received)"])
            }
            let now = offset + Int64(bytes.count)
            try await conn.query(
                """
                SELECT lo_put(content, \(offset), \(ByteBuffer(bytes: bytes))) FROM outpost_blobs WHERE service = \(service) AND sha256 = \(sha)
                """, logger: logger)
            guard now == total else {
                try await conn.query("UPDATE outpost_blobs SET received = \(now) WHERE service = \(service) AND sha256 = \(sha)", logger: logger)
                return .success(BlobStatus(sha256: sha, received: now, complete: false))
            }
            var hash = SHA256()
            var position: Int64 = 0
            while position < total {
                var piece = ByteBuffer()
                for try await b in try await conn.query(
                    "SELECT lo_get(content, \(position), \(Int32(1 << 20))) FROM outpost_blobs WHERE service = \(service) AND sha256 = \(sha)", logger: logger
                ).decode(ByteBuffer.self) { piece = b }
                guard piece.readableBytes > 0 else { break }
                piece.withUnsafeReadableBytes { hash.update($0) }
                position += Int64(piece.readableBytes)
            }
            guard SHA256.hexString(hash.finalize()) == sha else {
                try await conn.query(
                    "SELECT lo_unlink(content) FROM outpost_blobs WHERE service = \(service) AND sha256 = \(sha)", logger: logger)
                try await conn.query("DELETE FROM outpost_blobs WHERE service = \(service) AND sha256 = \(sha)", logger: logger)
                return .failure(SyncServiceError(.contentMismatch, "the uploaded content does not match its SHA-256 \(sha.prefix(12))…; it was discarded, send it again"))
            }
            try await conn.query(
                "UPDATE outpost_blobs SET received = \(now), complete = true WHERE service = \(service) AND sha256 = \(sha)", logger: logger)
            return .success(BlobStatus(sha256: sha, received: now, complete: true))
        }
        return try outcome.get()
    }
}
