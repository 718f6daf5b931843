import Foundation
import OutpostCore

/// How long a test lets a cancelled wait take. The library promises 250 ms; on a 2-core machine
/// running the whole suite, the Task that observes the cancel can wait its turn on a cooperative
/// pool that other tests' work occupies: a cancel that takes milliseconds alone was seen to take
/// 2 s, and 11 s for a checkForUpdates started while the sync tests ran (its whole test took
/// 485 s). So the bound is far above the promise and still below "never" and below the HTTP
/// timeouts (60 s and more) that would end a request nobody cancelled.
public enum CancellationBound {
    public static let loaded: Duration = .seconds(20) * timeScale

    /// How much slower than usual tests run here: `OUTPOST_TIME_SCALE` (scripts/sanitize sets 4,
    /// a sanitized build being several times slower), else 1. Bounds on how long something may
    /// take are multiplied by it.
    public static let timeScale: Int = ProcessInfo.processInfo.environment["OUTPOST_TIME_SCALE"].flatMap(Int.init).map { max(1, $0) } ?? 1

    /// Waits (polling every 2 ms) until `ready()` holds, cancels `task`, and awaits it: how long
    /// the cancelled wait took, and what it threw (nil when it returned a value).
    public static func cancel<T: Sendable>(
        _ task: Task<T, any Error>, when ready: @Sendable () -> Bool
    ) async throws -> (took: Duration, error: (any Error)?) {
        while !ready() { try await Task.sleep(for: .milliseconds(2)) }
        let cancelled = ContinuousClock.now
        task.cancel()
        do {
            _ = try await task.value
            return (ContinuousClock.now - cancelled, nil)
        } catch {
            return (ContinuousClock.now - cancelled, error)
        }
    }

    /// What `task` ends with, or nil when it has not ended within `bound` (it goes on; what it
    /// ends with is dropped) or the awaiting test was cancelled first. `Task.value` does not heed
    /// the awaiting test's cancellation, so a task that never ends held its test past the time
    /// limit with nothing said; with this the test says what it was waiting for and what the
    /// work was doing. The task's end and the bound race through a ``SharedOutcome``: the first
    /// to settle it answers.
    public static func outcome<T: Sendable>(of task: Task<T, any Error>, within bound: Duration = loaded) async -> Result<T, any Error>? {
        let first = SharedOutcome<Result<T, any Error>?>()
        Task { first.settle(.success(await task.result)) }
        let timer = Task {
            try? await Task.sleep(for: bound)
            first.settle(.success(nil))
        }
        defer { timer.cancel() }
        return (try? await first.value()) ?? nil
    }
}
