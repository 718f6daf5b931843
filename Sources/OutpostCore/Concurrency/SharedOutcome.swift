/// The outcome of work that several callers await, each honouring its own Task's
/// cancellation: ``value(onLeave:)`` returns the outcome once it is settled, or throws
/// `CancellationError` as soon as the calling Task is cancelled — that caller leaves, the work
/// goes on for the others. What the work is (a job, a load, a blocking call) is its owner's
/// business: it settles the outcome once, and hears (through `onLeave`) how many callers are
/// still waiting when one leaves, so it can stop the work when none is.
///
/// ```swift
/// let outcome = SharedOutcome<Int>()
/// Task { outcome.settle(.success(try await compute())) }
/// let value = try await outcome.value()   // CancellationError if this Task is cancelled first
/// ```
///
/// Each waiter is a small state machine (GRDB's `CancellableDatabaseAccess` is the model): the
/// cancellation handler may run before the waiter's continuation is stored, after it, or after
/// the outcome resumed it, and exactly one of them resumes the continuation.
public final class SharedOutcome<Value: Sendable>: Sendable {
    private enum Waiter {
        /// Waiting with its continuation.
        case waiting(CheckedContinuation<Value, any Error>)
        /// Its Task was cancelled before its continuation was stored.
        case cancelledEarly
    }

    private struct State {
        var settled: Result<Value, any Error>?
        var waiters: [UInt64: Waiter] = [:]
        var next: UInt64 = 0
    }

    private let state = Locked(State())

    /// An outcome not settled yet, with no one waiting.
    public init() {}

    /// Whether the outcome is settled.
    public var isSettled: Bool { state.withLock { $0.settled != nil } }

    /// The callers waiting now.
    public var waiting: Int { state.withLock { s in s.waiters.values.filter { if case .waiting = $0 { true } else { false } }.count } }

    /// The outcome, once settled; `CancellationError` as soon as the calling Task is cancelled.
    /// - Parameter onLeave: called (outside any lock) when this caller leaves by cancellation,
    ///   with the number of callers still waiting.
    public func value(onLeave: @Sendable (_ remaining: Int) -> Void = { _ in }) async throws -> Value {
        let id = state.withLock { s -> UInt64 in
            s.next += 1
            return s.next
        }
        let left = Locked<Int?>(nil)
        defer { if let remaining = left.withLock({ $0 }) { onLeave(remaining) } }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Value, any Error>) in
                let resume = state.withLock { s -> Result<Value, any Error>? in
                    if let settled = s.settled { return settled }
                    if case .cancelledEarly? = s.waiters.removeValue(forKey: id) {
                        left.withLock { $0 = Self.remaining(s) }
                        return .failure(CancellationError())
                    }
                    s.waiters[id] = .waiting(continuation)
                    return nil
                }
                if let resume { continuation.resume(with: resume) }
            }
        } onCancel: {
            let continuation = state.withLock { s -> CheckedContinuation<Value, any Error>? in
                guard s.settled == nil else { return nil }
                switch s.waiters[id] {
                case .waiting(let c)?:
                    s.waiters[id] = nil
                    left.withLock { $0 = Self.remaining(s) }
                    return c
                case .cancelledEarly?:
                    return nil
                case nil:
                    s.waiters[id] = .cancelledEarly
                    return nil
                }
            }
            continuation?.resume(throwing: CancellationError())
        }
    }

    private static func remaining(_ s: State) -> Int {
        s.waiters.values.filter { if case .waiting = $0 { true } else { false } }.count
    }

    /// Settles the outcome (the first call wins; later ones do nothing) and resumes every caller
    /// waiting. Returns whether this call settled it.
    @discardableResult
    public func settle(_ result: Result<Value, any Error>) -> Bool {
        let waiting = state.withLock { s -> [CheckedContinuation<Value, any Error>]? in
            guard s.settled == nil else { return nil }
            s.settled = result
            defer { s.waiters = [:] }
            return s.waiters.values.compactMap { if case .waiting(let c) = $0 { c } else { nil } }
        }
        guard let waiting else { return false }
        for c in waiting { c.resume(with: result) }
        return true
    }
}
