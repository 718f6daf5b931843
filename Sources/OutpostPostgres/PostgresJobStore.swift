import Foundation
import Logging
import OutpostCore
import OutpostSyncService
import PostgresNIO

/// Job records (async createReplica and synchronizeReplica, tile exports) in the database, so
/// that with several server processes any of them answers a job's status and passes a cancel to
/// the process running it. The job itself runs where it was started; its files go to the
/// processes' output directory (give them a shared one: `outpost serve --site-directory`).
public final class PostgresJobStore: JobRecordStore {
    let database: PostgresConnections
    /// Where the store reads the time (a record's last update).
    let clock: ServiceClock

    /// Connects (one small pool, on the primary when several servers are listed) after
    /// applying pending migrations.
    public init(location: PostgresLocation, clock: ServiceClock = .system) async throws {
        try await PostgresServiceStore.withClient(location) { client in _ = try await PostgresServiceStore.migrate(client) }
        self.clock = clock
        database = PostgresConnections(pool: await PostgresPool.connect(location, maximumConnections: 4))
    }

    public var isShared: Bool { true }

    /// Returns once the database answers a statement within three seconds.
    public func check() async throws {
        try await database.run(timeout: .seconds(3)) { client, logger in try await client.query("SELECT 1", logger: logger) }
    }

    public func insert(_ record: JobRecord, host: String, until: Int64) async throws {
        try await insert(record, host: host, until: until, resumable: nil)
    }

    public func insert(_ record: JobRecord, host: String, until: Int64, resumable: ResumableJob?) async throws {
        let kind = resumable?.kind, input = resumable?.input.jsonString
        try await database.run { client, logger in
            try await client.query(
                """
                INSERT INTO outpost_jobs (job_id, status, response_type, submission_time, last_updated_time, host, lease_until, kind, input)
                VALUES (\(record.id), \(record.status), \(record.responseType), \(record.submissionTime), \(record.lastUpdatedTime), \(host), \(until),
                        \(kind), \(input)::jsonb)
                """, logger: logger)
        }
    }

    public func takeAbandoned(now: Int64, host: String, until: Int64, maximumStarts: Int) async throws -> [(id: String, job: ResumableJob)] {
        try await database.run { client, logger in
            // As in failAbandoned, row locks decide between hosts: a job is taken by one, and a
            // host that waited on its row finds the lease renewed and leaves it.
            var taken: [(id: String, job: ResumableJob)] = []
            for try await (id, kind, input) in try await client.query(
                """
                UPDATE outpost_jobs SET host = \(host), lease_until = \(until), starts = starts + 1, last_updated_time = \(now)
                WHERE status IN ('Pending', 'InProgress') AND lease_until < \(now) AND kind IS NOT NULL AND starts < \(maximumStarts)
                  AND NOT cancel_requested
                RETURNING job_id, kind, input::text
                """, logger: logger
            ).decode((String, String, String).self) {
                taken.append((id, ResumableJob(kind: kind, input: try JSONValue.parse(input))))
            }
            return taken
        }
    }

    public func update(_ id: String, status: String, result: JSONValue?, error: String?) async throws {
        let now = clock.milliseconds(), result = result?.jsonString
        try await database.run { client, logger in
            try await client.query(
                """
                UPDATE outpost_jobs SET status = \(status), last_updated_time = \(now),
                  result = coalesce(\(result)::jsonb, result), error = coalesce(\(error), error)
                WHERE job_id = \(id) AND status IN ('Pending', 'InProgress')
                """, logger: logger)
        }
    }

    public func renew(host: String, until: Int64) async throws {
        try await database.run { client, logger in
            try await client.query(
                "UPDATE outpost_jobs SET lease_until = \(until) WHERE host = \(host) AND status IN ('Pending', 'InProgress')", logger: logger)
        }
    }

    public func release(_ ids: [String], host: String) async throws {
        guard !ids.isEmpty else { return }
        try await database.run { client, logger in
            try await client.query(
                "UPDATE outpost_jobs SET lease_until = 0 WHERE host = \(host) AND job_id = ANY(\(ids)) AND status IN ('Pending', 'InProgress')", logger: logger)
        }
    }

    public func failAbandoned(now: Int64, error: String) async throws -> [String] {
        try await database.run { client, logger in
            // Row locks decide between hosts doing this at once: each job is failed by one.
            var ids: [String] = []
            for try await id in try await client.query(
                """
                UPDATE outpost_jobs SET status = 'Failed', error = \(error), last_updated_time = \(now)
                WHERE status IN ('Pending', 'InProgress') AND lease_until < \(now)
                RETURNING job_id
                """, logger: logger
            ).decode(String.self) {
                ids.append(id)
            }
            return ids
        }
    }

    public func record(_ id: String) async throws -> JobRecord? {
        return try await database.run { client, logger in
            for try await (status, type, submitted, updated, result, error) in try await client.query(
                "SELECT status, response_type, submission_time, last_updated_time, result::text, error FROM outpost_jobs WHERE job_id = \(id)", logger: logger
            ).decode((String, String, Int64, Int64, String?, String?).self) {
                return JobRecord(
                    id: id, status: status, responseType: type, submissionTime: submitted, lastUpdatedTime: updated,
                    result: try result.map { try JSONValue.parse($0) }, error: error)
            }
            return nil
        }
    }

    public func requestCancel(_ id: String) async throws -> Bool {
        return try await database.run { client, logger in
            for try await _ in try await client.query("UPDATE outpost_jobs SET cancel_requested = true WHERE job_id = \(id) RETURNING 1", logger: logger) {
                return true
            }
            return false
        }
    }

    public func cancelRequested(_ id: String) async throws -> Bool {
        return try await database.run { client, logger in
            for try await flag in try await client.query("SELECT cancel_requested FROM outpost_jobs WHERE job_id = \(id)", logger: logger).decode(Bool.self) {
                return flag
            }
            return false
        }
    }

    public func sweep(finishedBefore time: Int64) async throws {
        try await database.run { client, logger in
            try await client.query(
                "DELETE FROM outpost_jobs WHERE status NOT IN ('Pending', 'InProgress') AND last_updated_time < \(time)", logger: logger)
        }
    }
}
