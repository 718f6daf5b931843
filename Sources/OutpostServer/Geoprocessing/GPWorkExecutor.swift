import Dispatch

/// Where geoprocessing tools run: threads of their own rather than Swift's cooperative pool.
/// A tool computes for seconds without a suspension point; on the pool (one thread per core)
/// it would hold a thread the server's status, cancel and query requests need.
final class GPWorkExecutor: TaskExecutor {
    static let shared = GPWorkExecutor()

    private let queue = DispatchQueue(label: "outpost.geoprocessing", qos: .utility, attributes: .concurrent)

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }

    /// Runs `work` (and the nonisolated async functions it calls) on these threads.
    static func run<T: Sendable>(_ work: @Sendable () async throws -> T) async throws -> T {
        try await withTaskExecutorPreference(shared) { try await work() }
    }
}
