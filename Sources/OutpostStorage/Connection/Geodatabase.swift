import COutpostSQLite
import Foundation
import GRDB
import GRDBSQLite
import OutpostCore
import Synchronization

/// A local geodatabase: an OGC GeoPackage 1.3 file holding feature tables, their R-tree spatial
/// index, attachments and the change capture that sync relies on (docs/geopackage-extension.md).
///
/// ```swift
/// let gdb = try Geodatabase.create(at: url, schema: schema)
/// let points = try gdb.table(named: "inspection_points")
/// let added = try await points.add([Feature(attributes: ["status": .string("open")], geometry: g)])
/// ```
///
/// Reads run concurrently on a pool of connections (WAL); writes are serialised on one writer
/// connection. Cancelling the calling task interrupts a running statement (`sqlite3_interrupt`)
/// and surfaces as `CancellationError`.
public final class Geodatabase: Sendable {
    /// The file.
    public let url: URL
    /// Whether the file was opened read-only.
    public let isReadOnly: Bool
    /// True for files created by Outpost (they carry `outpost_schema` and change capture).
    public let isManaged: Bool
    let writer: any DatabaseWriter
    /// Checkpoints the WAL of a writable file in the background (nil: read-only or not WAL).
    let checkpointer: WALCheckpointer?
    /// Requests to start writing the log that the kernel took during large commits
    /// (`WALWriteback`); for tests.
    let writebackRequests = Atomic<Int>(0)
    private let state: Locked<State>

    private struct State {
        var schema: ServiceSchema
        var explicitTransaction = false
        /// The writer's commits do not wait for the disk (`synchronous = NORMAL`), as the last
        /// non-durable write left it: the next durable transaction sets it back first.
        var synchronousRelaxed = false
        /// Closed: every later use is a ``StorageError/Code/closed`` error (a closed connection
        /// pool must not be touched again).
        var closed = false
    }

    private func checkOpen() throws {
        if state.withLock({ $0.closed }) { throw StorageError(.closed, "\(url.lastPathComponent) is closed") }
    }

    /// The service schema the file was created from, or one derived from the file's tables for
    /// GeoPackages written by other tools.
    public var schema: ServiceSchema { state.withLock { $0.schema } }

    init(url: URL, writer: any DatabaseWriter, schema: ServiceSchema, isReadOnly: Bool, isManaged: Bool, checkpointer: WALCheckpointer? = nil) {
        self.url = url
        self.writer = writer
        self.checkpointer = checkpointer
        self.isReadOnly = isReadOnly
        self.isManaged = isManaged
        self.state = Locked(State(schema: schema))
    }

    // MARK: - Opening

