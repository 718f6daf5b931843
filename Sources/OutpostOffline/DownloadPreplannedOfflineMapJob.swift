import Foundation
import OutpostCore
import OutpostProtocol
import OutpostStorage
import OutpostSync

/// Downloads a preplanned area's package (the SDK's `DownloadPreplannedOfflineMapJob`): every
/// file streamed with resume, then each replica registered as a replica of its own (the service
/// copies the package's registration at the file's generation), then the folder moved into place.
///
/// Steps: `list` (the package's files and sizes), `download` (a resumable part per file, persisted
/// in the folder being built), `register` (each new replica id is recorded before the file takes
/// it, so a kill never registers twice), `finish`. A cancelled or failed job removes what it built
/// and unregisters the replicas it registered.
public struct DownloadPreplannedOfflineMapJob: JobDefinition {
    public static let jobType = "outpost.downloadPreplannedOfflineMap"

    /// `…/arcgis/rest/maps/<name>/areas/<id>`.
    public var areaURL: URL
    /// The map definition's URL, kept in the offline map.
    public var mapSource: String?
    /// Where the offline map is written (it must not exist or be empty).
    public var downloadDirectory: URL
    let environment: OfflineJobEnvironment

    /// A download of the preplanned area at `areaURL` into `downloadDirectory`.
    public init(areaURL: URL, mapSource: String?, downloadDirectory: URL, environment: OfflineJobEnvironment = OfflineJobEnvironment()) {
        self.areaURL = areaURL
        self.mapSource = mapSource
        self.downloadDirectory = downloadDirectory.standardizedFileURL
        self.environment = environment
    }

    public var parameters: JSONValue {
        var p: [String: JSONValue] = ["areaUrl": .string(areaURL.absoluteString), "downloadDirectory": .string(downloadDirectory.path)]
        if let mapSource { p["mapSource"] = .string(mapSource) }
        return .object(p)
    }

    public init(parameters: JSONValue, environment: JobEnvironment) throws {
        guard let area = parameters["areaUrl"]?.stringValue.flatMap(URL.init(string:)), let directory = parameters["downloadDirectory"]?.stringValue else {
            throw JobError(.invalidJSON, "a preplanned download needs areaUrl and downloadDirectory")
        }
        self.init(
            areaURL: area, mapSource: parameters["mapSource"]?.stringValue, downloadDirectory: URL(fileURLWithPath: directory),
            environment: environment[OfflineJobEnvironment.self] ?? OfflineJobEnvironment())
    }

    public var stepNames: [String] { ["list", "download", "register", "finish"] }

    var stagingURL: URL { downloadDirectory.deletingLastPathComponent().appendingPathComponent(downloadDirectory.lastPathComponent + ".partial") }
    var partsURL: URL { stagingURL.appendingPathComponent(".jobs") }

    public func run(step: Int, context: JobContext) async throws {
        switch step {
        case 0: try await list(context)
        case 1: try await download(context)
        case 2: try await register(context)
        default: try await finish(context)
        }
    }

    public func output(context: JobContext) async throws -> OfflineMap { try OfflineMap(directory: downloadDirectory) }

    private func list(_ context: JobContext) async throws {
        let files = FileManager.default
        try OfflineMap.requireEmpty(downloadDirectory)
        let answer = try await OfflineHTTP(token: environment.token).json(areaURL)
        guard answer["ready"]?.boolValue == true else {
            throw OfflineMapError(.invalidParameters, "preplanned area \(answer["id"]?.stringValue ?? areaURL.lastPathComponent) is not prepared on the server yet (outpost offline prepare)")
        }
        let listed = (answer["files"]?.arrayValue ?? []).compactMap { f -> JSONValue? in
            guard let path = f["path"]?.stringValue, !path.hasPrefix("/"), !path.split(separator: "/").contains(".."), f["size"]?.integerValue != nil else { return nil }
            return f
        }
        guard listed.contains(where: { $0["path"]?.stringValue == OfflineMap.mapFileName }) else {
            throw OfflineMapError(.service, "the prepared package of \(areaURL.lastPathComponent) has no map.json")
        }
        try? files.removeItem(at: stagingURL)
        try files.createDirectory(at: stagingURL, withIntermediateDirectories: true)
        context.record("files", .array(listed))
        context.log("\(listed.count) files, \(listed.reduce(0) { $0 + ($1["size"]?.integerValue ?? 0) }) bytes")
    }

