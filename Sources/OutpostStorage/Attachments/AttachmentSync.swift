import Foundation
import GRDB
import GRDBSQLite
import OutpostCore
import OutpostDigest

/// An attachment as sync sees it: identity, owner, metadata and content hash.
public struct AttachmentRecord: Hashable, Sendable {
    /// The attachment's row id in the geodatabase.
    public var id: Int64
    /// The attachment's global id, the same on every copy.
    public var globalID: String
    /// The global id of the feature it belongs to (nil when the feature has none).
    public var featureGlobalID: String?
    /// The name of the feature's layer.
    public var layer: String
    /// The file name.
    public var name: String
    /// The MIME type.
    public var contentType: String
    /// The content's length in bytes.
    public var size: Int64
    /// Free-text keywords, when given.
    public var keywords: String?
}

extension GeodatabaseConnection {
    /// The `outpost_changes` table name attachment edits are captured under.
    public static let attachmentsTable = MediaTable.name

    /// Captures inserts and deletes of attachments (by any writer) for upload, like feature
    /// edits: silenced while downloads apply. Idempotent.
    public func installAttachmentCapture() throws {
        guard try db.tableExists(ChangeCapture.changesTable), try db.tableExists(MediaTable.name) else { return }
        let enabled = "(SELECT silenced FROM outpost_capture WHERE id = 1) = 0"
        try db.execute(
            sql: """
                CREATE TRIGGER IF NOT EXISTS outpost_attachments_insert AFTER INSERT ON attachments WHEN \(enabled)
                BEGIN
                  INSERT INTO outpost_changes (table_name, fid, globalid, op) VALUES ('attachments', NEW.id, NEW.globalid, 'insert');
                END;
                CREATE TRIGGER IF NOT EXISTS outpost_attachments_delete AFTER DELETE ON attachments WHEN \(enabled)
                BEGIN
                  INSERT INTO outpost_changes (table_name, fid, globalid, op, old_values)
                  VALUES ('attachments', OLD.id, OLD.globalid, 'delete',
                    json_object('rel_globalid', OLD.rel_globalid, 'layer', OLD.layer, 'att_name', OLD.att_name, 'data_size', OLD.data_size));
                END;
                """)
    }

    /// Attachments by global id (those that exist).
    public func attachmentRecords(globalIDs: [String]) throws -> [String: AttachmentRecord] {
        guard !globalIDs.isEmpty, try db.tableExists(MediaTable.name) else { return [:] }
        var out: [String: AttachmentRecord] = [:]
        for row in try Row.fetchAll(
            db,
            sql: """
                SELECT id, globalid, rel_globalid, layer, att_name, content_type, data_size, keywords FROM attachments
                WHERE globalid IN (SELECT value FROM json_each(?))
                """,
            arguments: [JSONValue.arrayText(globalIDs)])
        {
            let record = AttachmentRecord(
                id: row[0], globalID: row[1], featureGlobalID: row[2], layer: row[3], name: row[4], contentType: row[5], size: row[6], keywords: row[7])
            out[record.globalID] = record
        }
        return out
    }

    /// The global ids of every attachment held here.
    public func attachmentGlobalIDs() throws -> [String] {
        guard try db.tableExists(MediaTable.name) else { return [] }
        return try String.fetchAll(db, sql: "SELECT globalid FROM attachments WHERE globalid IS NOT NULL ORDER BY globalid")
    }

    /// The attachments of features of a layer, by feature global id.
    public func attachmentRecords(layer: String, featureGlobalIDs: [String]) throws -> [String: [AttachmentRecord]] {
        guard !featureGlobalIDs.isEmpty, try db.tableExists(MediaTable.name) else { return [:] }
        var out: [String: [AttachmentRecord]] = [:]
        for row in try Row.fetchAll(
            db,
            sql: """
                SELECT id, globalid, rel_globalid, layer, att_name, content_type, data_size, keywords FROM attachments
                WHERE layer = ? AND rel_globalid IN (SELECT value FROM json_each(?)) ORDER BY id
                """,
            arguments: [layer, JSONValue.arrayText(featureGlobalIDs)])
        {
            let record = AttachmentRecord(
                id: row[0], globalID: row[1], featureGlobalID: row[2], layer: row[3], name: row[4], contentType: row[5], size: row[6], keywords: row[7])
            out[record.featureGlobalID ?? "", default: []].append(record)
        }
        return out
    }

