import Foundation
import OutpostCore
import OutpostSQLiteService
import OutpostSyncService
import OutpostVectorTiles

/// The server's asynchronous operations (`async=true` createReplica and synchronizeReplica, tile
/// exports), as ArcGIS shapes them: the request answers `{"statusUrl": …/jobs/<id>}` at once and
/// the client polls that URL until `status` is `Completed` (with `resultUrl`) or `Failed`.
///
/// A job runs in the process that started it; its record is in the ``JobRecordStore``. With a
/// shared store any process answers its status, and a cancel sent to another process reaches
/// the running one through the store (it looks twice a second). There each process also renews
/// the lease on the jobs it runs every third of ``lease``, and takes over the jobs of a process
/// whose lease ran out (it stopped): a job started with a ``ResumableJob`` is run again from its
/// start here (at most ``maximumStarts`` times in all), through the way of running its kind
/// registered with ``register(_:_:)``; any other is failed, and its client hears "Failed" with
/// the reason and submits again.
final class ServerJobs: Sendable {
    /// A job's work: its result fields (`resultUrl`, `replicaID`, …).
    typealias Work = @Sendable () async throws -> JSONValue
    let store: any JobRecordStore
    private let running = Locked<[String: Task<Void, Never>]>([:])
    /// Finished jobs are forgotten after this long.
    let retention: Duration
    let metrics: ServerMetrics?
    /// This process, as the job records name the host running a job.
    let host = "h" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(16)
    /// How long a job stays with a process that stopped renewing its lease.
    let lease: Duration
    /// Renews this process's leases and ends the jobs of stopped processes (shared stores only).
    private let keeper = Locked<Task<Void, Never>?>(nil)
    /// How each kind of resumable job is run again from its input.
    private let kinds = Locked<[String: @Sendable (JSONValue) async throws -> Work]>([:])
    /// Jobs this host handed back while draining: their end is not written here (another host
    /// runs them again, or fails them).
    private let handedBack = Locked<Set<String>>([])
    /// Set once the host drains: it takes no other host's job any more.
    private let closing = Locked(false)
    /// How many times a job is started in all before a host's stopping fails it: a job that
    /// takes its host down with it is not handed from host to host for ever.
    static let maximumStarts = 3

    /// What a job whose process stopped is failed with.
    static let abandoned = "the server process running this job stopped before it finished; submit it again"

    init(store: any JobRecordStore = MemoryJobStore(), retention: Duration = .seconds(3600), lease: Duration = .seconds(30), metrics: ServerMetrics? = nil) {
        self.store = store
        self.retention = retention
        self.lease = lease
        self.metrics = metrics
        guard store.isShared else { return }
        let period = lease / 3
        keeper.withLock {
            $0 = Task { [weak self] in
                while !Task.isCancelled {
                    try? await Task.sleep(for: period)
                    guard let self else { return }
                    await self.keepLeases()
                }
            }
        }
    }

    deinit { keeper.withLock { $0?.cancel() } }

    /// Ends this host's part once its server has stopped: no lease renewed and no other host's
    /// job taken over any more, and the ways of running jobs again let go (they hold the
    /// server's routes, which hold this: without it a stopped server stays in memory, and a
    /// shared store's keeper goes on taking jobs for it).
    func close() {
        closing.withLock { $0 = true }
        keeper.withLock {
            $0?.cancel()
            $0 = nil
        }
        kinds.withLock { $0 = [:] }
    }

    /// Registers how a kind of resumable job is run again from its input on this host.
    func register(_ kind: String, _ make: @escaping @Sendable (JSONValue) async throws -> Work) {
        kinds.withLock { $0[kind] = make }
    }

    /// One round of the keeper: this process's leases renewed, stopped processes' jobs taken
    /// over (run again here) or failed.
    func keepLeases() async {
        let now = Self.now()
        try? await store.renew(host: host, until: now + lease.wholeMilliseconds)
        guard !closing.withLock({ $0 }) else { return }
        for (id, job) in (try? await store.takeAbandoned(now: now, host: host, until: now + lease.wholeMilliseconds, maximumStarts: Self.maximumStarts)) ?? [] {
            do {
                guard let make = kinds.withLock({ $0[job.kind] }) else {
                    throw ServiceError(500, "this server process cannot run a \(job.kind) job")
                }
                run(id, try await make(job.input))
            } catch {
                try? await store.update(id, status: "Failed", result: nil, error: "\(Self.abandoned) (\(ServiceError.from(error).message))")
            }
        }
        _ = try? await store.failAbandoned(now: now, error: Self.abandoned)
    }

    static func now() -> Int64 { ServiceClock.system.milliseconds() }

