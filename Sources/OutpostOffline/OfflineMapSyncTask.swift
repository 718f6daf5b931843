import Foundation
import OutpostCore
import OutpostProtocol
import OutpostStorage
import OutpostSync

/// How an offline map syncs.
public struct OfflineMapSyncParameters: Codable, Hashable, Sendable {
    /// Replicas of services that take no edits only download, whatever is asked here.
    public var direction: SyncGeodatabaseParameters.Direction
    /// A replica whose sync fails is left exactly as it was (each replica on its own).
    public var rollbackOnFailure: Bool

    /// Parameters with the given direction and rollback.
    public init(direction: SyncGeodatabaseParameters.Direction = .bidirectional, rollbackOnFailure: Bool = true) {
        self.direction = direction
        self.rollbackOnFailure = rollbackOnFailure
    }
}

/// What a sync of an offline map did, replica by replica (the SDK's `OfflineMapSyncResult`).
public struct OfflineMapSyncResult: Sendable, Hashable, Codable {
    /// What the sync did to one replica.
    public struct Replica: Sendable, Hashable, Codable {
        /// The replica's file in the offline map.
        public var file: String
        /// The FeatureServer it syncs with.
        public var serviceUrl: String
        /// What the sync did, layer by layer.
        public var layers: [SyncLayerResult]
        /// Why this replica did not sync (the others still did).
        public var error: String?
    }

    /// Each replica's result.
    public var replicas: [Replica]

    /// Whether a replica failed or the service refused an edit.
    public var hasErrors: Bool { replicas.contains { $0.error != nil || $0.layers.contains { !$0.editResults.isEmpty } } }
}

/// What ``OfflineMapSyncTask/checkForUpdates()`` found, replica by replica.
public struct OfflineMapUpdatesInfo: Sendable, Hashable {
    /// What one replica has waiting.
    public struct Replica: Sendable, Hashable {
        /// The replica's file in the offline map.
        public var file: String
        /// Its changes waiting each way.
        public var updates: GeodatabaseUpdates
    }

    /// Each replica's updates.
    public var replicas: [Replica]

    /// Whether any service has changes to download.
    public var downloadAvailable: Bool { replicas.contains { $0.updates.downloadAvailable } }
    /// Whether any replica has edits to upload.
    public var uploadAvailable: Bool { replicas.contains { $0.updates.uploadAvailable } }
}

/// Syncs every replica of an offline map in one job, checks for updates, and applies scheduled
/// update packages (the SDK's `OfflineMapSyncTask`).
///
/// ```swift
/// let task = OfflineMapSyncTask(offlineMap: try OfflineMap(directory: folder))
/// let job = task.makeOfflineMapSyncJob(parameters: task.makeDefaultOfflineMapSyncParameters())
/// try job.start()
/// let result = try await job.output      // result.hasErrors, result.replicas
/// ```
public final class OfflineMapSyncTask: Sendable {
    /// The offline map this task syncs.
    public let offlineMap: OfflineMap
    let token: String?

    /// A task for `offlineMap`; `token` is sent to its secured services.
    public init(offlineMap: OfflineMap, token: String? = nil) {
        self.offlineMap = offlineMap
        self.token = token
    }

    /// Both ways (download only for read-only services), each replica rolled back on failure.
    public func makeDefaultOfflineMapSyncParameters() -> OfflineMapSyncParameters { OfflineMapSyncParameters() }

    /// A job that syncs every replica of the map; one that fails is rolled back and reported while the others
    /// sync.
    public func makeOfflineMapSyncJob(
        parameters: OfflineMapSyncParameters, faults: FaultInjector = FaultInjector(), store: (any JobStore)? = nil
    ) -> Job<OfflineMapSyncJob> {
        Job(
            OfflineMapSyncJob(directory: offlineMap.directory, syncParameters: parameters, environment: OfflineJobEnvironment(token: token, faults: faults)),
            store: store)
    }

    /// Whether each replica has changes waiting on its service and edits waiting to upload.
    public func checkForUpdates() async throws -> OfflineMapUpdatesInfo {
        var found: [OfflineMapUpdatesInfo.Replica] = []
        for replica in offlineMap.syncingReplicas {
            let gdb = try Geodatabase.open(at: offlineMap.url(replica.file))
            defer { try? gdb.close() }
            guard let url = URL(string: replica.serviceUrl) else { throw OfflineMapError(.notAnOfflineMap, "\(replica.serviceUrl) is not a URL") }
            found.append(.init(file: replica.file, updates: try await GeodatabaseSyncTask(url: url, token: token).checkForUpdates(geodatabase: gdb)))
        }
        return OfflineMapUpdatesInfo(replicas: found)
    }

    /// Applies a scheduled update package (`outpost service export-updates`) to the replica of
    /// its service; a package for a service the map does not hold is refused.
    /// - Returns: the replica's file and what the import did.
    public func applyScheduledUpdates(from package: URL) async throws -> (file: String, summary: DeltaSync.ImportSummary) {
        let header: DeltaHeader
        do {
            header = try DeltaReader(url: package).header
        } catch let error as DeltaError {
            throw OfflineMapError(.invalidParameters, error.message)
        }
        // An update package names its service; a reply names its replica.
        var matching: MapDefinition.Offline.Replica?
        for replica in offlineMap.syncingReplicas {
            if header.kind == .updates {
                if URL(string: replica.serviceUrl)?.deletingLastPathComponent().lastPathComponent.lowercased() == header.service.lowercased() {
                    matching = replica
                    break
                }
            } else {
                let gdb = try Geodatabase.open(at: offlineMap.url(replica.file), readOnly: true)
                let state = try await gdb.read { try $0.replicaState() }
                try? gdb.close()
                if state?.replicaID == header.replicaId {
                    matching = replica
                    break
                }
            }
        }
        guard let replica = matching else {
            throw OfflineMapError(.invalidParameters, "\(package.lastPathComponent) is for service \(header.service), which no replica of this offline map holds")
        }
        let gdb = try Geodatabase.open(at: offlineMap.url(replica.file))
        defer { try? gdb.close() }
        return (replica.file, try await DeltaSync.importReply(into: gdb, from: package))
    }
}
