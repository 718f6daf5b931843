import Foundation
import OutpostCore
import OutpostProtocol
import OutpostStorage

/// A replica's side of sync by delta files (docs/sync.md, "Delta files"), with the invariants
/// of HTTP sync: the exported batch is the sealed batch an HTTP upload would send (sealed and
/// stored first, so exporting again gives the same batch until its answer is imported); the
/// reply's answer acknowledges it exactly as an HTTP answer does, and its changes are applied
/// with the cursor advance in the same transaction. HTTP syncs and delta files can be mixed on
/// one replica in any order.
public enum DeltaSync {
    /// What an export wrote.
    public struct ExportSummary: Sendable, Codable {
        /// The file's header: its replica, batch and the generations it covers.
        public var header: DeltaHeader
        /// How many edits the file carries.
        public var edits: Int
    }

    /// What an import did.
    public struct ImportSummary: Sendable, Codable {
        /// The batch the reply answered was acknowledged now (false: it had been before).
        public var acknowledged = false
        /// Rolled back by the service: its edits stay pending, the reasons recorded.
        public var rejected = false
        /// Edits the service refused, kept on the replica as rejected edits with their reasons.
        public var rejectedEdits = 0
        /// Conflicts the service resolved for the uploaded edits (kept as records on both sides).
        public var conflicts = 0
        /// Server changes applied, and the generation the replica reached (nil: the changes
        /// had been applied before).
        public var changes = 0
        /// The generation the replica reached (nil: the changes had been applied before).
        public var upto: Int64?
    }

    /// Seals the replica's pending edits (or takes the batch already sealed and waiting) and
    /// writes them, with the cursors its changes are wanted from, to `url`.
    /// - Throws: ``SyncError`` when the file is not a replica.
    @discardableResult
    public static func exportEdits(from geodatabase: Geodatabase, to url: URL, parameters: SyncGeodatabaseParameters = SyncGeodatabaseParameters()) async throws -> ExportSummary {
        let sealed = try await geodatabase.write { conn -> (ReplicaState, StoredBatch?) in
            guard let state = try conn.replicaState() else { throw SyncError(.notAReplica, "\(geodatabase.url.lastPathComponent) is not a replica") }
            guard !state.unregistered else { throw SyncError(.notAReplica, "replica \(state.replicaID) was unregistered; it can no longer sync") }
            if let pending = try conn.sealedBatch() { return (state, pending) }
            let tables = try SyncGeodatabaseJob.uploadTables(state, parameters, conn)
            let made = try BatchSealer.seal(
                conn, state: state, tables: tables, maxChanges: parameters.maxChangesPerBatch, rollbackOnFailure: parameters.shouldRollbackOnFailure,
                conflictPolicy: parameters.conflictPolicy)
            return (state, made?.stored)
        }
        let (state, stored) = sealed
        let batch = try stored.map { try UploadBatch.decode($0.body) }
        // The content of the attachments the batch adds travels with it, once per content.
        var contents: [String: (globalID: String, info: AttachmentInfo)] = [:]
        for edit in batch?.attachments ?? [] where edit.op == .insert {
            if let info = edit.attachment, contents[info.sha256] == nil { contents[info.sha256] = (edit.globalId, info) }
        }
        var cursors: [String: Int64] = [:]
        for layer in state.layers where parameters.downloads(layer, model: state.syncModel) {
            cursors[String(layer.id)] = state.cursor(forLayer: layer.id)
        }
        var header = DeltaHeader(kind: .edits, service: state.serviceURL, replicaId: state.replicaID, cursors: cursors)
        header.replicaName = state.replicaName
        header.seq = stored?.seq
        header.batchId = stored?.batchID
        header.batchHash = stored?.hash
        header.lastAckedSeq = state.lastAckedSeq
        header.schemaVersion = state.schemaVersion
        header.edits = batch?.editCount ?? 0
        header.attachments = contents.count
        let writer = try DeltaWriter(url: url, header: header)
        if let stored { try writer.write(.batch, stored.body) }
        for (sha, entry) in contents.sorted(by: { $0.key < $1.key }) {
            let gid = entry.globalID
            // Deleted here after the batch was sealed: the service refuses the insert (no
            // content); its reply withdraws the batch (rollback) or rejects the insert alone,
            // and the next export carries the delete. Unlike a sync over HTTP, which seals again
            // on the refusal, the export cannot reseal ahead: the same batch may have reached
            // the service earlier, with its content, and must go as it was sealed.
            _ = try await writer.writeContent(sha256: sha, total: entry.info.size) { offset, length in
                try await geodatabase.read { conn -> Data? in
                    guard let record = try conn.attachmentRecords(globalIDs: [gid]).values.first else { return nil }
                    return try conn.attachmentBytes(id: record.id, offset: offset, length: length)
                }
            }
        }
        // What the replica holds, so the reply brings only the content it lacks.
        if state.attachmentsDirection == .bidirectional {
            let held = try await geodatabase.read { try $0.attachmentGlobalIDs() }
            try writer.write(.heldAttachments, Data(JSONValue.arrayText(held).utf8))
        }
        try writer.finish()
        return ExportSummary(header: header, edits: batch?.editCount ?? 0)
    }

