/// The lifecycle of a job as a pure value: every request returns what the runner must do, and
/// illegal requests throw. No I/O, so every transition is unit-tested directly.
///
/// ```
/// notStarted ──start──▶ started ──checkpoint(pause requested)──▶ paused ──start/resume──▶ started
///      │                   │  └──finish──▶ succeeded | failed
///      └──cancel──▶ failed  └──cancel──▶ canceling ──(rollback done)──▶ failed
/// paused ──cancel──▶ canceling
/// ```
///
/// Pause and cancel are requests honoured at the next checkpoint of a running job; a paused job
/// has no runner, so starting it again runs from its last checkpoint.
public struct JobStateMachine: Sendable, Hashable {
    /// Where the job is in its lifecycle.
    public private(set) var status: JobStatus
    /// A pause was asked for and takes effect at the next checkpoint.
    public private(set) var pauseRequested = false

    /// A machine at `status`; a job saved while running (`.started`) comes back `.paused`.
    public init(status: JobStatus = .notStarted) {
        // A job rebuilt from JSON that was running (or stopping) when saved is paused now: nothing
        // runs it until someone starts it again.
        self.status = (status == .started) ? .paused : status
    }

    /// What the runner does after `start()`/`resume()`.
    public enum StartAction: Sendable, Hashable {
        /// Run from the current step and checkpoint.
        case run
    }

    /// What the runner does at a checkpoint.
    public enum CheckpointAction: Sendable, Hashable {
        /// Go on running.
        case proceed
        /// Stop running; the job is paused and restarts from this checkpoint.
        case pause
        /// Stop running, roll back, and end failed with a cancellation error.
        case cancel
    }

    /// What `cancel()` asks of the caller.
    public enum CancelAction: Sendable, Hashable {
        /// Nothing to do (already finished or already canceling).
        case none
        /// The job never ran: it is failed (cancelled) now.
        case finishedWithoutRunning
        /// A runner is active: it stops at its next checkpoint.
        case stopAtNextCheckpoint
        /// No runner (paused): roll back now, then finish failed.
        case rollBackNow
    }

    /// Starts a job that has not started or is paused.
    /// - Throws: ``JobError`` (`invalidTransition`) when the job is running, stopping or finished.
    public mutating func start() throws -> StartAction {
        switch status {
        case .notStarted, .paused:
            status = .started
            pauseRequested = false
            return .run
        case .started:
            throw JobError(.invalidTransition, "the job is already running")
        case .canceling:
            throw JobError(.invalidTransition, "the job is being cancelled")
        case .succeeded, .failed:
            throw JobError(.invalidTransition, "a finished job cannot be restarted")
        }
    }

    /// `resume()` is `start()` on a paused job.
    public mutating func resume() throws -> StartAction {
        guard status == .paused else {
            throw JobError(.invalidTransition, "only a paused job can be resumed (the job is \(status.rawValue))")
        }
        return try start()
    }

    /// Asks a running job to pause at its next checkpoint.
    /// - Throws: ``JobError`` (`invalidTransition`) when the job is not running.
    public mutating func pause() throws {
        switch status {
        case .started:
            pauseRequested = true
        case .paused:
            break
        case .notStarted:
            throw JobError(.invalidTransition, "a job that has not started cannot be paused")
        case .canceling:
            throw JobError(.invalidTransition, "the job is being cancelled")
        case .succeeded, .failed:
            throw JobError(.invalidTransition, "a finished job cannot be paused")
        }
    }

    /// Asks the job to stop, and says what the caller must do for that.
    public mutating func cancel() -> CancelAction {
        switch status {
        case .notStarted:
            status = .failed
            return .finishedWithoutRunning
        case .started:
            status = .canceling
            return .stopAtNextCheckpoint
        case .paused:
            status = .canceling
            return .rollBackNow
        case .canceling, .succeeded, .failed:
            return .none
        }
    }

    /// A running step reached a checkpoint.
    public mutating func checkpoint() -> CheckpointAction {
        switch status {
        case .canceling:
            return .cancel
        case .started where pauseRequested:
            status = .paused
            pauseRequested = false
            return .pause
        default:
            return .proceed
        }
    }

    /// The last step finished and the output is ready.
    public mutating func succeed() {
        if status == .started { status = .succeeded }
    }

    /// A step failed, or cancellation (and its rollback) completed.
    public mutating func fail() {
        if status == .started || status == .canceling || status == .paused { status = .failed }
    }
}
