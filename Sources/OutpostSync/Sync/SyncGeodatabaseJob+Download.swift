import Foundation
import OutpostCore
import OutpostProtocol
import OutpostStorage

/// Step 2: the server's changes since the replica's generation, staged page by page, then
/// applied with the new generation in one transaction.
extension SyncGeodatabaseJob {
    func download(_ state: ReplicaState, _ client: NativeSyncClient, _ context: JobContext) async throws {
        let layers = state.layers.filter { syncParameters.downloads($0, model: state.syncModel) }
        guard !layers.isEmpty else { return }
        let checkpoint = context.checkpointData
        let upto: Int64
        let info = try await client.replicaInfo()
        // A service whose schema moved on: the replica migrates in the transaction that applies
        // this download.
        var newSchema: ServiceSchema?
        if let version = info["serviceSchemaVersion"]?.integerValue, version > state.schemaVersion {
            newSchema = try await client.schema()
            context.log("the service schema moved from version \(state.schemaVersion) to \(version); migrating with this download")
        }
        if let saved = checkpoint?["upto"]?.integerValue {
            upto = saved
        } else {
            guard let generation = info["serviceGeneration"]?.integerValue else { throw SyncError(.invalidResponse, "the replica info has no serviceGeneration") }
            upto = generation
            // Rows left staged by a sync that did not finish are fetched again.
            try await geodatabase.write { conn in try conn.clearStaging() }
        }
        var index = Int(checkpoint?["layer"]?.integerValue ?? 0)
        var after = checkpoint?["after"]?.stringValue
        var staged = checkpoint?["staged"]?.integerValue ?? 0
        func save() async throws {
            try await context.checkpoint(["upto": .integer(upto), "layer": .integer(Int64(index)), "after": after.map(JSONValue.string) ?? .null, "staged": .integer(staged)])
        }
        try await save()
        while index < layers.count {
            let layer = layers[index]
            let since = state.cursor(forLayer: layer.id)
            if since < upto {
                // The next page is requested before this one is staged, so the server reads it
                // while the replica writes (only the cursor of a staged page is checkpointed).
                var page = try await client.changes(layer: layer.id, since: since, upto: upto, after: after)
                while true {
                    let next = page.next
                    async let following: ChangePage? = next == nil ? nil : client.changes(layer: layer.id, since: since, upto: upto, after: next)
                    try await stage(page.changes, layerID: layer.id)
                    try faults.check("client.afterStage")
                    staged += Int64(page.changes.count)
                    if page.next == nil { context.log("staged \(staged) changes of \(layer.table)") }
                    context.reportProgress("changes downloaded", done: staged, total: nil)
                    after = page.next
                    try await save()
                    guard let nextPage = try await following else { break }
                    page = nextPage
                }
            }
            index += 1
            after = nil
            try await save()
        }
        let contentDirectory = state.attachmentsDirection == .bidirectional ? URL(fileURLWithPath: geodatabase.url.path + ".attachments") : nil
        if let contentDirectory { try await downloadContent(layers, into: contentDirectory, client, context) }
        let counts = try await Self.applyDownloaded(geodatabase, layers: layers, upto: upto, migration: newSchema, contentDirectory: contentDirectory, faults: faults)
        try faults.check("client.afterApply")
        if let contentDirectory { try? FileManager.default.removeItem(at: contentDirectory) }
        for layer in layers {
            Self.update(context, layer: layer) { $0.downloaded = counts[layer.id] ?? PendingChanges() }
        }
        let total = counts.values.reduce(0) { $0 + $1.total }
        context.log("applied \(total) server changes up to generation \(upto)")
    }

    /// Applies the staged changes of `layers` with the cursor advance to `upto` (and a schema
    /// migration) in one transaction, after `first` (a delta reply's acknowledgement) in the same
    /// transaction; the counts per layer.
    static func applyDownloaded(
        _ gdb: Geodatabase, layers: [ReplicaState.Layer], upto: Int64, migration: ServiceSchema?, contentDirectory: URL?, faults: FaultInjector,
        first: (@Sendable (GeodatabaseConnection) throws -> Void)? = nil
    ) async throws -> [Int: PendingChanges] {
        let downloadedIDs = Set(layers.map(\.id))
        do {
            return try await gdb.write { conn -> [Int: PendingChanges] in
                try first?(conn)
                return try conn.withChangeCaptureSilenced {
                    var counts: [Int: PendingChanges] = [:]
                    if let migration {
                        // Pending values of dropped fields are kept as records first.
                        try conn.migrateSchema(to: migration, allowDrop: true, addLayers: false) { layer, column in
                            try conn.archivePendingValues(of: layer, column: column)
                        }
                    }
                    for layer in layers {
                        counts[layer.id] = try Self.applyStaged(layerID: layer.id, table: layer.table, conn, contentDirectory: contentDirectory)
                    }
                    guard var current = try conn.replicaState() else { throw SyncError(.notAReplica, "the replica state disappeared") }
                    if !layers.isEmpty {
                        if current.syncModel == .perReplica { current.cursor = max(current.cursor, upto) }
                        for i in current.layers.indices where downloadedIDs.contains(current.layers[i].id) {
                            current.layers[i].cursor = max(current.layers[i].cursor, upto)
                        }
                    }
                    current.lastSyncAt = Date()
                    if let migration { current.schemaVersion = max(current.schemaVersion, migration.schemaVersion) }
                    try conn.setReplicaState(current)
                    try conn.clearStaging()
                    try faults.check("client.beforeApplyCommit")
                    return counts
                }
            }
        } catch {
            // The transaction rolled a migration back: the geodatabase reads its stored schema again.
            if migration != nil { try? gdb.reloadSchema() }
            throw error
        }
    }

    func stage(_ changes: [FeedChange], layerID: Int) async throws {
        guard !changes.isEmpty else { return }
        let rows = changes.map { ($0, $0.json.jsonString) }
        try await geodatabase.write { conn in
            for (change, row) in rows {
                try conn.stage(layerID: layerID, globalID: change.globalId, kind: change.kind.rawValue, generation: change.generation, row: row)
            }
        }
    }
}