    /// Applies a service's reply: acknowledges (or withdraws, when rolled back) the batch it
    /// answers, then applies its changes with the cursor advance, all in one transaction.
    /// Importing the same reply again changes nothing.
    /// - Throws: `DeltaError` for a damaged file, a reply to another replica, or one whose
    ///   changes start past the replica's cursor (an earlier reply is missing) or before it
    ///   (the replica synced since the edits file was made: export again); nothing is applied.
    public static func importReply(into geodatabase: Geodatabase, from url: URL) async throws -> ImportSummary {
        let reader = try DeltaReader(url: url)
        let header = reader.header
        let name = url.lastPathComponent
        guard header.kind == .reply || header.kind == .updates else { throw DeltaError("\(name) is an \(header.kind.rawValue) file; a replica imports replies") }
        guard let state = try await geodatabase.read({ try $0.replicaState() }) else { throw DeltaError("\(geodatabase.url.lastPathComponent) is not a replica") }
        if header.kind == .reply, header.replicaId != state.replicaID {
            throw DeltaError("\(name) answers replica \(header.replicaId ?? "?"), not \(state.replicaID)")
        }
        // An update package knows nothing of local edits: it goes into replicas with none
        // waiting in its layers (read-only ones, or any with nothing pending).
        if header.kind == .updates {
            // Layers the replica does not hold are passed over.
            let tables = state.layers.filter { header.cursors[String($0.id)] != nil }.map(\.table)
            guard !tables.isEmpty else { throw DeltaError("\(name) carries none of this replica's layers") }
            let layerTables = tables
            let waiting = try await geodatabase.read { conn in
                (try conn.sealedBatch() != nil ? 1 : 0) + (try conn.pendingChangeSpan(upTo: .max, tables: layerTables).count)
            }
            guard waiting == 0 else {
                throw DeltaError("\(name) is an update package, and this replica has edits waiting to upload: sync (or export them) first")
            }
        }
        var summary = ImportSummary()
        // The batch part: the answer to the sealed batch, or one acknowledged before.
        var acknowledge: (@Sendable (GeodatabaseConnection) throws -> Void)?
        var firstPage: (DeltaFile.RecordKind, Data)? = try reader.next()
        if let seq = header.seq {
            guard let (kind, body) = firstPage, kind == .batchAnswer || kind == .rejection else { throw DeltaError("\(name) is damaged: the batch answer is missing") }
            firstPage = try reader.next()
            let sealed = try await geodatabase.read { try $0.sealedBatch() }
            if let sealed, sealed.seq == seq {
                guard sealed.batchID == header.batchId, sealed.hash == header.batchHash else {
                    throw DeltaError("\(name) answers another batch \(seq) than the one this replica sealed")
                }
                let batch = try UploadBatch.decode(sealed.body)
                let result: BatchResult
                do {
                    result = try BatchResult(json: JSONValue.parse(body))
                } catch {
                    throw DeltaError("\(name) is damaged: the batch answer is unreadable (\(error))")
                }
                if kind == .batchAnswer {
                    let rejected = SyncGeodatabaseJob.rejections(result, batch, state: state, pending: false)
                    let conflicts = SyncGeodatabaseJob.conflicts(result, state: state)
                    let text = String(decoding: body, as: UTF8.self)
                    summary.acknowledged = true
                    summary.rejectedEdits = rejected.count
                    summary.conflicts = conflicts.count
                    acknowledge = { conn in try conn.acknowledgeBatch(seq: seq, result: text, rejected: rejected, conflicts: conflicts) }
                } else {
                    let rejected = SyncGeodatabaseJob.rejections(result, batch, state: state, pending: true)
                    summary.rejected = true
                    summary.rejectedEdits = rejected.count
                    acknowledge = { conn in try conn.withdrawSealedBatch(seq: seq, rejected: rejected) }
                }
            } else if seq > state.lastAckedSeq {
                throw DeltaError("\(name) answers batch \(seq), which this replica has not sealed (it is at batch \(state.lastAckedSeq))")
            }
        }
        // The changes part: they must start exactly where the replica's cursors are.
        let upto = header.upto ?? 0
        var layers: [ReplicaState.Layer] = []
        for (key, since) in header.cursors {
            guard let id = Int(key), let layer = state.layers.first(where: { $0.id == id }) else {
                if header.kind == .updates { continue }
                throw DeltaError("\(name) carries changes of layer \(key), which this replica does not hold")
            }
            let cursor = state.cursor(forLayer: id)
            if cursor >= upto { continue }
            if header.kind == .updates ? cursor < since : cursor != since {
                throw DeltaError(cursor < since
                    ? "\(name) holds changes from generation \(since), but \(layer.table) is at generation \(cursor): import the earlier reply first"
                    : "\(name) holds changes from generation \(since), but \(layer.table) has since reached generation \(cursor): export the edits again")
            }
            layers.append(layer)
        }
        // Nothing new: the batch was acknowledged before and the replica is past these changes.
        let seenBefore = (header.seq != nil && acknowledge == nil)
            || header.cursors.contains { key, since in Int(key).map { state.cursor(forLayer: $0) > since } ?? false }
        if seenBefore, acknowledge == nil, layers.isEmpty {
            throw DeltaError("\(name) was imported before (or a later reply was): nothing in it is new")
        }
        let wanted = Set(layers.map(\.id))
        try await geodatabase.write { conn in try conn.clearStaging() }
        // Attachment content lands where an HTTP download puts it, checked by its hash.
        let contentDirectory = header.kind == .reply && state.attachmentsDirection == .bidirectional ? URL(fileURLWithPath: geodatabase.url.path + ".attachments") : nil
        defer { if let contentDirectory { try? FileManager.default.removeItem(at: contentDirectory) } }
        var record = firstPage
        while let (kind, body) = record {
            if kind == .content {
                if let contentDirectory { try DeltaContentReceiver(directory: contentDirectory).receive(body, file: name) }
                record = try reader.next()
                continue
            }
            guard kind == .changes else { throw DeltaError("\(name) is damaged: unexpected record \(kind.rawValue)") }
            let page: ChangePage
            do {
                page = try ChangePage(json: JSONValue.parse(body))
            } catch {
                throw DeltaError("\(name) is damaged: a page of changes is unreadable (\(error))")
            }
            if wanted.contains(page.layerId) {
                let rows = page.changes.map { ($0, $0.json.jsonString) }
                try await geodatabase.write { conn in
                    for (change, row) in rows {
                        try conn.stage(layerID: page.layerId, globalID: change.globalId, kind: change.kind.rawValue, generation: change.generation, row: row)
                    }
                }
            }
            record = try reader.next()
        }
        let counts = try await SyncGeodatabaseJob.applyDownloaded(
            geodatabase, layers: layers, upto: upto, migration: nil, contentDirectory: contentDirectory, faults: FaultInjector(), first: acknowledge)
        summary.changes = counts.values.reduce(0) { $0 + $1.total }
        summary.upto = layers.isEmpty ? nil : upto
        return summary
    }
}

