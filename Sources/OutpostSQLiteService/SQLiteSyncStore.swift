import Foundation
import OutpostCore
import OutpostProtocol
import OutpostStorage
import OutpostSyncService

/// The sync store of a service GeoPackage: each `SyncService` step runs inside one GRDB
/// transaction, on that transaction's own thread (``ConnectionThread``), and each primitive is
/// a statement or two on its connection. SQLite's one writer is the commit lock.
extension SQLiteServiceBackend: SyncStore {
    /// The layers' whole checksums known at the generation the transaction starts from move
    /// forward with it once it commits (`LayerChecksums`): it lists the rows it writes in them.
    public func writeTransaction<T: Sendable>(_ body: @escaping @Sendable (SQLiteSyncTransaction) async throws -> T) async throws -> T {
        let blobs = blobs
        let tracking = LayerChecksums.Tracking(layerChecksums, geodatabase: geodatabase)
        let pacing = BatchApplier.HelperPacing(rawValue: readAheadPacing.load(ordering: .relaxed)) ?? .free
        do {
            let result = try await geodatabase.write { conn in
                let tx = SQLiteSyncTransaction(conn: conn, blobs: blobs, pacing: pacing)
                let run = { try ConnectionThread.run { try await body(tx) } }
                let tables = try tracking.begin(conn)
                guard !tables.isEmpty else { return try run() }
                let (result, rows) = try conn.trackingWrittenRows(of: tables, run)
                tracking.written(rows, generation: try ServiceStore.generation(conn))
                return result
            }
            tracking.committed()
            return result
        } catch {
            tracking.cancel()
            throw error
        }
    }

    public func readTransaction<T: Sendable>(_ body: @escaping @Sendable (SQLiteSyncTransaction) async throws -> T) async throws -> T {
        let blobs = blobs
        return try await geodatabase.read { conn in
            let tx = SQLiteSyncTransaction(conn: conn, blobs: blobs)
            return try ConnectionThread.run { try await body(tx) }
        }
    }

    /// A framed batch's runs are applied as they arrive (the transaction's thread waits for them).
    public var appliesStreamedBatches: Bool { true }
}

/// One transaction on a service GeoPackage (see ``SQLiteServiceBackend``'s `SyncStore`
/// conformance). Used only on the transaction's thread, where its body runs.
public struct SQLiteSyncTransaction: SyncTransaction, @unchecked Sendable {
    let conn: GeodatabaseConnection
    let blobs: BlobStore
    /// How the batch writer and its read-ahead helper meet (``BatchApplier/HelperPacing``).
    var pacing: BatchApplier.HelperPacing = .free

    public func lockGeneration() throws -> Int64 { try ServiceStore.generation(conn) }

    public func replica(_ id: String, forUpdate: Bool) throws -> ReplicaInfo { try SQLiteServiceBackend.replica(id: id, conn) }

    public func ledgerEntry(replicaID: String, seq: Int64) throws -> BatchAdmission.LedgerEntry? {
        try conn.query(
            "SELECT hash, result FROM outpost_batch_ledger WHERE replica_id = ? AND seq = ?", arguments: [.text(replicaID), .integer(seq)]
        ).first.map { BatchAdmission.LedgerEntry(hash: $0[0].textValue ?? "", result: $0[1].textValue ?? "") }
    }

    public func droppedFields(since version: Int) throws -> [Int: Set<String>] { try SQLiteServiceBackend.droppedFields(since: version, conn) }

    public func resolveConflicts(_ ids: [Int64]) throws {
        try conn.execute(
            "UPDATE outpost_conflicts SET state = 'resolved' WHERE state = 'open' AND conflict_id IN (SELECT value FROM json_each(?))",
            arguments: [.text(JSONValue.array(ids.map { .integer($0) }).jsonString)])
    }

    public func applier(_ context: BatchContext) -> BatchApplier {
        BatchApplier(conn: conn, schema: conn.geodatabase.schema, context: context, blobs: blobs, pacing: pacing)
    }

    public func record(_ commit: BatchAdmission.Commit, at time: Int64) throws {
        if let generation = commit.advancesGenerationTo { try ServiceStore.setGeneration(conn, generation) }
        let replica = SQLLiteral.text(commit.replicaID)
        try writeLedgerRow(
            replica: replica, seq: commit.seq, batchID: commit.batchID, hash: commit.hash, result: commit.answer.json,
            generation: commit.advancesGenerationTo)
        try conn.execute("DELETE FROM outpost_batch_ledger WHERE replica_id = ? AND seq < ?", arguments: [replica, .integer(commit.pruneBelow)])
        try conn.execute(
            "UPDATE outpost_replicas SET last_seq = ?, last_sync_at = ? WHERE replica_id = ?", arguments: [.integer(commit.lastSeq), .integer(time), replica])
    }

    public func keep(_ rejection: BatchAdmission.KeptRejection) throws {
        try writeLedgerRow(
            replica: .text(rejection.replicaID), seq: rejection.seq, batchID: rejection.batchID, hash: rejection.hash, result: rejection.result,
            generation: nil)
    }

