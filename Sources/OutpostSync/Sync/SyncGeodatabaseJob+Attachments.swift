import Foundation
import OutpostCore
import OutpostDigest
import OutpostProtocol
import OutpostStorage

/// Attachment content both ways: uploaded by hash before the batch that adds it, downloaded
/// before the apply that needs it; in chunks, resumable, verified, never whole in memory.
extension SyncGeodatabaseJob {
    /// Uploads the content of a batch's new attachments the server does not have yet, in chunks
    /// read from the replica (never a whole attachment in memory). Returns the global ids of the
    /// inserted attachments whose content the replica no longer has and the server lacks:
    /// deleted here after the batch was sealed (the upload settles them: `refusedOnlyFor`).
    func uploadContent(of attachments: [AttachmentEdit], _ client: NativeSyncClient, _ context: JobContext) async throws -> Set<String> {
        var seen = Set<String>()
        var vanished = Set<String>()
        for edit in attachments where edit.op == .insert {
            guard let info = edit.attachment, seen.insert(info.sha256).inserted else { continue }
            var status = try await withRetries(context, "attachment \(info.name)") { try await client.blobStatus(info.sha256) }
            if status.complete { continue }
            context.log("uploading attachment \(info.name) (\(info.size >> 10) KB) from byte \(status.received)")
            let chunk = syncParameters.attachmentChunkSize
            while !status.complete {
                let offset = status.received
                let gid = edit.globalId
                let read = try await geodatabase.read { conn -> Data? in
                    guard let record = try conn.attachmentRecords(globalIDs: [gid]).values.first else { return nil }
                    return try conn.attachmentBytes(id: record.id, offset: offset, length: chunk)
                }
                guard let bytes = read else {
                    // Deleted here after the batch was sealed: the server refuses the insert (no
                    // content); the upload settles it (see `refusedOnlyFor`).
                    // Another insert of the same content may still read it from its own record.
                    context.log("attachment \(info.name) was deleted before its content went up")
                    vanished.insert(GlobalID.normalized(gid) ?? gid)
                    seen.remove(info.sha256)
                    break
                }
                // Where someone else's upload of the same content moved on, this continues from there.
                status = try await withRetries(context, "attachment \(info.name)") {
                    try await client.appendBlob(info.sha256, offset: offset, total: info.size, bytes: bytes)
                }
                try faults.check("client.afterContentChunk")
                context.reportProgress("attachment bytes", done: status.received, total: info.size)
            }
        }
        return vanished
    }

    /// Fetches the content of staged attachments the replica does not have into `directory`
    /// (`<sha256>`, verified), resuming a partial file with a Range request. Staged rows are read
    /// a thousand at a time and content streams to disk: nothing large is held in memory.
    func downloadContent(_ layers: [ReplicaState.Layer], into directory: URL, _ client: NativeSyncClient, _ context: JobContext) async throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        for layer in layers {
            var after = ""
            while true {
                let layerID = layer.id, from = after
                let rows = try await geodatabase.read { conn in try conn.stagedRows(layerID: layerID, after: from, limit: 1000) }
                guard let last = rows.last else { break }
                after = last.globalID
                let wanted = try rows.compactMap { $0.row }.flatMap { try FeedChange(json: JSONValue.parse($0)).attachments ?? [] }
                guard !wanted.isEmpty else { continue }
                let ids = wanted.map(\.globalId)
                let local = try await geodatabase.read { conn in Set(try conn.attachmentRecords(globalIDs: ids).keys) }
                for info in wanted where !local.contains(info.globalId) {
                    try await fetch(info, into: directory, client, context)
                    Self.update(context, layer: layer) { $0.attachmentsDownloaded += 1 }
                }
            }
        }
    }

    /// One attachment's content into `directory/<sha256>`, a chunk per request, verified.
    func fetch(_ info: AttachmentInfo, into directory: URL, _ client: NativeSyncClient, _ context: JobContext) async throws {
        let target = directory.appendingPathComponent(info.sha256), partial = directory.appendingPathComponent(info.sha256 + ".partial")
        if FileManager.default.fileExists(atPath: target.path) { return }
        if !FileManager.default.fileExists(atPath: partial.path) { _ = FileManager.default.createFile(atPath: partial.path, contents: nil) }
        guard let handle = FileHandle(forUpdatingAtPath: partial.path) else { throw SyncError(.unsupported, "cannot write \(partial.path)") }
        defer { try? handle.close() }
        var offset = Int64(try handle.seekToEnd())
        if offset > info.size {
            try handle.truncate(atOffset: 0)
            offset = 0
        }
        if offset > 0 { context.log("resuming the download of attachment \(info.name) at byte \(offset)") }
        while offset < info.size {
            let end = min(info.size, offset + Int64(syncParameters.attachmentChunkSize)) - 1
            let from = offset
            let bytes = try await withRetries(context, "attachment \(info.name)") { try await client.attachmentBytes(info.globalId, from: from, through: end) }
            try handle.write(contentsOf: bytes)
            offset += Int64(bytes.count)
            try faults.check("client.afterContentChunk")
        }
        try handle.synchronize()
        guard try Self.sha256(of: partial) == info.sha256 else {
            try? FileManager.default.removeItem(at: partial)
            throw SyncError(.invalidResponse, "attachment \(info.globalId) arrived with a different SHA-256 than announced; it is fetched again next time")
        }
        try FileManager.default.moveItem(at: partial, to: target)
    }

    static func sha256(of file: URL) throws -> String {
        guard let handle = FileHandle(forReadingAtPath: file.path) else { throw SyncError(.unsupported, "cannot read \(file.path)") }
        defer { try? handle.close() }
        var hash = SHA256()
        while let chunk = try handle.read(upToCount: 1 << 20), !chunk.isEmpty { chunk.withUnsafeBytes { hash.update($0) } }
        return SHA256.hexString(hash.finalize())
    }
}