/// Writes attachment content records into a directory as `<sha256>` files (the layout an HTTP
/// download uses), appending chunk by chunk and checking the hash when a content is whole.
struct DeltaContentReceiver {
    let directory: URL

    func receive(_ body: Data, file name: String) throws {
        let chunk = try DeltaContent.parse(body)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let target = directory.appendingPathComponent(chunk.sha256), partial = directory.appendingPathComponent(chunk.sha256 + ".partial")
        if FileManager.default.fileExists(atPath: target.path) { return }
        if chunk.offset == 0 { _ = FileManager.default.createFile(atPath: partial.path, contents: nil) }
        guard let handle = FileHandle(forWritingAtPath: partial.path) else { throw DeltaError("\(name) is damaged: content \(chunk.sha256.prefix(12))… starts past its beginning") }
        defer { try? handle.close() }
        guard try handle.seekToEnd() == UInt64(chunk.offset) else { throw DeltaError("\(name) is damaged: content \(chunk.sha256.prefix(12))… has a gap") }
        try handle.write(contentsOf: chunk.bytes)
        guard chunk.offset + Int64(chunk.bytes.count) == chunk.total else { return }
        try handle.close()
        guard try SyncGeodatabaseJob.sha256(of: partial) == chunk.sha256 else {
            throw DeltaError("\(name) is damaged: an attachment's content does not match its SHA-256")
        }
        try FileManager.default.moveItem(at: partial, to: target)
    }
}