    /// The host drains: it takes no other host's job any more, lets the jobs it runs finish until
    /// `deadline` (renewing their leases), and then, with a shared store, stops the ones left and
    /// hands them back (their leases ended at once): another host runs a resumable one again
    /// from its start, and fails any other with the reason, at its next look rather than a
    /// lease later.
    func handBack(by deadline: ContinuousClock.Instant) async {
        closing.withLock { $0 = true }
        while !running.withLock({ $0.isEmpty }), ContinuousClock.now < deadline, !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(50))
        }
        guard store.isShared else { return }
        let left = running.withLock { $0 }
        guard !left.isEmpty else { return }
        // No renewal after the leases end: the keeper is stopped first.
        if let keeper = keeper.withLock({ $0 }) {
            keeper.cancel()
            await keeper.value
        }
        handedBack.withLock { $0.formUnion(left.keys) }
        for task in left.values { task.cancel() }
        let stopping = ContinuousClock.now + .seconds(5)
        while !running.withLock({ $0.isEmpty }), ContinuousClock.now < stopping {
            try? await Task.sleep(for: .milliseconds(20))
        }
        // In a task of its own: the drain may be cancelled, and a database store would refuse
        // a query run for a cancelled task.
        let ids = Array(left.keys), store = self.store, host = self.host
        await Task { try? await store.release(ids, host: host) }.value
    }

    /// Starts `work` and returns the job id; `work` returns the job's result fields
    /// (`resultUrl`, `replicaID`, …). With `resumable` (a kind registered with
    /// ``register(_:_:)`` and its input), another process of a site runs the job again from its
    /// start should this one stop before it ends.
    func start(responseType: String, resumable: ResumableJob? = nil, _ work: @escaping Work) async throws -> String {
        let id = UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        let now = Self.now()
        try await store.sweep(finishedBefore: now - retention.components.seconds * 1000)
        try await store.insert(
            JobRecord(id: id, status: "Pending", responseType: responseType, submissionTime: now, lastUpdatedTime: now), host: host,
            until: now + lease.wholeMilliseconds, resumable: store.isShared ? resumable : nil)
        run(id, work)
        return id
    }

    /// Runs job `id` here to its end, writing its status as it goes.
    private func run(_ id: String, _ work: @escaping Work) {
        let store = self.store
        // Created and recorded under the lock: the task's own removal at its end waits for it.
        metrics?.jobStarted()
        running.withLock { running in running[id] = Task { [self] in
            defer { self.metrics?.jobFinished() }
            try? await store.update(id, status: "InProgress", result: nil, error: nil)
            let watcher = store.isShared ? Task { await Self.watchForCancel(id, store: store, self) } : nil
            defer { watcher?.cancel() }
            let outcome: (status: String, result: JSONValue?, error: String?)
            do {
                outcome = ("Completed", try await work(), nil)
            } catch {
                // A cancelled job may end with its own error (a job's cancellation, a rollback's).
                let failure = ServiceError.from(error)
                outcome = error is CancellationError || Task.isCancelled || failure.status == 499 ? ("Cancelled", nil, nil) : ("Failed", nil, failure.message)
            }
            // Written from a task of its own: this one may be cancelled, and a database store
            // would refuse to run a query for it. A job handed back is another host's to end.
            if !self.handedBack.withLock({ $0.contains(id) }) {
                await Task { try? await store.update(id, status: outcome.status, result: outcome.result, error: outcome.error) }.value
            }
            _ = self.running.withLock { $0.removeValue(forKey: id) }
        } }
    }

    /// Cancels a job here when another process asked for it through the shared store.
    private static func watchForCancel(_ id: String, store: any JobRecordStore, _ jobs: ServerJobs) async {
        while !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(500))
            if (try? await store.cancelRequested(id)) == true {
                jobs.running.withLock { $0[id] }?.cancel()
                return
            }
        }
    }

    /// The ArcGIS status JSON of a job, nil when unknown.
    func status(_ id: String) async throws -> JSONValue? {
        guard let r = try await store.record(id) else { return nil }
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

    /// Asks a running job to stop (here, or through the store in the process running it).
    /// Returns false for an unknown job.
    func cancel(_ id: String) async throws -> Bool {
        if let task = running.withLock({ $0[id] }) {
            task.cancel()
            return true
        }
        return try await store.requestCancel(id)
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
    /// Each feature service's vector tiles, made once per service (its generator keeps what it
    /// learned of the source between requests).
    private let layerTiles = Locked<[String: (backend: SQLiteServiceBackend, tiles: LayerVectorTiles)]>([:])
    /// The drawing of each served vector tile file (its style read once, not per request).
    private let vectorDrawings = Locked<[String: (archive: VectorTileArchive, source: VectorTileRenderSource)]>([:])
    /// The configured public address (``ServerConfiguration/publicURL``).
    let publicURL: URL?
    /// The server serves HTTPS.
    let secure: Bool

    /// The output directory made for this server when none was configured: removed with the
    /// services, and by a later server if this process is killed.
    private let madeDirectory: ProcessDirectory?

    init(configuration: ServerConfiguration, metrics: ServerMetrics? = nil) {
        publicURL = configuration.publicURL
        secure = configuration.tls != nil
        let directory: URL
        if let configured = configuration.outputDirectory {
            directory = configured
            madeDirectory = nil
        } else {
            let temporary = FileManager.default.temporaryDirectory
            ProcessDirectory.removeAbandoned(in: temporary, prefix: "outpost-serve-")
            let made = ProcessDirectory(
                temporary.appendingPathComponent("outpost-serve-\(ProcessInfo.processInfo.processIdentifier)-\(UUID().uuidString.prefix(8))"))
            directory = made.url
            madeDirectory = made
        }
        renderedTiles = directory.appendingPathComponent("rendered-tiles")
        jobs = ServerJobs(store: configuration.jobStore ?? MemoryJobStore(), lease: configuration.jobLease, metrics: metrics)
        files = ResultFiles(directory: directory, retention: configuration.resultRetention)
        replayRetention = configuration.resultRetention
    }
}

extension SyncServices {
    /// `backend`'s layers as vector tiles, kept under the rendered tiles: the one made before
    /// for this backend, else a new one.
    /// - Throws: ``VectorTileError`` when its layers cannot be made into tiles.
    func layerVectorTiles(_ backend: SQLiteServiceBackend) throws -> LayerVectorTiles {
        if let known = layerTiles.withLock({ $0[backend.name] }), known.backend === backend { return known.tiles }
        let tiles = try LayerVectorTiles(
            name: backend.name, geodatabase: backend.geodatabase, cacheDirectory: renderedTiles.appendingPathComponent("\(backend.name)/vector")
        ) { try await backend.generation() }
        layerTiles.withLock { $0[backend.name] = (backend, tiles) }
        return tiles
    }

    /// Raster tiles and images drawn from `archive` by its style, made once per served file.
    func vectorDrawing(_ archive: VectorTileArchive) async throws -> VectorTileRenderSource {
        if let known = vectorDrawings.withLock({ $0[archive.name] }), known.archive === archive { return known.source }
        let source = VectorTileRenderSource(renderer: try await VectorTileRenderer(service: archive))
        vectorDrawings.withLock { $0[archive.name] = (archive, source) }
        return source
    }
}

/// A directory that belongs to a running process: it holds an exclusive `flock` on the
/// directory's `.lock` for as long as it lives, and the kernel drops that lock when the process
/// ends, however it ends. A server's result files and rendered tiles live in one; a server that
/// was killed leaves it behind (replica files of gigabytes), and the next server on the machine
/// removes every such directory whose lock it can take.
final class ProcessDirectory: Sendable {
    let url: URL
    private let lock: Int32

    /// Makes the directory under a staging name, locks it, and only then gives it its name: a
    /// sweeping server never sees it unlocked.
    init(_ url: URL) {
        let fm = FileManager.default
        let staging = url.deletingLastPathComponent().appendingPathComponent(".staging-\(url.lastPathComponent)")
        try? fm.createDirectory(at: staging, withIntermediateDirectories: true)
        lock = open(staging.appendingPathComponent(".lock").path, O_CREAT | O_RDWR | O_CLOEXEC, 0o644)
        if lock >= 0 { _ = flock(lock, LOCK_EX | LOCK_NB) }
        if (try? fm.moveItem(at: staging, to: url)) == nil {
            try? fm.createDirectory(at: url, withIntermediateDirectories: true)
        }
        self.url = url
    }

    deinit {
        try? FileManager.default.removeItem(at: url)
        if lock >= 0 { close(lock) }
    }

    /// Removes the directories named `prefix…` in `parent` that no live process holds. One
    /// without a lock file (made before there were locks) goes once it is an hour old.
    static func removeAbandoned(in parent: URL, prefix: String) {
        let fm = FileManager.default
        for name in (try? fm.contentsOfDirectory(atPath: parent.path)) ?? [] where name.hasPrefix(prefix) {
            let directory = parent.appendingPathComponent(name)
            let fd = open(directory.appendingPathComponent(".lock").path, O_RDWR | O_CLOEXEC)
            guard fd >= 0 else {
                let modified = (try? fm.attributesOfItem(atPath: directory.path))?[.modificationDate] as? Date
                if let modified, modified < Date().addingTimeInterval(-3600) { try? fm.removeItem(at: directory) }
                continue
            }
            defer { close(fd) }
            if flock(fd, LOCK_EX | LOCK_NB) == 0 { try? fm.removeItem(at: directory) }
        }
    }
}
