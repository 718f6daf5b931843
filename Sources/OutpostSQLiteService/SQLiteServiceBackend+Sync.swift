import Foundation
import OutpostCore
import OutpostProtocol
import OutpostStorage
import OutpostSyncService

extension SQLiteServiceBackend: SyncBackend {
    // MARK: - Replicas

    public func createReplica(_ request: ReplicaRequest, serviceURL: String, format: ReplicaFileFormat, writingTo url: URL) async throws -> ReplicaInfo {
        let schema = geodatabase.schema
        try request.validate(against: schema)
        let replicaID = GlobalID.make()
        let gdb = geodatabase
        let scope = ReplicaScope(request: request, schema: schema)
        // One read transaction: the data written and the generation recorded are the same snapshot.
        let generation = try await gdb.read { conn in
            let generation = try ServiceStore.generation(conn)
            let export = ReplicaExport(scope: scope, request: request, schema: schema, server: conn, generation: generation, replicaID: replicaID)
            switch format {
            case .geopackage: try export.writeGeoPackage(serviceURL: serviceURL, to: url)
            case .json: try export.writeJSON(serviceURL: serviceURL, to: url)
            }
            return generation
        }
        let info = try request.info(replicaID: replicaID, generation: generation, schema: schema, created: clock.milliseconds())
        guard request.syncModel != .none else { return info }
        let definition = try JSONValueEncoder().encode(info).jsonString
        let created = info.creationDate
        try await gdb.write { conn in
            try conn.execute(
                "INSERT INTO outpost_replicas (replica_id, name, definition, replica_gen, last_seq, created_at) VALUES (?, ?, ?, ?, 0, ?)",
                arguments: [.text(replicaID), .text(request.name), .text(definition), .integer(generation), .integer(created)])
        }
        return info
    }


    public func replica(id: String) async throws -> ReplicaInfo {
        try await geodatabase.read { conn in try Self.replica(id: id, conn) }
    }

    static func replica(id: String, _ conn: GeodatabaseConnection) throws -> ReplicaInfo {
        let normalized = ReplicaID.normalized(id)
        guard let row = try conn.query(
            "SELECT definition, replica_gen, last_seq, last_sync_at FROM outpost_replicas WHERE replica_id = ?",
            arguments: [.text(normalized)]).first
        else { throw SyncServiceError.notFound("replica \(id)") }
        var info = try JSONValueDecoder().decode(ReplicaInfo.self, from: Data(row[0].textValue!.utf8))
        info.replicaServerGen = row[1].integerValue ?? 0
        info.lastSeq = row[2].integerValue ?? 0
        info.lastSyncDate = row[3].integerValue
        info.serviceGeneration = try ServiceStore.generation(conn)
        info.serviceSchemaVersion = conn.geodatabase.schema.schemaVersion
        return info
    }

    public func replicas() async throws -> [ReplicaInfo] {
        try await geodatabase.read { conn in
            try conn.query("SELECT replica_id FROM outpost_replicas ORDER BY created_at").map { try Self.replica(id: $0[0].textValue!, conn) }
        }
    }

    public func copyReplica(id: String, name: String, generation: Int64) async throws -> ReplicaInfo {
        let copyID = GlobalID.make()
        let copy = try await geodatabase.write { conn in
            let copy = try Self.replica(id: id, conn).copy(id: copyID, name: name, generation: generation, created: self.clock.milliseconds())
            try conn.execute(
                "INSERT INTO outpost_replicas (replica_id, name, definition, replica_gen, last_seq, created_at) VALUES (?, ?, ?, ?, 0, ?)",
                arguments: [.text(copyID), .text(name), .text(try JSONValueEncoder().encode(copy).jsonString), .integer(generation), .integer(copy.creationDate)])
            return copy
        }
        return copy
    }

