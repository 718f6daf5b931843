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
