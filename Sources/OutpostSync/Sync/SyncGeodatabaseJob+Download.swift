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
        // The first requests, made while the upload's last batch was acknowledged (only for a
        // download starting afresh).
        let ahead: DownloadAhead.Start?
        if checkpoint == nil {
            ahead = try await DownloadAhead.shared.take(job: context.jobID)
        } else {
            DownloadAhead.shared.drop(job: context.jobID)
            ahead = nil
        }
        if ahead != nil { context.log("the download's first requests went out while the last batch was acknowledged") }
        let upto: Int64
        let info: JSONValue
        if let ahead { info = ahead.info } else { info = try await client.replicaInfo() }
        // What the service reads for uploads, kept for the next seal (a server upgraded or
        // replaced since the replica was made).
        let encodings = info["batchEncodings"]?.arrayValue?.compactMap(\.stringValue)
        if encodings != state.batchEncodings {
            try await geodatabase.write { conn in
                guard var current = try conn.replicaState() else { return }
                current.batchEncodings = encodings
                try conn.setReplicaState(current)
            }
        }
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
            // Rows left staged by a sync that did not finish are fetched again. Not waiting for
            // the disk: a power cut that takes the clearing leaves rows only a resumed job reads,
            // and a fresh one clears them again; the first staged page, a durable commit, makes
            // it durable first. Waiting would sync the WAL's unsynced frames on the sync's path
            // (an upload's acknowledgement of 16,000 edits: ~50 ms).
            try await geodatabase.write(durable: false) { conn in try conn.clearStaging() }
        }
        let contentDirectory = state.attachmentsDirection == .bidirectional ? URL(fileURLWithPath: geodatabase.url.path + ".attachments") : nil
        // A fresh download without attachment content or a migration asks the server how large
        // it is with its first pages; a small one is applied while it downloads.
        var firstPages: [Int: ChangePage] = [:]
        let limit = syncParameters.applyWhileDownloadingLimit
        if checkpoint == nil, appliesWhileDownloading(state, migrating: newSchema != nil) {
            var rows = 0
            for layer in layers where state.cursor(forLayer: layer.id) < upto {
                let since = state.cursor(forLayer: layer.id)
                let page: ChangePage
                if let made = ahead?.firstPages[layer.id], made.since == since {
                    page = made.page
                } else {
                    page = try await client.changes(layer: layer.id, since: since, upto: upto, after: nil, countUpTo: limit)
                }
                firstPages[layer.id] = page
                // A last page holds the whole window; otherwise the server counted it (one that
                // does not count gets its download staged).
                rows += page.next == nil ? page.changes.count : page.windowRows ?? limit + 1
            }
            if rows <= limit {
                let counts = try await applyWhileDownloading(layers, state, firstPages: firstPages, expectedRows: rows, upto: upto, client, context)
                try faults.check("client.afterApply")
                finishDownload(layers, counts, upto, context)
                return
            }
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
                var page: ChangePage
                if after == nil, let first = firstPages[layer.id] {
                    page = first
                } else {
                    page = try await client.changes(layer: layer.id, since: since, upto: upto, after: after)
                }
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
        if let contentDirectory { try await downloadContent(layers, into: contentDirectory, client, context) }
        askServerChecksumsAhead(state, layers: layers, downloading: Int(staged), client, context)
        let counts = try await Self.applyDownloaded(
            geodatabase, layers: layers, upto: upto, migration: newSchema, contentDirectory: contentDirectory, faults: faults, durable: false)
        try faults.check("client.afterApply")
        if let contentDirectory { try? FileManager.default.removeItem(at: contentDirectory) }
        finishDownload(layers, counts, upto, context)
    }

    /// Asks for the replica info and each layer's first page now (DownloadAhead), as
    /// ``download(_:_:_:)`` would first, when it will apply while downloading: no attachment
    /// content to fetch, a limit above zero, and (checked on the info) no schema migration.
    func startDownloadAhead(_ state: ReplicaState, layers: [ReplicaState.Layer], _ client: NativeSyncClient, _ context: JobContext) {
        guard appliesWhileDownloading(state, migrating: false) else { return }
        let limit = syncParameters.applyWhileDownloadingLimit
        DownloadAhead.shared.start(job: context.jobID) {
            let info = try await client.replicaInfo()
            var firstPages: [Int: (since: Int64, page: ChangePage)] = [:]
            let migrates = (info["serviceSchemaVersion"]?.integerValue).map { $0 > state.schemaVersion } ?? false
            // The guard above held the rest of appliesWhileDownloading; only the migration was unknown.
            if !migrates, let upto = info["serviceGeneration"]?.integerValue {
                for layer in layers where state.cursor(forLayer: layer.id) < upto {
                    let since = state.cursor(forLayer: layer.id)
                    firstPages[layer.id] = (since, try await client.changes(layer: layer.id, since: since, upto: upto, after: nil, countUpTo: limit))
                }
            }
            return DownloadAhead.Start(info: info, firstPages: firstPages)
        }
    }

    /// Whether a download starting afresh asks the server to count its window and applies a
    /// small one while it arrives: not when it fetches attachment content first, migrates the
    /// schema, or the limit is zero.
    func appliesWhileDownloading(_ state: ReplicaState, migrating: Bool) -> Bool {
        syncParameters.applyWhileDownloadingLimit > 0 && state.attachmentsDirection != .bidirectional && !migrating
    }

    /// Once the download has every page and the verify will compare whole layers, the server's
    /// checksums are asked for (VerifyAhead): it computes them while the replica applies.
    func askServerChecksumsAhead(_ state: ReplicaState, layers: [ReplicaState.Layer], downloading: Int, _ client: NativeSyncClient, _ context: JobContext) {
        let moved = Self.results(context).values.reduce(0) { $0 + $1.uploaded.total } + downloading
        guard Self.verifiesWholeLayers(layers, syncParameters, moved: moved) else { return }
        let ids = layers.map(\.id)
        VerifyAhead.shared.askServer(job: context.jobID, schemaVersion: state.schemaVersion) { try await client.checksums(layers: ids) }
    }

    private func finishDownload(_ layers: [ReplicaState.Layer], _ counts: [Int: PendingChanges], _ upto: Int64, _ context: JobContext) {
        for layer in layers {
            Self.update(context, layer: layer) { $0.downloaded = counts[layer.id] ?? PendingChanges() }
        }
        let total = counts.values.reduce(0) { $0 + $1.total }
        context.log("applied \(total) server changes up to generation \(upto)")
    }

    /// Applies a download page by page as it arrives, in the transaction that moves the cursor:
    /// the pages are fetched by a task of their own while the writer applies the previous one
    /// (at most `expectedRows` changes, counted by the server, are held). Nothing is staged or
    /// checkpointed: a failure or kill rolls everything back and the next sync downloads again.
    private func applyWhileDownloading(
        _ layers: [ReplicaState.Layer], _ state: ReplicaState, firstPages: [Int: ChangePage], expectedRows: Int, upto: Int64,
        _ client: NativeSyncClient, _ context: JobContext
    ) async throws -> [Int: PendingChanges] {
        let handoff = PageHandoff()
        let faults = self.faults
        // A download of single pages is all here already: nothing is fetched while applying.
        let whole = firstPages.values.allSatisfy { $0.next == nil }
        if whole {
            for layer in layers {
                if let page = firstPages[layer.id] { handoff.put(.page(layer.id, page.changes)) }
                handoff.put(.endOfLayer(layer.id))
            }
            askServerChecksumsAhead(state, layers: layers, downloading: expectedRows, client, context)
        }
        let fetched = whole ? nil : Task {
            var received = 0
            do {
                for layer in layers {
                    if var page = firstPages[layer.id] {
                        while true {
                            let next = page.next
                            handoff.put(.page(layer.id, page.changes))
                            received += page.changes.count
                            context.reportProgress("changes downloaded", done: Int64(received), total: nil)
                            guard let next, !handoff.isClosed else { break }
                            try Task.checkCancellation()
                            page = try await client.changes(layer: layer.id, since: state.cursor(forLayer: layer.id), upto: upto, after: next)
                        }
                    }
                    handoff.put(.endOfLayer(layer.id))
                }
                askServerChecksumsAhead(state, layers: layers, downloading: received, client, context)
            } catch {
                handoff.put(.failed(error))
            }
        }
        // The downloader reports progress through the job's context: it must have ended before
        // this returns or throws (a failed job may be gone right after, and its context with it).
        let applied: Result<[Int: PendingChanges], any Error>
        do {
            applied = .success(try await withTaskCancellationHandler {
                try await Self.applyDownloaded(geodatabase, layers: layers, upto: upto, migration: nil, contentDirectory: nil, faults: faults, durable: false, applyLayer: { layer, conn in
                    // The window's rows bound the geometries written; a window of nothing but the
                    // replica's own echoes writes none (and must not pack the R-tree again).
                    let first = firstPages[layer.id]
                    let expected = first.map { $0.changes.isEmpty && $0.next == nil ? 0 : $0.windowRows ?? expectedRows } ?? 0
                    do {
                        return try Self.applyArriving(layer, expectedGeometryWrites: expected, from: handoff, conn, faults: faults)
                    } catch {
                        handoff.close()  // the downloader may stop
                        throw error
                    }
                })
            } onCancel: {
                fetched?.cancel()
            })
        } catch {
            applied = .failure(error)
        }
        fetched?.cancel()
        await fetched?.value
        let counts = try applied.get()
        for layer in layers where firstPages[layer.id] != nil {
            context.log("applied \(counts[layer.id]?.total ?? 0) changes of \(layer.table) while downloading them")
        }
        return counts
    }

    /// Applies a layer's pages as the handoff gives them, up to the end of the layer.
    private static func applyArriving(
        _ layer: ReplicaState.Layer, expectedGeometryWrites: Int, from handoff: PageHandoff, _ conn: GeodatabaseConnection, faults: FaultInjector
    ) throws -> PendingChanges {
        guard let definition = conn.geodatabase.schema.allLayers.first(where: { $0.name == layer.table }) else {
            throw SyncError(.notAReplica, "the replica has no table \(layer.table)")
        }
        var applier = try DownloadApplier(conn: conn, layer: definition)
        try applyingInBulk(conn, table: layer.table, rows: expectedGeometryWrites) {
            while true {
                switch handoff.take() {
                case .page(let id, let changes) where id == layer.id:
                    try applier.apply(changes)
                    try faults.check("client.afterPageApplied")
                case .endOfLayer(let id) where id == layer.id: return
                case .failed(let error): throw error
                default: throw SyncError(.invalidResponse, "the download's pages came out of order")
                }
            }
        }
        return applier.counts
    }

    /// Applies the staged changes of `layers` with the cursor advance to `upto` (and a schema
    /// migration) in one transaction, after `first` (a delta reply's acknowledgement) in the same
    /// transaction; the counts per layer. `durable`: false for a download from the service, which
    /// the next sync fetches again if a power cut takes this commit (the service keeps its change
    /// log, and the cursor moves in this commit, I6); a delta reply's file may be gone by then.
    static func applyDownloaded(
        _ gdb: Geodatabase, layers: [ReplicaState.Layer], upto: Int64, migration: ServiceSchema?, contentDirectory: URL?, faults: FaultInjector,
        durable: Bool = true,
        first: (@Sendable (GeodatabaseConnection) throws -> Void)? = nil,
        applyLayer: (@Sendable (ReplicaState.Layer, GeodatabaseConnection) throws -> PendingChanges)? = nil
    ) async throws -> [Int: PendingChanges] {
        let downloadedIDs = Set(layers.map(\.id))
        do {
            return try await gdb.write(durable: durable) { conn -> [Int: PendingChanges] in
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
                        counts[layer.id] = try applyLayer?(layer, conn) ?? Self.applyStaged(layerID: layer.id, table: layer.table, conn, contentDirectory: contentDirectory)
                    }
                    guard var current = try conn.replicaState() else { throw SyncError(.notAReplica, "the replica state disappeared") }
                    if !layers.isEmpty {
                        if current.syncModel == .perReplica { current.cursor = max(current.cursor, upto) }
                        for i in current.layers.indices where downloadedIDs.contains(current.layers[i].id) {
                            current.layers[i].cursor = max(current.layers[i].cursor, upto)
                        }
                    }
                    current.lastSyncAt = Date()
                    if let migration {
                        current.schemaVersion = max(current.schemaVersion, migration.schemaVersion)
                        // Every feature's values changed shape: the next verify hashes and compares
                        // whole layers.
                        for i in current.layers.indices {
                            current.layers[i].verifiedAt = nil
                            current.layers[i].checksum = nil
                        }
                    }
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
        let rows = try zip(changes, FeedChange.withJSONValues(changes)).map { ($0, $1.json.jsonString) }
        try await geodatabase.write { conn in
            for (change, row) in rows {
                try conn.stage(layerID: layerID, globalID: change.globalId, kind: change.kind.rawValue, generation: change.generation, row: row)
            }
        }
    }
}

/// Pages handed from the task that downloads them to the writer that applies them (a download
/// small enough to be applied as it arrives: the server counted it first).
final class PageHandoff: @unchecked Sendable {
    enum Item {
        case page(Int, [FeedChange])
        case endOfLayer(Int)
        case failed(any Error)
    }

    private let condition = NSCondition()
    private var items: [Item] = []
    private var closed = false

    func put(_ item: Item) {
        condition.lock()
        items.append(item)
        condition.signal()
        condition.unlock()
    }

    /// The next item, waiting for it.
    func take() -> Item {
        condition.lock()
        defer { condition.unlock() }
        while items.isEmpty { condition.wait() }
        return items.removeFirst()
    }

    /// The writer failed and takes no more pages: the downloader may stop.
    func close() {
        condition.lock()
        closed = true
        condition.unlock()
    }

    var isClosed: Bool {
        condition.lock()
        defer { condition.unlock() }
        return closed
    }
}