    public func unregisterReplica(id: String) async throws {
        try await geodatabase.write { conn in
            _ = try Self.replica(id: id, conn)
            let gid = SQLLiteral.text(ReplicaID.normalized(id))
            try conn.execute("DELETE FROM outpost_batch_ledger WHERE replica_id = ?", arguments: [gid])
            try conn.execute("DELETE FROM outpost_replicas WHERE replica_id = ?", arguments: [gid])
        }
    }

    // MARK: - Batches

    public func batchResult(replicaID: String, seq: Int64) async throws -> BatchResult? {
        try await geodatabase.read { conn in
            guard let text = try conn.query(
                "SELECT result FROM outpost_batch_ledger WHERE replica_id = ? AND seq = ?",
                arguments: [.text(ReplicaID.normalized(replicaID)), .integer(seq)]).first?[0].textValue
            else { return nil }
            return try BatchAdmission.replayed(text)
        }
    }

    public func applyBatchAnswering(_ batch: UploadBatch, hash: String) async throws -> BatchAnswer {
        try await apply(batch, hash: hash, streamed: nil)
    }

    public func applyStreamedBatch(_ head: UploadBatch.FramedReader.Head, from body: StreamedBatch) async throws -> BatchAnswer {
        try await apply(head.batch, hash: nil, streamed: (head.layers, body))
    }

    /// Applies a whole batch, or one whose frames `streamed` hands over as they arrive (its
    /// `batch` has no edits; the layers its head announces say what it may hold), in one write
    /// transaction.
    private func apply(
        _ batch: UploadBatch, hash: String?, streamed: (announced: [UploadBatch.AnnouncedLayer], body: StreamedBatch)?
    ) async throws -> BatchAnswer {
        let gdb = geodatabase
        let faults = self.faults
        return try await gdb.write { conn -> BatchAnswer.Pending in
            let replicaID = ReplicaID.normalized(batch.replicaId)
            let info = try Self.replica(id: replicaID, conn)
            let ledger = try conn.query(
                "SELECT hash, result FROM outpost_batch_ledger WHERE replica_id = ? AND seq = ?",
                arguments: [.text(replicaID), .integer(batch.seq)]
            ).first.map { BatchAdmission.LedgerEntry(hash: $0[0].textValue ?? "", result: $0[1].textValue ?? "") }
            var admitted: BatchAdmission.Admitted
            if let streamed {
                var announced = batch
                announced.layers = streamed.announced.map { BatchLayer(id: $0.id, edits: []) }
                guard let a = try BatchAdmission.admitStreamed(announced, replica: info, ledger: ledger) else { throw StreamedBatch.WholeBodyNeeded() }
                admitted = a
            } else {
                switch try BatchAdmission.admit(batch, hash: hash ?? "", replica: info, ledger: ledger) {
                case .replay(let answer): return .init(replay: answer)
                case .apply(let a): admitted = a
                }
            }
            let generation = try ServiceStore.generation(conn) + 1
            let requestedRule = try BatchPlanner.rule(batch.conflictPolicy)
            var applier = BatchApplier(
                conn: conn, schema: conn.geodatabase.schema, generation: generation, origin: (replicaID, batch.seq), rollbackOnFailure: batch.rollbackOnFailure,
                requestedRule: requestedRule,
                droppedFields: batch.schemaVersion < conn.geodatabase.schema.schemaVersion ? try Self.droppedFields(since: batch.schemaVersion, conn) : [:])
            // Manual conflicts the replica resolved: its resolving edits are in this batch.
            if let resolved = batch.resolvedConflicts, !resolved.isEmpty {
                try conn.execute(
                    "UPDATE outpost_conflicts SET state = 'resolved' WHERE state = 'open' AND conflict_id IN (SELECT value FROM json_each(?))",
                    arguments: [.text(JSONValue.array(resolved.map { .integer($0) }).jsonString)])
            }
            var layers: [BatchLayerResult] = []
            if let (announced, body) = streamed {
                // Each announced layer in turn, its runs of frames as they arrive (a run of a
                // later layer ends it). A layer's work begins before its first frame comes: its
                // R-tree's triggers are set aside while the replica still writes the frame.
                var next: StreamedBatch.Run?
                var taken = true
                for (position, layer) in announced.enumerated() {
                    var received = false
                    let results = try applier.apply(layerID: layer.id, expectedGeometryWrites: layer.geometryWrites) {
                        if taken {
                            next = try body.nextRun()
                            taken = false
                        }
                        guard let run = next, run.position == position else { return nil }
                        taken = true
                        received = true
                        return run.edits
                    }
                    if received { layers.append(BatchLayerResult(id: layer.id, results: results)) }
                }
                // The last layer ended with the body (its reader keeps frames in the head's order).
                guard next == nil, let whole = body.hash else { throw StreamedBatch.WholeBodyNeeded() }
                admitted.hash = whole
            } else {
                for layerEdits in batch.layers {
                    layers.append(BatchLayerResult(id: layerEdits.id, results: try applier.apply(layerEdits)))
                }
            }
            var attachments: [BatchEditResult]?
            if let edits = batch.attachments, !edits.isEmpty { attachments = try applier.apply(edits, blobs: self.blobs) }
            switch admitted.finish(generation: generation, applied: applier.applied, failed: applier.failed, layers: layers, attachments: attachments) {
            case .rejected(let rejected):
                throw rejected
            case .commit(let commit):
                let pending = BatchAnswer.Pending(applied: commit.answer, stages: applier.stages)
                try Self.record(commit, at: self.clock.milliseconds(), conn)
                try faults.check("server.beforeCommit")
                return pending
            }
        }.committed()
    }

