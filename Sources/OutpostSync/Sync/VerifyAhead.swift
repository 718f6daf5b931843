import Foundation
import OutpostProtocol
import OutpostStorage
import OutpostCore

/// Checksums a sync job makes before its verify step, held in this process only (a job resumed
/// elsewhere simply computes them at verify): the replica's own, computed while the server
/// applies the last upload batch (the client waits idle then), and the server's, asked for as
/// soon as that batch is answered, or when a download has fetched its last page. A sync that uploaded many edits verifies whole layers; this way neither
/// side's pass over the layer waits for the other steps.
///
/// The verify step takes a replica checksum only for a layer this job's download left
/// untouched, at the same schema version, with nothing pending; and the server's only when its
/// generation is the one every layer was downloaded to. Anything else is computed afresh, as
/// without them. A stale checksum can only cause a needless comparison of the whole layer or
/// refetch, never hide a difference: it describes rows the replica held, which the server then
/// also holds only if nothing changed.
final class VerifyAhead: Sendable {
    static let shared = VerifyAhead()

    struct Entry: Sendable {
        var schemaVersion: Int
        /// The replica's checksums, hashed when the data had `hashedAt`.
        var local: [Int: FeatureDigest.Accumulator] = [:]
        var hashedAt: GeodatabaseConnection.ChecksumStamp?
        var server: Task<ReplicaChecksums, any Error>?
    }

    private let entries = Locked<[String: Entry]>([:])

    func storeLocal(job: String, schemaVersion: Int, _ local: [Int: FeatureDigest.Accumulator], hashedAt: GeodatabaseConnection.ChecksumStamp?) {
        entries.withLock { $0[job] = Entry(schemaVersion: schemaVersion, local: local, hashedAt: hashedAt) }
    }

    /// Whether the job has replica checksums made ahead and has not yet asked for the server's.
    func awaitsServer(job: String) -> Bool { entries.withLock { $0[job] != nil && $0[job]?.server == nil } }

    /// Asks for the server's checksums now (once per job): after the last upload batch's answer,
    /// or after a download's last page, while the replica still acknowledges or applies and the
    /// server has nothing else to do.
    func askServer(job: String, schemaVersion: Int, _ ask: @escaping @Sendable () async throws -> ReplicaChecksums) {
        entries.withLock { entries in
            guard entries[job]?.server == nil else { return }
            entries[job, default: Entry(schemaVersion: schemaVersion)].server = Task { try await ask() }
        }
    }

    /// The job's entry, removed: each is used once.
    func take(job: String) -> Entry? { entries.withLock { $0.removeValue(forKey: job) } }

    /// Forgets the job's entry (its sync ended without a verify).
    func drop(job: String) { take(job: job)?.server?.cancel() }
}

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
