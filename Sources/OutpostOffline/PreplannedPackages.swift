import Foundation
import OutpostCore
import OutpostStorage
import OutpostSync

/// A folder of preplanned areas' packages (`<map name>.preplanned/` beside a served map
/// definition): each `<area id>/` an offline map made ahead, sealed, whose replicas stay
/// registered as the package's own for crews' copies (docs/offline.md).
///
/// ```swift
/// let packages = PreplannedPackages(folder: servicesURL.appendingPathComponent("field-crews.preplanned"))
/// let (definition, target) = try await packages.prepareJob(task: task, area: "south-west")
/// let job = Job(definition)
/// try job.start()
/// guard await job.waitUntilFinished() == .succeeded else { … }
/// let package = try await packages.install(area: "south-west", from: target)
/// ```
public struct PreplannedPackages: Sendable {
    /// The folder holding one package per area.
    public let folder: URL
    let token: String?

    /// The packages in `folder`; `token` is sent to secured services.
    public init(folder: URL, token: String? = nil) {
        self.folder = folder.standardizedFileURL
        self.token = token
    }

    /// Where area `id`'s package is.
    public func package(_ id: String) -> URL { folder.appendingPathComponent(id) }

    /// Whether area `id`'s package is complete in the folder.
    public func isPrepared(_ id: String) -> Bool {
        FileManager.default.fileExists(atPath: package(id).appendingPathComponent(OfflineMap.mapFileName).path)
    }

    /// The job that makes area `id`'s package, and where it writes it: the package's place, or
    /// beside it when a package is there already (``install(area:from:)`` swaps them).
    public func prepareJob(task: OfflineMapTask, area id: String, environment: OfflineJobEnvironment? = nil) async throws -> (GenerateOfflineMapJob, URL) {
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let parameters = try await task.makeDefaultGenerateOfflineMapParameters(preplannedArea: id)
        let target = isPrepared(id) ? folder.appendingPathComponent(".\(id).new") : package(id)
        guard let map = task.map else { throw OfflineMapError(.invalidMap, "the map definition did not load") }
        let job = GenerateOfflineMapJob(
            map: map, source: task.source, offlineParameters: parameters, downloadDirectory: target, environment: environment ?? OfflineJobEnvironment(token: token))
        return (job, target)
    }

    /// Seals the package a prepare job wrote to `target` (every database one file) and puts it
    /// in area `id`'s place; an older package there is replaced and its replicas unregistered
    /// (no crew copies them any more).
    @discardableResult
    public func install(area id: String, from target: URL) async throws -> OfflineMap {
        let made = try OfflineMap(directory: target)
        try made.seal()
        let place = package(id)
        // Paths, not URLs: a URL to a directory that exists gains a trailing slash.
        guard target.standardizedFileURL.path != place.standardizedFileURL.path else { return made }
        if isPrepared(id) {
            let old = try OfflineMap(directory: place)
            for replica in old.syncingReplicas {
                guard let url = URL(string: replica.serviceUrl), let gdb = try? Geodatabase.open(at: old.url(replica.file)) else { continue }
                try? await GeodatabaseSyncTask(url: url, token: token).unregisterGeodatabase(gdb)
                try? gdb.close()
            }
        }
        let trash = folder.appendingPathComponent(".\(id).old")
        try? FileManager.default.removeItem(at: trash)
        if FileManager.default.fileExists(atPath: place.path) { try FileManager.default.moveItem(at: place, to: trash) }
        try FileManager.default.moveItem(at: target, to: place)
        try? FileManager.default.removeItem(at: trash)
        return try OfflineMap(directory: place)
    }
}
