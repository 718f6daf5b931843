import Foundation
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

    @Test func aLogThatCannotBeOpenedStartsNoHelper() {
        let dir = TemporaryDirectory()
        #expect(WALWriteback.start(walPath: dir.url.appendingPathComponent("missing.gpkg-wal").path) == nil)
    }
}
