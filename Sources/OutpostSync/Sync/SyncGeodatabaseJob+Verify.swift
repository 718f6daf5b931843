import Foundation
import OutpostCore
import OutpostProtocol
import OutpostStorage

/// Step 3: each layer's checksum against the server's; a layer that differs is fetched again.
extension SyncGeodatabaseJob {
    func verify(_ state: ReplicaState, _ client: NativeSyncClient, _ context: JobContext) async throws {
        let layers = state.layers.filter { syncParameters.downloads($0, model: state.syncModel) }
        guard !layers.isEmpty else { return }
        context.log("verifying")
        // Layers verified before compare only the features changed since (every change on either
        // side goes through the server's change log: the replica's uploads, others' edits, the
        // server's resolutions), when this sync moved few enough of them; the others, or after
        // many changes, the whole scope: the replica's from its stored checksum when that still
        // holds, else hashed while the server computes its own.
        let results = Self.results(context)
        let moved = results.values.reduce(0) { $0 + $1.uploaded.total + $1.downloaded.total }
        let ahead = VerifyAhead.shared.take(job: context.jobID)
        let server: ReplicaChecksums
        var locals: [LocalChecksum?]
        if !Self.verifiesWholeLayers(layers, syncParameters, moved: moved), let since = layers.compactMap(\.verifiedAt).min() {
            ahead?.server?.cancel()
            server = try await client.checksums(layers: layers.map(\.id), since: since)
            locals = []
            for layer in layers {
                let expected = server.layers.first { $0.id == layer.id }
                locals.append(try await localChecksum(layer, of: expected?.globalIds).map { LocalChecksum(sum: $0, source: .partial) })
            }
        } else {
            // What was computed ahead (see VerifyAhead) where it still holds; the rest now, the
            // replica's while the server computes its own.
            var usable: [Int: LocalChecksum] = [:]
            if let ahead { usable = try await madeAhead(ahead, layers, state: state, results: results) }
            let made = usable, missing = layers.filter { usable[$0.id] == nil }
            async let computed = localChecksums(missing)
            var early: ReplicaChecksums?
            if let task = ahead?.server, let answer = try? await task.value, layers.allSatisfy({ state.cursor(forLayer: $0.id) == answer.generation }) {
                early = answer
            }
            if let early { server = early } else { server = try await client.checksums(layers: layers.map(\.id)) }
            var fresh = try await computed
            locals = layers.map { layer in made[layer.id] ?? fresh.removeFirst() }
            if !made.isEmpty || early != nil {
                context.log("checksums made ahead: \(made.count) of the replica's layers, \(early == nil ? "not " : "")the server's")
            }
            let kept = locals.compactMap { $0 }.filter { $0.source == .stored }.count
            if kept > 0 { context.log("\(kept) of the replica's layer checksums kept since they were last hashed") }
        }
        context.log("server checksums received")
        var verified: [Int: Int64] = [:]
        // Whole checksums hashed now that matched, with the data they were hashed at: stored.
        var toStore: [Int: (FeatureDigest.Accumulator, GeodatabaseConnection.ChecksumStamp)] = [:]
        func matched(_ layer: ReplicaState.Layer, _ local: LocalChecksum) {
            if case .hashed(let stamp?) = local.source { toStore[layer.id] = (local.sum, stamp) }
        }
        for (layer, localSum) in zip(layers, locals) {
            guard var expected = server.layers.first(where: { $0.id == layer.id }) else { continue }
            guard var local = localSum else {
                context.log("\(layer.table) was edited during the sync; its checksum is checked next time")
                continue
            }
            if expected.globalIds != nil, !local.matches(expected) {
                // The changed features differ: the whole scope decides before anything is fetched.
                context.log("\(layer.table): the features changed since generation \(expected.since ?? 0) differ; comparing the whole layer")
                guard let whole = try await client.checksums(layers: [layer.id]).layers.first, let all = try await wholeChecksum(layer) else { continue }
                (expected, local) = (whole, all)
            }
            if !local.matches(expected), local.source == .stored, let hashed = try await wholeChecksum(layer, useStored: false) {
                // A stored checksum that no longer describes the layer (a write no hook saw,
                // outside Outpost with capture removed): the layer hashed decides.
                context.log("\(layer.table): its stored checksum no longer held; hashed the layer again", severity: .warning)
                local = hashed
            }
            if local.matches(expected) {
                Self.update(context, layer: layer) { $0.checksumMatches = true }
                verified[layer.id] = server.generation
                matched(layer, local)
                continue
            }
            context.log(
                "\(layer.table) differs from the server (\(local.sum.count) features here, \(expected.count) there); fetching the layer again",
                severity: .warning)
            let counts = try await refetch(layer, client)
            let again = try await wholeChecksum(layer, useStored: false)
            let matches = again?.matches(expected) ?? false
            Self.update(context, layer: layer) {
                $0.refetched = true
                $0.checksumMatches = matches
                $0.downloaded.inserts += counts.inserts
                $0.downloaded.updates += counts.updates
                $0.downloaded.deletes += counts.deletes
            }
            if matches, let again {
                verified[layer.id] = server.generation
                matched(layer, again)
            }
        }
        // Where each layer last matched: the next verify starts from there (one row: no wait for
        // the checkpoint the download's commit made due); and the checksums hashed now, kept
        // for the next verify of the whole layer if nothing was written since they were hashed.
        let matchedAt = verified, store = toStore
        try await geodatabase.write(small: true, durable: false) { conn in
            guard var current = try conn.replicaState() else { return }
            for i in current.layers.indices {
                if let generation = matchedAt[current.layers[i].id] { current.layers[i].verifiedAt = generation }
                if let (sum, stamp) = store[current.layers[i].id] { _ = try conn.keepChecksum(sum, of: current.layers[i].table, hashedAt: stamp, in: &current) }
            }
            try conn.setReplicaState(current)
        }
    }

