import Foundation
import GRDB
import Synchronization
import OutpostCore
import OutpostTestSupport
import Testing

@testable import OutpostStorage

@Suite("A large commit starts the disk writing its log early")
struct WALWritebackTests {
    /// Inserts `rows` rows of a kilobyte each in one transaction.
    static func insert(_ rows: Int, into gdb: Geodatabase, durable: Bool) async throws {
        try await gdb.write(durable: durable) { conn in
            try conn.execute("CREATE TABLE IF NOT EXISTS scratch (b BLOB)")
            try conn.execute(
                "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < \(rows)) INSERT INTO scratch SELECT randomblob(1000) FROM n")
        }
    }

    @Test func onlyALargeDurableCommitAsksTheKernelToWriteItsLog() async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.emptyFieldInspection(in: dir)
        let large = Int(WALWriteback.minimumChanges) + 500
        // A small commit, and a large one that does not wait for the disk, start no helper.
        try await Self.insert(100, into: gdb, durable: true)
        try await Self.insert(large, into: gdb, durable: false)
        #expect(gdb.writebackRequests.load(ordering: .relaxed) == 0)
        // A large durable commit does (at least once, before its own sync of the log).
        try await Self.insert(large, into: gdb, durable: true)
        #if os(Linux)
        #expect(gdb.writebackRequests.load(ordering: .relaxed) > 0, "the kernel took the request on the log")
        #else
        #expect(gdb.writebackRequests.load(ordering: .relaxed) == 0)
        #endif
        try gdb.close()
        // Every commit is whole, and the file is sound.
        let reopened = try Geodatabase.open(at: gdb.url)
        let (rows, check) = try await reopened.read { conn in
            (try conn.query("SELECT count(*) FROM scratch").first?[0].integerValue, try conn.query("PRAGMA integrity_check").first?[0].textValue)
        }
        #expect(rows == Int64(100 + 2 * large))
        #expect(check == "ok")
        try reopened.close()
    }

    /// A commit that fails in `COMMIT` itself, after its helper has started: the helper stops
    /// and lets the log go, nothing of the transaction is kept, and the next large commit works.
    @Test func aCommitThatFailsInCommitStopsItsHelper() async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.emptyFieldInspection(in: dir)
        let wal = gdb.url.path + "-wal"
        try await Self.insert(10, into: gdb, durable: true)
        let openBefore = Self.descriptors(of: wal)
        let large = Int(WALWriteback.minimumChanges) + 500
        let refusal = CommitRefusal()
        await #expect(throws: (any Error).self) {
            try await gdb.write { conn in
                try conn.execute(
                    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < \(large)) INSERT INTO scratch SELECT randomblob(1000) FROM n")
                // SQLite's commit hook: the COMMIT statement fails and the transaction rolls back.
                conn.db.add(transactionObserver: refusal, extent: .nextTransaction)
            }
        }
        let asked = refusal.asked.load(ordering: .relaxed)
        #expect(asked == 1, "the commit was refused in COMMIT")
        // The helper has ended: no request after the failed commit returned, and no descriptor
        // of the log is left open beyond SQLite's own.
        let requests = gdb.writebackRequests.load(ordering: .relaxed)
        try await Task.sleep(for: .milliseconds(30))
        #expect(gdb.writebackRequests.load(ordering: .relaxed) == requests)
        #expect(Self.descriptors(of: wal) == openBefore)
        #expect(try await gdb.read { try $0.query("SELECT count(*) FROM scratch").first?[0].integerValue } == 10)
        // The next large durable commit is whole, and asks again.
        try await Self.insert(large, into: gdb, durable: true)
        #if os(Linux)
        #expect(gdb.writebackRequests.load(ordering: .relaxed) > requests)
        #endif
        let (rows, check) = try await gdb.read { conn in
            (try conn.query("SELECT count(*) FROM scratch").first?[0].integerValue, try conn.query("PRAGMA integrity_check").first?[0].textValue)
        }
        #expect(rows == Int64(10 + large))
        #expect(check == "ok")
        try gdb.close()
    }

    /// Refuses the commit it is asked about (once).
    final class CommitRefusal: TransactionObserver, @unchecked Sendable {
        // @unchecked: called on the writer's thread only; the count is atomic.
        let asked = Atomic<Int>(0)
        struct Refused: Error {}
        func observes(eventsOfKind eventKind: DatabaseEventKind) -> Bool { false }
        func databaseDidChange(with event: DatabaseEvent) {}
        func databaseWillCommit() throws {
            asked.add(1, ordering: .relaxed)
            throw Refused()
        }
        func databaseDidCommit(_ db: Database) {}
        func databaseDidRollback(_ db: Database) {}
    }

    /// How many of this process's open descriptors refer to `path`.
    static func descriptors(of path: String) -> Int {
        let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        let target = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
        return fds.count { (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\($0)")) == target }
    }

    @Test func aLogThatCannotBeOpenedStartsNoHelper() {
        let dir = TemporaryDirectory()
        #expect(WALWriteback.start(walPath: dir.url.appendingPathComponent("missing.gpkg-wal").path) == nil)
    }
}
