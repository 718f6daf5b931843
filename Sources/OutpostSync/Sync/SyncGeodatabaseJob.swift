import Foundation
import OutpostCore
import OutpostProtocol
import OutpostStorage

/// Syncs a replica geodatabase with its service (docs/sync.md), in three steps:
///
/// 1. `upload`: seal pending edits into the next numbered batch (stored before it is sent),
///    PUT it until the server answers, and record the answer in the same transaction that
///    deletes the change rows it carried. A resent batch is applied once: the server replays
///    its stored answer. Repeats while edits are pending (large backlogs go in several batches).
/// 2. `download`: read the server's changes since the replica's generation up to the service's
///    latest and apply them with the generation's advance in one transaction: page by page as
///    they arrive when the server counts them small, else staged page by page first.
/// 3. `verify`: compare each layer's checksum with the server's; a layer that differs is
///    fetched again (and reported).
///
/// Every step is restartable: the durable state lives in the geodatabase (the sealed batch, the
/// staging table) and in the checkpoints, so a job resumed from JSON after a kill, or simply a
/// new sync, reaches the same end as an uninterrupted one. One sync per geodatabase runs at a
/// time; edits made meanwhile go into the next batch.
public struct SyncGeodatabaseJob: JobDefinition {
    public static let jobType = "outpost.syncGeodatabase"
    /// What the sync did, layer by layer.
    public typealias Output = [SyncLayerResult]

    /// The replica being synced.
    public let geodatabase: Geodatabase
    /// How the sync runs.
    public var syncParameters: SyncGeodatabaseParameters
    /// The FeatureServer to sync with; nil for the one the replica was made from (a service
    /// that moved, or a proxy in front of it, is given here).
    public var serviceURL: URL?
    let environment: SyncJobEnvironment

    /// A job that syncs `geodatabase` with its service (or with `serviceURL`).
    public init(
        parameters: SyncGeodatabaseParameters, geodatabase: Geodatabase, serviceURL: URL? = nil, environment: SyncJobEnvironment = SyncJobEnvironment()
    ) {
        self.syncParameters = parameters
        self.geodatabase = geodatabase
        self.serviceURL = serviceURL
        self.environment = environment
    }

    public var parameters: JSONValue {
        var p: [String: JSONValue] = [
            "geodatabase": .string(geodatabase.url.path), "sync": (try? JSONValueEncoder().encode(syncParameters)) ?? .null,
        ]
        if let serviceURL { p["serviceUrl"] = .string(serviceURL.absoluteString) }
        return .object(p)
    }

    public init(parameters: JSONValue, environment: JobEnvironment) throws {
        guard let path = parameters["geodatabase"]?.stringValue, let sync = parameters["sync"], !sync.isNull else {
            throw JobError(.invalidJSON, "a sync job needs geodatabase and sync")
        }
        let url = URL(fileURLWithPath: path)
        let open = environment[Geodatabase.self].flatMap { $0.url.standardizedFileURL == url.standardizedFileURL ? $0 : nil }
        self.init(
            parameters: try JSONValueDecoder().decode(SyncGeodatabaseParameters.self, from: sync),
            geodatabase: try open ?? Geodatabase.open(at: url), serviceURL: parameters["serviceUrl"]?.stringValue.flatMap(URL.init(string:)),
            environment: environment[SyncJobEnvironment.self] ?? SyncJobEnvironment())
    }

    public var stepNames: [String] { ["upload", "download", "verify"] }

    var faults: FaultInjector { environment.faults }

    public func run(step: Int, context: JobContext) async throws {
        let lock = try SyncLock.acquire(for: geodatabase.url)
        // The replica's checkpoints wait for the sync (each step defers them; the next step
        // begins within the deferral's grace), so the copy of a large download does not run
        // beside the verify's reading of the layers.
        let deferral = geodatabase.deferCheckpoints()
        context.onCleanup {
            deferral.end()
            lock.release()
        }
        let job = context.jobID
        context.onRollback {
            VerifyAhead.shared.drop(job: job)
            DownloadAhead.shared.drop(job: job)
        }
        let state = try await replicaState()
        let client = NativeSyncClient(try ServiceConnection(featureServerURL: try serviceURL(state), token: environment.token), replicaID: state.replicaID)
        switch step {
        case 0: try await upload(state, client, context)
        case 1: try await download(state, client, context)
        default: try await verify(state, client, context)
        }
    }

    public func output(context: JobContext) async throws -> [SyncLayerResult] {
        Self.results(context).values.sorted { $0.layerId < $1.layerId }
    }

    // MARK: - State

    func replicaState() async throws -> ReplicaState {
        guard let state = try await geodatabase.read({ try $0.replicaState() }) else {
            throw SyncError(.notAReplica, "\(geodatabase.url.lastPathComponent) is not a replica of a feature service")
        }
        guard !state.unregistered else {
            throw SyncError(.notRegistered, "replica \(state.replicaID) was unregistered; it can no longer sync (its local edits stay in the file)")
        }
        return state
    }

    func serviceURL(_ state: ReplicaState) throws -> URL {
        if let serviceURL { return serviceURL }
        guard let url = URL(string: state.serviceURL) else { throw SyncError(.notAReplica, "the replica's service URL \(state.serviceURL) is not valid") }
        return url
    }

    static func results(_ context: JobContext) -> [Int: SyncLayerResult] {
        guard let json = context.recorded("layers"), let list = try? JSONValueDecoder().decode([SyncLayerResult].self, from: json) else {
            return [:]
        }
        return Dictionary(uniqueKeysWithValues: list.map { ($0.layerId, $0) })
    }

    static func save(_ results: [Int: SyncLayerResult], _ context: JobContext) {
        let list = results.values.sorted { $0.layerId < $1.layerId }
        context.record("layers", (try? JSONValueEncoder().encode(list)) ?? .null)
    }

    static func update(_ context: JobContext, layer: ReplicaState.Layer, _ change: (inout SyncLayerResult) -> Void) {
        var results = results(context)
        var r = results[layer.id] ?? SyncLayerResult(layerId: layer.id, tableName: layer.table)
        change(&r)
        results[layer.id] = r
        save(results, context)
    }

    /// `body` again after a network error or a 5xx answer, up to `attempts` times in all.
    func withRetries<T>(_ context: JobContext, _ what: String, _ body: () async throws -> T) async throws -> T {
        var attempt = 0
        while true {
            do {
                return try await body()
            } catch let error as SyncError where error.code == .unreachable || (error.code == .server && (error.status ?? 0) >= 500) {
                attempt += 1
                guard attempt < syncParameters.attempts else { throw error }
                context.log("\(what): \(error); trying again", severity: .warning)
                try await Task.sleep(for: .milliseconds(200 << min(attempt, 5)))
            }
        }
    }
}
