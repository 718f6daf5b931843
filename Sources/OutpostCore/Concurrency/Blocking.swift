import Dispatch

/// Runs synchronous, blocking work (SQLite reads, a graph search) on a Dispatch thread and
/// awaits it, so it never holds one of the cooperative pool's few threads (two on the CI
/// machines) that other requests and tasks need.
public func runBlocking<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        DispatchQueue.global().async { continuation.resume(with: Result { try body() }) }
    }
}
