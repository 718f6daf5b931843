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
        // many changes, the whole scope, computed here while the server computes its own.
        let results = Self.results(context)
        let moved = results.values.reduce(0) { $0 + $1.uploaded.total + $1.downloaded.total }
        let ahead = VerifyAhead.shared.take(job: context.jobID)
        let server: ReplicaChecksums
        var locals: [FeatureDigest.Accumulator?]
        if !Self.verifiesWholeLayers(layers, syncParameters, moved: moved), let since = layers.compactMap(\.verifiedAt).min() {
            ahead?.server?.cancel()
            server = try await client.checksums(layers: layers.map(\.id), since: since)
            locals = []
            for layer in layers {
                let expected = server.layers.first { $0.id == layer.id }
                locals.append(try await localChecksum(layer, of: expected?.globalIds))
            }
        } else {
            // What was computed ahead (see VerifyAhead) where it still holds; the rest now, the
            // replica's while the server computes its own.
            var usable: [Int: FeatureDigest.Accumulator] = [:]
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
        }
        context.log("server checksums received")
        var verified: [Int: Int64] = [:]
        for (layer, localSum) in zip(layers, locals) {
            guard var expected = server.layers.first(where: { $0.id == layer.id }) else { continue }
            guard var local = localSum else {
                context.log("\(layer.table) was edited during the sync; its checksum is checked next time")
                continue
            }
            if expected.globalIds != nil, local.hex != expected.checksum || local.count != expected.count {
                // The changed features differ: the whole scope decides before anything is fetched.
                context.log("\(layer.table): the features changed since generation \(expected.since ?? 0) differ; comparing the whole layer")
                guard let whole = try await client.checksums(layers: [layer.id]).layers.first, let all = try await localChecksum(layer) else { continue }
                (expected, local) = (whole, all)
            }
            if local.hex == expected.checksum && local.count == expected.count {
                Self.update(context, layer: layer) { $0.checksumMatches = true }
                verified[layer.id] = server.generation
                continue
            }
            context.log(
                "\(layer.table) differs from the server (\(local.count) features here, \(expected.count) there); fetching the layer again",
                severity: .warning)
            let counts = try await refetch(layer, client)
            let again = try await localChecksum(layer)
            let matches = again.map { $0.count == expected.count && $0.hex == expected.checksum } ?? false
            Self.update(context, layer: layer) {
                $0.refetched = true
                $0.checksumMatches = matches
                $0.downloaded.inserts += counts.inserts
                $0.downloaded.updates += counts.updates
                $0.downloaded.deletes += counts.deletes
            }
            if matches { verified[layer.id] = server.generation }
        }
        // Where each layer last matched: the next verify starts from there (one row: no wait for
        // the checkpoint the download's commit made due).
        let matched = verified
        try await geodatabase.write(small: true) { conn in
            guard var current = try conn.replicaState() else { return }
            for i in current.layers.indices {
                if let generation = matched[current.layers[i].id] { current.layers[i].verifiedAt = generation }
            }
            try conn.setReplicaState(current)
        }
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
    ) async throws -> [Int: FeatureDigest.Accumulator] {
        guard ahead.schemaVersion == state.schemaVersion else { return [:] }
        let candidates = layers.filter { layer in
            let result = results[layer.id]
            return ahead.local[layer.id] != nil && (result?.downloaded.total ?? 0) == 0 && result?.refetched != true
        }
        guard !candidates.isEmpty else { return [:] }
        return try await geodatabase.read { conn in
            var out: [Int: FeatureDigest.Accumulator] = [:]
            for layer in candidates where try conn.geodatabase.table(named: layer.table).pendingChanges(in: conn).total == 0 {
                out[layer.id] = ahead.local[layer.id]
            }
            return out
        }
    }

    /// Computes each downloading layer's whole checksum ahead of the verify (see VerifyAhead),
    /// pending edits included: they are the ones being uploaded.
    func checksumsAhead(_ state: ReplicaState, _ context: JobContext) async throws {
        let layers = state.layers.filter { syncParameters.downloads($0, model: state.syncModel) }
        guard !layers.isEmpty else { return }
        let sums = try await geodatabase.read { conn in
            var sums: [Int: FeatureDigest.Accumulator] = [:]
            for layer in layers { sums[layer.id] = try conn.geodatabase.table(named: layer.table).checksum(matching: .all, in: conn) }
            return sums
        }
        VerifyAhead.shared.storeLocal(job: context.jobID, schemaVersion: state.schemaVersion, sums)
    }

    func localChecksums(_ layers: [ReplicaState.Layer]) async throws -> [FeatureDigest.Accumulator?] {
        var sums: [FeatureDigest.Accumulator?] = []
        for layer in layers { sums.append(try await localChecksum(layer)) }
        return sums
    }

    /// The layer's checksum (of the features `globalIDs` names, when given), nil when it has
    /// pending edits (it cannot match until they upload).
    func localChecksum(_ layer: ReplicaState.Layer, of globalIDs: [String]? = nil) async throws -> FeatureDigest.Accumulator? {
        guard let globalIDs else { return try await wholeChecksum(layer) }
        return try await geodatabase.read { conn in
            let table = try conn.geodatabase.table(named: layer.table)
            guard try table.pendingChanges(in: conn).total == 0 else { return nil }
            guard !globalIDs.isEmpty else { return FeatureDigest.Accumulator() }
            var query = FeatureQuery()
            query.globalIDs = globalIDs
            return try table.checksum(matching: query, in: conn)
        }
    }

    /// The whole layer's checksum; a large layer's two halves (by object id) hashed at once on
    /// two readers, so both cores work (at this point the server has computed its own, or
    /// computes it on its side). Nil when the layer has pending edits, before or after: a writer
    /// that committed between the halves' reads left its edit pending.
    func wholeChecksum(_ layer: ReplicaState.Layer) async throws -> FeatureDigest.Accumulator? {
        let (pending, halves) = try await geodatabase.read { conn -> (Int, (FeatureQuery, FeatureQuery)?) in
            let table = try conn.geodatabase.table(named: layer.table)
            return (try table.pendingChanges(in: conn).total, try table.checksumHalves(of: .all, in: conn))
        }
        guard pending == 0 else { return nil }
        guard let (low, high) = halves else {
            return try await geodatabase.read { conn in try conn.geodatabase.table(named: layer.table).checksum(matching: .all, in: conn) }
        }
        async let first = geodatabase.read { conn in try conn.geodatabase.table(named: layer.table).checksum(matching: low, in: conn) }
        var sum = try await geodatabase.read { conn in try conn.geodatabase.table(named: layer.table).checksum(matching: high, in: conn) }
        sum.add(try await first)
        let after = try await geodatabase.read { conn in try conn.geodatabase.table(named: layer.table).pendingChanges(in: conn).total }
        return after == 0 ? sum : nil
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
