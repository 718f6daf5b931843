import Foundation
import Logging
import OutpostSyncService
import PostgresNIO

/// A site's users document and failed sign-ins in the database (`outpost users --postgres`
/// writes the document; every `outpost serve --postgres` host reads it). Made by
/// ``PostgresJobStore/security()``, over that store's connections.
public final class PostgresSecurityStore: SecurityRecordStore {
    /// The store whose connections these records use, kept open while they are.
    let jobs: PostgresJobStore
    var database: PostgresConnections { jobs.database }
    /// Writers of the document take this transaction lock, so that two first writers (no row
    /// yet to lock) do not both insert.
    static let writeLock: Int64 = 0x6F75_7470_7573_6572

    init(jobs: PostgresJobStore) { self.jobs = jobs }

    public func securityVersion() async throws -> Int64? {
        try await database.run { client, logger in
            for try await version in try await client.query("SELECT version FROM outpost_security WHERE id = 1", logger: logger).decode(Int64.self) {
                return version
            }
            return nil
        }
    }

    public func securityDocument() async throws -> (version: Int64, text: String)? {
        try await database.run { client, logger -> (version: Int64, text: String)? in
            for try await (version, text) in try await client.query("SELECT version, document::text FROM outpost_security WHERE id = 1", logger: logger)
                .decode((Int64, String).self)
            {
                return (version, text)
            }
            return nil
        }
    }

    @discardableResult
    public func changeSecurityDocument(_ change: @escaping @Sendable (String?) throws -> String) async throws -> Int64 {
        let lock = Self.writeLock
        return try await database.transaction { conn, logger in
            try await conn.query("SELECT pg_advisory_xact_lock(\(lock))", logger: logger)
            var current: (version: Int64, text: String)?
            for try await (version, text) in try await conn.query("SELECT version, document::text FROM outpost_security WHERE id = 1", logger: logger)
                .decode((Int64, String).self)
            {
                current = (version, text)
            }
            let text = try change(current?.text)
            let version = (current?.version ?? 0) + 1
            try await conn.query(
                """
                INSERT INTO outpost_security (id, document, version) VALUES (1, \(text)::jsonb, \(version))
                ON CONFLICT (id) DO UPDATE SET document = excluded.document, version = excluded.version
                """, logger: logger)
            return version
        }
    }

    public func failedSignIns(_ keys: [String], since: Int64) async throws -> [String: (count: Int, oldest: Int64)] {
        try await database.run { client, logger in
            // Failures older than the window count for nothing: forgotten as they are met.
            try await client.query("DELETE FROM outpost_failed_sign_ins WHERE key = ANY(\(keys)) AND at < \(since)", logger: logger)
            var out: [String: (count: Int, oldest: Int64)] = [:]
            for try await (key, count, oldest) in try await client.query(
                "SELECT key, count(*), min(at) FROM outpost_failed_sign_ins WHERE key = ANY(\(keys)) GROUP BY key", logger: logger
            ).decode((String, Int64, Int64).self) {
                out[key] = (Int(count), oldest)
            }
            return out
        }
    }

    public func recordFailedSignIn(_ keys: [String], at time: Int64) async throws {
        try await database.run { client, logger in
            try await client.query("INSERT INTO outpost_failed_sign_ins (key, at) SELECT unnest(\(keys)::text[]), \(time)", logger: logger)
        }
    }

    public func clearFailedSignIns(_ key: String) async throws {
        try await database.run { client, logger in
            try await client.query("DELETE FROM outpost_failed_sign_ins WHERE key = \(key)", logger: logger)
        }
    }
}

extension PostgresJobStore {
    /// The site's users document and failed sign-ins, over this store's connections.
    public func security() -> PostgresSecurityStore { PostgresSecurityStore(jobs: self) }
}