    /// The ledger's row for one sequence number of a replica, replacing a rolled-back batch's kept answer.
    private func writeLedgerRow(replica: SQLLiteral, seq: Int64, batchID: String, hash: String, result: String, generation: Int64?) throws {
        try conn.execute(
            "INSERT OR REPLACE INTO outpost_batch_ledger (replica_id, seq, batch_id, hash, result, generation) VALUES (?, ?, ?, ?, ?, ?)",
            arguments: [replica, .integer(seq), .text(batchID), .text(hash), .text(result), generation.map { .integer($0) } ?? .null])
    }

    public func schema(knownVersion version: Int) -> ServiceSchema { conn.geodatabase.schema }

    public func othersChanged(layerID: Int, since: Int64, upto: Int64, replicaID: String) throws -> Bool {
        try conn.query(
            SQLiteServiceBackend.othersInWindowSQL, arguments: [.integer(Int64(layerID)), .integer(since), .integer(upto), .text(replicaID)]
        ).first?[0].integerValue == 1
    }

    public func changedFeatures(layerID: Int, since: Int64, upto: Int64, after: String?, limit: Int, replicaID: String) throws -> [ChangeFeedAssembly.Row] {
        let byWindow = try SQLiteServiceBackend.readsFeedByWindow(conn, layerID: layerID, since: since, upto: upto, limit: limit)
        // Stepped in place (a feed reads every row of the window once, the replica's own echoes
        // too): no GRDB row and array of literals per row.
        var rows: [ChangeFeedAssembly.Row] = []
        rows.reserveCapacity(min(limit, 4096))
        try conn.forEachRow(
            """
            SELECT globalid, max(generation), sum(CASE WHEN origin_replica IS ? THEN 0 ELSE 1 END), max(op = 'insert'), max(op = 'delete')
            FROM outpost_change_log\(byWindow ? " INDEXED BY outpost_change_log_feed" : "")
            WHERE layer_id = ? AND generation > ? AND generation <= ? AND globalid > ?
            GROUP BY globalid ORDER BY globalid LIMIT ?
            """,
            arguments: [.text(replicaID), .integer(Int64(layerID)), .integer(since), .integer(upto), .text(after ?? ""), .integer(Int64(limit))]
        ) { row in
            guard let gid = row.text(0), let generation = row.integer(1) else { return }
            rows.append(
                ChangeFeedAssembly.Row(
                    globalID: gid, generation: generation, echo: (row.integer(2) ?? 0) == 0, inserted: (row.integer(3) ?? 0) != 0,
                    deleted: (row.integer(4) ?? 0) != 0))
        }
        return rows
    }

    /// Whole rows read straight as sync values (no `Feature` each); a read with an exact spatial
    /// filter, or only for presence, through the feature reader.
    public func syncRows(_ layer: LayerDefinition, matching reads: [FeatureQuery]) throws -> [String: FeatureTable.SyncRow] {
        var inScope: [String: FeatureTable.SyncRow] = [:]
        let table = try conn.geodatabase.table(id: layer.id)
        let fields = layer.fields.filter { $0.type != .oid }
        for read in reads {
            if read.intersecting == nil, read.outFields == nil, read.returnGeometry {
                try table.forEachSyncRow(matching: read, in: conn) { inScope[$0.globalID] = $0 }
            } else {
                try table.forEach(matching: read, in: conn) { inScope[$0.globalID!] = try ReplicaRows.syncRow($0, fields: fields) }
            }
        }
        return inScope
    }

    /// Whole rows read as stored (no value or geometry decoded); a read with an exact spatial
    /// filter finds its features through the feature reader, then reads them so; a read only
    /// for presence, through the feature reader.
    public func storedRows(_ layer: LayerDefinition, matching reads: [FeatureQuery]) throws -> [String: FeedRow?]? {
        let table = try conn.geodatabase.table(id: layer.id)
        let columns = ReplicaRows.storedColumns(of: table)
        var inScope: [String: FeedRow?] = [:]
        func readStored(_ read: FeatureQuery) throws {
            try table.forEachStoredRow(matching: read, in: conn) { gid, values, geometry in
                inScope[gid] = FeedRow(columns: columns, values: values, geometry: geometry)
            }
        }
        for read in reads {
            if read.outFields != nil || !read.returnGeometry {
                try table.forEach(matching: read, in: conn) { inScope[$0.globalID!] = .some(nil) }
            } else if read.intersecting != nil {
                var found: [String] = []
                try table.forEach(matching: read, in: conn) { found.append($0.globalID!) }
                var again = FeatureQuery()
                again.globalIDs = found
                if !found.isEmpty { try readStored(again) }
            } else {
                try readStored(read)
            }
        }
        return inScope
    }

    public func attachmentInfos(_ layer: LayerDefinition, features globalIDs: [String]) throws -> [String: [AttachmentInfo]] {
        try ServiceStore.attachmentInfos(conn, layer: layer.name, featureGlobalIDs: globalIDs)
    }
}
