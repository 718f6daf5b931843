import AsyncHTTPClient
import Foundation
import OutpostCore
import OutpostStorage

/// Takes a feature service offline and keeps the copy in sync (the ArcGIS
/// `GeodatabaseSyncTask`): generate a replica geodatabase, sync it both ways, unregister it.
///
/// ```swift
/// let task = GeodatabaseSyncTask(url: URL(string: "http://host/arcgis/rest/services/crews/FeatureServer")!)
/// try await task.load()
/// let parameters = try await task.makeDefaultGenerateGeodatabaseParameters(extent: area)
/// let generate = try task.makeGenerateGeodatabaseJob(parameters: parameters, downloadFileURL: file)
/// try generate.start()
/// let geodatabase = try await generate.output
/// … edits …
/// let sync = try task.makeSyncGeodatabaseJob(parameters: try await task.makeDefaultSyncGeodatabaseParameters(geodatabase: geodatabase), geodatabase: geodatabase)
/// try sync.start()
/// let results = try await sync.output   // per-layer counts and rejected edits
/// ```
public final class GeodatabaseSyncTask: Loadable, Sendable {
    /// The service's description, once loaded.
    public struct ServiceInfo: Sendable, Hashable {
        /// A layer or table of the service.
        public struct Layer: Sendable, Hashable {
            /// The layer's id in the service.
            public var id: Int
            /// The layer's name, which is its table's name in a replica.
            public var name: String
            /// Whether it is a table without geometry.
            public var isTable: Bool
        }

        /// The service's layers and tables.
        public var layers: [Layer]
        /// What the service allows (`Query`, `Create`, `Update`, `Delete`, `Sync`…).
        public var capabilities: [String]
        /// Whether the service makes replicas that sync.
        public var syncEnabled: Bool
        /// Whether a replica may sync layer by layer (the `layer` sync model).
        public var supportsPerLayerSync: Bool
        /// The spatial reference of the service's data.
        public var spatialReference: SpatialReference
        /// The extent of the service's data, when it says.
        public var fullExtent: Envelope?

        /// Whether the service accepts edits, so replicas sync both ways rather than download only.
        public var isEditable: Bool { capabilities.contains { ["Create", "Update", "Delete", "Editing"].contains($0) } }
    }

    /// The FeatureServer this task works with.
    public let url: URL
    let connection: ServiceConnection
    let token: String?
    private let loader: LoadableSupport
    private let info = InfoBox()

    private final class InfoBox: Sendable {
        let value = Locked<ServiceInfo?>(nil)
    }

    /// A task for the feature service at `url` (`…/rest/services/<name>/FeatureServer`).
    /// - Throws: ``SyncError`` when `url` is not a FeatureServer URL.
    public init(url: URL, token: String? = nil, client: HTTPClient = ServiceConnection.defaultClient) throws {
        let connection = try ServiceConnection(featureServerURL: url, token: token, client: client)
        self.url = connection.featureServerURL
        self.connection = connection
        self.token = token
        let info = self.info
        loader = LoadableSupport {
            let json = try await connection.json(.GET, connection.featureServerURL)
            info.value.withLock { $0 = Self.parse(json) }
        }
    }

