import Foundation

/// A long operation that reports status, progress and messages, can pause, resume and cancel
/// at checkpoints, and survives a process restart through its JSON.
///
/// ```swift
/// let job = Job(CopyFileJob(source: a, destination: b))
/// try job.start()
/// for await progress in job.progressUpdates { print(progress.fraction) }   // ends with the job
/// let result = try await job.output
/// ```
///
/// The lifecycle is ``JobStateMachine``. Pause and cancel take effect at the next checkpoint; a
/// cancelled job ends ``JobStatus/failed`` with ``JobError/Code/cancelled``; cleanup registered by
/// a step always runs, and rollback runs on failure and cancellation, both shielded from task
/// cancellation.
public final class Job<Definition: JobDefinition>: Sendable {
    /// What the job does: its parameters and steps.
    public let definition: Definition
    /// The job's id, kept in its JSON (and a `JobManager`'s file name).
    public var id: String { state.withLock { $0.snapshot.id } }

    private struct State {
        var machine: JobStateMachine
        var snapshot: JobSnapshot
        var runner: Task<Void, Never>?
        var cleanups: [@Sendable () async -> Void] = []
        var rollbacks: [@Sendable () async -> Void] = []
    }

    private let state: Locked<State>
    /// The job's result, which every caller of ``output`` awaits.
    private let outcome = SharedOutcome<Definition.Output>()
    private let statusBroadcast: Broadcast<JobStatus>
    private let progressBroadcast: Broadcast<JobProgress>
    private let messageBroadcast: Broadcast<JobMessage?>
    private let store: Locked<(any JobStore)?>
    /// Held while the JSON is written (``save()``).
    private let saving = Locked(())
    /// Where the job reads the time (its snapshot's dates, its messages' time stamps).
    private let clock: WallClock

    /// A new job, not started, reading the time from `clock`.
    public init(_ definition: Definition, id: String = UUID().uuidString, store: (any JobStore)? = nil, clock: WallClock = .system) {
        self.definition = definition
        self.clock = clock
        let now = clock.now()
        let snapshot = JobSnapshot(
            id: id, jobType: Definition.jobType, status: .notStarted, parameters: definition.parameters,
            steps: definition.stepNames, createdAt: now, updatedAt: now)
        state = Locked(State(machine: JobStateMachine(), snapshot: snapshot))
        statusBroadcast = Broadcast(.notStarted)
        progressBroadcast = Broadcast(JobProgress())
        messageBroadcast = Broadcast(nil)
        self.store = Locked(store)
    }

    /// Rebuilds a job from its JSON. A job that was running when saved comes back `paused` and
    /// continues from its last checkpoint when started. It reads the time from the environment's
    /// ``WallClock``, when one was put in.
    /// - Throws: ``JobError/Code/invalidJSON`` for unreadable JSON or another job type.
    public static func fromJSON(
        _ data: Data, environment: JobEnvironment = JobEnvironment(), store: (any JobStore)? = nil
    ) throws -> Job<Definition> {
        try Job(snapshot: JobSnapshot.decode(data), environment: environment, store: store)
    }

    init(snapshot: JobSnapshot, environment: JobEnvironment, store: (any JobStore)?) throws {
        guard snapshot.jobType == Definition.jobType else {
            throw JobError(.invalidJSON, "the JSON is a \(snapshot.jobType) job, not \(Definition.jobType)")
        }
        let definition: Definition
        do {
            definition = try Definition(parameters: snapshot.parameters, environment: environment)
        } catch {
            throw JobError(.invalidJSON, "the \(snapshot.jobType) parameters are invalid: \(error)")
        }
        guard definition.stepNames == snapshot.steps else {
            throw JobError(.invalidJSON, "the JSON lists steps \(snapshot.steps), this Outpost runs \(definition.stepNames)")
        }
        self.definition = definition
        clock = environment[WallClock.self] ?? .system
        let machine = JobStateMachine(status: snapshot.status)
        var restored = snapshot
        restored.status = machine.status
        state = Locked(State(machine: machine, snapshot: restored))
        statusBroadcast = Broadcast(machine.status)
        progressBroadcast = Broadcast(snapshot.progress)
        messageBroadcast = Broadcast(nil)
        self.store = Locked(store)
        if machine.status == .failed { outcome.settle(.failure(snapshot.error ?? JobError(.stepFailed, "the job failed"))) }
        if machine.status.isFinished { finishUpdates() }
    }

