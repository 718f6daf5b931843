import Foundation
import OutpostCore
import Testing

@testable import OutpostStorage

@Suite("Where-clause parser")
struct WhereClauseTests {
    static let layer = LayerDefinition(
        id: 0, name: "t", geometryType: .point,
        fields: [
            FieldDefinition(name: "objectid", type: .oid), FieldDefinition(name: "Status", type: .string),
            FieldDefinition(name: "depth", type: .double), FieldDefinition(name: "n", type: .integer),
            FieldDefinition(name: "seen", type: .date), FieldDefinition(name: "day", type: .dateOnly),
        ])

    func sql(_ text: String) throws -> (String, [SQLLiteral]) {
        let clause = try WhereClause(text, layer: Self.layer)
        return clause.sql()
    }

    @Test func comparisonsBindEveryValue() throws {
        let (s, a) = try sql("status = 'open' AND depth >= 2.5 OR NOT n <> -3")
        #expect(s == #"((("Status" = ?) AND ("depth" >= ?)) OR (NOT ("n" <> ?)))"#)
        #expect(a == [.text("open"), .double(2.5), .integer(-3)])
        #expect(try sql("1=1").0 == "(? = ?)")
    }

    @Test func predicates() throws {
        #expect(try sql("n IN (1, 2, 3)").0 == #"("n" IN (?, ?, ?))"#)
        #expect(try sql("n NOT IN (1)").0 == #"("n" NOT IN (?))"#)
        #expect(try sql("status LIKE 'op%' ESCAPE '!'").0 == #"("Status" LIKE ? ESCAPE ?)"#)
        #expect(try sql("status NOT LIKE '%x'").0 == #"("Status" NOT LIKE ?)"#)
        #expect(try sql("depth IS NULL").0 == #"("depth" IS NULL)"#)
        #expect(try sql("depth IS NOT NULL").0 == #"("depth" IS NOT NULL)"#)
        #expect(try sql("n BETWEEN 1 AND 5").0 == #"("n" BETWEEN ? AND ?)"#)
        #expect(try sql("n NOT BETWEEN 1 AND 5").0 == #"("n" NOT BETWEEN ? AND ?)"#)
        #expect(try sql("UPPER(status) = 'OPEN'").0 == #"(upper("Status") = ?)"#)
        #expect(try sql("CHAR_LENGTH(status) > 2").0 == #"(length("Status") > ?)"#)
        #expect(try sql("depth * 2 + 1 > n / 3").0 == #"((("depth" * ?) + ?) > ("n" / ?))"#)
        #expect(try sql(#""Status" = 'it''s'"#).1 == [.text("it's")])
        #expect(try sql("(n = 1 OR n = 2) AND status <> 'x'").0 == #"((("n" = ?) OR ("n" = ?)) AND ("Status" <> ?))"#)
    }

    @Test func datesAreNormalisedToStorageText() throws {
        #expect(try sql("seen > DATE '2024-01-31'").1 == [.text("2024-01-31T00:00:00.000Z")])
        #expect(try sql("seen < TIMESTAMP '2024-01-31 10:20:30'").1 == [.text("2024-01-31T10:20:30.000Z")])
        #expect(try sql("seen >= '2024-01-31'").1 == [.text("2024-01-31T00:00:00.000Z")])
        #expect(try sql("day = '2024-01-31T10:00:00Z'").1 == [.text("2024-01-31")])
        #expect(try sql("seen <= CURRENT_TIMESTAMP").0.contains("strftime"))
        #expect(try sql("seen BETWEEN DATE '2024-01-01' AND DATE '2024-02-01'").1.count == 2)
    }

    @Test func postgresPlaceholdersAreNumbered() throws {
        let clause = try WhereClause("n IN (1, 2) AND status = 'a'", layer: Self.layer)
        let (s, a) = clause.sql(dialect: .postgres, firstParameter: 3)
        #expect(s == #"(("n" IN ($3, $4)) AND ("Status" = $5))"#)
        #expect(a.count == 3)
    }

    static let hostile: [String] = [
        "", "   ", "status", "1", "'x'", "status = ", "= 1", "status = 'open",
        "status = 'a'; DROP TABLE t", "1=1; DELETE FROM t", "1=1 --", "1=1 /* x */", "status = 'a' OR 1=1)",
        "(status = 'a'", "nosuchfield = 1", "t.status = 1", "status = (SELECT 1)", "status IN (SELECT objectid FROM t)",
        "EXISTS (SELECT 1)", "load_extension('x') = 1", "sqlite_version() = 1", "status = x'41'", "status = ?",
        "status = :a", "status = $1", "status = @a", "n IN ()", "n BETWEEN 1", "status LIKE 'a' ESCAPE 'ab'",
        "status IS 1", "NOT", "n = 1 AND", "n = 1 OR OR n = 2", "depth = 1e999", "seen > DATE 'tomorrow'",
        "n = 1 UNION SELECT 1", "\"unterminated = 1", "status = 'a' \u{0}", "UPPER(status, 1) = 'A'", "ROUND() = 1",
        String(repeating: "(", count: 200) + "n = 1" + String(repeating: ")", count: 200),
        String(repeating: "NOT ", count: 200) + "n = 1",
        String(repeating: "-", count: 500) + "1 = 1",
        "n IN (" + Array(repeating: "1", count: 10_001).joined(separator: ",") + ")",
        String(repeating: "x", count: 40_000),
    ]

    @Test(arguments: hostile)
    func hostileInputIsAClearError(text: String) {
        do {
            _ = try WhereClause(text, layer: Self.layer)
            Issue.record("accepted: \(text.prefix(80))")
        } catch let error as StorageError {
            #expect(error.code == .invalidWhereClause)
            #expect(!error.message.isEmpty)
        } catch {
            Issue.record("unexpected error type \(error)")
        }
    }

    /// Found by the where fuzz target: unary plus recursed once per `+`, and 1,300 of them
    /// overflowed the stack (a query's where clause could take the server down). Any number of
    /// them is skipped now; unary minus still counts toward the nesting limit.
    @Test func runsOfUnaryPlusDoNotRecurse() throws {
        let (text, values) = try sql("n = " + String(repeating: "+", count: 30_000) + "1")
        #expect(text == #"("n" = ?)"# && values == [.integer(1)], "\(text)")
        #expect(throws: StorageError.self) { try WhereClause(String(repeating: "+-", count: 100) + "1 = n", layer: Self.layer) }
    }

    @Test func fieldNamesAreCaseInsensitiveAndEmittedCanonically() throws {
        #expect(try sql("STATUS = 'a' and DePtH > 1").0 == #"(("Status" = ?) AND ("depth" > ?))"#)
    }
}
