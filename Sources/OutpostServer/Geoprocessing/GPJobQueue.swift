import Foundation
import OutpostCore
import OutpostGeoprocessing
import OutpostSyncService

/// Runs a geoprocessing service's jobs: at most `maximumConcurrentJobs` at once on this host (the
/// rest wait as `esriJobWaiting`, first come first served), each ended by cancel or by its time
/// limit, every state change and message written to the store as it happens.
///
/// The jobs a host runs are those submitted to it and those it took over; it holds each under a
/// lease in the store. On start, and with a shared store every lease period, it takes over what
/// a stopped server (or host) left: a job that was executing is failed with a message saying so
/// (a tool may have been half way through; its inputs are kept, so the client may submit again),
/// and jobs that were submitted or waiting run as if just submitted. With a shared store it also
/// renews its leases and looks every second for cancels asked through other hosts.
actor GPJobQueue {
    let definition: GPServiceDefinition
    let store: any GPJobRecordStore
    let files: GPFiles
    /// This process's name in the store: the jobs it holds carry it.
    let host: String
    /// How long a job stays held without its host renewing the lease.
    let lease: Duration
    private var running: [String: Task<Void, Never>] = [:]
    private var waiting: [String] = []
    /// Jobs whose time ran out (ended as TimedOut rather than Cancelled).
    private var timedOut: Set<String> = []
    /// Jobs whose end is being written: a cancel now finds them finished.
    private var concluding: Set<String> = []
    private var watcher: Task<Void, Never>?
    /// The service is closing: no job is taken over or started any more.
    private var closing = false

    init(definition: GPServiceDefinition, store: any GPJobRecordStore, files: GPFiles, lease: Duration = .seconds(30)) {
        self.definition = definition
        self.store = store
        self.files = files
        self.lease = lease
        host = "h" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
    }

    static func now() -> Int64 { ServiceClock.system.milliseconds() }

    private var leaseEnd: Int64 { Self.now() + lease.wholeMilliseconds }

    /// Takes over the jobs a previous server left unfinished and, with a shared store, starts
    /// watching for cancels and for hosts that stopped.
    func recover() async throws {
        try await sweep()
        try await takeOver()
        guard store.isShared, watcher == nil else { return }
        let period = max(lease / 3, .milliseconds(100))
        watcher = Task { [weak self] in
            var renewed = ContinuousClock.now
            while !Task.isCancelled {
                try? await Task.sleep(for: min(period, .seconds(1)))
                guard let self else { return }
                await self.passOnCancels()
                if ContinuousClock.now - renewed >= period {
                    renewed = ContinuousClock.now
                    await self.renewAndTakeOver()
                }
            }
        }
    }

    /// The service is closing. With a shared store the host hands back the jobs it has not
    /// started (another host takes them at its next look), finishes those it runs (renewing
    /// their leases meanwhile) and stops watching the store; with its own file there is nothing
    /// to do (the next server takes over what is left).
    func close() async {
        guard store.isShared else { return }
        closing = true
        if !waiting.isEmpty {
            let handed = waiting
            waiting.removeAll()
            try? await store.release(handed, host: host)
        }
        await drain()
        watcher?.cancel()
        watcher = nil
    }

    private func renewAndTakeOver() async {
        try? await store.renew(host: host, until: leaseEnd)
        try? await takeOver()
    }

    /// Cancels here what was asked to be cancelled through another host.
    private func passOnCancels() async {
        guard let ids = try? await store.cancelsRequested(host: host) else { return }
        for id in ids { _ = try? await cancel(id) }
    }

    private func takeOver() async throws {
        guard !closing else { return }
        for (id, status) in try await store.claim(host: host, until: leaseEnd, now: Self.now()) {
            switch GPJobStatus(rawValue: status) {
            case .executing?, .cancelling?:
                try? FileManager.default.removeItem(at: files.root.appendingPathComponent(id))
                let cause = store.isShared ? "The server host running the job stopped" : "The server stopped while the job was executing"
                try await append(id, GPMessage(.error, "\(cause); submit it again."))
                try await update(id, .failed)
            default:
                try await append(id, GPMessage(.informative, store.isShared ? "Queued again: the server host it was submitted to stopped." : "Queued again after a server restart."))
                waiting.append(id)
                try await update(id, .waiting)
            }
        }
        pump()
    }

    /// Records a job and starts it when a slot is free. `inputs` were checked by the caller.
    func submit(task: String, inputs: [String: JSONValue], environment: GPEnvironment) async throws -> String {
        try await sweep()
        let id = "j" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        let now = Self.now()
        let record = GPJobRecord(id: id, task: task, status: .submitted, submitted: now, updated: now, inputs: inputs, environment: environment)
        try await store.insert(record.stored, host: host, until: leaseEnd)
        waiting.append(id)
        if running.count >= definition.maximumConcurrentJobs { try await update(id, .waiting) }
        pump()
        return id
    }

    /// Asks a job to stop: a waiting one is cancelled at once, a running one is told to stop
    /// (its tool checks between features) and discards what it made, one another host holds is
    /// passed to it through the store. False for an unknown job.
    func cancel(_ id: String) async throws -> Bool {
        if let index = waiting.firstIndex(of: id) {
            waiting.remove(at: index)
            try await append(id, GPMessage(.warning, "Cancelled before it started."))
            try await update(id, .cancelled)
            return true
        }
        if let task = running[id] {
            // Told before anything is awaited: the job's end, written on this actor, sees it.
            guard !concluding.contains(id), !task.isCancelled else { return true }
            task.cancel()
            try await update(id, .cancelling)
            return true
        }
        guard let job = try await store.summary(id) else { return false }
        if let status = GPJobStatus(rawValue: job.status), !status.isFinished {
            try await store.requestCancel(id)
            if status == .executing { try await update(id, .cancelling) }
        }
        return true
    }

    /// Forgets finished jobs older than the retention, with their files.
    func sweep() async throws {
        let cutoff = Self.now() - definition.jobRetention.wholeMilliseconds
        for id in try await store.removeFinished(before: cutoff) { try? FileManager.default.removeItem(at: files.root.appendingPathComponent(id)) }
        // The files of execute requests (x…) and uploaded items go after the same time.
        let oldest = Date(timeIntervalSince1970: Double(cutoff) / 1000)
        let fm = FileManager.default
        for (parent, prefix) in [(files.root, "x"), (files.uploads, "i")] {
            for name in (try? fm.contentsOfDirectory(atPath: parent.path)) ?? [] where name.hasPrefix(prefix) {
                let folder = parent.appendingPathComponent(name)
                if let made = (try? fm.attributesOfItem(atPath: folder.path))?[.modificationDate] as? Date, made < oldest {
                    try? fm.removeItem(at: folder)
                }
            }
        }
    }

    /// A job's task and status and the names of its inputs and results (a status request reads
    /// no values).
    nonisolated func summary(_ id: String) async throws -> (task: String, status: GPJobStatus, inputs: [String], results: [String])? {
        try await store.summary(id).map { ($0.task, GPJobStatus(rawValue: $0.status) ?? .failed, $0.inputs, $0.results) }
    }

    /// One input or result value of a job (REST JSON), nil when it has none.
    nonisolated func value(_ id: String, _ name: String, result: Bool) async throws -> JSONValue? {
        try await store.value(id, name, result: result).map { try JSONValue.parse($0) }
    }

    /// A job's messages, oldest first.
    nonisolated func messages(_ id: String) async throws -> [GPMessage] {
        try await store.messages(id).map { GPMessage(GPMessage.Kind(rawValue: $0.type) ?? .informative, $0.description) }
    }

    @discardableResult
    private nonisolated func update(_ id: String, _ status: GPJobStatus, results: String? = nil) async throws -> Bool {
        try await store.update(id, status: status.rawValue, finishes: status.isFinished, results: results, now: Self.now())
    }

    private nonisolated func append(_ id: String, _ message: GPMessage) async throws {
        try await store.append(id, type: message.kind.rawValue, description: message.description)
    }

    /// Waits for every running job (tests, shutdown).
    func drain() async {
        while let task = running.values.first { await task.value }
    }

    private func pump() {
        while !closing, running.count < definition.maximumConcurrentJobs, !waiting.isEmpty {
            let id = waiting.removeFirst()
            running[id] = Task { await self.execute(id) }
        }
    }

    private func finished(_ id: String) {
        running[id] = nil
        timedOut.remove(id)
        pump()
    }

    private func markTimedOut(_ id: String) {
        guard let task = running[id] else { return }
        timedOut.insert(id)
        task.cancel()
    }

    private func hasTimedOut(_ id: String) -> Bool { timedOut.contains(id) }

    /// Records how a job ended. On the actor, and marked before anything is awaited, so a cancel
    /// is either taken before (a job asked to stop never ends as succeeded, however late the tool
    /// noticed) or finds the job finished.
    private func conclude(_ id: String, _ outcome: Outcome, started: ContinuousClock.Instant) async {
        concluding.insert(id)
        var outcome = outcome
        if outcome.status == .succeeded {
            if running[id]?.isCancelled == true {
                outcome = timedOut.contains(id) ? .timedOut(definition.maximumExecutionTime) : .cancelled
            } else if ContinuousClock.now - started > definition.maximumExecutionTime {
                // The limit holds even when a busy machine wakes the timer late.
                outcome = .timedOut(definition.maximumExecutionTime)
            }
        }
        if !outcome.alreadyFinished {
            // A job that did not succeed leaves no output behind.
            if outcome.status != .succeeded { try? FileManager.default.removeItem(at: files.root.appendingPathComponent(id)) }
            if let message = outcome.message { try? await append(id, message) }
            _ = try? await update(id, outcome.status, results: outcome.status == .succeeded ? outcome.results : nil)
        }
        concluding.remove(id)
        finished(id)
    }

    /// How a run ended, before ``conclude(_:_:started:)`` decides.
    struct Outcome: Sendable {
        var status: GPJobStatus
        /// The results as JSON (succeeded only).
        var results: String?
        var message: GPMessage?
        /// The job had ended before it ran here (cancelled through another host): nothing to write.
        var alreadyFinished = false

        static let cancelled = Outcome(status: .cancelled, message: GPMessage(.warning, "Cancelled; no output was kept."))
        static func timedOut(_ limit: Duration) -> Outcome {
            Outcome(status: .timedOut, message: GPMessage(.error, "The job ran longer than the service allows (\(limit.components.seconds) s) and was stopped."))
        }
    }

    /// Runs off the actor: reading inputs and running the tool take seconds, and status,
    /// cancel and submit requests must not wait for them.
    private nonisolated func execute(_ id: String) async {
        let started = ContinuousClock.now
        let outcome = (try? await GPWorkExecutor.run { await self.run(id) }) ?? Outcome(status: .failed)
        // Written from a task of its own: this one may be cancelled (the job was), and the
        // stores' reads and writes give up in a cancelled task.
        await Task { await self.conclude(id, outcome, started: started) }.value
    }

    private nonisolated func run(_ id: String) async -> Outcome {
        // A job cancelled as it starts stops here: the store's calls give up in a cancelled task.
        guard let stored = try? await store.job(id), let record = try? GPJobRecord(stored), let task = definition.task(named: record.task) else {
            return Task.isCancelled ? await stopped(id) : Outcome(status: .failed)
        }
        // Ended before it ran here (cancelled through another host), or while it started.
        guard !record.status.isFinished, (try? await update(id, .executing)) == true else {
            return Task.isCancelled ? await stopped(id) : Outcome(status: record.status, alreadyFinished: true)
        }
        // A tool's progress is written in order, without holding the tool up, and all of it
        // before the job's end.
        let (progress, reporter) = AsyncStream.makeStream(of: String.self)
        let writer = Task { for await text in progress { try? await self.append(id, GPMessage(.informative, text)) } }
        let outcome = await perform(record, task: task, report: { reporter.yield($0) })
        reporter.finish()
        await writer.value
        return outcome
    }

    /// How a job told to stop ended: out of time, or cancelled.
    private func stopped(_ id: String) -> Outcome { hasTimedOut(id) ? .timedOut(definition.maximumExecutionTime) : .cancelled }

    private nonisolated func perform(_ record: GPJobRecord, task: GPTaskDefinition, report: @escaping @Sendable (String) -> Void) async -> Outcome {
        let id = record.id, files = self.files
        let limit = definition.maximumExecutionTime
        let timer = Task {
            try await Task.sleep(for: limit)
            await self.markTimedOut(id)
        }
        defer { timer.cancel() }
        do {
            try await append(id, GPMessage(.informative, "Executing \(task.name)"))
            var inputs: [String: GPValue] = [:]
            for (name, json) in record.inputs {
                guard let parameter = task.parameter(name) else { throw GPValueError(parameter: name, "is not a parameter of \(task.name)") }
                inputs[name] = try files.local(try GPValue(json: json, as: parameter.dataType, parameter: name), parameter: name)
            }
            let context = GPToolContext(outputDirectory: files.root.appendingPathComponent(id), report: report)
            let outputs = try await task.execute(inputs, environment: record.environment, context: context)
            try Task.checkCancellation()
            let results = JSONValue.object(try outputs.mapValues { try $0.json }).jsonString
            return Outcome(status: .succeeded, results: results, message: GPMessage(.informative, "Succeeded"))
        } catch {
            if error is CancellationError || Task.isCancelled { return await stopped(id) }
            return Outcome(status: .failed, message: GPMessage(.error, Self.describe(error)))
        }
    }

    /// A failure as a message a person can act on.
    static func describe(_ error: any Error) -> String {
        if let e = error as? GPValueError { return e.description }
        if let e = error as? GeometryEngine.Failure { return "Geometry error: \(e.description)" }
        if let e = error as? CoordinateTransform.Failure { return "Coordinate error: \(e.description)" }
        return "\(error)"
    }
}