    /// A layer's checksum on the replica's side of a verify, and where it came from.
    struct LocalChecksum {
        enum Source: Equatable {
            /// Stored, and kept current since it was hashed (``ReplicaState/StoredChecksum``).
            case stored
            /// Hashed from the whole layer when the data had the stamp (nil: a write came
            /// between the halves' reads and the stamp's, so it is not stored).
            case hashed(GeodatabaseConnection.ChecksumStamp?)
            /// Of the features changed since the last match only.
            case partial
        }

        var sum: FeatureDigest.Accumulator
        var source: Source

        func matches(_ expected: ReplicaChecksums.Layer) -> Bool { sum.hex == expected.checksum && sum.count == expected.count }
    }

    /// Whether the verify compares whole layers: when asked, when a layer was never verified,
    /// or when the sync moved more features than a window lists. `moved` only grows during a
    /// sync, so an earlier step that finds it true knows the verify will.
    static func verifiesWholeLayers(_ layers: [ReplicaState.Layer], _ parameters: SyncGeodatabaseParameters, moved: Int) -> Bool {
        parameters.verifyWholeLayers == true || !layers.allSatisfy({ $0.verifiedAt != nil }) || moved > ReplicaChecksums.maxWindowFeatures
    }

    /// The replica checksums made ahead that still describe the layers: the job's download
    /// applied nothing to them, the schema did not move, and nothing is pending.
    func madeAhead(
        _ ahead: VerifyAhead.Entry, _ layers: [ReplicaState.Layer], state: ReplicaState, results: [Int: SyncLayerResult]
    ) async throws -> [Int: LocalChecksum] {
        guard ahead.schemaVersion == state.schemaVersion else { return [:] }
        let candidates = layers.filter { layer in
            let result = results[layer.id]
            return ahead.local[layer.id] != nil && (result?.downloaded.total ?? 0) == 0 && result?.refetched != true
        }
        guard !candidates.isEmpty else { return [:] }
        return try await geodatabase.read { conn in
            var out: [Int: LocalChecksum] = [:]
            for layer in candidates where try conn.geodatabase.table(named: layer.table).pendingChanges(in: conn).total == 0 {
                if let sum = ahead.local[layer.id] { out[layer.id] = LocalChecksum(sum: sum, source: .hashed(ahead.hashedAt)) }
            }
            return out
        }
    }

