import Foundation
import OutpostCore
import Synchronization

/// The server's asynchronous operations (`async=true` createReplica and synchronizeReplica), as
/// ArcGIS shapes them: the request answers `{"statusUrl": …/jobs/<id>}` at once and the client
/// polls that URL until `status` is `Completed` (with `resultUrl`) or `Failed`.
///
/// Jobs live in memory: a restarted server forgets them and their status URLs answer 404, which
/// a client treats as a failed job and retries (every operation behind a job is idempotent or
/// registers nothing until it succeeds).
final class ServerJobs: Sendable {
    struct Record: Sendable {
        var id: String
        var status: String
        var responseType: String
        var submissionTime: Int64
        var lastUpdatedTime: Int64
        var result: JSONValue?
        var error: String?
        var task: Task<Void, Never>?
    }

    private let records = Mutex<[String: Record]>([:])
    /// Finished jobs are forgotten after this long.
    let retention: Duration

    init(retention: Duration = .seconds(3600)) {
        self.retention = retention
    }

    static func now() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

    /// Starts `work` and returns the job id; `work` returns the job's result fields
    /// (`resultUrl`, `replicaID`, …).
    func start(responseType: String, _ work: @escaping @Sendable () async throws -> JSONValue) -> String {
        let id = UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        let now = Self.now()
        sweep(now: now)
        records.withLock { $0[id] = Record(id: id, status: "Pending", responseType: responseType, submissionTime: now, lastUpdatedTime: now) }
        let task = Task { [self] in
            update(id) { $0.status = "InProgress" }
            do {
                let result = try await work()
                update(id) {
                    $0.status = "Completed"
                    $0.result = result
                }
            } catch is CancellationError {
                update(id) { $0.status = "Cancelled" }
            } catch {
                let failure = ServiceError.from(error)
                update(id) {
                    $0.status = failure.status == 499 ? "Cancelled" : "Failed"
                    $0.error = failure.message
                }
            }
        }
        records.withLock { $0[id]?.task = task }
        return id
    }

    private func update(_ id: String, _ change: (inout Record) -> Void) {
        records.withLock { records in
            guard var r = records[id] else { return }
            change(&r)
            r.lastUpdatedTime = Self.now()
            records[id] = r
        }
    }

    private func sweep(now: Int64) {
        let limit = retention.components.seconds * 1000
        records.withLock { records in
            records = records.filter { ["Pending", "InProgress"].contains($0.value.status) || now - $0.value.lastUpdatedTime < limit }
        }
    }

    /// The ArcGIS status JSON of a job, nil when unknown.
    func status(_ id: String) -> JSONValue? {
        guard let r = records.withLock({ $0[id] }) else { return nil }
        var json: [String: JSONValue] = [
            "jobId": .string(r.id), "status": .string(r.status), "responseType": .string(r.responseType),
            "submissionTime": .integer(r.submissionTime), "lastUpdatedTime": .integer(r.lastUpdatedTime),
        ]
        if let result = r.result?.objectValue { json.merge(result) { _, new in new } }
        if let error = r.error {
            json["error"] = ["code": 500, "message": .string(error), "details": []]
            json["messages"] = [["type": "esriJobMessageTypeError", "description": .string(error)]]
        }
        return .object(json)
    }

    /// Asks a running job to stop. Returns false for an unknown job.
    func cancel(_ id: String) -> Bool {
        guard let task = records.withLock({ $0[id].map { $0.task } }) else { return false }
        task?.cancel()
        return true
    }
}

/// Files the server hands out by URL (replica files, synchronizeReplica answers): kept in one
/// directory and removed `retention` after they were written or last fetched, as ArcGIS removes
/// its output files after ten minutes of no access.
final class ResultFiles: Sendable {
    let directory: URL
    let retention: Duration

    init(directory: URL, retention: Duration) {
        self.directory = directory
        self.retention = retention
    }

    /// A new, not yet existing file name with this extension.
    func newFile(extension ext: String) throws -> (name: String, url: URL) {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        sweep()
        let name = UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased() + "." + ext
        return (name, directory.appendingPathComponent(name))
    }

    /// The file for a name from a URL (only names this class made), touched so it is kept.
    func file(named name: String) -> URL? {
        guard name.range(of: "^[0-9a-f]{32}\\.[a-z]+$", options: .regularExpression) != nil else { return nil }
        let url = directory.appendingPathComponent(name)
        guard FileManager.default.fileExists(atPath: url.path) else { return nil }
        try? FileManager.default.setAttributes([.modificationDate: Date()], ofItemAtPath: url.path)
        return url
    }

    func remove(named name: String) {
        guard let url = file(named: name) else { return }
        try? FileManager.default.removeItem(at: url)
    }

    /// Removes files not touched within the retention.
    func sweep() {
        let fm = FileManager.default
        let oldest = Date().addingTimeInterval(-Double(retention.components.seconds))
        guard let names = try? fm.contentsOfDirectory(atPath: directory.path) else { return }
        for name in names {
            let path = directory.appendingPathComponent(name).path
            if let date = (try? fm.attributesOfItem(atPath: path))?[.modificationDate] as? Date, date < oldest {
                try? fm.removeItem(atPath: path)
            }
        }
    }
}

/// What the sync endpoints share across requests: the async jobs and the result files.
final class SyncServices: Sendable {
    let jobs: ServerJobs
    let files: ResultFiles
    let replayRetention: Duration
    /// Where tiles drawn for feature services' MapServers are kept.
    let renderedTiles: URL

    init(configuration: ServerConfiguration) {
        let directory = configuration.outputDirectory
            ?? FileManager.default.temporaryDirectory.appendingPathComponent("outpost-serve-\(ProcessInfo.processInfo.processIdentifier)-\(UUID().uuidString.prefix(8))")
        renderedTiles = directory.appendingPathComponent("rendered-tiles")
        jobs = ServerJobs()
        files = ResultFiles(directory: directory, retention: configuration.resultRetention)
        replayRetention = configuration.resultRetention
    }
}
