import Foundation
import OutpostCore
import OutpostStorage

/// Runs jobs as the parts of one job: starts them together, reports their combined progress as
/// the parent's, and carries the parent's pause and cancel to them. Each part keeps its own JSON
/// (where it is persisted), so a parent rebuilt after a kill rebuilds and resumes its parts.
struct ChildJobs {
    struct Part {
        var key: String
        var job: any AnyJob
        /// Its share of the parent's progress.
        var weight: Double
    }

    var parts: [Part]
    /// How a part is started (through a ``JobManager``, which locks it, or directly).
    var start: @Sendable (any AnyJob) throws -> Void

    /// Runs the unfinished parts until every part has finished (succeeded or failed), and
    /// returns their final snapshots by key.
    /// - Throws: `CancellationError` after cancelling the parts, or the parent's pause (after
    ///   pausing them), when the parent is cancelled or paused.
    /// - Parameter started: called once the parts are running (a fault point for tests).
    func run(_ context: JobContext, phase: String, started: () throws -> Void = {}) async throws -> [String: JobSnapshot] {
        for part in parts where !part.job.status.isFinished {
            try await startPart(part.job)
        }
        try started()
        let clock = ContinuousClock()
        var lastCheckpoint = clock.now
        while true {
            report(context, phase: phase)
            if parts.allSatisfy({ $0.job.status.isFinished }) { break }
            if context.isInterruptRequested || Task.isCancelled {
                try await interrupt(context)
            }
            // A checkpoint now and then: the parent's JSON stays fresh and a cancel asked by
            // another process is seen.
            if clock.now - lastCheckpoint > .seconds(1) {
                lastCheckpoint = clock.now
                do {
                    try await context.checkpoint(nil)
                } catch {
                    await stopParts(cancel: context.isCancelRequested)
                    throw error
                }
            }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return Dictionary(parts.map { ($0.key, $0.job.snapshot) }, uniquingKeysWith: { a, _ in a })
    }

    private func startPart(_ job: any AnyJob) async throws {
        // A part paused a moment ago may still hold its lock: give it a little time.
        for attempt in 0..<50 {
            do {
                try start(job)
                return
            } catch let error as JobError where error.code == .busy && attempt < 49 {
                try await Task.sleep(for: .milliseconds(100))
            }
        }
    }

    private func report(_ context: JobContext, phase: String) {
        let total = parts.reduce(0) { $0 + $1.weight }
        guard total > 0 else { return }
        let done = parts.reduce(0.0) { sum, part in
            let status = part.job.status
            return sum + part.weight * (status.isFinished ? 1 : part.job.snapshot.progress.fraction)
        }
        context.reportProgress(phase, done: Int64((done / total * 1000).rounded(.down)), total: 1000)
    }

    private func interrupt(_ context: JobContext) async throws {
        let cancel = context.isCancelRequested || Task.isCancelled
        await stopParts(cancel: cancel)
        if cancel { throw CancellationError() }
        // The parent's checkpoint raises its pause.
        try await context.checkpoint(nil)
    }

    /// Cancels the parts a kill left unfinished in `directory` (each rolls back what it made),
    /// for a parent that is being rolled back after a restart.
    static func cancelUnfinished(in directory: URL, environment: OfflineJobEnvironment) async {
        guard FileManager.default.fileExists(atPath: directory.path),
            let manager = try? JobManager(directory: directory, registry: .withOfflineMapJobs(environment))
        else { return }
        for snapshot in (try? manager.snapshots()) ?? [] where !snapshot.status.isFinished {
            _ = try? await manager.cancel(id: snapshot.id, timeout: .seconds(30))
        }
    }

    /// Cancels the parts (waiting for their rollbacks) or pauses them (waiting until each has
    /// stopped and saved its JSON: a parent read from its JSON rebuilds them from theirs).
    private func stopParts(cancel: Bool) async {
        // Subscribed before the parts are asked: a job announces a pause or its end after saving
        // its JSON, while its status reads paused a moment before. Only a part running now has
        // an announcement to wait for.
        let watched = parts.map { part in (part, [.started, .canceling].contains(part.job.status), part.job.statusUpdates) }
        for part in parts where !part.job.status.isFinished {
            if cancel { part.job.cancel() } else { try? part.job.pause() }
        }
        for (part, running, updates) in watched {
            if cancel || part.job.status.isFinished {
                _ = await part.job.waitUntilFinished()
            } else if running {
                await Self.firstStop(of: updates, within: .seconds(5))
            }
        }
    }

    /// Waits for the first announced status that is not running (or until `limit`: a part that
    /// stopped between the look at its status and the subscription announced it already).
    private static func firstStop(of updates: AsyncStream<JobStatus>, within limit: Duration) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for await status in updates where status != .started && status != .canceling { return }
            }
            group.addTask { try? await Task.sleep(for: limit) }
            await group.next()
            group.cancelAll()
        }
    }
}
