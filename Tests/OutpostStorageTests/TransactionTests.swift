import Foundation
import GRDB
import GRDBSQLite
import OutpostCore
import OutpostTestSupport
import Testing

@testable import OutpostStorage

@Suite("Transactions and cancellation")
struct TransactionTests {
    @Test func explicitTransactionsCommitOrRollBack() async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.fieldInspection(in: dir)
        let table = try gdb.table(named: "inspection_points")
        let before = try await SampleGeodatabases.contents(of: gdb)

        try gdb.beginTransaction()
        #expect(throws: StorageError.self) { try gdb.beginTransaction() }
        _ = try await table.add([FeatureTableEditTests.validPoint()])
        try await table.delete(objectIDs: [1])
        #expect(try await table.count() == 300, "reads inside the transaction see its changes")
        // A failing call inside the transaction undoes only itself.
        await #expect(throws: StorageError.self) { try await table.delete(objectIDs: [2, 99_999]) }
        #expect(try await table.feature(objectID: 2) != nil)
        try gdb.rollback()
        #expect(try await SampleGeodatabases.contents(of: gdb) == before)
        #expect(try await table.pendingChanges() == PendingChanges())

        try gdb.beginTransaction()
        try await table.delete(objectIDs: [1])
        try gdb.commit()
        #expect(try await table.count() == 299)
        #expect(try await table.pendingChanges().deletes == 1)
        #expect(throws: StorageError.self) { try gdb.commit() }
        #expect(throws: StorageError.self) { try gdb.rollback() }
        try gdb.close()
    }

    @Test func closureTransactionsRollBackOnError() async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.fieldInspection(in: dir)
        let table = try gdb.table(named: "inspection_points")
        struct Boom: Error {}
        await #expect(throws: Boom.self) {
            try await gdb.write { conn in
                try table.delete(objectIDs: [1, 2, 3], in: conn)
                throw Boom()
            }
        }
        #expect(try await table.count() == 300)
        try gdb.close()
    }

    @Test(.scaledTimeLimit(minutes: 1))
    func cancellingATaskInterruptsItsStatement() async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.fieldInspection(in: dir)
        let started = Date()
        let task = Task {
            try await gdb.read { conn in
                // Runs for minutes unless interrupted.
                try Int.fetchOne(conn.db, sql: "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 5000000000) SELECT count(*) FROM c")
            }
        }
        try await Task.sleep(for: .milliseconds(200))
        task.cancel()
        let result = await task.result
        #expect(throws: CancellationError.self) { try result.get() }
        // Uninterrupted, the query runs for minutes; the bound leaves room for a loaded machine.
        #expect(Date().timeIntervalSince(started) < 30)
        // The geodatabase is fine afterwards.
        #expect(try await gdb.table(named: "inspection_points").count() == 300)
        try gdb.close()
    }

    /// The writer keeps a transaction's changed pages in its page cache up to the cache's size
    /// (32 MB unless opened with another `writerCache`; a service's writer has 64 MB) and writes
    /// them into the WAL before the commit only past it, so a large transaction's memory stays
    /// bounded, and one that fits writes each page once.
    @Test(.scaledTimeLimit(minutes: 1), arguments: [nil, 64 << 20])
    func aTransactionKeepsItsChangedPagesUpToTheWriterCache(writerCache: Int?) async throws {
        let dir = TemporaryDirectory()
        let made = try SampleGeodatabases.fieldInspection(in: dir)
        let url = made.url
        try made.close()
        let gdb = try writerCache.map { try Geodatabase.open(at: url, writerCache: $0) } ?? Geodatabase.open(at: url)
        defer { try? gdb.close() }
        let cache = writerCache ?? Geodatabase.defaultWriterCache
        try await gdb.write { conn in
            let db = conn.db
            func status(_ counter: Int32) -> Int {
                var current: Int32 = 0, highest: Int32 = 0
                _ = sqlite3_db_status(db.sqliteConnection, counter, &current, &highest, 0)
                return Int(current)
            }
            let spilledBefore = status(SQLITE_DBSTATUS_CACHE_SPILL)
            try db.execute(sql: "CREATE TABLE bulk (id INTEGER PRIMARY KEY, data BLOB)")
            // A row to a 4 KB page.
            let insert = try db.makeStatement(sql: "INSERT INTO bulk (data) VALUES (zeroblob(3900))")
            let pages = cache / 4096
            // Four fifths of the cache: nothing written early.
            for _ in 0..<(pages * 4 / 5) { try insert.execute() }
            #expect(status(SQLITE_DBSTATUS_CACHE_SPILL) == spilledBefore)
            #expect(status(SQLITE_DBSTATUS_CACHE_USED) > cache * 3 / 4)
            // Twice the cache: pages go to the WAL, and the cache stops growing.
            for _ in 0..<(2 * pages - pages * 4 / 5) { try insert.execute() }
            #expect(status(SQLITE_DBSTATUS_CACHE_SPILL) > spilledBefore)
            #expect(status(SQLITE_DBSTATUS_CACHE_USED) < cache + cache / 8)
        }
        #expect(try await gdb.read { conn in try Int.fetchOne(conn.db, sql: "SELECT count(*) FROM bulk") } == cache / 4096 * 2)
    }

    /// Writers delete at `secure_delete = FAST`: what a delete removes is zeroed in the pages the
    /// write changes anyway, and the pages it frees are not written again only to be zeroed (the
    /// default of Debian's SQLite, which zeroes them all). A freed chain of 100 overflow pages
    /// adds a few frames to the WAL, not a hundred.
    @Test(.scaledTimeLimit(minutes: 1))
    func deletesDoNotWriteTheirFreedPagesAgain() async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.fieldInspection(in: dir)
        let deferral = gdb.deferCheckpoints()
        defer { deferral.end() }
        #expect(try await gdb.write { conn in try Int.fetchOne(conn.db, sql: "PRAGMA secure_delete") } == 2)
        try await gdb.write { conn in
            try conn.db.execute(sql: "CREATE TABLE bulk (data BLOB)")
            try conn.db.execute(sql: "INSERT INTO bulk (data) VALUES (randomblob(400000))")
        }
        let wal = gdb.url.path + "-wal"
        func walBytes() throws -> Int { (try FileManager.default.attributesOfItem(atPath: wal)[.size] as? NSNumber)?.intValue ?? 0 }
        let before = try walBytes()
        try await gdb.write { conn in try conn.db.execute(sql: "DELETE FROM bulk") }
        let frames = (try walBytes() - before) / (4096 + 24)
        #expect(frames < 20, "the delete wrote \(frames) pages")
        #expect(try await gdb.read { conn in try Int.fetchOne(conn.db, sql: "SELECT count(*) FROM bulk") } == 0)
        try gdb.close()
    }

    /// `write(durable: false)` (a replica's download, its acknowledgement of an answer) commits at
    /// SQLite's `synchronous = NORMAL`: the commit does not wait for the disk. Every other commit
    /// waits (FULL), also after such a write threw, after one cancelled mid-statement, and inside
    /// an explicit transaction, which keeps its own level.
    @Test(.scaledTimeLimit(minutes: 1))
    func aNonDurableWriteRelaxesOnlyItsOwnCommit() async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.fieldInspection(in: dir)
        let table = try gdb.table(named: "inspection_points")
        let full = 2, normal = 1
        func level(durable: Bool = true) async throws -> Int? {
            try await gdb.write(durable: durable) { conn in try Int.fetchOne(conn.db, sql: "PRAGMA synchronous") }
        }
        #expect(try await level() == full)
        #expect(try await level(durable: false) == normal)
        #expect(try await level() == full)
        func blockingLevel(durable: Bool = true) throws -> Int? {
            try gdb.write(durable: durable) { conn in try Int.fetchOne(conn.db, sql: "PRAGMA synchronous") }
        }
        #expect(try blockingLevel(durable: false) == normal)
        #expect(try blockingLevel() == full)

        // What it writes is committed like any write.
        try await gdb.write(durable: false) { conn in try table.delete(objectIDs: [1], in: conn) }
        #expect(try await table.count() == 299)

        struct Boom: Error {}
        await #expect(throws: Boom.self) {
            try await gdb.write(durable: false) { conn in
                try table.delete(objectIDs: [2], in: conn)
                throw Boom()
            }
        }
        #expect(try await table.count() == 299)
        #expect(try await level() == full)

        // Cancelled in the middle of a statement: the next durable commit is FULL all the same,
        // and so is an explicit transaction begun next.
        for explicit in [false, true] {
            let task = Task {
                try await gdb.write(durable: false) { conn in
                    try Int.fetchOne(conn.db, sql: "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 5000000000) SELECT count(*) FROM c")
                }
            }
            try await Task.sleep(for: .milliseconds(200))
            task.cancel()
            let result = await task.result
            #expect(throws: (any Error).self) { try result.get() }
            if explicit {
                try gdb.beginTransaction()
                #expect(try await level(durable: false) == full, "a write inside an explicit transaction joins it")
                #expect(try await gdb.read { conn in try Int.fetchOne(conn.db, sql: "PRAGMA synchronous") } == full)
                try gdb.commit()
            } else {
                #expect(try await level() == full)
            }
        }
        try gdb.close()

        // Reopened, the file holds every commit.
        let reopened = try Geodatabase.open(at: gdb.url)
        #expect(try await reopened.table(named: "inspection_points").count() == 299)
        try reopened.close()

        // A file with a rollback journal (as GDAL leaves one) is written durably regardless:
        // NORMAL there risks the file, not just the last commit.
        let queue = try DatabaseQueue(path: gdb.url.path)
        try await queue.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA journal_mode = DELETE") }
        try queue.close()
        let journaled = try Geodatabase.open(at: gdb.url)
        #expect(try await journaled.write(durable: false) { conn in try Int.fetchOne(conn.db, sql: "PRAGMA synchronous") } == full)
        try journaled.close()
    }

    /// Clearing the staging table with nothing staged commits nothing (another connection sees
    /// no new data version), so it makes the disk wait for nothing; with rows staged (of the
    /// layer asked for) it removes them, and only them.
    @Test func clearingAnEmptyStagingTableWritesNothing() async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.fieldInspection(in: dir)
        try await gdb.write { conn in try ReplicaTables.install(conn.db) }
        let other = try DatabaseQueue(path: gdb.url.path)
        func dataVersion() throws -> Int? { try other.read { db in try Int.fetchOne(db, sql: "PRAGMA data_version") } }
        let before = try dataVersion()
        try await gdb.write { conn in try conn.clearStaging() }
        try await gdb.write { conn in try conn.clearStaging(layerID: 0) }
        #expect(try dataVersion() == before, "nothing was committed")

        try await gdb.write { conn in
            try conn.stage(layerID: 0, globalID: "{0D0D0D0D-0000-4000-8000-00000000000D}", kind: "leave", generation: 1, row: nil)
            try conn.stage(layerID: 3, globalID: "{0D0D0D0D-0000-4000-8000-00000000000E}", kind: "leave", generation: 1, row: nil)
        }
        let staged = try dataVersion()
        #expect(staged != before)
        try await gdb.write { conn in try conn.clearStaging(layerID: 1) }
        #expect(try dataVersion() == staged, "nothing of layer 1 was staged")
        try await gdb.write { conn in try conn.clearStaging(layerID: 0) }
        #expect(try await gdb.read { conn in (try conn.hasStagedRows(layerID: 0), try conn.hasStagedRows(layerID: 3)) } == (false, true))
        try await gdb.write { conn in try conn.clearStaging() }
        #expect(try await !gdb.read { conn in try conn.hasStagedRows() })
        try other.close()
        try gdb.close()
    }
}