    /// Writes what an applied batch commits with: the generation, the ledger row (pruning the
    /// older ones) and the replica's position.
    static func record(_ commit: BatchAdmission.Commit, at time: Int64, _ conn: GeodatabaseConnection) throws {
        if let generation = commit.advancesGenerationTo { try ServiceStore.setGeneration(conn, generation) }
        let replica = SQLLiteral.text(commit.replicaID)
        try conn.execute(
            "INSERT INTO outpost_batch_ledger (replica_id, seq, batch_id, hash, result, generation) VALUES (?, ?, ?, ?, ?, ?)",
            arguments: [
                replica, .integer(commit.seq), .text(commit.batchID), .text(commit.hash), .text(commit.answer.json),
                commit.advancesGenerationTo.map { .integer($0) } ?? .null,
            ])
        try conn.execute("DELETE FROM outpost_batch_ledger WHERE replica_id = ? AND seq < ?", arguments: [replica, .integer(commit.pruneBelow)])
        try conn.execute(
            "UPDATE outpost_replicas SET last_seq = ?, last_sync_at = ? WHERE replica_id = ?", arguments: [.integer(commit.lastSeq), .integer(time), replica])
    }

    // MARK: - Change feed

    public func changes(replicaID: String, layerID: Int, since: Int64, upto: Int64, after: String?, limit: Int) async throws -> ChangePage {
        try await feedPage(scope: nil, replicaID: replicaID, layerID: layerID, since: since, upto: upto, after: after, limit: limit)
    }

    public func recordReceived(replicaID: String, upTo generation: Int64) async throws {
        // Informational, shown as replicaServerGen in the replica's info. One row: no wait for
        // a checkpoint due after the replica's last batch.
        let id = ReplicaID.normalized(replicaID)
        try await geodatabase.write(small: true) { conn in
            try conn.execute(
                "UPDATE outpost_replicas SET replica_gen = max(replica_gen, ?), last_sync_at = ? WHERE replica_id = ?",
                arguments: [.integer(generation), .integer(self.clock.milliseconds()), .text(id)])
        }
    }

