import Foundation
import OutpostCore
import OutpostProtocol
import OutpostStorage
import OutpostSyncService

/// A service's side of sync by delta files (docs/sync.md, "Delta files"): an `edits` file is
/// applied through the same batch admission and ledger as an HTTP upload — importing it again
/// replays the stored answer, a different batch under the same seq or a gap is refused — and
/// the reply carries the answer and the changes the replica needs since the cursors the file
/// names, filtered to its scope, paged as the HTTP feed is.
public enum DeltaImport {
    /// What an import did.
    public struct Summary: Sendable {
        /// The replica the file came from.
        public var replicaID: String
        /// The batch's sequence number, when the file carried one.
        public var seq: Int64?
        /// The batch was applied or rolled back before (this answer is the stored one).
        public var replayed = false
        /// Rolled back as a whole (an invalid edit); nothing applied.
        public var rejected = false
        /// Edits the batch held.
        public var edits = 0
        /// Changes the reply carries.
        public var changes = 0
        /// Attachments whose content the reply carries.
        public var attachments = 0
        /// The generation the reply's changes reach.
        public var upto: Int64 = 0
    }

    /// Feed page size in the reply.
    static let pageSize = 1_000

    /// Applies `input` (an `edits` file) to `backend` exactly once and writes the reply to `reply`.
    /// - Throws: `DeltaError` for a damaged, foreign or out-of-order file (nothing applied).
    public static func importEdits(_ input: URL, into backend: any SyncBackend, service: String, reply: URL) async throws -> Summary {
        let reader = try DeltaReader(url: input)
        let header = reader.header
        let name = input.lastPathComponent
        guard header.kind == .edits else { throw DeltaError("\(name) is a \(header.kind.rawValue) file; a service imports edits files") }
        guard let replicaID = header.replicaId else { throw DeltaError("\(name) names no replica") }
        let replica: ReplicaInfo
        do {
            replica = try await backend.replica(id: replicaID)
        } catch {
            throw DeltaError("\(service) has no replica \(replicaID) (\(name) was made for another service, or the replica was unregistered)")
        }
        var summary = Summary(replicaID: replicaID, seq: header.seq)
        var answer: (DeltaFile.RecordKind, Data)?
        var record = try reader.next()
        var batch: UploadBatch?
        if let seq = header.seq {
            guard let (kind, body) = record, kind == .batch else { throw DeltaError("\(name) is damaged: its batch is missing") }
            guard let hash = header.batchHash, UploadBatch.hash(body) == hash else { throw DeltaError("\(name) is damaged: its batch does not match its hash") }
            do {
                batch = try UploadBatch.decode(body)
            } catch {
                throw DeltaError("\(name) is damaged: its batch is unreadable (\(error))")
            }
            guard batch?.replicaId == replicaID, batch?.seq == seq, batch?.batchId == header.batchId else {
                throw DeltaError("\(name) is damaged: its batch is not the one its header names")
            }
            record = try reader.next()
        }
        // The content of the attachments the batch adds goes into the service's store first (as
        // an HTTP upload sends it first), and the list of attachments the replica holds.
        var held: Set<String>?
        while let (kind, body) = record {
            switch kind {
            case .content: try await receive(body, into: backend, file: name)
            case .heldAttachments:
                let ids = (try? JSONValue.parse(body).arrayValue?.compactMap(\.stringValue)) ?? nil
                guard let ids else { throw DeltaError("\(name) is damaged: its list of attachments is unreadable") }
                held = Set(ids.map { GlobalID.normalized($0) ?? $0 })
            default: throw DeltaError("\(name) is damaged: unexpected record \(kind.rawValue)")
            }
            record = try reader.next()
        }
        if let batch, let hash = header.batchHash {
            summary.edits = batch.editCount
            do {
                let applied = try await backend.applyBatchAnswering(batch, hash: hash)
                summary.replayed = applied.result.replayed == true
                answer = (.batchAnswer, Data(applied.json.utf8))
            } catch let refusal as BatchRefusal {
                throw DeltaError(refusal.description)
            } catch let rejected as BatchRejected {
                summary.rejected = true
                summary.replayed = rejected.result.replayed == true
                answer = (.rejection, rejected.result.json.jsonData)
            }
        }
        // The changes since the file's cursors, up to the generation now.
        let upto = try await backend.replica(id: replicaID).serviceGeneration
        summary.upto = upto
        var cursors: [Int: Int64] = [:]
        for (key, since) in header.cursors {
            guard let id = Int(key), replica.layers.contains(where: { $0.id == id }) else {
                throw DeltaError("\(name) asks for changes of layer \(key), which replica \(replicaID) does not hold")
            }
            cursors[id] = since
        }
        var out = DeltaHeader(kind: .reply, service: service, replicaId: replicaID, cursors: header.cursors)
        out.replicaName = replica.replicaName
        out.seq = header.seq
        out.batchId = header.batchId
        out.batchHash = header.batchHash
        out.upto = upto
        out.schemaVersion = try await backend.schema().schemaVersion
        out.edits = summary.edits
        let writer = try DeltaWriter(url: reply, header: out)
        if let answer { try writer.write(answer.0, answer.1) }
        // Attachments the replica will need content for: those of the changes it does not hold.
        let wantsContent = replica.attachmentsSyncDirection == .bidirectional
        var needed: [String: AttachmentInfo] = [:]
        for (layer, since) in cursors.sorted(by: { $0.key < $1.key }) where since < upto {
            var after: String?
            try await backend.recordReceived(replicaID: replicaID, upTo: since)
            repeat {
                let page = try await backend.changes(replicaID: replicaID, layerID: layer, since: since, upto: upto, after: after, limit: pageSize)
                if !page.changes.isEmpty { try writer.write(.changes, page.json.jsonData) }
                summary.changes += page.changes.count
                if wantsContent {
                    for info in page.changes.flatMap({ $0.attachments ?? [] }) where !(held?.contains(GlobalID.normalized(info.globalId) ?? info.globalId) ?? false) {
                        needed[info.sha256] = info
                    }
                }
                after = page.next
            } while after != nil
        }
        for info in needed.values.sorted(by: { $0.sha256 < $1.sha256 }) {
            let written = try await writer.writeContent(sha256: info.sha256, total: info.size) { offset, length in
                try? await backend.attachmentBytes(globalID: info.globalId, offset: offset, length: length)
            }
            if written { summary.attachments += 1 }
        }
        try writer.finish()
        return summary
    }

