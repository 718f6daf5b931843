import Foundation
import OutpostCore

/// Runs an async body to its end on the calling thread: the thread a database connection's
/// transaction runs on (SQLite connections are used on their own queue only).
///
/// The body runs as a task whose preferred executor is this thread: each of its jobs (its start,
/// and every resumption after a suspension) is queued here and run here, in turn, until it
/// returns. A store's primitive operations are synchronous, so the body of a `SyncService`
/// step suspends nowhere and runs straight through, at no cost beyond one task.
final class ConnectionThread: TaskExecutor, @unchecked Sendable {
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var finished = false

    /// Runs `body` on this thread and returns what it returned (or throws what it threw).
    static func run<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
        let thread = ConnectionThread()
        let outcome = Locked<Result<T, any Error>?>(nil)
        Task(executorPreference: thread) {
            let result: Result<T, any Error>
            do { result = .success(try await body()) } catch { result = .failure(error) }
            outcome.withLock { $0 = result }
            thread.finish()
        }
        thread.drain()
        return try outcome.withLock { $0! }.get()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        guard !finished else {
            condition.unlock()
            // The body has returned (what is left is the task's own ending): any thread will do.
            globalConcurrentExecutor.enqueue(ExecutorJob(job))
            return
        }
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    private func finish() {
        condition.lock()
        finished = true
        condition.signal()
        condition.unlock()
    }

    /// Runs the queued jobs until the body has returned.
    private func drain() {
        let executor = asUnownedTaskExecutor()
        while true {
            condition.lock()
            while jobs.isEmpty && !finished { condition.wait() }
            if jobs.isEmpty {
                condition.unlock()
                return
            }
            let job = jobs.removeFirst()
            condition.unlock()
            job.runSynchronously(on: executor)
        }
    }
}