    public func windowRows(layerID: Int, since: Int64, upto: Int64, cap: Int) async throws -> Int {
        try await geodatabase.read { conn in
            let rows = try conn.query(Self.windowSQL, arguments: [.integer(Int64(layerID)), .integer(since), .integer(upto), .integer(Int64(cap))])
            return Int(rows.first?[0].integerValue ?? 0)
        }
    }

    public func changes(scope: ReplicaInfo, layerID: Int, since: Int64, upto: Int64, after: String?, limit: Int) async throws -> ChangePage {
        try await feedPage(scope: scope, replicaID: scope.replicaID, layerID: layerID, since: since, upto: upto, after: after, limit: limit)
    }

    /// A feed page for a registered replica (`scope` nil: read from the database) or for a scope
    /// no replica holds (an update package's area).
    private func feedPage(scope given: ReplicaInfo?, replicaID: String, layerID: Int, since: Int64, upto: Int64, after: String?, limit: Int) async throws -> ChangePage {
        let schema = geodatabase.schema
        let gdb = geodatabase
        return try await gdb.read { conn in
            let info = try given ?? Self.replica(id: replicaID, conn)
            let (layerInfo, layer) = try Self.layer(layerID, of: info, schema: schema)
            let scope = ReplicaScope(info: info, schema: schema).query(layerInfo, layer: layer)
            // Asked once per window (its first page): a later page exists only when it was not empty.
            if after == nil, ChangeFeedAssembly.holdsWholeLayer(scope) {
                let others = try conn.query(Self.othersInWindowSQL, arguments: [.integer(Int64(layerID)), .integer(since), .integer(upto), .text(info.replicaID)])
                if ChangeFeedAssembly.windowIsEmpty(scope: scope, othersChangedWindow: others.first?[0].integerValue == 1) {
                    return ChangePage(layerId: layerID, since: since, upto: upto, changes: [], next: nil)
                }
            }
            // One row per feature changed in the window: its latest generation, whether anyone
            // but this replica changed it, and whether it was added in the window.
            let byWindow = try Self.readsFeedByWindow(conn, layerID: layerID, since: since, upto: upto, limit: limit)
            let rows = try conn.query(
                """
                SELECT globalid, max(generation), sum(CASE WHEN origin_replica IS ? THEN 0 ELSE 1 END), max(op = 'insert'), max(op = 'delete')
                FROM outpost_change_log\(byWindow ? " INDEXED BY outpost_change_log_feed" : "")
                WHERE layer_id = ? AND generation > ? AND generation <= ? AND globalid > ?
                GROUP BY globalid ORDER BY globalid LIMIT ?
                """,
                arguments: [.text(info.replicaID), .integer(Int64(layerID)), .integer(since), .integer(upto), .text(after ?? ""), .integer(Int64(limit))])
            let changed = rows.map { row in
                ChangeFeedAssembly.Row(
                    globalID: row[0].textValue!, generation: row[1].integerValue!, echo: (row[2].integerValue ?? 0) == 0,
                    inserted: (row[3].integerValue ?? 0) != 0, deleted: (row[4].integerValue ?? 0) != 0)
            }
            // Whole rows read straight as sync values (no `Feature` each); a read with an exact
            // spatial filter, or only for presence, through the feature reader.
            var inScope: [String: FeatureTable.SyncRow] = [:]
            let table = try conn.geodatabase.table(id: layerID)
            let fields = layer.fields.filter { $0.type != .oid }
            for read in ChangeFeedAssembly.reads(changed, scope: scope) {
                if read.intersecting == nil, read.outFields == nil, read.returnGeometry {
                    try table.forEachSyncRow(matching: read, in: conn) { inScope[$0.globalID] = $0 }
                } else {
                    try table.forEach(matching: read, in: conn) { inScope[$0.globalID!] = try ReplicaRows.syncRow($0, fields: fields) }
                }
            }
            let attachments = info.attachmentsSyncDirection == .bidirectional && layer.hasAttachments
                ? try ServiceStore.attachmentInfos(conn, layer: layer.name, featureGlobalIDs: Array(inScope.keys)) : nil
            let changes = try ChangeFeedAssembly.changes(changed, scope: scope, syncRows: inScope, attachments: attachments)
            return ChangePage(layerId: layerID, since: since, upto: upto, changes: changes, next: ChangeFeedAssembly.next(changed, limit: limit))
        }
    }