    /// Opens an existing GeoPackage.
    ///
    /// Files written by Outpost open with their schema; GeoPackages from GDAL, QGIS and others open
    /// with a schema derived from their tables (not synced).
    /// - Parameters:
    ///   - url: the file.
    ///   - readOnly: open it for reading only.
    ///   - writerCache: the most bytes of pages the writing connection keeps in its page cache
    ///     (``defaultWriterCache`` unless given; SQLite takes memory for it as pages are used).
    /// - Throws: ``StorageError`` `.notFound`, `.notAGeoPackage` (not SQLite, or not a GeoPackage),
    ///   `.corrupt`, or `.unsupportedContent` (for example curve geometry types).
    public static func open(at url: URL, readOnly: Bool = false, writerCache: Int = defaultWriterCache) throws -> Geodatabase {
        let header = try FileHeader.read(url)
        let checkpointer = header.isWAL && !readOnly ? WALCheckpointer(path: url.path) : nil
        let config = configuration(readOnly: readOnly, checkpointer: checkpointer, writerCache: writerCache)
        let writer: any DatabaseWriter
        do {
            // WAL files get a pool (concurrent readers). Others are opened as they are: switching a
            // file written by another tool to WAL would change it behind its back.
            if header.isWAL {
                writer = try DatabasePool(path: url.path, configuration: config)
                // A commit is durable once its WAL frames are synced (`write(durable: false)`
                // relaxes one transaction). GRDB's pool sets its writer to `synchronous = NORMAL`
                // after `prepareDatabase`, where a commit waits for no disk and a power cut may
                // take it: a server's answered batch, a crew's saved edit.
                if !readOnly { try writer.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA synchronous = FULL") } }
            } else {
                writer = try DatabaseQueue(path: url.path, configuration: config)
            }
        } catch {
            throw StorageError.from(error, "cannot open \(url.lastPathComponent)")
        }
        do {
            let (schema, managed) = try writer.read { db in try SchemaStore.load(db, fileStem: url.deletingPathExtension().lastPathComponent) }
            return Geodatabase(url: url, writer: writer, schema: schema, isReadOnly: readOnly, isManaged: managed, checkpointer: checkpointer)
        } catch {
            checkpointer?.close()
            try? writer.close()
            throw StorageError.from(error, "cannot read \(url.lastPathComponent)")
        }
    }

    /// The writing connection's page cache unless ``open(at:readOnly:writerCache:)`` is given
    /// another: 32 MB.
    public static let defaultWriterCache = 32 << 20

    static func configuration(readOnly: Bool, checkpointer: WALCheckpointer? = nil, writerCache: Int = defaultWriterCache) -> Configuration {
        var config = Configuration()
        config.readonly = readOnly
        config.foreignKeysEnabled = true
        // Explicit begin/commit across calls (beginTransaction()) leaves a transaction open between
        // writer accesses.
        config.allowsUnsafeTransactions = true
        // Other processes (GDAL, QGIS, a second Outpost) may hold the write lock briefly.
        config.busyMode = .timeout(10)
        config.prepareDatabase { db in
            guard let handle = db.sqliteConnection else { return }
            let rc = outpost_register_geopackage_functions(UnsafeMutableRawPointer(handle))
            guard rc == 0 else { throw DatabaseError(resultCode: ResultCode(rawValue: rc), message: "cannot register ST_* functions") }
            // As GDAL does: DELETE triggers (R-tree, capture) also fire for INSERT OR REPLACE.
            try db.execute(sql: "PRAGMA recursive_triggers = ON")
            // SQLite's 2 MB default page cache makes every edit re-read R-tree and index pages
            // through system calls; a larger cache (filled only as pages are used) and memory-mapped
            // reads keep hot pages in reach.
            // Readers (up to five of a pool) get a smaller cache and map: memory stays bounded
            // when a sync streams millions of rows through them. Each connection maps the file
            // on its own and its mapped pages count in the process's resident memory, so the
            // windows are bounded: a server with a writer and five readers maps at most
            // 128 + 5 × 32 MB of a large file (with 256 + 5 × 64 MB, a sync of a million edits
            // held 370 MB of mapped pages). Beyond the window SQLite reads through its page
            // cache, which is heap: the writer's window still covers a replica holding a 100 MB
            // attachment, whose upload otherwise fills the 32 MB cache.
            if db.configuration.readonly {
                try db.execute(sql: "PRAGMA cache_size = -8192")
                try db.execute(sql: "PRAGMA mmap_size = 33554432")
            } else {
                try db.execute(sql: "PRAGMA cache_size = -\(max(writerCache, 1 << 20) >> 10)")
                try db.execute(sql: "PRAGMA mmap_size = 134217728")
                // Deleted content is zeroed in the pages a write changes anyway, and freed pages
                // are not written again only to be zeroed (Debian builds SQLite with
                // `secure_delete` on: a replica's acknowledgement of 16,000 edits committed
                // ~4 MB of zeroed pages; docs/sync.md, "Deletes").
                try db.execute(sql: "PRAGMA secure_delete = FAST")
                // Commits leave the copying of WAL frames into the file to a background checkpoint.
                checkpointer?.install(on: handle)
            }
            // Every UPDATE that fires triggers (R-tree, capture) keeps a statement journal; once it
            // outgrows 64 KB SQLite moves it to a temporary file and every page the statement
            // touches is written there first: 200 MB of writes for 16,000 synced edits. In memory
            // the journal costs a few pages per statement.
            try db.execute(sql: "PRAGMA temp_store = MEMORY")
        }
        return config
    }

    /// Defers the background copies of the write-ahead log into the main file (checkpoints)
    /// until the returned deferral ends, or the log passes 64 MB: for work that someone waits
    /// for and that reads much of the file after writing much of it (a sync's verify after its
    /// download). Nothing is less durable; the copy runs once the work is done.
    public func deferCheckpoints() -> CheckpointDeferral {
        CheckpointDeferral(checkpointer)
    }

    /// Checkpoints the WAL into the main file and closes every connection. After `close()` the
    /// file is a single self-contained GeoPackage that can be copied or shared, and, when no
    /// other connection has it open, its `-wal` and `-shm` companions are gone (as after GDAL or
    /// the `sqlite3` shell).
    public func close() throws {
        // A second close does nothing.
        guard !state.withLock({ s -> Bool in
            defer { s.closed = true }
            return s.closed
        }) else { return }
        checkpointer?.close()
        let pool = writer as? DatabasePool
        if let pool, !isReadOnly {
            _ = try? pool.writeWithoutTransaction { db in try db.checkpoint(.truncate) }
        }
        do {
            try writer.close()
        } catch {
            throw StorageError.from(error, "cannot close \(url.lastPathComponent)")
        }
        if pool != nil, !isReadOnly { Self.removeWALCompanions(url.path) }
    }

    /// SQLite deletes a WAL file and its shared memory when the last connection to close can
    /// write; the pool closes its writer before its read-only readers, so neither does. One more
    /// connection, opened and closed alone, leaves the file as the shell or GDAL would (it keeps
    /// them when another connection, in this process or another, still has the file open).
    private static func removeWALCompanions(_ path: String) {
        var handle: OpaquePointer?
        defer { sqlite3_close_v2(handle) }
        guard sqlite3_open_v2(path, &handle, SQLITE_OPEN_READWRITE, nil) == SQLITE_OK else { return }
        sqlite3_exec(handle, "PRAGMA schema_version", nil, nil, nil)
    }

    // MARK: - Tables

    /// All layers and tables, layers first.
    public var tables: [FeatureTable] {
        schema.allLayers.map { FeatureTable(geodatabase: self, definition: $0, schema: schema) }
    }

    /// The layer or table called `name` (case-insensitive).
    /// - Throws: ``StorageError/Code/notFound``.
    public func table(named name: String) throws -> FeatureTable {
        let schema = self.schema
        guard let layer = schema.layer(named: name) else {
            throw StorageError(.notFound, "no layer or table named \"\(name)\" in \(url.lastPathComponent)")
        }
        return FeatureTable(geodatabase: self, definition: layer, schema: schema)
    }

    /// The layer or table with service layer id `id`.
    public func table(id: Int) throws -> FeatureTable {
        let schema = self.schema
        guard let layer = schema.layer(id: id) else {
            throw StorageError(.notFound, "no layer or table with id \(id) in \(url.lastPathComponent)")
        }
        return FeatureTable(geodatabase: self, definition: layer, schema: schema)
    }

    // MARK: - Access

    /// Runs `body` with a read-only view of the committed data (or, while an explicit transaction
    /// is open, with the writer so the transaction's own changes are visible).
    public func read<T>(_ body: (GeodatabaseConnection) throws -> T) throws -> T {
        try checkOpen()
        do {
            if state.withLock({ $0.explicitTransaction }) {
                return try writer.writeWithoutTransaction { db in try body(GeodatabaseConnection(db, self)) }
            }
            return try writer.read { db in try body(GeodatabaseConnection(db, self)) }
        } catch {
            throw StorageError.from(error, "read failed")
        }
    }

    /// Runs `body` on a reader of the committed data only, alongside writes: nil (without
    /// running it) when the file cannot be read that way — not in WAL mode, or while an explicit
    /// transaction is open (`read(_:)` would then see its uncommitted changes).
    public func readCommitted<T: Sendable>(_ body: @escaping @Sendable (GeodatabaseConnection) throws -> T) async throws -> T? {
        try checkOpen()
        guard writer is DatabasePool, !state.withLock({ $0.explicitTransaction }) else { return nil }
        do {
            return try await writer.read { db in try body(GeodatabaseConnection(db, self)) }
        } catch {
            throw StorageError.from(error, "read failed")
        }
    }

    /// Runs `body` on a reader of the committed data only, blocking the calling thread: while a
    /// transaction writes on another thread, it sees the data as they were before that
    /// transaction. nil (without running it) when the file is not in WAL mode, which has no such
    /// reader. For a writer reading ahead on a second thread what its own transaction does not
    /// touch.
    public func readCommittedBlocking<T>(_ body: (GeodatabaseConnection) throws -> T) throws -> T? {
        try checkOpen()
        guard let pool = writer as? DatabasePool else { return nil }
        do {
            return try pool.read { db in try body(GeodatabaseConnection(db, self)) }
        } catch {
            throw StorageError.from(error, "read failed")
        }
    }

    /// Async `read`: the statement is interrupted when the calling task is cancelled.
    public func read<T: Sendable>(_ body: @escaping @Sendable (GeodatabaseConnection) throws -> T) async throws -> T {
        try checkOpen()
        do {
            if state.withLock({ $0.explicitTransaction }) {
                return try await writer.writeWithoutTransaction { db in try body(GeodatabaseConnection(db, self)) }
            }
            return try await writer.read { db in try body(GeodatabaseConnection(db, self)) }
        } catch {
            throw StorageError.from(error, "read failed")
        }
    }

    /// Runs `body` in a write transaction: committed if it returns, rolled back if it throws (the
    /// first error is rethrown). Inside an explicit transaction (``beginTransaction()``) the work
    /// joins it, in a savepoint so a failure undoes only this call's changes.
    ///
    /// - Parameter small: the transaction writes a few rows (bookkeeping): it does not wait for a
    ///   background checkpoint the WAL is due for (see `WALCheckpointer`); the WAL grows by its
    ///   few pages instead. Right after a large commit such a write waited 18–42 ms for a copy it
    ///   did not need (a server recording where a replica's download starts; a replica recording
    ///   its verify), in the middle of a sync.
    /// - Parameter durable: `false` for work that can be done again from elsewhere if it is lost
    ///   (a replica's download from its service, its acknowledgement of an answer the server keeps):
    ///   the commit does not wait for its write-ahead log to reach the disk (SQLite's
    ///   `synchronous = NORMAL` for this transaction). A crash of the process loses nothing; a
    ///   power cut or a crash of the system may lose this commit and any other such commit after
    ///   the last durable one, never a durable commit that followed it, and never the file's
    ///   consistency. Files not in WAL mode (written by other tools) and writes inside an explicit
    ///   transaction are durable regardless.
    /// - Parameter body: the writes, on the transaction's connection.
    public func write<T>(small: Bool = false, durable: Bool = true, _ body: (GeodatabaseConnection) throws -> T) throws -> T {
        try checkOpen()
        try checkWritable()
        do {
            return try writer.writeWithoutTransaction { db in try self.transactional(db, small: small, durable: durable, body) }
        } catch {
            throw StorageError.from(error, "write failed")
        }
    }

    /// Async `write`: the statement is interrupted when the calling task is cancelled, and the
    /// transaction rolls back.
    public func write<T: Sendable>(
        small: Bool = false, durable: Bool = true, _ body: @escaping @Sendable (GeodatabaseConnection) throws -> T
    ) async throws -> T {
        try checkOpen()
        try checkWritable()
        do {
            return try await writer.writeWithoutTransaction { db in try self.transactional(db, small: small, durable: durable, body) }
        } catch {
            throw StorageError.from(error, "write failed")
        }
    }

    private func transactional<T>(_ db: Database, small: Bool, durable: Bool, _ body: (GeodatabaseConnection) throws -> T) throws -> T {
        var result: T?
        if db.isInsideTransaction {
            try GeodatabaseConnection.inSavepoint(db) { result = try body(GeodatabaseConnection(db, self)) }
        } else {
            if !small { checkpointer?.waitIfBehind() }
            // SQLite refuses to change the level inside a transaction: it is set before, and set
            // back before the next durable transaction begins (this one may end cancelled). Only
            // in WAL mode: with a rollback journal, NORMAL risks the file, not just the commit.
            let relax = !durable && writer is DatabasePool
            try state.withLock { try Self.setSynchronous(db, relaxed: relax, &$0.synchronousRelaxed) }
            // A large durable commit starts the disk's writing of its log while it copies the
            // frames (see `WALWriteback`).
            var writeback: WALWriteback?
            defer { writeback?.stop() }
            let changesBefore = db.totalChangesCount
            try db.inTransaction(.immediate) {
                result = try body(GeodatabaseConnection(db, self))
                if !relax, checkpointer != nil, db.totalChangesCount - changesBefore >= Int(WALWriteback.minimumChanges) {
                    writeback = WALWriteback.start(walPath: url.path + "-wal") { [self] in writebackRequests.add(1, ordering: .relaxed) }
                }
                return .commit
            }
        }
        return result!
    }

    /// Sets the writer's commits to wait for the disk (FULL) or not (`relaxed`: NORMAL), when
    /// `current` (the state's record of the level) says it is otherwise.
    private static func setSynchronous(_ db: Database, relaxed: Bool, _ current: inout Bool) throws {
        guard relaxed != current else { return }
        // Recorded first: a level left unknown by a failure is treated as relaxed.
        current = true
        try db.execute(sql: relaxed ? "PRAGMA synchronous = NORMAL" : "PRAGMA synchronous = FULL")
        current = relaxed
    }

    private func checkWritable() throws {
        if isReadOnly {
            throw StorageError(.readOnly, "\(url.lastPathComponent) is open read-only")
        }
    }

    // MARK: - Explicit transactions

    /// Begins a transaction that spans several calls; end it with ``commit()`` or ``rollback()``.
    /// Writes made meanwhile join it; reads see its uncommitted changes.
    /// - Throws: ``StorageError/Code/transactionState`` if one is already open.
    public func beginTransaction() throws {
        try checkWritable()
        try state.withLock { s in
            guard !s.explicitTransaction else {
                throw StorageError(.transactionState, "a transaction is already open")
            }
            do {
                var relaxed = s.synchronousRelaxed  // the state is locked here
                defer { s.synchronousRelaxed = relaxed }
                try writer.writeWithoutTransaction { db in
                    try Self.setSynchronous(db, relaxed: false, &relaxed)
                    try db.beginTransaction(.immediate)
                }
            } catch {
                throw StorageError.from(error, "cannot begin a transaction")
            }
            s.explicitTransaction = true
        }
    }

    /// Commits the transaction opened by ``beginTransaction()``.
    public func commit() throws {
        try endTransaction { db in try db.commit() }
    }

    /// Rolls back the transaction opened by ``beginTransaction()``; nothing it wrote remains.
    public func rollback() throws {
        try endTransaction { db in try db.rollback() }
    }

    private func endTransaction(_ end: @escaping (Database) throws -> Void) throws {
        try state.withLock { s in
            guard s.explicitTransaction else {
                throw StorageError(.transactionState, "no transaction is open")
            }
            do {
                try writer.writeWithoutTransaction { db in
                    if db.isInsideTransaction { try end(db) }
                }
            } catch {
                throw StorageError.from(error, "cannot end the transaction")
            }
            s.explicitTransaction = false
        }
    }

    /// Whether an explicit transaction is open.
    public var isInTransaction: Bool { state.withLock { $0.explicitTransaction } }

    func replaceSchema(_ schema: ServiceSchema) {
        state.withLock { $0.schema = schema }
    }
}

/// The first 100 bytes of an SQLite file (https://www.sqlite.org/fileformat.html §1.3).
struct FileHeader {
    let applicationID: UInt32
    let isWAL: Bool

