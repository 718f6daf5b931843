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
        let replicaID = request.replicaID ?? GlobalID.make()
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
        if request.syncModel != .none { hashWholeLayers(request, scope, at: generation) }
        let info = try request.info(replicaID: replicaID, generation: generation, schema: schema, created: clock.milliseconds())
        guard request.syncModel != .none else { return info }
        let definition = try JSONValueEncoder().encode(info).jsonString
        let created = info.creationDate
        try await gdb.write { conn in
            try conn.execute(
                """
                INSERT INTO outpost_replicas (replica_id, name, definition, replica_gen, last_seq, created_at) VALUES (?, ?, ?, ?, 0, ?)
                ON CONFLICT (replica_id) DO UPDATE SET replica_gen = min(replica_gen, excluded.replica_gen)
                """,
                arguments: [.text(replicaID), .text(request.name), .text(definition), .integer(generation), .integer(created)])
        }
        return info
    }

    /// The whole checksum of each layer the new replica holds whole, at its generation, made
    /// after the replica is (``LayerChecksums``): the replica's first verify compares whole
    /// layers. Not made when the service moved on meanwhile.
    private func hashWholeLayers(_ request: ReplicaRequest, _ scope: ReplicaScope, at generation: Int64) {
        let schema = geodatabase.schema, gdb = geodatabase
        let whole = request.layers.compactMap { info -> Int? in
            guard let layer = schema.layer(id: info.id), let query = scope.query(info, layer: layer), LayerChecksums.isWholeLayer(query) else { return nil }
            return layer.id
        }
        layerChecksums.hashing(whole, at: generation) { layers in
            (try? await gdb.read { conn -> [Int: FeatureDigest.Accumulator]? in
                guard try ServiceStore.generation(conn) == generation else { return nil }
                var sums: [Int: FeatureDigest.Accumulator] = [:]
                for id in layers { sums[id] = try conn.geodatabase.table(id: id).checksum(matching: FeatureQuery(), in: conn) }
                return sums
            }) ?? nil
        }
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

    // MARK: - Change feed

    public func recordReceived(replicaID: String, upTo generation: Int64) async throws {
        // Informational, shown as replicaServerGen in the replica's info. One row: no wait for
        // a checkpoint due after the replica's last batch, nor for the disk (a feed's first page
        // waits for this commit: ~30 ms of every download, its first page included, went to
        // syncing the WAL for it). A power cut may take it; the next durable commit makes it
        // durable, and the replica's next download records it again.
        let id = ReplicaID.normalized(replicaID)
        try await geodatabase.write(small: true, durable: false) { conn in
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

    public func snapshot(replicaID: String, layerID: Int, after: String?, limit: Int) async throws -> ChangePage {
        let schema = geodatabase.schema
        return try await geodatabase.read { conn in
            let info = try Self.replica(id: replicaID, conn)
            let (layerInfo, layer) = try ReplicaScope.layer(layerID, of: info, schema: schema)
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
        // A batch's advance of the kept whole checksums lands just after its commit.
        if since == nil { await layerChecksums.settled() }
        let first = try await checksums(replicaID: replicaID, layerIDs: layerIDs, since: since, splitting: halving)
        guard !first.halves.isEmpty else { return first.answer }
        var answer = first.answer
        for (index, whole, (low, high)) in first.halves {
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
            if whole { layerChecksums.keep(sum, of: id, at: answer.generation) }
        }
        return answer
    }

    private func halfChecksum(layerID: Int, _ query: FeatureQuery) async throws -> (generation: Int64, sum: FeatureDigest.Accumulator) {
        try await geodatabase.read { conn in (try ServiceStore.generation(conn), try conn.geodatabase.table(id: layerID).checksum(matching: query, in: conn)) }
    }

    /// The checksums in one read; with `splitting`, a large layer's whole scope is left to be
    /// hashed in halves (its index in the answer, whether it is the whole layer, and the halves'
    /// queries). A whole layer's checksum known at this generation is taken (``LayerChecksums``);
    /// one hashed here is kept.
    private func checksums(
        replicaID: String, layerIDs: [Int], since: Int64?, splitting: Bool
    ) async throws -> (answer: ReplicaChecksums, halves: [(Int, Bool, (FeatureQuery, FeatureQuery))]) {
        let schema = geodatabase.schema
        let known = layerChecksums
        return try await geodatabase.read { conn in
            let info = try Self.replica(id: replicaID, conn)
            let scope = ReplicaScope(info: info, schema: schema)
            let generation = try ServiceStore.generation(conn)
            var layers: [ReplicaChecksums.Layer] = []
            var halves: [(Int, Bool, (FeatureQuery, FeatureQuery))] = []
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
                let whole = window == nil && LayerChecksums.isWholeLayer(query)
                if whole, let sum = known.sum(of: id, at: generation) {
                    layers.append(.init(id: id, count: sum.count, checksum: sum.hex))
                    continue
                }
                if let window { query.globalIDs = window }
                let table = try conn.geodatabase.table(id: id)
                if splitting, window == nil, let parts = try table.checksumHalves(of: query, in: conn) {
                    halves.append((layers.count, whole, parts))
                    layers.append(.init(id: id, count: 0, checksum: FeatureDigest.Accumulator().hex))
                    continue
                }
                let acc = window?.isEmpty == true ? FeatureDigest.Accumulator() : try table.checksum(matching: query, in: conn)
                if whole { known.keep(acc, of: id, at: generation) }
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
                self.layerChecksums.removeAll()
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
