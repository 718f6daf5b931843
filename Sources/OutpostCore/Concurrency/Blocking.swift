import Dispatch

/// Runs synchronous, blocking work (SQLite reads, a graph search) on a Dispatch thread and
/// awaits it, so it never holds one of the cooperative pool's few threads (two on the CI
/// machines) that other requests and tasks need.
///
/// The caller's cancellation is honoured: a cancelled Task gets `CancellationError` at once
/// (work not yet begun never begins); work already running goes on to its end on its thread and
/// its result is dropped. So the work must be free of effects a caller would need to know about
/// — reads and computations, as every use here is; work that writes takes its own path.
public func runBlocking<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try Task.checkCancellation()
    let outcome = SharedOutcome<T>()
    DispatchQueue.global().async {
        guard !outcome.isSettled else { return }
        outcome.settle(Result { try body() })
    }
    // Its one caller gone, the outcome is settled: work not yet begun is skipped.
    return try await outcome.value { _ in outcome.settle(.failure(CancellationError())) }
}