    /// How a feed page reads the change log. Walking the (layer, global id, generation) index
    /// needs no sort, but visits the whole history of every feature on the page: with millions
    /// of old changes and a window of twenty new ones, one page read all of them (0.15 s per 2
    /// million rows, for every sync of every replica). Reading the window by generation visits
    /// only its rows but sorts them all for every page. The window's rows are counted (up to
    /// where the walk wins in any case) and compared with the log's size; the cheaper reading is
    /// taken.
    static func readsFeedByWindow(_ conn: GeodatabaseConnection, layerID: Int, since: Int64, upto: Int64, limit: Int) throws -> Bool {
        let history = try conn.query(historySQL).first?[0].integerValue ?? 0
        // Counting stops where the walk wins anyway (a few hundred rows for a fresh log of
        // 16,000, thousands for millions): counting whole large windows for every page cost a
        // third of the pages.
        var cap: Int64 = 2
        while cap < 1 << 40, feedPlanSortsWindow(windowRows: cap, logRows: history, limit: limit) { cap *= 2 }
        let window = try conn.query(
            windowSQL,
            arguments: [.integer(Int64(layerID)), .integer(since), .integer(upto), .integer(cap)])
        return feedPlanSortsWindow(windowRows: window.first?[0].integerValue ?? 0, logRows: history, limit: limit)
    }

    /// The span of change ids in the log: each end read from the primary key on its own. With
    /// both aggregates in one select SQLite reads the whole log (no min/max shortcut), for every
    /// page: 0.16 s a page at a million rows, two minutes of the feed after a million-edit upload.
    static let historySQL = """
        SELECT coalesce((SELECT max(change_id) FROM outpost_change_log) - (SELECT min(change_id) FROM outpost_change_log) + 1, 0)
        """

    /// The window's rows, counted up to a cap, from the (layer, generation) index.
    /// Whether anyone but the replica changed the layer in the window (by the window's index).
    static let othersInWindowSQL = """
        SELECT EXISTS (SELECT 1 FROM outpost_change_log INDEXED BY outpost_change_log_feed
          WHERE layer_id = ? AND generation > ? AND generation <= ? AND origin_replica IS NOT ?)
        """

    static let windowSQL = "SELECT count(*) FROM (SELECT 1 FROM outpost_change_log WHERE layer_id = ? AND generation > ? AND generation <= ? LIMIT ?)"

    /// Whether sorting the window for a page (`w` rows: about w·log₂w, each ~3 times the cost of
    /// a row visited in index order) beats walking the feature index (for features spread evenly,
    /// about `logRows · limit / w` rows a page).
    static func feedPlanSortsWindow(windowRows w: Int64, logRows: Int64, limit: Int) -> Bool {
        guard w > 1 else { return true }
        let window = Double(w)
        return 3 * window * log2(window) < Double(logRows) * Double(limit) / window
    }

    static func layer(_ id: Int, of info: ReplicaInfo, schema: ServiceSchema) throws -> (ReplicaInfo.Layer, LayerDefinition) {
        guard let layerInfo = info.layers.first(where: { $0.id == id }), let layer = schema.layer(id: id) else {
            throw SyncServiceError.notFound("layer \(id) in replica \(info.replicaID)")
        }
        return (layerInfo, layer)
    }

