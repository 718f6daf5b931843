/// How long a test lets a cancelled wait take. The library promises 250 ms; on a 2-core machine
/// running the whole suite, the Task that observes the cancel can wait its turn on a cooperative
/// pool that other tests' work occupies (2 s was seen for a cancel that takes milliseconds alone),
/// so the bound is far above the promise and still far below "never".
public enum CancellationBound {
    public static let loaded: Duration = .seconds(5)

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
}
