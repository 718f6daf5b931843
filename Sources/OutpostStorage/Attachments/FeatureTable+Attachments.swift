import Foundation
import GRDB
import GRDBSQLite
import OutpostCore

extension FeatureTable {
    /// Chunk size for streaming attachment bytes in and out of SQLite.
    static let attachmentChunkSize = 1 << 20

    /// Adds an attachment to a feature from bytes in memory.
    /// - Throws: ``StorageError`` `.invalidEdit` when the layer has no attachments, `.notFound` for
    ///   an unknown feature.
    public func addAttachment(
        toFeature objectID: Int64, name: String, contentType: String, data: Data, keywords: String? = nil
    ) async throws -> Attachment {
        try await geodatabase.write { conn in
            try self.addAttachment(toFeature: objectID, name: name, contentType: contentType, size: Int64(data.count), keywords: keywords, in: conn) { write in
                try write(data)
            }
        }
    }

    /// Adds an attachment from a file, streaming it in chunks: a 100 MB photo never sits in memory.
    public func addAttachment(
        toFeature objectID: Int64, name: String, contentType: String, contentsOf file: URL, keywords: String? = nil
    ) async throws -> Attachment {
        guard FileManager.default.isReadableFile(atPath: file.path) else { throw StorageError(.io, "cannot read \(file.path)") }
        return try await geodatabase.write { conn in
            try self.addAttachment(toFeature: objectID, name: name, contentType: contentType, keywords: keywords, globalID: nil, fromFile: file, in: conn)
        }
    }

