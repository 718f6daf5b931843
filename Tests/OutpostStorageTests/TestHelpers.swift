import GRDB

@testable import OutpostStorage

extension Geodatabase {
    /// The first column of the first row of `sql`, as an integer.
    func int(_ sql: String) async throws -> Int? {
        try await read { conn in try Int.fetchOne(conn.db, sql: sql) }
    }

    /// The first column of the first row of `sql`, as text.
    func string(_ sql: String) async throws -> String? {
        try await read { conn in try String.fetchOne(conn.db, sql: sql) }
    }
}