    /// Appends a content chunk to the service's store of attachment content: bytes it has are
    /// passed over (a file imported again), complete content is left alone.
    static func receive(_ body: Data, into backend: any SyncBackend, file name: String) async throws {
        let chunk = try DeltaContent.parse(body)
        let status = try await backend.blobStatus(sha256: chunk.sha256)
        let end = chunk.offset + Int64(chunk.bytes.count)
        if status.complete || end <= status.received && end < chunk.total { return }
        guard chunk.offset <= status.received else {
            throw DeltaError("\(name) is damaged: the content \(chunk.sha256.prefix(12))… misses bytes \(status.received) to \(chunk.offset)")
        }
        do {
            _ = try await backend.appendBlob(
                sha256: chunk.sha256, offset: status.received, total: chunk.total, bytes: Data(chunk.bytes.dropFirst(Int(status.received - chunk.offset))))
        } catch let error as SyncServiceError {
            throw DeltaError("\(name): attachment content \(chunk.sha256.prefix(12))…: \(error.message)")
        }
    }

    /// Writes a scheduled update package: every change of `layers` after generation `since` up to
    /// `upto`, within `area` (in the service's spatial reference; nil: everywhere), for any
    /// read-only replica of that area at or after `since` to import. Returns the changes written.
    @discardableResult
    public static func exportUpdates(
        from backend: any SyncBackend, service: String, layers: [Int], area: Envelope?, where clause: String? = nil, since: Int64, upto: Int64, to url: URL
    ) async throws -> Int {
        let schema = try await backend.schema()
        for id in layers {
            guard let layer = schema.layer(id: id) else { throw DeltaError("\(service) has no layer \(id)") }
            guard layer.globalIDField != nil else { throw DeltaError("layer \(id) has no global ids, so it does not sync") }
        }
        guard since >= 0, since <= upto else { throw DeltaError("--since \(since) is not a generation of \(service) (it is at \(upto))") }
        let geometry = try area.map { try EsriJSON.value(.polygon($0.polygon)) }
        // A scope no replica holds: its id matches no change's origin, so nothing is left out.
        let scope = ReplicaInfo(
            replicaID: "updates-\(UUID().uuidString)", replicaName: "updates", syncModel: .perReplica, replicaServerGen: since,
            layers: layers.map { ReplicaInfo.Layer(id: $0, serverGen: since, syncDirection: .download, where: clause, useGeometry: area != nil) },
            geometry: geometry, returnAttachments: false, attachmentsSyncDirection: .none, lastSeq: 0, serviceGeneration: upto,
            schemaVersion: schema.schemaVersion, creationDate: Int64(Date().timeIntervalSince1970 * 1_000), lastSyncDate: nil)
        var header = DeltaHeader(kind: .updates, service: service, replicaId: nil, cursors: Dictionary(uniqueKeysWithValues: layers.map { (String($0), since) }))
        header.upto = upto
        header.schemaVersion = schema.schemaVersion
        header.area = area.map { [$0.xmin, $0.ymin, $0.xmax, $0.ymax] }
        let writer = try DeltaWriter(url: url, header: header)
        var total = 0
        for layer in layers.sorted() where since < upto {
            var after: String?
            repeat {
                let page = try await backend.changes(scope: scope, layerID: layer, since: since, upto: upto, after: after, limit: pageSize)
                if !page.changes.isEmpty { try writer.write(.changes, page.json.jsonData) }
                total += page.changes.count
                after = page.next
            } while after != nil
        }
        try writer.finish()
        return total
    }
}