    /// Adds an attachment whose `size` bytes are supplied by `produce`, which calls `write` with
    /// consecutive chunks. The row is created with a zero blob of the final size and filled through
    /// SQLite's incremental blob I/O.
    /// `globalID` keeps an attachment's identity when it comes from elsewhere (sync); nil makes
    /// a new one.
    public func addAttachment(
        toFeature objectID: Int64, name: String, contentType: String, size: Int64, keywords: String? = nil, globalID: String? = nil,
        in conn: GeodatabaseConnection, produce: ((Data) throws -> Void) throws -> Void
    ) throws -> Attachment {
        try requireAttachments()
        let db = conn.db
        let featureGlobalID = try featureGlobalID(objectID, db)
        let globalID = globalID.flatMap(GlobalID.normalized) ?? GlobalID.make()
        try db.execute(
            sql: """
                INSERT INTO attachments (data, content_type, globalid, rel_globalid, layer, att_name, data_size, keywords)
                VALUES (zeroblob(?), ?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [size, contentType, globalID, featureGlobalID, self.name, name, size, keywords])
        let id = db.lastInsertedRowID
        try db.execute(
            sql: "INSERT INTO \(quoted(MediaTable.mappingTableName(for: self.name))) (base_id, related_id) VALUES (?, ?)",
            arguments: [objectID, id])
        try withBlob(db, id: id, writable: true) { blob in
            var offset: Int32 = 0
            try produce { chunk in
                guard Int64(offset) + Int64(chunk.count) <= size else {
                    throw StorageError(.io, "attachment data is longer than the declared \(size) bytes")
                }
                let rc = chunk.withUnsafeBytes { sqlite3_blob_write(blob, $0.baseAddress, Int32($0.count), offset) }
                guard rc == SQLITE_OK else { throw StorageError(.sqlite, "writing attachment bytes failed (SQLite \(rc))") }
                offset += Int32(chunk.count)
            }
            guard Int64(offset) == size else {
                throw StorageError(.io, "attachment data is \(offset) bytes, \(size) were declared")
            }
        }
        return Attachment(
            id: id, globalID: globalID, featureObjectID: objectID, featureGlobalID: featureGlobalID, name: name,
            contentType: contentType, size: size, keywords: keywords)
    }

    /// The attachments of a feature, in the order they were added.
    public func attachments(forFeature objectID: Int64) async throws -> [Attachment] {
        try await geodatabase.read { conn in try self.attachments(forFeature: objectID, in: conn) }
    }

    /// The attachments of the feature `objectID`, on a connection the caller holds.
    public func attachments(forFeature objectID: Int64, in conn: GeodatabaseConnection) throws -> [Attachment] {
        try requireAttachments()
        let rows = try Row.fetchAll(
            conn.db,
            sql: """
                SELECT a.id, a.globalid, a.rel_globalid, a.att_name, a.content_type, a.data_size, a.keywords, m.base_id
                FROM attachments a JOIN \(quoted(MediaTable.mappingTableName(for: name))) m ON m.related_id = a.id
                WHERE m.base_id = ? ORDER BY a.id
                """,
            arguments: [objectID])
        return rows.map { Self.attachment($0) }
    }

    /// The whole content of a small attachment. Use ``readAttachment(id:to:)`` for large ones.
    public func attachmentData(id: Int64) async throws -> Data {
        try await geodatabase.read { conn in
            var data = Data()
            try self.readAttachment(id: id, in: conn) { data.append($0) }
            return data
        }
    }

    /// Streams an attachment into a file (written beside it and renamed when complete).
    public func readAttachment(id: Int64, to file: URL) async throws {
        try await geodatabase.read { conn in
            let partial = file.deletingLastPathComponent().appendingPathComponent(".\(file.lastPathComponent).partial")
            guard FileManager.default.createFile(atPath: partial.path, contents: nil),
                let handle = FileHandle(forWritingAtPath: partial.path)
            else { throw StorageError(.io, "cannot write \(partial.path)") }
            do {
                try self.readAttachment(id: id, in: conn) { try handle.write(contentsOf: $0) }
                try handle.close()
                _ = try? FileManager.default.removeItem(at: file)
                try FileManager.default.moveItem(at: partial, to: file)
            } catch {
                try? handle.close()
                try? FileManager.default.removeItem(at: partial)
                throw error
            }
        }
    }

    /// Calls `body` with consecutive chunks of the attachment's bytes.
    public func readAttachment(id: Int64, in conn: GeodatabaseConnection, _ body: (Data) throws -> Void) throws {
        try requireAttachments()
        guard try Bool.fetchOne(
            conn.db,
            sql: "SELECT EXISTS (SELECT 1 FROM \(quoted(MediaTable.mappingTableName(for: name))) WHERE related_id = ?)",
            arguments: [id]) == true
        else {
            throw StorageError(.notFound, "no attachment \(id) in \(name)", table: name)
        }
        try withBlob(conn.db, id: id, writable: false) { blob in
            let size = Int(sqlite3_blob_bytes(blob))
            var offset = 0
            var buffer = Data(count: min(size, Self.attachmentChunkSize))
            while offset < size {
                let n = min(Self.attachmentChunkSize, size - offset)
                let rc = buffer.withUnsafeMutableBytes { sqlite3_blob_read(blob, $0.baseAddress, Int32(n), Int32(offset)) }
                guard rc == SQLITE_OK else { throw StorageError(.sqlite, "reading attachment \(id) failed (SQLite \(rc))") }
                try body(buffer.prefix(n))
                offset += n
            }
        }
    }

    /// Up to `length` bytes of an attachment from `offset` (empty past the end): for serving
    /// large attachments in pieces without holding them.
    public func readAttachment(id: Int64, offset: Int64, length: Int, in conn: GeodatabaseConnection) throws -> Data {
        try requireAttachments()
        return try conn.attachmentBytes(id: id, offset: offset, length: length)
    }

    /// Deletes an attachment.
    public func deleteAttachment(id: Int64) async throws {
        try await geodatabase.write { conn in
            try self.requireAttachments()
            let mapping = quoted(MediaTable.mappingTableName(for: self.name))
            guard try Bool.fetchOne(conn.db, sql: "SELECT EXISTS (SELECT 1 FROM \(mapping) WHERE related_id = ?)", arguments: [id]) == true else {
                throw StorageError(.notFound, "no attachment \(id) in \(self.name)", table: self.name)
            }
            try conn.db.execute(sql: "DELETE FROM \(mapping) WHERE related_id = ?", arguments: [id])
            try conn.db.execute(sql: "DELETE FROM attachments WHERE id = ?", arguments: [id])
        }
    }

    // MARK: - Helpers

    private func requireAttachments() throws {
        guard definition.hasAttachments else {
            throw StorageError(.invalidEdit, "\(name) does not have attachments enabled", table: name)
        }
    }

    private func featureGlobalID(_ objectID: Int64, _ db: Database) throws -> String? {
        let pk = quoted(definition.objectIDField)
        let select = definition.globalIDField.map(quoted) ?? "NULL"
        guard let row = try Row.fetchOne(db, sql: "SELECT \(pk), \(select) FROM \(quoted(name)) WHERE \(pk) = ?", arguments: [objectID]) else {
            throw StorageError(.notFound, "no feature with object id \(objectID)", table: name)
        }
        return row[1]
    }

    private static func attachment(_ row: Row) -> Attachment {
        Attachment(
            id: row["id"], globalID: row["globalid"], featureObjectID: row["base_id"], featureGlobalID: row["rel_globalid"],
            name: row["att_name"], contentType: row["content_type"], size: row["data_size"], keywords: row["keywords"])
    }

    /// Opens incremental blob I/O on `attachments.data` of row `id` (https://sqlite.org/c3ref/blob_open.html).
    private func withBlob(_ db: Database, id: Int64, writable: Bool, _ body: (OpaquePointer) throws -> Void) throws {
        var blob: OpaquePointer?
        let rc = sqlite3_blob_open(db.sqliteConnection, "main", "attachments", "data", id, writable ? 1 : 0, &blob)
        guard rc == SQLITE_OK, let blob else {
            throw StorageError(.sqlite, "cannot open attachment \(id) (SQLite \(rc))", table: name)
        }
        defer { sqlite3_blob_close(blob) }
        try body(blob)
    }
}