    public func snapshot(replicaID: String, layerID: Int, after: String?, limit: Int) async throws -> ChangePage {
        let schema = geodatabase.schema
        return try await geodatabase.read { conn in
            let info = try Self.replica(id: replicaID, conn)
            let (layerInfo, layer) = try Self.layer(layerID, of: info, schema: schema)
            let generation = try ServiceStore.generation(conn)
            var changes: [FeedChange] = []
            if var query = ReplicaScope(info: info, schema: schema).query(layerInfo, layer: layer), let gid = layer.globalIDField {
                query.afterGlobalID = after
                query.orderBy = [.init(gid)]
                query.limit = limit
                let fields = layer.fields.filter { $0.type != .oid }
                try conn.geodatabase.table(id: layerID).forEach(matching: query, in: conn) {
                    changes.append(try ReplicaRows.upsert($0, fields: fields, generation: generation))
                }
                if info.attachmentsSyncDirection == .bidirectional && layer.hasAttachments {
                    let attachments = try ServiceStore.attachmentInfos(conn, layer: layer.name, featureGlobalIDs: changes.map(\.globalId))
                    for i in changes.indices { changes[i].attachments = attachments[changes[i].globalId] ?? [] }
                }
            }
            return ChangePage(layerId: layerID, since: 0, upto: generation, changes: changes, next: changes.count == limit ? changes.last?.globalId : nil)
        }
    }

    public func replayedResponse(key: String) async throws -> String? {
        try await geodatabase.read { conn in
            try conn.query("SELECT response FROM outpost_request_replay WHERE request_key = ?", arguments: [.text(key)]).first?[0].textValue
        }
    }

    public func storeResponse(key: String, response: String, retention: Duration) async throws {
        let seconds = retention.components.seconds
        try await geodatabase.write { conn in
            try conn.execute(
                "DELETE FROM outpost_request_replay WHERE created_at < strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?)", arguments: [.text("-\(seconds) seconds")])
            try conn.execute(
                "INSERT OR REPLACE INTO outpost_request_replay (request_key, response) VALUES (?, ?)", arguments: [.text(key), .text(response)])
        }
    }

    public func checksums(replicaID: String, layerIDs: [Int], since: Int64?) async throws -> ReplicaChecksums {
        try await checksums(replicaID: replicaID, layerIDs: layerIDs, since: since, halving: Self.halvesLargeLayers)
    }

    /// Whether a large layer's whole scope is hashed in two halves at once: on a machine with
    /// cores to spare. On two cores shared with the replica (`outpost-bench sync`, eight
    /// alternating runs) it measured no faster, within the machine's noise: the second reader
    /// takes its core from the replica's own work, which the server's checksum runs beside (the
    /// download's last pages, R-tree pack and commit; the last batch's answer).
    static let halvesLargeLayers = ProcessInfo.processInfo.activeProcessorCount >= 4

    /// The checksums; with `halving`, a large layer's whole scope (by object id) is hashed in
    /// two halves on two readers at once, as the replica hashes its own. Both halves must read
    /// the generation the rest was computed at, or everything is computed again in one read.
    func checksums(replicaID: String, layerIDs: [Int], since: Int64?, halving: Bool) async throws -> ReplicaChecksums {
        let first = try await checksums(replicaID: replicaID, layerIDs: layerIDs, since: since, splitting: halving)
        guard !first.halves.isEmpty else { return first.answer }
        var answer = first.answer
        for (index, (low, high)) in first.halves {
            let id = answer.layers[index].id
            async let lowSum = halfChecksum(layerID: id, low)
            let highSum = try await halfChecksum(layerID: id, high)
            let other = try await lowSum
            guard highSum.generation == answer.generation, other.generation == answer.generation else {
                return try await checksums(replicaID: replicaID, layerIDs: layerIDs, since: since, splitting: false).answer
            }
            var sum = highSum.sum
            sum.add(other.sum)
            answer.layers[index] = .init(id: id, count: sum.count, checksum: sum.hex)
        }
        return answer
    }

    private func halfChecksum(layerID: Int, _ query: FeatureQuery) async throws -> (generation: Int64, sum: FeatureDigest.Accumulator) {
        try await geodatabase.read { conn in (try ServiceStore.generation(conn), try conn.geodatabase.table(id: layerID).checksum(matching: query, in: conn)) }
    }

