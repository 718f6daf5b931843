import Foundation
import OutpostCore
import OutpostDigest
import OutpostProtocol
import OutpostSyncService

/// Attachment content uploaded by hash, kept in files beside the service
/// (`<service>.gpkg.blobs/<sha256>`), received in chunks at increasing offsets and verified
/// against its hash when the last byte arrives. A link that drops mid-photo resumes where the
/// server's file ends; content the server already has is not sent again.
final class BlobStore: Sendable {
    let directory: URL
    private let lock = Locked(())

    init(directory: URL) {
        self.directory = directory
    }

    static func isHash(_ text: String) -> Bool {
        text.count == 64 && text.allSatisfy { $0.isHexDigit && !$0.isUppercase }
    }

    func url(_ sha: String) -> URL { directory.appendingPathComponent(sha) }
    private func partial(_ sha: String) -> URL { directory.appendingPathComponent(sha + ".partial") }

    func status(_ sha: String) throws -> BlobStatus {
        guard Self.isHash(sha) else { throw SyncServiceError.invalidParameter("sha256", "expected 64 lower-case hex digits") }
        return lock.withLock { _ in
            if FileManager.default.fileExists(atPath: url(sha).path) {
                return BlobStatus(sha256: sha, received: Self.size(url(sha)), complete: true)
            }
            return BlobStatus(sha256: sha, received: Self.size(partial(sha)), complete: false)
        }
    }

    /// Appends `bytes` at `offset` of content `sha` whose whole size is `total`.
    /// - Throws: ``SyncServiceError``: a `conflict` when `offset` is not where the received bytes
    ///   end (its details say where), an `invalidParameter` past `total`, a `contentMismatch` when
    ///   the complete content does not hash to `sha` (it is discarded).
    func append(_ sha: String, offset: Int64, total: Int64, bytes: Data) throws -> BlobStatus {
        guard Self.isHash(sha) else { throw SyncServiceError.invalidParameter("sha256", "expected 64 lower-case hex digits") }
        guard total >= 0, offset >= 0, offset + Int64(bytes.count) <= total else {
            throw SyncServiceError.invalidParameter("size", "\(offset) + \(bytes.count) bytes is past the declared size \(total)")
        }
        return try lock.withLock { _ in
            if FileManager.default.fileExists(atPath: url(sha).path) { return BlobStatus(sha256: sha, received: Self.size(url(sha)), complete: true) }
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let file = partial(sha)
            let received = Self.size(file)
            guard offset == received else {
                throw SyncServiceError(.conflict, "content \(sha.prefix(12))… continues at byte \(received), not \(offset)", details: ["received: \(received)"])
            }
            if !FileManager.default.fileExists(atPath: file.path) { _ = FileManager.default.createFile(atPath: file.path, contents: nil) }
            guard let handle = FileHandle(forWritingAtPath: file.path) else { throw SyncServiceError(.failed, "cannot write \(file.lastPathComponent)") }
            try handle.seek(toOffset: UInt64(offset))
            try handle.write(contentsOf: bytes)
            let now = offset + Int64(bytes.count)
            // Chunks are not flushed one by one: after a crash a partial file may hold bytes the
            // disk lost, and the hash check at the end refuses it. Complete content is flushed
            // before it is renamed into place.
            if now == total { try handle.synchronize() }
            try handle.close()
            guard now == total else { return BlobStatus(sha256: sha, received: now, complete: false) }
            guard try Self.hash(file) == sha else {
                try? FileManager.default.removeItem(at: file)
                throw SyncServiceError(.contentMismatch, "the uploaded content does not match its SHA-256 \(sha.prefix(12))…; it was discarded, send it again")
            }
            try FileManager.default.moveItem(at: file, to: url(sha))
            return BlobStatus(sha256: sha, received: now, complete: true)
        }
    }

    static func size(_ url: URL) -> Int64 {
        ((try? FileManager.default.attributesOfItem(atPath: url.path))?[.size] as? NSNumber)?.int64Value ?? 0
    }

    /// The SHA-256 of a file, read a megabyte at a time.
    static func hash(_ url: URL) throws -> String {
        guard let handle = FileHandle(forReadingAtPath: url.path) else { throw SyncServiceError(.failed, "cannot read \(url.lastPathComponent)") }
        defer { try? handle.close() }
        var hash = SHA256()
        while let chunk = try handle.read(upToCount: 1 << 20), !chunk.isEmpty {
            chunk.withUnsafeBytes { hash.update($0) }
        }
        return SHA256.hexString(hash.finalize())
    }
}