    private func download(_ context: JobContext) async throws {
        let listed = context.recorded("files")?.arrayValue ?? []
        let manager = try JobManager(directory: partsURL, registry: .withOfflineMapJobs(environment))
        var parts: [ChildJobs.Part] = []
        for (i, file) in listed.enumerated() {
            let key = "file-\(i)"
            let path = file["path"]!.stringValue!, size = file["size"]!.integerValue!
            let job: any AnyJob =
                FileManager.default.fileExists(atPath: manager.jsonURL(id: key).path)
                ? try manager.job(id: key)
                : try manager.add(
                    DownloadFileJob(
                        url: areaURL.appendingPathComponent("files").appendingPathComponent(path), destination: stagingURL.appendingPathComponent(path),
                        expectedSize: size, environment: environment), id: key)
            parts.append(ChildJobs.Part(key: path, job: job, weight: Double(max(size, 1))))
        }
        let finals = try await ChildJobs(parts: parts, start: { try manager.start($0) }).run(context, phase: "bytes")
        if let failed = finals.first(where: { $0.value.status == .failed }) {
            throw OfflineMapError(.service, "\(failed.key): \(failed.value.error?.message ?? "the download failed")")
        }
    }

    /// The package's map, as it came from the server.
    private func packagedMap() throws -> MapDefinition {
        do {
            return try MapDefinition.decode(try Data(contentsOf: stagingURL.appendingPathComponent(OfflineMap.mapFileName)))
        } catch {
            throw OfflineMapError(.service, "the package's map.json does not read: \(error)")
        }
    }

    /// A service URL of the package (as the server that prepared it wrote it) at the address this
    /// crew reaches the server by.
    func rebased(_ url: String) -> String {
        let area = areaURL.absoluteString
        guard let service = url.range(of: "/rest/services/"), let maps = area.range(of: "/rest/maps/") else { return url }
        return String(area[..<maps.lowerBound]) + String(url[service.lowerBound...])
    }

    private func register(_ context: JobContext) async throws {
        let map = try packagedMap()
        guard let offline = map.offline else { throw OfflineMapError(.service, "the package's map.json is not an offline map") }
        var copies = context.recorded("copies")?.objectValue ?? [:]
        for replica in offline.replicas where !replica.snapshot {
            let serviceURL = rebased(replica.serviceUrl)
            guard let url = URL(string: serviceURL) else { throw OfflineMapError(.service, "\(serviceURL) is not a URL") }
            let gdb = try Geodatabase.open(at: stagingURL.appendingPathComponent(replica.file))
            defer { try? gdb.close() }
            let task = try GeodatabaseSyncTask(url: url, token: environment.token)
            let name = "\(map.title) (\(offline.preplannedArea ?? areaURL.lastPathComponent))"
            let id: String
            if let recorded = copies[replica.file]?.stringValue {
                id = recorded
            } else {
                id = try await task.registerCopy(of: gdb, name: name)
                copies[replica.file] = .string(id)
                // Recorded before the file takes it: a kill in between registers nothing twice.
                context.record("copies", .object(copies))
            }
            try environment.faults.check("offline.afterRegister")
            try await GeodatabaseSyncTask.adopt(replicaID: id, name: name, serviceURL: url, in: gdb)
            context.log("\(replica.file) is replica \(id)")
        }
    }

    private func finish(_ context: JobContext) async throws {
        let files = FileManager.default
        if !files.fileExists(atPath: stagingURL.path), files.fileExists(atPath: downloadDirectory.appendingPathComponent(OfflineMap.mapFileName).path) { return }
        var map = try packagedMap().mappingServiceURLs(rebased)
        if let mapSource { map.offline?.source = mapSource }
        try map.encoded().write(to: stagingURL.appendingPathComponent(OfflineMap.mapFileName), options: .atomic)
        try? files.removeItem(at: partsURL)
        if files.fileExists(atPath: downloadDirectory.path) { try files.removeItem(at: downloadDirectory) }
        try files.moveItem(at: stagingURL, to: downloadDirectory)
        context.record("moved", true)
        context.log("offline map written to \(downloadDirectory.path)")
    }

    public func rollback(context: JobContext) async {
        guard context.recorded("moved") == nil else { return }
        await ChildJobs.cancelUnfinished(in: partsURL, environment: environment)
        // Copies registered for a package that will not be kept are unregistered by their own
        // ids (never the package's: other crews' copies start from it).
        if let map = try? packagedMap(), let copies = context.recorded("copies")?.objectValue {
            for replica in map.offline?.replicas ?? [] {
                guard let id = copies[replica.file]?.stringValue, let url = URL(string: rebased(replica.serviceUrl)),
                    let task = try? GeodatabaseSyncTask(url: url, token: environment.token)
                else { continue }
                try? await task.unregisterReplica(id: id)
            }
        }
        try? FileManager.default.removeItem(at: stagingURL)
    }
}