    /// The checksums in one read; with `splitting`, a large layer's whole scope is left to be
    /// hashed in halves (its index in the answer, and the halves' queries).
    private func checksums(
        replicaID: String, layerIDs: [Int], since: Int64?, splitting: Bool
    ) async throws -> (answer: ReplicaChecksums, halves: [(Int, (FeatureQuery, FeatureQuery))]) {
        let schema = geodatabase.schema
        return try await geodatabase.read { conn in
            let info = try Self.replica(id: replicaID, conn)
            let scope = ReplicaScope(info: info, schema: schema)
            let generation = try ServiceStore.generation(conn)
            var layers: [ReplicaChecksums.Layer] = []
            var halves: [(Int, (FeatureQuery, FeatureQuery))] = []
            for id in layerIDs {
                guard let layerInfo = info.layers.first(where: { $0.id == id }), let layer = schema.layer(id: id) else {
                    throw SyncServiceError.notFound("layer \(id) in replica \(replicaID)")
                }
                guard var query = scope.query(layerInfo, layer: layer) else {
                    layers.append(.init(id: id, count: 0, checksum: FeatureDigest.Accumulator().hex))
                    continue
                }
                // The features changed in the window, when they are few: the checksum of those.
                var window: [String]?
                if let since, try conn.query(
                    Self.windowSQL, arguments: [.integer(Int64(id)), .integer(since), .integer(generation), .integer(Int64(ReplicaChecksums.maxWindowRows + 1))]
                ).first?[0].integerValue ?? 0 <= Int64(ReplicaChecksums.maxWindowRows) {
                    let gids = try conn.query(
                        "SELECT DISTINCT globalid FROM outpost_change_log WHERE layer_id = ? AND generation > ? AND generation <= ? ORDER BY globalid LIMIT ?",
                        arguments: [.integer(Int64(id)), .integer(since), .integer(generation), .integer(Int64(ReplicaChecksums.maxWindowFeatures + 1))]
                    ).compactMap { $0[0].textValue }
                    if gids.count <= ReplicaChecksums.maxWindowFeatures { window = gids }
                }
                if let window { query.globalIDs = window }
                let table = try conn.geodatabase.table(id: id)
                if splitting, window == nil, let parts = try table.checksumHalves(of: query, in: conn) {
                    halves.append((layers.count, parts))
                    layers.append(.init(id: id, count: 0, checksum: FeatureDigest.Accumulator().hex))
                    continue
                }
                let acc = window?.isEmpty == true ? FeatureDigest.Accumulator() : try table.checksum(matching: query, in: conn)
                layers.append(.init(id: id, count: acc.count, checksum: acc.hex, since: window == nil ? nil : since, globalIds: window))
            }
            return (ReplicaChecksums(generation: generation, layers: layers), halves)
        }
    }
}

extension SQLiteServiceBackend {
    /// The conflict records kept on the server, oldest first, with their current state.
    public func conflictRecords() async throws -> [ConflictRecord] {
        try await geodatabase.read { conn in
            try conn.query("SELECT record, state FROM outpost_conflicts ORDER BY conflict_id").map { row in
                var record = try JSONValueDecoder().decode(ConflictRecord.self, from: Data((row[0].textValue ?? "{}").utf8))
                record.state = row[1].textValue
                return record
            }
        }
    }

    /// Conflict records kept on the server.
    public func conflictCount() async throws -> Int {
        try await geodatabase.read { conn in Int(try conn.query("SELECT count(*) FROM outpost_conflicts").first?[0].integerValue ?? 0) }
    }
}

// MARK: - Attachment content

extension SQLiteServiceBackend {
    public func blobStatus(sha256: String) async throws -> BlobStatus { try blobs.status(sha256) }

