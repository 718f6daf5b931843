import Foundation
import Logging
import OutpostCore
import OutpostProtocol
import OutpostStorage
import OutpostSyncService
import PostgresNIO

/// The sync store on PostgreSQL: a write transaction on one pooled connection, a read in a
/// repeatable-read snapshot, and each primitive a statement in the service's tables. The
/// commit lock is the service's row in `outpost_services`, so that batches sent to several
/// server processes at once apply one at a time.
extension PostgresServiceBackend: SyncStore {
    public func writeTransaction<T: Sendable>(_ body: @escaping @Sendable (PostgresSyncTransaction) async throws -> T) async throws -> T {
        try await transaction { conn in try await body(PostgresSyncTransaction(conn: conn, backend: self)) }
    }

    public func readTransaction<T: Sendable>(_ body: @escaping @Sendable (PostgresSyncTransaction) async throws -> T) async throws -> T {
        try await snapshotRead { conn in try await body(PostgresSyncTransaction(conn: conn, backend: self)) }
    }

    /// Whole batches only: a connection of the pool is not held while a replica's frames come.
    public var appliesStreamedBatches: Bool { false }
}

/// One transaction of a PostgreSQL service (see ``PostgresServiceBackend``'s `SyncStore`
/// conformance).
public struct PostgresSyncTransaction: SyncTransaction {
    let conn: PostgresConnection
    let backend: PostgresServiceBackend
    private var service: String { backend.name }
    private var logger: Logger { backend.logger }

    public func lockGeneration() async throws -> Int64 { try await backend.lockGeneration(conn) }

    public func replica(_ id: String, forUpdate: Bool) async throws -> ReplicaInfo {
        try await PostgresServiceBackend.replica(id: id, service: service, conn, lock: forUpdate, logger: logger)
    }

    public func ledgerEntry(replicaID: String, seq: Int64) async throws -> BatchAdmission.LedgerEntry? {
        var ledger: BatchAdmission.LedgerEntry?
        for try await (hash, text) in try await conn.query(
            "SELECT hash, result FROM outpost_batch_ledger WHERE replica_id = \(replicaID) AND seq = \(seq)", logger: logger
        ).decode((String, String).self) { ledger = .init(hash: hash, result: text) }
        return ledger
    }

    public func droppedFields(since version: Int) async throws -> [Int: Set<String>] {
        try await PostgresServiceBackend.droppedFields(since: version, service: service, conn, logger: logger)
    }

    public func resolveConflicts(_ ids: [Int64]) async throws {
        try await conn.query(
            "UPDATE outpost_conflicts SET state = 'resolved' WHERE service = \(service) AND state = 'open' AND conflict_id = ANY(\(ids))", logger: logger)
    }

    public func applier(_ context: BatchContext) -> PostgresBatchApplier {
        PostgresBatchApplier(conn: conn, service: service, logger: logger, layers: backend.layers, context: context)
    }

    public func record(_ commit: BatchAdmission.Commit, at time: Int64) async throws {
        if let generation = commit.advancesGenerationTo { try await PostgresChangeLog.setGeneration(conn, service: service, generation, logger: logger) }
        let replica = commit.replicaID
        try await writeLedgerRow(
            replica: replica, seq: commit.seq, batchID: commit.batchID, hash: commit.hash, result: commit.answer.json,
            generation: commit.advancesGenerationTo)
        try await conn.query("DELETE FROM outpost_batch_ledger WHERE replica_id = \(replica) AND seq < \(commit.pruneBelow)", logger: logger)
        try await conn.query("UPDATE outpost_replicas SET last_seq = \(commit.lastSeq), last_sync_at = \(time) WHERE replica_id = \(replica)", logger: logger)
    }

    public func keep(_ rejection: BatchAdmission.KeptRejection) async throws {
        try await writeLedgerRow(
            replica: rejection.replicaID, seq: rejection.seq, batchID: rejection.batchID, hash: rejection.hash, result: rejection.result,
            generation: nil)
    }

    /// The ledger's row for one sequence number of a replica, replacing a rolled-back batch's kept answer.
    private func writeLedgerRow(replica: String, seq: Int64, batchID: String, hash: String, result: String, generation: Int64?) async throws {
        try await conn.query(
            """
            INSERT INTO outpost_batch_ledger (replica_id, seq, batch_id, hash, result, generation)
            VALUES (\(replica), \(seq), \(batchID), \(hash), \(result), \(generation))
            ON CONFLICT (replica_id, seq) DO UPDATE SET batch_id = EXCLUDED.batch_id, hash = EXCLUDED.hash, result = EXCLUDED.result, generation = EXCLUDED.generation
            """, logger: logger)
    }

    /// Read again from the database when another process migrated the service.
    public func schema(knownVersion version: Int) async throws -> ServiceSchema {
        try await backend.adopt(version: version, conn)
        return backend.serviceSchema
    }

    public func othersChanged(layerID: Int, since: Int64, upto: Int64, replicaID: String) async throws -> Bool {
        var others = false
        for try await found in try await conn.query(
            """
            SELECT EXISTS (SELECT 1 FROM outpost_change_log WHERE service = \(service) AND layer_id = \(Int32(layerID))
              AND generation > \(since) AND generation <= \(upto) AND origin_replica IS DISTINCT FROM \(replicaID))
            """, logger: logger
        ).decode(Bool.self) { others = found }
        return others
    }

    public func changedFeatures(
        layerID: Int, since: Int64, upto: Int64, after: String?, limit: Int, replicaID: String
    ) async throws -> [ChangeFeedAssembly.Row] {
        var changed: [ChangeFeedAssembly.Row] = []
        for try await (gid, generation, others, inserted, deleted) in try await conn.query(
            """
            SELECT globalid, max(generation), sum(CASE WHEN origin_replica IS NOT DISTINCT FROM \(replicaID) THEN 0 ELSE 1 END)::bigint,
              bool_or(op = 'insert'), bool_or(op = 'delete')
            FROM outpost_change_log
            WHERE service = \(service) AND layer_id = \(Int32(layerID)) AND generation > \(since) AND generation <= \(upto)
              AND globalid COLLATE "C" > \(after ?? "")
            GROUP BY globalid ORDER BY globalid COLLATE "C" LIMIT \(Int64(limit))
            """, logger: logger
        ).decode((String, Int64, Int64, Bool, Bool).self) {
            changed.append(.init(globalID: gid, generation: generation, echo: others == 0, inserted: inserted, deleted: deleted))
        }
        return changed
    }

    public func syncRows(_ layer: LayerDefinition, matching reads: [FeatureQuery]) async throws -> [String: FeatureTable.SyncRow] {
        let table = try backend.layer(layer.id)
        let fields = layer.fields.filter { $0.type != .oid }
        var inScope: [String: FeatureTable.SyncRow] = [:]
        for read in reads {
            for feature in try await PostgresServiceBackend.features(conn, table, read, logger: logger) {
                inScope[feature.globalID!] = try ReplicaRows.syncRow(feature, fields: fields)
            }
        }
        return inScope
    }

    public func attachmentInfos(_ layer: LayerDefinition, features globalIDs: [String]) async throws -> [String: [AttachmentInfo]] {
        try await PostgresServiceBackend.attachmentInfos(conn, service: service, layerID: layer.id, features: globalIDs, logger: logger)
    }
}