    /// Computes each downloading layer's whole checksum ahead of the verify (see VerifyAhead),
    /// pending edits included: they are the ones being uploaded.
    func checksumsAhead(_ state: ReplicaState, _ context: JobContext) async throws {
        let layers = state.layers.filter { syncParameters.downloads($0, model: state.syncModel) }
        guard !layers.isEmpty else { return }
        let (sums, stamp) = try await geodatabase.read { conn in
            var sums: [Int: FeatureDigest.Accumulator] = [:]
            for layer in layers { sums[layer.id] = try conn.geodatabase.table(named: layer.table).checksum(matching: .all, in: conn) }
            return (sums, try conn.checksumStamp())
        }
        VerifyAhead.shared.storeLocal(job: context.jobID, schemaVersion: state.schemaVersion, sums, hashedAt: stamp)
    }

    func localChecksums(_ layers: [ReplicaState.Layer]) async throws -> [LocalChecksum?] {
        var sums: [LocalChecksum?] = []
        for layer in layers { sums.append(try await wholeChecksum(layer)) }
        return sums
    }

    /// The checksum of the features `globalIDs` names, nil when the layer has pending edits (it
    /// cannot match until they upload).
    func localChecksum(_ layer: ReplicaState.Layer, of globalIDs: [String]?) async throws -> FeatureDigest.Accumulator? {
        guard let globalIDs else { return try await wholeChecksum(layer)?.sum }
        return try await geodatabase.read { conn in
            let table = try conn.geodatabase.table(named: layer.table)
            guard try table.pendingChanges(in: conn).total == 0 else { return nil }
            guard !globalIDs.isEmpty else { return FeatureDigest.Accumulator() }
            var query = FeatureQuery()
            query.globalIDs = globalIDs
            return try table.checksum(matching: query, in: conn)
        }
    }

    /// The whole layer's checksum: the stored one while it holds (unless `useStored` is false,
    /// or the sync was asked to verify whole layers), else hashed, a large layer's two halves (by
    /// object id) at once on two readers, so both cores work (at this point the server has
    /// computed its own, or computes it on its side). Nil when the layer has pending edits,
    /// before or after: a writer that committed between the halves' reads left its edit pending.
    func wholeChecksum(_ layer: ReplicaState.Layer, useStored: Bool = true) async throws -> LocalChecksum? {
        let trustStored = useStored && syncParameters.verifyWholeLayers != true
        let (pending, halves, stored, stamp) = try await geodatabase.read { conn in
            let table = try conn.geodatabase.table(named: layer.table)
            return (
                try table.pendingChanges(in: conn).total, try table.checksumHalves(of: .all, in: conn),
                trustStored ? try conn.storedChecksum(of: layer.table) : nil, try conn.checksumStamp()
            )
        }
        guard pending == 0 else { return nil }
        if let stored { return LocalChecksum(sum: stored, source: .stored) }
        guard let (low, high) = halves else {
            return try await geodatabase.read { conn in
                LocalChecksum(sum: try conn.geodatabase.table(named: layer.table).checksum(matching: .all, in: conn), source: .hashed(try conn.checksumStamp()))
            }
        }
        async let first = geodatabase.read { conn in try conn.geodatabase.table(named: layer.table).checksum(matching: low, in: conn) }
        var sum = try await geodatabase.read { conn in try conn.geodatabase.table(named: layer.table).checksum(matching: high, in: conn) }
        sum.add(try await first)
        let (after, stampAfter) = try await geodatabase.read { conn in
            (try conn.geodatabase.table(named: layer.table).pendingChanges(in: conn).total, try conn.checksumStamp())
        }
        return after == 0 ? LocalChecksum(sum: sum, source: .hashed(stampAfter == stamp ? stamp : nil)) : nil
    }

    /// Fetches every feature of the layer in the replica's scope again and makes the local table
    /// equal to it (local edits still win).
    func refetch(_ layer: ReplicaState.Layer, _ client: NativeSyncClient) async throws -> PendingChanges {
        try await geodatabase.write { conn in try conn.clearStaging(layerID: layer.id) }
        var after: String?
        repeat {
            let page = try await client.snapshot(layer: layer.id, after: after)
            try await stage(page.changes, layerID: layer.id)
            after = page.next
        } while after != nil
        return try await geodatabase.write { conn in
            try conn.withChangeCaptureSilenced {
                let counts = try Self.applyStaged(layerID: layer.id, table: layer.table, conn, deleteAbsent: true)
                try conn.clearStaging(layerID: layer.id)
                return counts
            }
        }
    }
}
