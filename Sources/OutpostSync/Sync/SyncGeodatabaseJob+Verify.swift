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
        // The replica's checksums are computed while the server computes its own.
        async let computed = localChecksums(layers)
        let server = try await client.checksums(layers: layers.map(\.id))
        context.log("server checksums received")
        let locals = try await computed
        for (layer, localSum) in zip(layers, locals) {
            guard let expected = server.layers.first(where: { $0.id == layer.id }) else { continue }
            guard let local = localSum else {
                context.log("\(layer.table) was edited during the sync; its checksum is checked next time")
                continue
            }
            if local.hex == expected.checksum && local.count == expected.count {
                Self.update(context, layer: layer) { $0.checksumMatches = true }
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
        }
    }

    func localChecksums(_ layers: [ReplicaState.Layer]) async throws -> [FeatureDigest.Accumulator?] {
        var sums: [FeatureDigest.Accumulator?] = []
        for layer in layers { sums.append(try await localChecksum(layer)) }
        return sums
    }

    /// The layer's checksum, nil when it has pending edits (it cannot match until they upload).
    func localChecksum(_ layer: ReplicaState.Layer) async throws -> FeatureDigest.Accumulator? {
        try await geodatabase.read { conn in
            let table = try conn.geodatabase.table(named: layer.table)
            guard try table.pendingChanges(in: conn).total == 0 else { return nil }
            return try table.checksum(matching: .all, in: conn)
        }
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
