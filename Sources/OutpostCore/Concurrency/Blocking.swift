import Dispatch

/// Runs synchronous, blocking work (SQLite reads, a graph search) on a Dispatch thread and
/// awaits it, so it never holds one of the cooperative pool's few threads (two on the CI
/// machines) that other requests and tasks need.
///
/// The caller's cancellation is honoured: a cancelled Task gets `CancellationError` at once
/// (work not yet begun never begins). Work already running learns of it through the
/// ``BlockingCancellation`` it is handed: it checks it between steps and registers how to
/// interrupt what it waits on (``BlockingCancellation/whileRunning(interrupt:_:)``, a SQLite
/// statement's `sqlite3_interrupt`); its result is dropped. So the work must be free of effects
/// a caller would need to know about — reads and computations, as every use here is; work that
/// writes takes its own path.
public func runBlocking<T: Sendable>(_ body: @escaping @Sendable (BlockingCancellation) throws -> T) async throws -> T {
    try Task.checkCancellation()
    let outcome = SharedOutcome<T>()
    let cancellation = BlockingCancellation()
    DispatchQueue.global().async {
        guard !outcome.isSettled else { return }
        outcome.settle(Result { try body(cancellation) })
    }
    // Its one caller gone: the outcome is settled (work not yet begun is skipped) and the work
    // running is told, and interrupted where it said how.
    return try await outcome.value { _ in
        outcome.settle(.failure(CancellationError()))
        cancellation.cancel()
    }
}

/// ``runBlocking(_:)`` for work too short to look for a cancel.
public func runBlocking<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await runBlocking { (_: BlockingCancellation) in try body() }
}

/// Whether the caller of blocking work has gone, for the work to look at between its steps,
/// and how to interrupt it while it waits (``whileRunning(interrupt:_:)``).
public final class BlockingCancellation: Sendable {
    private struct State {
        var cancelled = false
        var interrupts: [UInt64: @Sendable () -> Void] = [:]
        var next: UInt64 = 0
    }

    private let state = Locked(State())

    /// A cancellation not yet cancelled.
    public init() {}

    /// Whether the caller left.
    public var isCancelled: Bool { state.withLock { $0.cancelled } }

    /// Throws `CancellationError` once the work is cancelled.
    public func checkCancellation() throws {
        if isCancelled { throw CancellationError() }
    }

    /// Runs `body` with `interrupt` registered: if the work is cancelled while `body` runs,
    /// `interrupt` is called once, from the cancelling thread, and never after `body` has
    /// returned (so an interrupt cannot reach the next user of a shared connection).
    /// - Throws: `CancellationError` without running `body` when the work is cancelled already.
    public func whileRunning<T>(interrupt: @escaping @Sendable () -> Void, _ body: () throws -> T) throws -> T {
        let id = state.withLock { s -> UInt64? in
            guard !s.cancelled else { return nil }
            s.next += 1
            s.interrupts[s.next] = interrupt
            return s.next
        }
        guard let id else { throw CancellationError() }
        // Taken out under the lock that cancel() holds while interrupting.
        defer { _ = state.withLock { $0.interrupts.removeValue(forKey: id) } }
        return try body()
    }

    /// Marks the work cancelled and interrupts what it runs now.
    public func cancel() {
        state.withLock { s in
            guard !s.cancelled else { return }
            s.cancelled = true
            // Called under the lock: the work cannot leave whileRunning (and its connection
            // go to someone else) until the interrupt has been delivered. An interrupt is a
            // flag's write (sqlite3_interrupt), so holding the lock for it costs nothing.
            for interrupt in s.interrupts.values { interrupt() }
            s.interrupts = [:]
        }
    }
}
