import Foundation
import OutpostVectorTiles
import OutpostCore
import OutpostStorage
import OutpostSync
import OutpostTiles

/// Syncs every replica of an offline map as one job: the replicas sync side by side (each its
/// own sync job, each rolled back on its own failure), with combined progress, pause, resume and
/// cancel. A replica that fails is reported and the others still sync. A job resumed after a kill
/// syncs the replicas not yet done; a sync repeated is harmless (the service's ledger applies a
/// batch once).
public struct OfflineMapSyncJob: JobDefinition {
    public static let jobType = "outpost.syncOfflineMap"
    public typealias Output = OfflineMapSyncResult

    /// The offline map folder whose replicas are synced.
    public var directory: URL
    /// The direction and rollback of each replica's sync.
    public var syncParameters: OfflineMapSyncParameters
    let environment: OfflineJobEnvironment

    /// A job that syncs every replica of the offline map in `directory`.
    public init(directory: URL, syncParameters: OfflineMapSyncParameters, environment: OfflineJobEnvironment = OfflineJobEnvironment()) {
        self.directory = directory.standardizedFileURL
        self.syncParameters = syncParameters
        self.environment = environment
    }

    public var parameters: JSONValue {
        ["directory": .string(directory.path), "sync": (try? JSONValueEncoder().encode(syncParameters)) ?? .null]
    }

    public init(parameters: JSONValue, environment: JobEnvironment) throws {
        guard let path = parameters["directory"]?.stringValue, let sync = parameters["sync"], !sync.isNull else {
            throw JobError(.invalidJSON, "an offline map sync job needs directory and sync")
        }
        self.init(
            directory: URL(fileURLWithPath: path), syncParameters: try JSONValueDecoder().decode(OfflineMapSyncParameters.self, from: sync),
            environment: environment[OfflineJobEnvironment.self] ?? OfflineJobEnvironment())
    }

    public var stepNames: [String] { ["sync"] }

    public func run(step: Int, context: JobContext) async throws {
        let map = try OfflineMap(directory: directory)
        var results = context.recorded("replicas")?.objectValue ?? [:]
        var geodatabases: [Geodatabase] = []
        defer { for gdb in geodatabases { try? gdb.close() } }
        var parts: [ChildJobs.Part] = []
        for replica in map.syncingReplicas where results[replica.file] == nil {
            guard let url = URL(string: replica.serviceUrl) else { throw OfflineMapError(.notAnOfflineMap, "\(replica.serviceUrl) is not a URL") }
            let gdb = try Geodatabase.open(at: map.url(replica.file))
            geodatabases.append(gdb)
            let parameters = SyncGeodatabaseParameters(
                geodatabaseSyncDirection: replica.readOnly ? .download : syncParameters.direction, shouldRollbackOnFailure: syncParameters.rollbackOnFailure)
            let job = Job(
                SyncGeodatabaseJob(
                    parameters: parameters, geodatabase: gdb, serviceURL: url, environment: SyncJobEnvironment(token: environment.token, faults: environment.faults)))
            parts.append(ChildJobs.Part(key: replica.file, job: job, weight: 1))
        }
        let finals = try await ChildJobs(parts: parts, start: { try $0.start() }).run(context, phase: "replicas")
        for (file, snapshot) in finals {
            guard let job = parts.first(where: { $0.key == file })?.job as? Job<SyncGeodatabaseJob> else { continue }
            var entry: [String: JSONValue] = [:]
            if snapshot.status == .succeeded, let layers = try? await job.output {
                entry["layers"] = try JSONValueEncoder().encode(layers)
                context.log("\(file) synced")
            } else {
                let message = snapshot.error?.message ?? "the sync failed"
                entry["error"] = .string(message)
                context.log("\(file) did not sync: \(message)", severity: .warning)
            }
            results[file] = .object(entry)
        }
        context.record("replicas", .object(results))
    }

    public func output(context: JobContext) async throws -> OfflineMapSyncResult {
        let map = try OfflineMap(directory: directory)
        let results = context.recorded("replicas")?.objectValue ?? [:]
        return OfflineMapSyncResult(
            replicas: try map.syncingReplicas.map { replica in
                let entry = results[replica.file]
                return OfflineMapSyncResult.Replica(
                    file: replica.file, serviceUrl: replica.serviceUrl,
                    layers: try entry?["layers"].map { try JSONValueDecoder().decode([SyncLayerResult].self, from: $0) } ?? [],
                    error: entry?["error"]?.stringValue)
            })
    }
}

/// The offline-map job types, for a registry that restores jobs from their JSON.
extension JobRegistry {
    /// The offline map jobs (generate, sync, file download) and every job they run as parts.
    public static func withOfflineMapJobs(_ environment: OfflineJobEnvironment = OfflineJobEnvironment()) -> JobRegistry {
        var registry = JobRegistry.withSyncJobs(environment: SyncJobEnvironment(token: environment.token, faults: environment.faults))
        registry.withTileJobs(TileJobEnvironment(token: environment.token, faults: environment.faults, checkpointInterval: environment.tileCheckpointInterval))
        ExportVectorTilesJob.register(in: &registry, environment: environment.vectorTiles)
        registry.environment[OfflineJobEnvironment.self] = environment
        registry.register(DownloadFileJob.self)
        registry.register(GenerateOfflineMapJob.self)
        registry.register(OfflineMapSyncJob.self)
        registry.register(DownloadPreplannedOfflineMapJob.self)
        return registry
    }
}