    // MARK: - Observation

    /// Where the job is in its lifecycle.
    public var status: JobStatus { state.withLock { $0.machine.status } }
    /// The current status, then every change.
    public var statusUpdates: AsyncStream<JobStatus> { statusBroadcast.subscribe() }
    /// How far the job got, by phase.
    public var progress: JobProgress { state.withLock { $0.snapshot.progress } }
    /// The current progress, then every change.
    public var progressUpdates: AsyncStream<JobProgress> { progressBroadcast.subscribe() }
    /// What the job logged, oldest first.
    public var messages: [JobMessage] { state.withLock { $0.snapshot.messages } }
    /// New messages as they are logged.
    public var messageUpdates: AsyncStream<JobMessage> {
        let source = messageBroadcast.subscribe()
        return AsyncStream { continuation in
            let task = Task {
                var first = true
                for await message in source {
                    // The subscription starts with the last message logged before it: skip it.
                    if first {
                        first = false
                        continue
                    }
                    if let message { continuation.yield(message) }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }
    /// The error that failed the job, if it failed.
    public var error: JobError? { state.withLock { $0.snapshot.error } }
    /// A copy of the job's JSON state.
    public var snapshot: JobSnapshot { state.withLock { $0.snapshot } }

    /// The job's result once it succeeds (waiting while it runs or is paused), or the error that
    /// failed it. A job outlives whoever awaits it: when the awaiting Task is cancelled this
    /// throws `CancellationError` at once and the job goes on (``cancel()`` stops it; ``run()``
    /// ties the two together).
    public var output: Definition.Output {
        get async throws { try await outcome.value() }
    }

    /// Starts the job (or resumes a paused one), awaits its output, and cancels the job if the
    /// calling Task is cancelled first — the structured form for work that belongs to its caller,
    /// such as a SwiftUI view's `.task`:
    ///
    /// ```swift
    /// .task { cache = try? await task.makeExportTileCacheJob(parameters: p, downloadFileURL: url).run() }
    /// ```
    ///
    /// - Throws: the job's error; `CancellationError` at once when the Task is cancelled (the job
    ///   then rolls back on its own, removing any partial output); ``JobError/Code/invalidTransition``
    ///   for a job that is running or finished.
    public func run() async throws -> Definition.Output {
        try start()
        do {
            return try await output
        } catch is CancellationError where !outcome.isSettled {
            cancel()
            throw CancellationError()
        }
    }

    /// Waits until the job succeeds or fails, and returns the final status.
    public func waitUntilFinished() async -> JobStatus {
        _ = try? await output
        return status
    }

    /// The job's JSON (Schemas/job.schema.json).
    public func toJSON() throws -> Data { try snapshot.encoded() }

    /// Sets where the job's JSON is persisted.
    public func persist(in store: any JobStore) throws {
        self.store.withLock { $0 = store }
        try store.save(snapshot)
    }

    // MARK: - Control

    /// Starts a new job, or resumes a paused one from its last checkpoint.
    /// - Throws: ``JobError/Code/invalidTransition`` when the job is running, cancelling or finished.
    public func start() throws {
        try state.withLock { s in
            _ = try s.machine.start()
            s.snapshot.status = s.machine.status
            s.runner = Task { await self.runLoop() }
            // Sent while the transition is held: read after it, the status of a short job could
            // already be its end (its runner finished first on a loaded machine), and observers
            // never saw it start. Later changes take this lock first, so they follow.
            statusBroadcast.send(s.machine.status)
        }
        save()
    }

    /// Resumes a paused job (the same as ``start()`` on a paused job).
    public func resume() throws {
        guard status == .paused else {
            throw JobError(.invalidTransition, "only a paused job can be resumed (the job is \(status.rawValue))")
        }
        try start()
    }

    /// Asks a running job to pause at its next checkpoint.
    public func pause() throws {
        try state.withLock { s in try s.machine.pause() }
        log("pause requested")
    }

    /// Cancels the job: a running job stops at its next checkpoint, rolls back and ends failed
    /// with a cancellation error. Cancelling a finished job does nothing.
    public func cancel() {
        let action = state.withLock { s -> JobStateMachine.CancelAction in
            // A job saved while its cancellation was under way resumes that cancellation.
            if s.machine.status == .canceling, s.runner == nil { return .rollBackNow }
            let action = s.machine.cancel()
            s.snapshot.status = s.machine.status
            if action == .stopAtNextCheckpoint { s.runner?.cancel() }
            return action
        }
        switch action {
        case .none, .stopAtNextCheckpoint:
            statusChanged()
        case .finishedWithoutRunning:
            finish(.failure(JobError.cancelled()))
        case .rollBackNow:
            statusChanged()
            let task = Task {
                await Self.uncancellable { await self.definition.rollback(context: JobContext(self)) }
                self.finish(.failure(JobError.cancelled()))
            }
            state.withLock { $0.runner = task }
        }
    }

    // MARK: - Running

    private enum Interruption: Error {
        case paused
        case cancelled
    }

    private func runLoop() async {
        let context = JobContext(self)
        log("started at step \(snapshot.currentStep + 1) of \(definition.stepNames.count)")
        do {
            while true {
                let step = state.withLock { $0.snapshot.currentStep }
                guard step < definition.stepNames.count else { break }
                do {
                    try await definition.run(step: step, context: context)
                } catch {
                    await runCleanups()
                    throw error
                }
                await runCleanups()
                // The end of a step is a checkpoint too.
                state.withLock { s in
                    s.snapshot.currentStep = step + 1
                    s.snapshot.checkpoint = nil
                    s.snapshot.progress.fraction = Double(step + 1) / Double(max(s.snapshot.steps.count, 1))
                }
                try await checkpointReached(context)
            }
            let output = try await definition.output(context: context)
            finish(.success(output))
        } catch Interruption.paused {
            state.withLock { $0.runner = nil; $0.rollbacks = [] }
            log("paused at step \(snapshot.currentStep + 1)")
            statusChanged()
        } catch {
            let cancelled = error is CancellationError || (error as? Interruption) == .cancelled || status == .canceling
            let jobError = cancelled ? JobError.cancelled() : (error as? JobError
                    ?? JobError(
                        .stepFailed, "\(definition.stepNames[min(snapshot.currentStep, definition.stepNames.count - 1)]): \(error)",
                        cause: (error as? any JobFailureCause)?.jobFailureCause))
            if cancelled {
                state.withLock { if $0.machine.status != .canceling { _ = $0.machine.cancel() } }
                statusChanged()
            }
            log(jobError.message, severity: .error)
            await runRollbacks(context)
            finish(.failure(jobError))
        }
    }

    /// Records a checkpoint and honours a pending pause or cancel.
    fileprivate func checkpointReached(_ context: JobContext, data: JSONValue?? = .none) async throws {
        let cancelledElsewhere = store.withLock { $0?.isCancelRequested(id: snapshot.id) } ?? false
        let action = state.withLock { s -> JobStateMachine.CheckpointAction in
            if case .some(let d) = data { s.snapshot.checkpoint = d }
            if cancelledElsewhere, s.machine.status == .started { _ = s.machine.cancel() }
            let action = s.machine.checkpoint()
            s.snapshot.status = s.machine.status
            return action
        }
        save()
        switch action {
        case .proceed: return
        case .pause: throw Interruption.paused
        case .cancel: throw Interruption.cancelled
        }
    }

    private func runCleanups() async {
        let cleanups = state.withLock { s -> [@Sendable () async -> Void] in
            defer { s.cleanups = [] }
            return s.cleanups
        }
        for cleanup in cleanups.reversed() { await Self.uncancellable(cleanup) }
    }

    private func runRollbacks(_ context: JobContext) async {
        let rollbacks = state.withLock { s -> [@Sendable () async -> Void] in
            defer { s.rollbacks = [] }
            return s.rollbacks
        }
        for rollback in rollbacks.reversed() { await Self.uncancellable(rollback) }
        await Self.uncancellable { await self.definition.rollback(context: context) }
    }

    /// Runs `body` in a task that does not inherit cancellation: teardown must finish even when
    /// the job's own task was cancelled.
    private static func uncancellable(_ body: @escaping @Sendable () async -> Void) async {
        await Task.detached { await body() }.value
    }

    private func finish(_ result: Result<Definition.Output, JobError>) {
        state.withLock { s in
            switch result {
            case .success: s.machine.succeed()
            case .failure(let e):
                s.machine.fail()
                s.snapshot.error = e
            }
            s.snapshot.status = s.machine.status
            if case .success = result {
                s.snapshot.progress.fraction = 1
            }
            s.runner = nil
        }
        if case .success = result { log("succeeded") }
        // Saved before the result is given out: whoever waited for the job (a caller of
        // `output`, a parent job about to read its parts' JSON) finds its JSON finished too.
        statusChanged()
        progressBroadcast.send(progress)
        outcome.settle(result.mapError { $0 as any Error })
        finishUpdates()
        // A job may have streamed millions of rows: what it freed goes back to the system.
        FreedMemory.release()
    }

    /// Ends every update stream (a finished job changes no more): `for await` loops over them end.
    private func finishUpdates() {
        statusBroadcast.finish()
        progressBroadcast.finish()
        messageBroadcast.finish()
    }

    private func statusChanged() {
        save()
        statusBroadcast.send(status)
    }

    /// Writes the job's JSON. The snapshot is taken and written under one lock, so the JSON
    /// always ends as the last state saved: a runner that finished a resumed job in the moment
    /// between ``start()`` taking its snapshot and writing it had its "succeeded" overwritten by
    /// that older "started", and the same command run again resumed a job that was done.
    private func save() {
        saving.withLock { _ in
            let (snapshot, store) = (self.snapshotForSave(), self.store.withLock { $0 })
            guard let store else { return }
            do {
                try store.save(snapshot)
            } catch {
                // Losing the JSON must not fail the work; the next checkpoint tries again. The
                // job's own messages say so (whoever runs it shows them), not this library on stderr.
                log("cannot save the job's state (\(error)); the next checkpoint tries again", severity: .warning)
            }
        }
    }

    private func snapshotForSave() -> JobSnapshot {
        state.withLock { s in
            s.snapshot.updatedAt = clock.now()
            return s.snapshot
        }
    }

    // MARK: - Context operations

    fileprivate var checkpointData: JSONValue? { state.withLock { $0.snapshot.checkpoint } }
    fileprivate var interruptRequested: Bool { state.withLock { $0.machine.pauseRequested || $0.machine.status == .canceling } }
    fileprivate var cancelRequested: Bool { state.withLock { $0.machine.status == .canceling } }

    fileprivate func record(_ key: String, _ value: JSONValue?) {
        state.withLock { $0.snapshot.results[key] = value }
        save()
    }

    fileprivate func recorded(_ key: String) -> JSONValue? { state.withLock { $0.snapshot.results[key] } }
    fileprivate var currentStep: Int { state.withLock { $0.snapshot.currentStep } }

    fileprivate func setProgress(phase: String, done: Int64, total: Int64?) {
        let progress = state.withLock { s -> JobProgress in
            var phases = s.snapshot.progress.phases
            let entry = JobProgress.Phase(name: phase, done: done, total: total)
            if let i = phases.firstIndex(where: { $0.name == phase }) { phases[i] = entry } else { phases.append(entry) }
            let steps = Double(max(s.snapshot.steps.count, 1))
            let within = entry.fraction ?? 0
            s.snapshot.progress = JobProgress(
                fraction: min(1, (Double(s.snapshot.currentStep) + within) / steps), phases: phases)
            return s.snapshot.progress
        }
        progressBroadcast.send(progress)
    }

    fileprivate func log(_ text: String, severity: JobMessage.Severity = .info) {
        let message = JobMessage(timestamp: clock.now(), severity: severity, text: text)
        state.withLock { s in
            s.snapshot.messages.append(message)
            if s.snapshot.messages.count > JobSnapshot.maxMessages {
                s.snapshot.messages.removeFirst(s.snapshot.messages.count - JobSnapshot.maxMessages)
            }
        }
        messageBroadcast.send(message)
    }

    fileprivate func addCleanup(_ body: @escaping @Sendable () async -> Void) {
        state.withLock { $0.cleanups.append(body) }
    }

    fileprivate func addRollback(_ body: @escaping @Sendable () async -> Void) {
        state.withLock { $0.rollbacks.append(body) }
    }
}

/// What a running step uses to report and to reach checkpoints.
public final class JobContext: Sendable {
    private let checkpointHandler: @Sendable (JSONValue?) async throws -> Void
    private let dataProvider: @Sendable () -> JSONValue?
    private let stepProvider: @Sendable () -> Int
    private let interruptProvider: @Sendable () -> Bool
    private let cancelProvider: @Sendable () -> Bool
    private let progressHandler: @Sendable (String, Int64, Int64?) -> Void
    private let logHandler: @Sendable (String, JobMessage.Severity) -> Void
    private let cleanupHandler: @Sendable (@escaping @Sendable () async -> Void) -> Void
    private let rollbackHandler: @Sendable (@escaping @Sendable () async -> Void) -> Void
    private let recordHandler: @Sendable (String, JSONValue?) -> Void
    private let recordedProvider: @Sendable (String) -> JSONValue?
    /// The id of the job this context serves.
    public let jobID: String

    init<D: JobDefinition>(_ job: Job<D>) {
        jobID = job.id
        checkpointHandler = { [unowned job] data in
            try await job.checkpointReached(JobContext(job), data: .some(data))
        }
        dataProvider = { [unowned job] in job.checkpointData }
        stepProvider = { [unowned job] in job.currentStep }
        interruptProvider = { [unowned job] in job.interruptRequested }
        cancelProvider = { [unowned job] in job.cancelRequested }
        progressHandler = { [unowned job] in job.setProgress(phase: $0, done: $1, total: $2) }
        logHandler = { [unowned job] in job.log($0, severity: $1) }
        cleanupHandler = { [unowned job] in job.addCleanup($0) }
        rollbackHandler = { [unowned job] in job.addRollback($0) }
        recordHandler = { [unowned job] in job.record($0, $1) }
        recordedProvider = { [unowned job] in job.recorded($0) }
    }

    /// Keeps a value in the job's JSON for later steps and for the output (persisted at once).
    public func record(_ key: String, _ value: JSONValue?) { recordHandler(key, value) }

    /// A value recorded by this or an earlier step (also after a restart).
    public func recorded(_ key: String) -> JSONValue? { recordedProvider(key) }

    /// The data of the current step's last checkpoint; nil when the step starts fresh.
    public var checkpointData: JSONValue? { dataProvider() }

    /// The index of the step being run.
    public var step: Int { stepProvider() }

    /// True when a pause or cancel waits for the next checkpoint: steps that space out their
    /// checkpoints reach one at once.
    public var isInterruptRequested: Bool { interruptProvider() }

    /// True when the interruption asked for is a cancellation (not a pause): a step that runs
    /// other jobs cancels them rather than pausing them.
    public var isCancelRequested: Bool { cancelProvider() }

    /// Records a checkpoint (persisted with the job), then pauses or cancels the job if that was
    /// asked for (by throwing: let the error propagate).
    public func checkpoint(_ data: JSONValue?) async throws { try await checkpointHandler(data) }

    /// Updates a named counter ("rows", "bytes", …); the job's fraction follows the latest one.
    public func reportProgress(_ phase: String, done: Int64, total: Int64?) { progressHandler(phase, done, total) }

    /// Adds a line to the job's messages.
    public func log(_ text: String, severity: JobMessage.Severity = .info) { logHandler(text, severity) }

    /// Runs `body` when the current step ends, however it ends (success, failure, pause, cancel).
    public func onCleanup(_ body: @escaping @Sendable () async -> Void) { cleanupHandler(body) }

    /// Runs `body` if the job fails or is cancelled during this run.
    public func onRollback(_ body: @escaping @Sendable () async -> Void) { rollbackHandler(body) }
}
