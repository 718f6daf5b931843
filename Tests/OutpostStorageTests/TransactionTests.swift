import Foundation
import GRDB
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
}
