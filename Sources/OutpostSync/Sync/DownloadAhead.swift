import Foundation
import OutpostCore
import OutpostProtocol

/// The first requests of a sync job's download, made while the replica acknowledges its last
/// upload batch (the download would otherwise wait for that write before asking): the replica
/// info and, for each downloading layer behind the service, its first change page counted up
/// to the apply-while-downloading limit. These are the requests the download makes first, with
/// the same arguments, so the server sees nothing new; held in this process only (a job resumed
/// elsewhere asks again).
///
/// The download takes them only when it starts afresh (no checkpoint) from the cursors they
/// were asked from; the window they fix ends at the generation the service had after the
/// batch's answer, which any later download moves on from.
final class DownloadAhead: Sendable {
    static let shared = DownloadAhead()

    struct Start: Sendable {
        /// The replica info the download begins with.
        var info: JSONValue
        /// Each layer's first page, with the cursor it was asked from.
        var firstPages: [Int: (since: Int64, page: ChangePage)]
    }

    private let entries = Locked<[String: Task<Start, any Error>]>([:])

    /// Starts `ask` for the job, in place of any earlier start.
    func start(job: String, _ ask: @escaping @Sendable () async throws -> Start) {
        let task = Task { try await ask() }
        entries.withLock { $0.updateValue(task, forKey: job) }?.cancel()
    }

    /// What the job's start found, removed (each is used once); nil when none was made. A start
    /// that failed throws its error: the download's own first request would have met it, and a
    /// sync with one attempt fails as it would have.
    func take(job: String) async throws -> Start? {
        guard let task = entries.withLock({ $0.removeValue(forKey: job) }) else { return nil }
        return try await task.value
    }

    /// Forgets the job's start (its sync ended without a download).
    func drop(job: String) { entries.withLock { $0.removeValue(forKey: job) }?.cancel() }

    /// Whether a start is held for the job.
    func holds(job: String) -> Bool { entries.withLock { $0[job] != nil } }
}