    /// Up to `length` bytes of attachment `id` from `offset` (empty past the end).
    public func attachmentBytes(id: Int64, offset: Int64, length: Int) throws -> Data {
        var out = Data()
        try withAttachmentBlob(id: id) { blob in
            let size = Int64(sqlite3_blob_bytes(blob))
            guard offset < size, length > 0 else { return }
            let n = Int(min(Int64(length), size - offset))
            out = Data(count: n)
            let rc = out.withUnsafeMutableBytes { sqlite3_blob_read(blob, $0.baseAddress, Int32(n), Int32(offset)) }
            guard rc == SQLITE_OK else { throw StorageError(.sqlite, "reading attachment \(id) failed (SQLite \(rc))") }
        }
        return out
    }

    /// The SHA-256 of attachment `id`'s bytes (lower-case hex), read a megabyte at a time.
    public func attachmentSHA256(id: Int64) throws -> String {
        var hash = SHA256()
        try withAttachmentBlob(id: id) { blob in
            let size = Int(sqlite3_blob_bytes(blob))
            var buffer = [UInt8](repeating: 0, count: min(size, 1 << 20))
            var offset = 0
            while offset < size {
                let n = min(buffer.count, size - offset)
                let rc = buffer.withUnsafeMutableBytes { sqlite3_blob_read(blob, $0.baseAddress, Int32(n), Int32(offset)) }
                guard rc == SQLITE_OK else { throw StorageError(.sqlite, "reading attachment \(id) failed (SQLite \(rc))") }
                buffer.withUnsafeBytes { hash.update(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
                offset += n
            }
        }
        return SHA256.hexString(hash.finalize())
    }

    /// Deletes an attachment by global id (its mapping row too); false when there was none.
    @discardableResult
    public func deleteAttachment(globalID: String) throws -> Bool {
        guard let record = try attachmentRecords(globalIDs: [globalID]).values.first else { return false }
        try db.execute(sql: "DELETE FROM \(quoted(MediaTable.mappingTableName(for: record.layer))) WHERE related_id = ?", arguments: [record.id])
        try db.execute(sql: "DELETE FROM attachments WHERE id = ?", arguments: [record.id])
        return true
    }

    private func withAttachmentBlob(id: Int64, _ body: (OpaquePointer) throws -> Void) throws {
        var blob: OpaquePointer?
        let rc = sqlite3_blob_open(db.sqliteConnection, "main", "attachments", "data", id, 0, &blob)
        guard rc == SQLITE_OK, let blob else { throw StorageError(.notFound, "no attachment \(id) (SQLite \(rc))") }
        defer { sqlite3_blob_close(blob) }
        try body(blob)
    }
}

/// Streams a file into a new attachment of a feature (a photo added from disk, or content that
/// was downloaded or uploaded and verified there). `globalID` nil makes a new identity.
extension FeatureTable {
    /// Adds the content of `file` as an attachment of the feature `objectID`, inside the caller's transaction.
    public func addAttachment(
        toFeature objectID: Int64, name: String, contentType: String, keywords: String?, globalID: String?, fromFile file: URL, in conn: GeodatabaseConnection
    ) throws -> Attachment {
        let size = (try? FileManager.default.attributesOfItem(atPath: file.path)[.size] as? NSNumber)?.int64Value ?? 0
        guard let handle = FileHandle(forReadingAtPath: file.path) else { throw StorageError(.io, "cannot open \(file.path)") }
        defer { try? handle.close() }
        return try addAttachment(toFeature: objectID, name: name, contentType: contentType, size: size, keywords: keywords, globalID: globalID, in: conn) { write in
            var remaining = size
            while remaining > 0 {
                guard let chunk = try handle.read(upToCount: Int(min(remaining, Int64(Self.attachmentChunkSize)))), !chunk.isEmpty else {
                    throw StorageError(.io, "\(file.path) ended early (it changed while being read)")
                }
                try write(chunk)
                remaining -= Int64(chunk.count)
            }
        }
    }
}
