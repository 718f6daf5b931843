import Foundation
import OutpostCore
import OutpostServiceTestSupport
import OutpostStorage
import OutpostTestSupport
import Testing

@testable import OutpostSQLiteService

@Suite("The change log and tombstones a batch's run writes")
struct ChangeLogWriterTests {
    /// A run of 250 entries (two full statements of 100 rows and 50 rows one by one) is logged in
    /// order with every column as given; a delete keeps a tombstone, an insert drops one, and
    /// for a feature named twice the later entry decides: deleted then inserted has none,
    /// inserted then deleted has the delete's row, a delete without a row keeps the row an
    /// earlier delete kept. An entry for the replica itself carries no origin.
    @Test func aRunIsLoggedInOrderAndItsTombstonesFollowTheLastOperation() async throws {
        let service = try await TestService.fieldInspection(.sqlite)
        let backend = try #require(service.backend as? SQLiteServiceBackend)
        let gid = { (n: Int) in String(format: "{00000000-0000-4000-8000-%012d}", n) }
        var entries: [ServiceStore.LogEntry] = []
        for n in 0..<250 {
            switch n % 5 {
            case 0: entries.append(.init(globalID: gid(n), op: "insert", columns: ["status", "notes"], editedAt: "2026-01-01T00:00:00.000Z"))
            case 1: entries.append(.init(globalID: gid(n), op: "update", columns: ["status"]))
            case 2: entries.append(.init(globalID: gid(n), op: "update", columns: [], toOrigin: true))
            case 3: entries.append(.init(globalID: gid(n), op: "delete", columns: [], row: "{\"n\":\(n)}"))
            default: entries.append(.init(globalID: gid(n), op: "update", columns: ["notes", "status"]))
            }
        }
        // Features named twice: A deleted then inserted, B inserted then deleted, C (tombstone
        // kept before the run) inserted, D (tombstone kept before) deleted again without a row.
        let (a, b, c, d) = (gid(1_001), gid(1_002), gid(1_003), gid(1_004))
        entries.insert(.init(globalID: a, op: "delete", columns: [], row: "{\"a\":1}"), at: 10)
        entries.insert(.init(globalID: b, op: "insert", columns: ["status"]), at: 20)
        entries.insert(.init(globalID: c, op: "insert", columns: ["status"]), at: 30)
        entries.insert(.init(globalID: a, op: "insert", columns: ["status"]), at: 140)
        entries.insert(.init(globalID: b, op: "delete", columns: [], row: "{\"b\":2}"), at: 205)
        entries.insert(.init(globalID: d, op: "delete", columns: [], row: nil), at: 230)
        let run = entries
        try await backend.geodatabase.write { conn in
            try ServiceStore.log(conn, generation: 7, layerID: 0, [
                .init(globalID: c, op: "delete", columns: [], row: "{\"c\":3}"), .init(globalID: d, op: "delete", columns: [], row: "{\"d\":4}"),
            ], changedAt: "2026-01-02T00:00:00.000Z")
            try ServiceStore.log(conn, generation: 8, layerID: 0, run, changedAt: "2026-01-03T00:00:00.000Z", origin: ("{R}", 5))
        }
        let logged = try await backend.geodatabase.read { conn in
            try conn.query(
                """
                SELECT globalid, op, changed_columns, origin_replica, origin_seq, edited_at, changed_at FROM outpost_change_log
                WHERE generation = 8 AND layer_id = 0 ORDER BY change_id
                """)
        }
        #expect(logged.count == entries.count)
        for (row, e) in zip(logged, entries) {
            let columns = JSONValue.array(e.columns.map { .string($0) }).jsonString
            let origin: [SQLLiteral] = e.toOrigin ? [.null, .null] : [.text("{R}"), .integer(5)]
            let expected: [SQLLiteral] = [.text(e.globalID), .text(e.op), .text(columns)] + origin + [e.editedAt.map { .text($0) } ?? .null, .text("2026-01-03T00:00:00.000Z")]
            #expect(row == expected, "\(e.globalID) \(e.op)")
        }
        let tombstones = try await backend.geodatabase.read { conn in
            Dictionary(uniqueKeysWithValues: try conn.query("SELECT globalid, generation, row FROM outpost_tombstones WHERE layer_id = 0").map {
                ($0[0].textValue ?? "", [$0[1], $0[2]])
            })
        }
        let deleted = entries.filter { $0.op == "delete" && ![a, b, d].contains($0.globalID) }
        for e in deleted { #expect(tombstones[e.globalID] == [.integer(8), .text(e.row ?? "")], "\(e.globalID)") }
        #expect(tombstones[a] == nil)
        #expect(tombstones[b] == [.integer(8), .text("{\"b\":2}")])
        #expect(tombstones[c] == nil)
        #expect(tombstones[d] == [.integer(8), .text("{\"d\":4}")])
        #expect(tombstones.count == deleted.count + 2)
    }

    /// A statement bound with fewer or more values than it takes is refused before it runs.
    @Test func aStatementBoundWithTheWrongNumberOfValuesIsRefused() async throws {
        let service = try await TestService.fieldInspection(.sqlite)
        let backend = try #require(service.backend as? SQLiteServiceBackend)
        try await backend.geodatabase.write { conn in
            let insert = try conn.statement("INSERT INTO outpost_tombstones (layer_id, globalid, generation) VALUES (?, ?, ?)")
            #expect(throws: StorageError.self) { try insert.execute { p in p.bind(Int64(0)); p.bind("{X}") } }
            #expect(throws: StorageError.self) {
                try insert.execute { p in
                    p.bind(Int64(0)); p.bind("{Y}"); p.bind(Int64(1)); p.bind(Int64(2))
                }
            }
            try insert.execute { p in p.bind(Int64(0)); p.bind("{Z}"); p.bind(Int64(3)) }
            #expect(try conn.query("SELECT globalid, generation FROM outpost_tombstones WHERE globalid IN ('{X}', '{Y}', '{Z}')") == [[.text("{Z}"), .integer(3)]])
        }
    }
}
