import Foundation
import Logging
import OutpostCore
import OutpostSyncService
import PostgresNIO

/// The job records of one geoprocessing service in the database, shared by the hosts of a site:
/// a job submitted through one host is polled, read and cancelled through any other, and a job
/// whose host stopped is taken over by another host when its lease runs out. Made by
/// ``PostgresJobStore/geoprocessingJobs(service:)``, over that store's connections.
public final class PostgresGPJobStore: GPJobRecordStore {
    /// The store whose connections these records use, kept open while they are.
    let jobs: PostgresJobStore
    let service: String
    var database: PostgresConnections { jobs.database }

    init(jobs: PostgresJobStore, service: String) {
        self.jobs = jobs
        self.service = service
    }

    public var isShared: Bool { true }

    public func insert(_ job: StoredGPJob, host: String, until: Int64) async throws {
        let service = service
        try await database.run { client, logger in
            try await client.query(
                """
                INSERT INTO outpost_gp_jobs (service, job_id, task, status, submitted, updated, inputs, environment, host, lease_until)
                VALUES (\(service), \(job.id), \(job.task), \(job.status), \(job.submitted), \(job.updated), \(job.inputs)::jsonb,
                        \(job.environment)::jsonb, \(host), \(until))
                """, logger: logger)
        }
    }

    public func update(_ id: String, status: String, finishes: Bool, results: String?, now: Int64) async throws -> Bool {
        let service = service
        return try await database.run { client, logger in
            for try await _ in try await client.query(
                """
                UPDATE outpost_gp_jobs SET status = \(status), finished = \(finishes), updated = \(now),
                  results = coalesce(\(results)::jsonb, results)
                WHERE service = \(service) AND job_id = \(id) AND NOT finished RETURNING 1
                """, logger: logger)
            {
                return true
            }
            return false
        }
    }

    public func append(_ id: String, type: String, description: String) async throws {
        let service = service
        try await database.run { client, logger in
            try await client.query(
                """
                INSERT INTO outpost_gp_messages (service, job_id, type, description)
                SELECT service, job_id, \(type), \(description) FROM outpost_gp_jobs WHERE service = \(service) AND job_id = \(id)
                """, logger: logger)
        }
    }

    public func job(_ id: String) async throws -> StoredGPJob? {
        let service = service
        return try await database.run { client, logger in
            for try await (task, status, submitted, updated, inputs, environment, results) in try await client.query(
                """
                SELECT task, status, submitted, updated, inputs::text, environment::text, results::text
                FROM outpost_gp_jobs WHERE service = \(service) AND job_id = \(id)
                """, logger: logger
            ).decode((String, String, Int64, Int64, String, String, String?).self) {
                return StoredGPJob(
                    id: id, task: task, status: status, submitted: submitted, updated: updated, inputs: inputs, environment: environment, results: results)
            }
            return nil
        }
    }

    public func summary(_ id: String) async throws -> GPJobSummary? {
        let service = service
        return try await database.run { client, logger in
            for try await (task, status, updated, cancel, inputs, results) in try await client.query(
                """
                SELECT task, status, updated, cancel_requested,
                  (SELECT coalesce(array_agg(k), '{}') FROM jsonb_object_keys(inputs) AS k),
                  (SELECT coalesce(array_agg(k), '{}') FROM jsonb_object_keys(coalesce(results, '{}')) AS k)
                FROM outpost_gp_jobs WHERE service = \(service) AND job_id = \(id)
                """, logger: logger
            ).decode((String, String, Int64, Bool, [String], [String]).self) {
                return GPJobSummary(task: task, status: status, inputs: inputs, results: results, updated: updated, cancelRequested: cancel)
            }
            return nil
        }
    }

    public func value(_ id: String, _ name: String, result: Bool) async throws -> String? {
        let service = service
        return try await database.run { client, logger in
            let query: PostgresQuery =
                result
                ? "SELECT (results -> \(name))::text FROM outpost_gp_jobs WHERE service = \(service) AND job_id = \(id) AND results ? \(name)"
                : "SELECT (inputs -> \(name))::text FROM outpost_gp_jobs WHERE service = \(service) AND job_id = \(id) AND inputs ? \(name)"
            for try await text in try await client.query(query, logger: logger).decode(String.self) { return text }
            return nil
        }
    }

    public func messages(_ id: String) async throws -> [(type: String, description: String)] {
        let service = service
        return try await database.run { client, logger in
            var out: [(type: String, description: String)] = []
            for try await (type, description) in try await client.query(
                "SELECT type, description FROM outpost_gp_messages WHERE service = \(service) AND job_id = \(id) ORDER BY seq", logger: logger
            ).decode((String, String).self) {
                out.append((type, description))
            }
            return out
        }
    }

    public func requestCancel(_ id: String) async throws {
        let service = service
        try await database.run { client, logger in
            try await client.query(
                "UPDATE outpost_gp_jobs SET cancel_requested = true WHERE service = \(service) AND job_id = \(id) AND NOT finished", logger: logger)
        }
    }

    public func cancelsRequested(host: String) async throws -> [String] {
        try await ids("SELECT job_id FROM outpost_gp_jobs WHERE service = \(service) AND host = \(host) AND cancel_requested AND NOT finished")
    }

    /// The job ids `query` answers.
    private func ids(_ query: PostgresQuery) async throws -> [String] {
        try await database.run { client, logger in
            var ids: [String] = []
            for try await id in try await client.query(query, logger: logger).decode(String.self) { ids.append(id) }
            return ids
        }
    }

    public func renew(host: String, until: Int64) async throws {
        let service = service
        try await database.run { client, logger in
            try await client.query(
                "UPDATE outpost_gp_jobs SET lease_until = \(until) WHERE service = \(service) AND host = \(host) AND NOT finished", logger: logger)
        }
    }

    public func release(_ ids: [String], host: String) async throws {
        let service = service
        try await database.run { client, logger in
            try await client.query(
                "UPDATE outpost_gp_jobs SET lease_until = 0 WHERE service = \(service) AND host = \(host) AND job_id = ANY(\(ids)) AND NOT finished",
                logger: logger)
        }
    }

    public func claim(host: String, until: Int64, now: Int64) async throws -> [(id: String, status: String)] {
        let service = service
        return try await database.run { client, logger in
            // Row locks decide between hosts claiming at once: the second finds the lease renewed.
            var claimed: [(id: String, status: String, submitted: Int64)] = []
            for try await (id, status, submitted) in try await client.query(
                """
                UPDATE outpost_gp_jobs SET host = \(host), lease_until = \(until)
                WHERE service = \(service) AND NOT finished AND lease_until < \(now) AND host IS DISTINCT FROM \(host)
                RETURNING job_id, status, submitted
                """, logger: logger
            ).decode((String, String, Int64).self) {
                claimed.append((id, status, submitted))
            }
            return claimed.sorted { $0.submitted < $1.submitted }.map { ($0.id, $0.status) }
        }
    }

    public func removeFinished(before time: Int64) async throws -> [String] {
        try await ids("DELETE FROM outpost_gp_jobs WHERE service = \(service) AND finished AND updated < \(time) RETURNING job_id")
    }
}

extension PostgresJobStore {
    /// The job records of the geoprocessing service `service`, over this store's connections.
    public func geoprocessingJobs(service: String) -> PostgresGPJobStore {
        PostgresGPJobStore(jobs: self, service: service)
    }
}