    public func appendBlob(sha256: String, offset: Int64, total: Int64, bytes: Data) async throws -> BlobStatus {
        try blobs.append(sha256, offset: offset, total: total, bytes: bytes)
    }

    public func attachmentInfo(globalID: String) async throws -> AttachmentInfo {
        try await geodatabase.read { conn in
            guard let gid = GlobalID.normalized(globalID), let record = try conn.attachmentRecords(globalIDs: [gid]).values.first else {
                throw SyncServiceError.notFound("attachment \(globalID)")
            }
            let stored = try conn.query("SELECT sha256 FROM outpost_attachment_hashes WHERE globalid = ?", arguments: [.text(gid)]).first?[0].textValue
            return AttachmentInfo(
                globalId: gid, name: record.name, contentType: record.contentType, size: record.size, sha256: try stored ?? conn.attachmentSHA256(id: record.id),
                keywords: record.keywords)
        }
    }

    public func attachmentBytes(globalID: String, offset: Int64, length: Int) async throws -> Data {
        try await geodatabase.read { conn in
            guard let gid = GlobalID.normalized(globalID), let record = try conn.attachmentRecords(globalIDs: [gid]).values.first else {
                throw SyncServiceError.notFound("attachment \(globalID)")
            }
            return try conn.attachmentBytes(id: record.id, offset: offset, length: length)
        }
    }
}

// MARK: - Schema migrations

extension SQLiteServiceBackend {
    /// Moves the service to `schema` (docs/sync.md, "Schema changes"): additive steps, and dropped
    /// fields when `allowDrop`. The new schema gets the next schema version and a generation of
    /// its own; replicas learn of it from their replica info, fetch the schema and migrate in the
    /// transaction that applies their next download. Batches made against an older version still
    /// apply: values of dropped fields are kept in conflict records (kind `schemaDropped`).
    /// - Returns: the steps taken (none when the schema is the same).
    @discardableResult
    public func migrate(to schema: ServiceSchema, allowDrop: Bool) async throws -> [SchemaChange] {
        let gdb = geodatabase
        do {
            return try await gdb.write { conn -> [SchemaChange] in
                let current = conn.geodatabase.schema
                var target = try schema.normalized()
                target.schemaVersion = current.schemaVersion + 1
                let steps = try SchemaChange.steps(from: current, to: target, allowDrop: allowDrop)
                guard !steps.isEmpty else { return [] }
                try conn.migrateSchema(to: target, allowDrop: allowDrop, addLayers: true)
                let generation = try ServiceStore.generation(conn) + 1
                try ServiceStore.setGeneration(conn, generation)
                try conn.execute("UPDATE outpost_service_state SET schema_version = ? WHERE id = 1", arguments: [.integer(Int64(target.schemaVersion))])
                try conn.execute(
                    "INSERT INTO outpost_schema_migrations (schema_version, generation, changes, schema) VALUES (?, ?, ?, ?)",
                    arguments: [
                        .integer(Int64(target.schemaVersion)), .integer(generation), .text(try JSONValueEncoder().encode(steps).jsonString),
                        .text(String(decoding: try target.encoded(), as: UTF8.self)),
                    ])
                return steps
            }
        } catch {
            try? gdb.reloadSchema()
            throw error
        }
    }

    /// Fields dropped from each layer by migrations after `version` (to keep an older batch's
    /// values of them instead of refusing it).
    static func droppedFields(since version: Int, _ conn: GeodatabaseConnection) throws -> [Int: Set<String>] {
        var out: [Int: Set<String>] = [:]
        for row in try conn.query("SELECT changes FROM outpost_schema_migrations WHERE schema_version > ?", arguments: [.integer(Int64(version))]) {
            let steps = try JSONValueDecoder().decode([SchemaChange].self, from: Data((row[0].textValue ?? "[]").utf8))
            for step in steps where step.kind == .dropField {
                if let layer = step.layerId, let field = step.field { out[layer, default: []].insert(field.lowercased()) }
            }
        }
        return out
    }
}