    static func parse(_ json: JSONValue) -> ServiceInfo {
        let layers = (json["layers"]?.arrayValue ?? []).compactMap { l -> ServiceInfo.Layer? in
            guard let id = l["id"]?.integerValue else { return nil }
            return ServiceInfo.Layer(id: Int(id), name: l["name"]?.stringValue ?? "", isTable: false)
        }
        let tables = (json["tables"]?.arrayValue ?? []).compactMap { l -> ServiceInfo.Layer? in
            guard let id = l["id"]?.integerValue else { return nil }
            return ServiceInfo.Layer(id: Int(id), name: l["name"]?.stringValue ?? "", isTable: true)
        }
        let sr = EsriJSON.decodeSpatialReference(json["spatialReference"]) ?? .wgs84
        return ServiceInfo(
            layers: layers + tables,
            capabilities: (json["capabilities"]?.stringValue ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) },
            syncEnabled: json["syncEnabled"]?.boolValue ?? false,
            supportsPerLayerSync: json["syncCapabilities"]?["supportsPerLayerSync"]?.boolValue ?? false,
            spatialReference: sr, fullExtent: json["fullExtent"].flatMap { try? EsriJSON.decodeEnvelope($0) })
    }

    /// The service's description, once loaded (nil before).
    public var serviceInfo: ServiceInfo? { info.value.withLock { $0 } }

    // MARK: Loadable

    /// Where loading the service's description is.
    public var loadStatus: LoadStatus { loader.loadStatus }
    public var loadStatusUpdates: AsyncStream<LoadStatus> { loader.loadStatusUpdates }
    public var loadError: (any Error)? { loader.loadError }
    /// Reads the service's description, or joins the read under way (see `Loadable.load()`).
    public func load() async throws { try await loader.load() }
    /// Reads the service's description again after a failed load.
    public func retryLoad() async throws { try await loader.retryLoad() }
    /// Stops a load under way, for every caller.
    public func cancelLoad() { loader.cancelLoad() }

    private func loadedInfo() async throws -> ServiceInfo {
        try await load()
        guard let info = serviceInfo else { throw SyncError(.invalidResponse, "the service info did not load") }
        return info
    }

    // MARK: Generate

    /// Every layer and table, filtered by `extent` (in `spatialReference`), one generation for the
    /// whole geodatabase, no attachments.
    /// - Throws: ``SyncError`` when the service is not sync-enabled.
    public func makeDefaultGenerateGeodatabaseParameters(extent: Envelope?, spatialReference: SpatialReference = .wgs84) async throws -> GenerateGeodatabaseParameters {
        let info = try await loadedInfo()
        guard info.syncEnabled else { throw SyncError(.unsupported, "\(url.absoluteString) is not sync-enabled") }
        return GenerateGeodatabaseParameters(
            extent: extent.map { .polygon($0.polygon) }, spatialReference: spatialReference,
            layerOptions: info.layers.map { .init(layerID: $0.id) })
    }

    /// A job that generates the replica into `downloadFileURL` (written beside it, moved into
    /// place when complete).
    public func makeGenerateGeodatabaseJob(
        parameters: GenerateGeodatabaseParameters, downloadFileURL: URL, faults: FaultInjector = FaultInjector(), store: (any JobStore)? = nil
    ) -> Job<GenerateGeodatabaseJob> {
        Job(
            GenerateGeodatabaseJob(
                serviceURL: url, parameters: parameters, downloadFileURL: downloadFileURL, environment: SyncJobEnvironment(token: token, faults: faults)),
            store: store)
    }

    // MARK: Sync

    /// Bidirectional with rollback on failure for an editable service; download for a
    /// read-only one.
    public func makeDefaultSyncGeodatabaseParameters(geodatabase: Geodatabase) async throws -> SyncGeodatabaseParameters {
        guard try await geodatabase.read({ try $0.replicaState() }) != nil else {
            throw SyncError(.notAReplica, "\(geodatabase.url.lastPathComponent) is not a replica of a feature service")
        }
        let info = try await loadedInfo()
        return SyncGeodatabaseParameters(geodatabaseSyncDirection: info.isEditable ? .bidirectional : .download)
    }

    /// A job that syncs `geodatabase` (a replica of this service) with the given parameters.
    /// - Parameters:
    ///   - parameters: the directions, batch size, rollback and conflict rules.
    ///   - geodatabase: the replica to sync.
    ///   - faults: fault points for tests.
    ///   - store: where the job keeps its JSON, so that a restarted process resumes it.
    public func makeSyncGeodatabaseJob(
        parameters: SyncGeodatabaseParameters, geodatabase: Geodatabase, faults: FaultInjector = FaultInjector(), store: (any JobStore)? = nil
    ) -> Job<SyncGeodatabaseJob> {
        Job(
            SyncGeodatabaseJob(
                parameters: parameters, geodatabase: geodatabase, serviceURL: url, environment: SyncJobEnvironment(token: token, faults: faults)),
            store: store)
    }

    /// What a sync of `geodatabase` would move, asked without moving anything (the SDK's
    /// `checkForUpdates`): whether the service has changes for it (one change is enough to say
    /// yes) and how many local edits wait to upload.
    public func checkForUpdates(geodatabase: Geodatabase) async throws -> GeodatabaseUpdates {
        guard let state = try await geodatabase.read({ try $0.replicaState() }) else {
            throw SyncError(.notAReplica, "\(geodatabase.url.lastPathComponent) is not a replica of a feature service")
        }
        var pending = PendingChanges()
        for layer in state.layers {
            let changes = try await geodatabase.table(named: layer.table).pendingChanges()
            pending.inserts += changes.inserts
            pending.updates += changes.updates
            pending.deletes += changes.deletes
        }
        let client = NativeSyncClient(connection, replicaID: state.replicaID)
        guard let generation = try await client.replicaInfo()["serviceGeneration"]?.integerValue else {
            throw SyncError(.invalidResponse, "the replica info has no serviceGeneration")
        }
        var changed: [Int] = []
        let parameters = SyncGeodatabaseParameters(geodatabaseSyncDirection: .download)
        for layer in state.layers where parameters.downloads(layer, model: state.syncModel) {
            let since = state.cursor(forLayer: layer.id)
            guard since < generation else { continue }
            if try await !client.changes(layer: layer.id, since: since, upto: generation, after: nil, limit: 1).changes.isEmpty { changed.append(layer.id) }
        }
        return GeodatabaseUpdates(layersWithChanges: changed, pendingUploads: pending)
    }

    /// Registers a copy of a replica's file (a preplanned area's package, a file copied to a
    /// second device) as a replica of its own, starting where the file is: the service answers
    /// with the new replica's id. The file is not changed: give the id to
    /// ``adopt(replicaID:name:serviceURL:in:)`` (a caller that records it in between never
    /// registers twice).
    public func registerCopy(of geodatabase: Geodatabase, name: String) async throws -> String {
        guard let state = try await geodatabase.read({ try $0.replicaState() }) else {
            throw SyncError(.notAReplica, "\(geodatabase.url.lastPathComponent) is not a replica of a feature service")
        }
        guard state.lastAckedSeq == 0, try await geodatabase.read({ try $0.sealedBatch() }) == nil else {
            throw SyncError(.unsupported, "\(geodatabase.url.lastPathComponent) has synced edits of its own; only an unsynced copy registers as a new replica")
        }
        let generation = state.layers.map { state.cursor(forLayer: $0.id) }.min() ?? state.cursor
        return try await NativeSyncClient(connection, replicaID: state.replicaID).copy(generation: generation, name: name).replicaID
    }

    /// Makes `geodatabase` the replica `replicaID` (registered by ``registerCopy(of:name:)``),
    /// syncing with `serviceURL` from now on.
    public static func adopt(replicaID: String, name: String, serviceURL: URL, in geodatabase: Geodatabase) async throws {
        try await geodatabase.write { conn in
            guard var state = try conn.replicaState() else { throw SyncError(.notAReplica, "\(geodatabase.url.lastPathComponent) is not a replica") }
            state.replicaID = replicaID
            state.replicaName = name
            state.serviceURL = serviceURL.absoluteString
            state.unregistered = false
            try conn.setReplicaState(state)
        }
    }

    // MARK: Delta files

    /// A job that writes the geodatabase's pending edits (and the content of attachments they
    /// add) to a delta file, for a link-less trip to the service (docs/sync.md, "Delta files").
    /// The edits stay pending until the reply is imported; exporting again writes the same batch.
    public static func makeExportDeltaJob(
        geodatabase: Geodatabase, deltaFileURL: URL, parameters: SyncGeodatabaseParameters = SyncGeodatabaseParameters(), store: (any JobStore)? = nil
    ) -> Job<ExportDeltaJob> {
        Job(ExportDeltaJob(geodatabase: geodatabase, deltaFileURL: deltaFileURL, syncParameters: parameters), store: store)
    }

    /// A job that imports a service's reply (or a scheduled update package) into the geodatabase.
    public static func makeImportDeltaJob(geodatabase: Geodatabase, deltaFileURL: URL, store: (any JobStore)? = nil) -> Job<ImportDeltaJob> {
        Job(ImportDeltaJob(geodatabase: geodatabase, deltaFileURL: deltaFileURL), store: store)
    }

    /// Unregisters replica `id` on the service (a registration whose file was never kept); one
    /// already gone is not an error.
    public func unregisterReplica(id: String) async throws {
        do {
            _ = try await connection.json(.POST, url.appendingPathComponent("unRegisterReplica"), form: [("replicaID", id)])
        } catch let error as SyncError where error.code == .notRegistered {
            // Already gone.
        }
    }

    /// Unregisters the geodatabase's replica on the service; the file keeps its data and its
    /// pending edits, marked as no longer able to sync.
    public func unregisterGeodatabase(_ geodatabase: Geodatabase) async throws {
        guard let state = try await geodatabase.read({ try $0.replicaState() }) else {
            throw SyncError(.notAReplica, "\(geodatabase.url.lastPathComponent) is not a replica of a feature service")
        }
        do {
            _ = try await connection.json(.POST, url.appendingPathComponent("unRegisterReplica"), form: [("replicaID", state.replicaID)])
        } catch let error as SyncError where error.code == .notRegistered {
            // Already gone on the server: only the file needs to know.
        }
        try await geodatabase.write { conn in
            guard var current = try conn.replicaState() else { return }
            current.unregistered = true
            try conn.setReplicaState(current)
        }
    }
}

/// What ``GeodatabaseSyncTask/checkForUpdates(geodatabase:)`` found.
public struct GeodatabaseUpdates: Sendable, Hashable, Codable {
    /// The layers the service has changes for.
    public var layersWithChanges: [Int]
    /// Local edits waiting to upload.
    public var pendingUploads: PendingChanges

    /// Whether the service has changes this replica has not downloaded.
    public var downloadAvailable: Bool { !layersWithChanges.isEmpty }
    /// Whether this replica has edits the service has not received.
    public var uploadAvailable: Bool { pendingUploads.total > 0 }
}

extension JobRegistry {
    /// Every Outpost job, including replica generation and sync, for `JobManager` to resume.
    public static func withSyncJobs(environment: SyncJobEnvironment = SyncJobEnvironment()) -> JobRegistry {
        var registry = JobRegistry.withNetworkJobs(transport: HTTPRemoteJobTransport(token: environment.token))
        registry.environment[SyncJobEnvironment.self] = environment
        registry.register(GenerateGeodatabaseJob.self)
        registry.register(SyncGeodatabaseJob.self)
        registry.register(ExportDeltaJob.self)
        registry.register(ImportDeltaJob.self)
        return registry
    }
}
