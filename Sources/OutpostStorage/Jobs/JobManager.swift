import Foundation
import OutpostCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Keeps the JSON of jobs in a directory and resumes them at launch: what a field app does when
/// the OS kills it mid-sync or mid-export.
///
/// Each job is `<directory>/<id>.json`, rewritten atomically at every checkpoint. A process that
/// runs a job holds an advisory lock on `<id>.lock` (released by the OS if it dies, so a killed
/// run never blocks the next); `<id>.cancel` asks whichever process runs it to cancel.
///
/// ```swift
/// let manager = try JobManager(directory: jobsURL, registry: .standard)
/// for job in try manager.resumeAll() { _ = await job.waitUntilFinished() }
/// ```
public final class JobManager: Sendable {
    /// The directory holding each job's JSON.
    public let directory: URL
    /// The job types the manager can rebuild from their JSON.
    public let registry: JobRegistry
    private let store: DirectoryJobStore
    private let locks: Locked<[String: Int32]>

    /// A manager of the jobs in `directory` (created when missing).
    public init(directory: URL, registry: JobRegistry = .standard) throws {
        self.directory = directory
        self.registry = registry
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        } catch {
            throw JobError(.invalidJSON, "cannot create the job directory \(directory.path): \(error.localizedDescription)")
        }
        store = DirectoryJobStore(directory: directory)
        locks = Locked([:])
    }

    /// Where job `id`'s JSON is kept.
    public func jsonURL(id: String) -> URL { store.url(id: id) }

    /// Creates a job persisted in the directory (not started), with a new id or `id`.
    public func add<D: JobDefinition>(_ definition: D, id: String = UUID().uuidString) throws -> Job<D> {
        let job = Job(definition, id: id, store: store)
        try store.save(job.snapshot)
        return job
    }

    /// Every job saved in the directory, newest first.
    public func snapshots() throws -> [JobSnapshot] {
        let files = try FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)
            .filter { $0.pathExtension == "json" }
        return try files.map { try JobSnapshot.decode(Data(contentsOf: $0)) }.sorted { $0.createdAt > $1.createdAt }
    }

    /// Rebuilds the job with `id` from its JSON.
    public func job(id: String) throws -> any AnyJob {
        let url = store.url(id: id)
        guard let data = FileManager.default.contents(atPath: url.path) else {
            throw JobError(.invalidJSON, "no job \(id) in \(directory.path)")
        }
        return try registry.makeJob(from: JobSnapshot.decode(data), store: store)
    }

    /// Starts (or resumes) `job` in this process.
    /// - Throws: `JobError/Code/busy` when another process is running it.
    public func start(_ job: any AnyJob) throws {
        try lock(job.id)
        do {
            try job.start()
        } catch {
            unlock(job.id)
            throw error
        }
        let id = job.id
        let updates = job.statusUpdates
        // Release the lock once the job stops running in this process (paused or finished).
        Task {
            var sawRunning = false
            for await status in updates {
                if status == .started || status == .canceling { sawRunning = true }
                if sawRunning, status == .paused || status.isFinished { break }
            }
            self.unlock(id)
        }
    }

    /// Resumes every unfinished job that no other process is running, and returns them.
    public func resumeAll() throws -> [any AnyJob] {
        var resumed: [any AnyJob] = []
        for snapshot in try snapshots() where !snapshot.status.isFinished {
            let job = try registry.makeJob(from: snapshot, store: store)
            if snapshot.status == .canceling {
                try lock(job.id)
                job.cancel()
                let id = job.id
                Task {
                    _ = await job.waitUntilFinished()
                    self.unlock(id)
                }
            } else {
                do {
                    try start(job)
                } catch let error as JobError where error.code == .busy {
                    continue
                }
            }
            resumed.append(job)
        }
        return resumed
    }

    /// Cancels the job with `id`, wherever it runs: in another process through `<id>.cancel`
    /// (waiting up to `timeout` for it to stop), else here (rolling it back).
    public func cancel(id: String, timeout: Duration = .seconds(60)) async throws -> JobSnapshot {
        if (try? lock(id)) != nil {
            defer { unlock(id) }
            let job = try self.job(id: id)
            job.cancel()
            _ = await job.waitUntilFinished()
            return job.snapshot
        }
        _ = FileManager.default.createFile(atPath: store.cancelMarker(id: id).path, contents: nil)
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: timeout)
        while clock.now < deadline {
            if let data = FileManager.default.contents(atPath: store.url(id: id).path),
                let snapshot = try? JobSnapshot.decode(data), snapshot.status.isFinished || snapshot.status == .paused
            {
                if snapshot.status.isFinished { try? FileManager.default.removeItem(at: store.cancelMarker(id: id)) }
                return snapshot
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw JobError(.busy, "job \(id) did not stop within \(timeout) after the cancel request")
    }

    /// Deletes a finished job's files.
    public func remove(id: String) throws {
        for url in [store.url(id: id), store.cancelMarker(id: id), store.lockURL(id: id)] {
            try? FileManager.default.removeItem(at: url)
        }
    }

    // MARK: - Locks

    private func lock(_ id: String) throws {
        let fd = open(store.lockURL(id: id).path, O_CREAT | O_RDWR, 0o644)
        guard fd >= 0 else { throw JobError(.busy, "cannot open the lock of job \(id)") }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            close(fd)
            throw JobError(.busy, "job \(id) is being run by another process")
        }
        locks.withLock { $0[id] = fd }
    }

    private func unlock(_ id: String) {
        if let fd = locks.withLock({ $0.removeValue(forKey: id) }) {
            flock(fd, LOCK_UN)
            close(fd)
        }
    }
}

/// Job JSON files in a directory, written atomically (temporary file, then rename).
struct DirectoryJobStore: JobStore {
    let directory: URL

    func url(id: String) -> URL { directory.appendingPathComponent("\(id).json") }
    func lockURL(id: String) -> URL { directory.appendingPathComponent("\(id).lock") }
    func cancelMarker(id: String) -> URL { directory.appendingPathComponent("\(id).cancel") }

    func save(_ snapshot: JobSnapshot) throws {
        let data = try snapshot.encoded()
        try data.write(to: url(id: snapshot.id), options: .atomic)
    }

    func isCancelRequested(id: String) -> Bool {
        FileManager.default.fileExists(atPath: cancelMarker(id: id).path)
    }
}
