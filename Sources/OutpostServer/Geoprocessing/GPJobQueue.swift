import Foundation
import OutpostCore
import OutpostGeoprocessing

/// Runs a geoprocessing service's jobs: at most `maximumConcurrentJobs` at once (the rest wait
/// as `esriJobWaiting`, first come first served), each ended by cancel or by its time limit,
/// every state change and message written to the ``GPJobStore`` as it happens.
///
/// On start it takes over what a stopped server left: a job that was executing is failed with
/// a message saying so (a tool may have been half way through; its inputs are kept, so the
/// client may submit again), and jobs that were submitted or waiting run as if just submitted.
actor GPJobQueue {
    let definition: GPServiceDefinition
    let store: GPJobStore
    let files: GPFiles
    private var running: [String: Task<Void, Never>] = [:]
    private var waiting: [String] = []
    /// Jobs whose time ran out (ended as TimedOut rather than Cancelled).
    private var timedOut: Set<String> = []

    init(definition: GPServiceDefinition, store: GPJobStore, files: GPFiles) {
        self.definition = definition
        self.store = store
        self.files = files
    }

    /// Takes over the jobs a previous server left unfinished.
    func recover() throws {
        try sweep()
        for (id, status) in try store.unfinished() {
            switch status {
            case .executing, .cancelling:
                try store.append(id, GPMessage(.error, "The server stopped while the job was executing; submit it again."))
                try store.update(id, status: .failed)
            default:
                try store.append(id, GPMessage(.informative, "Queued again after a server restart."))
                waiting.append(id)
                try store.update(id, status: .waiting)
            }
        }
        pump()
    }

    /// Records a job and starts it when a slot is free. `inputs` were checked by the caller.
    func submit(task: String, inputs: [String: JSONValue], environment: GPEnvironment) throws -> String {
        try sweep()
        let id = "j" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        let now = GPJobStore.now()
        try store.insert(GPJobRecord(id: id, task: task, status: .submitted, submitted: now, updated: now, inputs: inputs, environment: environment))
        waiting.append(id)
        if running.count >= definition.maximumConcurrentJobs { try store.update(id, status: .waiting) }
        pump()
        return id
    }

    /// Asks a job to stop: a waiting one is cancelled at once, a running one is told to stop
    /// (its tool checks between features) and discards what it made. False for an unknown job.
    func cancel(_ id: String) throws -> Bool {
        guard let job = try store.summary(id) else { return false }
        if let index = waiting.firstIndex(of: id) {
            waiting.remove(at: index)
            try store.append(id, GPMessage(.warning, "Cancelled before it started."))
            try store.update(id, status: .cancelled)
        } else if let task = running[id] {
            try store.update(id, status: .cancelling)
            task.cancel()
        } else if !job.status.isFinished {
            try store.update(id, status: .cancelled)
        }
        return true
    }

    /// Forgets finished jobs older than the retention, with their files.
    func sweep() throws {
        let retention = definition.jobRetention.components
        let cutoff = GPJobStore.now() - retention.seconds * 1000 - retention.attoseconds / 1_000_000_000_000_000
        for id in try store.removeFinished(before: cutoff) { try? FileManager.default.removeItem(at: files.root.appendingPathComponent(id)) }
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

    /// Waits for every running job (tests, shutdown).
    func drain() async {
        while let task = running.values.first { await task.value }
    }

    private func pump() {
        while running.count < definition.maximumConcurrentJobs, !waiting.isEmpty {
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

    /// Records how a job ended. On the actor, so a cancel is either taken before (a job asked to
    /// stop never ends as succeeded, however late the tool noticed) or finds the job finished.
    private func conclude(_ id: String, _ outcome: Outcome, started: ContinuousClock.Instant) {
        var outcome = outcome
        if outcome.status == .succeeded {
            if running[id]?.isCancelled == true {
                outcome = timedOut.contains(id) ? .timedOut(definition.maximumExecutionTime) : .cancelled
            } else if ContinuousClock.now - started > definition.maximumExecutionTime {
                // The limit holds even when a busy machine wakes the timer late.
                outcome = .timedOut(definition.maximumExecutionTime)
            }
        }
        // A job that did not succeed leaves no output behind.
        if outcome.status != .succeeded { try? FileManager.default.removeItem(at: files.root.appendingPathComponent(id)) }
        if let message = outcome.message { try? store.append(id, message) }
        _ = try? store.update(id, status: outcome.status, encodedResults: outcome.status == .succeeded ? outcome.results : nil)
        finished(id)
    }

    /// How a run ended, before ``conclude(_:_:started:)`` decides.
    struct Outcome: Sendable {
        var status: GPJobStatus
        /// The results as JSON (succeeded only).
        var results: String?
        var message: GPMessage?

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
        await conclude(id, outcome, started: started)
    }

    private nonisolated func run(_ id: String) async -> Outcome {
        let store = self.store, definition = self.definition, files = self.files
        guard let record = try? store.record(id), let task = definition.task(named: record.task) else { return Outcome(status: .failed) }
        let limit = definition.maximumExecutionTime
        let timer = Task {
            try await Task.sleep(for: limit)
            await self.markTimedOut(id)
        }
        defer { timer.cancel() }
        do {
            try store.update(id, status: .executing)
            try store.append(id, GPMessage(.informative, "Executing \(task.name)"))
            var inputs: [String: GPValue] = [:]
            for (name, json) in record.inputs {
                guard let parameter = task.parameter(name) else { throw GPValueError(parameter: name, "is not a parameter of \(task.name)") }
                inputs[name] = try files.local(try GPValue(json: json, as: parameter.dataType, parameter: name), parameter: name)
            }
            let output = files.root.appendingPathComponent(id)
            let context = GPToolContext(outputDirectory: output) { text in try? store.append(id, GPMessage(.informative, text)) }
            let outputs = try await task.execute(inputs, environment: record.environment, context: context)
            try Task.checkCancellation()
            let results = JSONValue.object(try outputs.mapValues { try $0.json }).jsonString
            return Outcome(status: .succeeded, results: results, message: GPMessage(.informative, "Succeeded"))
        } catch {
            if error is CancellationError || Task.isCancelled {
                return await hasTimedOut(id) ? .timedOut(limit) : .cancelled
            }
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