    static func read(_ url: URL) throws -> FileHeader {
        guard FileManager.default.fileExists(atPath: url.path) else {
            throw StorageError(.notFound, "\(url.path) does not exist")
        }
        guard let handle = FileHandle(forReadingAtPath: url.path) else {
            throw StorageError(.io, "cannot read \(url.path)")
        }
        defer { try? handle.close() }
        let bytes = [UInt8]((try? handle.read(upToCount: 100)) ?? Data())
        guard bytes.count == 100, bytes.starts(with: Array("SQLite format 3\0".utf8)) else {
            throw StorageError(.notAGeoPackage, "\(url.lastPathComponent) is not an SQLite database, so not a GeoPackage")
        }
        let appID = bytes[68..<72].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        // 0x47504B47 "GPKG" (1.2+), 0x47503130 "GP10" and 0x47503131 "GP11" (1.0, 1.1).
        guard [0x4750_4B47, 0x4750_3130, 0x4750_3131].contains(appID) else {
            throw StorageError(
                .notAGeoPackage,
                "\(url.lastPathComponent) is an SQLite database but not a GeoPackage (application_id 0x\(String(appID, radix: 16)), expected GPKG)")
        }
        // Bytes 18 and 19 are 2 for WAL databases.
        return FileHeader(applicationID: appID, isWAL: bytes[18] == 2 && bytes[19] == 2)
    }
}

extension StorageError {
    /// Maps SQLite and other failures to a StorageError; CancellationError passes through untouched.
    static func from(_ error: any Error, _ context: String) -> any Error {
        if error is StorageError || error is CancellationError { return error }
        if let db = error as? DatabaseError {
            if db.resultCode == .SQLITE_INTERRUPT { return CancellationError() }
            let code: Code =
                switch db.resultCode {
                case .SQLITE_CORRUPT, .SQLITE_NOTADB: .corrupt
                case .SQLITE_READONLY: .readOnly
                default: .sqlite
                }
            return StorageError(code, "\(context): \(db.message ?? "\(db.resultCode)")", cause: db)
        }
        if let g = error as? GeometryError {
            return StorageError(.corrupt, "\(context): \(g)", cause: g)
        }
        // Errors thrown by the caller's own closure pass through unchanged.
        return error
    }
}

/// A deferral of a geodatabase's background checkpoints (``Geodatabase/deferCheckpoints()``);
/// ending it more than once ends it once.
public final class CheckpointDeferral: Sendable {
    private let checkpointer: WALCheckpointer?
    private let ended = Atomic<Bool>(false)

    init(_ checkpointer: WALCheckpointer?) {
        self.checkpointer = checkpointer
        checkpointer?.deferCopies()
    }

    deinit { end() }

    /// Ends the deferral: background checkpoints resume. Later calls do nothing (it also ends when released).
    public func end() {
        guard !ended.exchange(true, ordering: .acquiringAndReleasing) else { return }
        checkpointer?.endDeferral()
    }
}
