import Foundation
import GRDB
import OutpostCore
import OutpostGeoprocessing
import OutpostSyncService

/// A geoprocessing job as the queue reads it from its store.
struct GPJobRecord: Sendable, Equatable {
    var id: String
    var task: String
    var status: GPJobStatus
    /// Epoch milliseconds.
    var submitted: Int64
    var updated: Int64
    /// The inputs as given (REST JSON by parameter name), layer URLs already resolved to
    /// features: a job re-run after a restart sees what the first run saw.
    var inputs: [String: JSONValue]
    var environment: GPEnvironment
    /// The outputs (REST JSON by parameter name) once it succeeded.
    var results: [String: JSONValue]?
}

extension GPJobRecord {
    /// A stored job read: its JSON parsed.
    init(_ stored: StoredGPJob) throws {
        let environment = try JSONValue.parse(stored.environment)
        self.init(
            id: stored.id, task: stored.task, status: GPJobStatus(rawValue: stored.status) ?? .failed, submitted: stored.submitted, updated: stored.updated,
            inputs: try JSONValue.parse(stored.inputs).objectValue ?? [:],
            environment: GPEnvironment(
                processSpatialReference: environment["processSR"]?.integerValue.map { SpatialReference(wkid: Int($0)) },
                outputSpatialReference: environment["outSR"]?.integerValue.map { SpatialReference(wkid: Int($0)) }),
            results: try stored.results.map { try JSONValue.parse($0).objectValue ?? [:] })
    }

    /// The job as a store keeps it.
    var stored: StoredGPJob {
        var environment: [String: JSONValue] = [:]
        if let sr = self.environment.processSpatialReference { environment["processSR"] = .integer(Int64(sr.wkid)) }
        if let sr = self.environment.outputSpatialReference { environment["outSR"] = .integer(Int64(sr.wkid)) }
        return StoredGPJob(
            id: id, task: task, status: status.rawValue, submitted: submitted, updated: updated, inputs: JSONValue.object(inputs).jsonString,
            environment: JSONValue.object(environment).jsonString, results: results.map { JSONValue.object($0).jsonString })
    }
}

/// Geoprocessing job records in a SQLite file (`jobs.sqlite` in the service's jobs directory):
/// they outlive the server process, so a client polling across a restart finds its job. One
/// server process uses it; a site shares its records in PostgreSQL instead.
final class SQLiteGPJobStore: GPJobRecordStore {
    private let queue: DatabaseQueue

    init(url: URL) throws {
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        var configuration = Configuration()
        configuration.busyMode = .timeout(5)
        queue = try DatabaseQueue(path: url.path, configuration: configuration)
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(
                sql: """
                    CREATE TABLE gp_job(
                        id TEXT PRIMARY KEY, task TEXT NOT NULL, status TEXT NOT NULL,
                        submitted INTEGER NOT NULL, updated INTEGER NOT NULL,
                        inputs TEXT NOT NULL, environment TEXT NOT NULL, results TEXT);
                    CREATE INDEX gp_job_status ON gp_job(status, updated);
                    CREATE TABLE gp_message(
                        seq INTEGER PRIMARY KEY, job TEXT NOT NULL REFERENCES gp_job(id) ON DELETE CASCADE,
                        type TEXT NOT NULL, description TEXT NOT NULL);
                    CREATE INDEX gp_message_job ON gp_message(job, seq);
                    """)
        }
        // Who holds a job and until when, whether it has finished, whether a cancel was asked.
        migrator.registerMigration("v2") { db in
            try db.execute(
                sql: """
                    ALTER TABLE gp_job ADD COLUMN host TEXT;
                    ALTER TABLE gp_job ADD COLUMN lease_until INTEGER NOT NULL DEFAULT 0;
                    ALTER TABLE gp_job ADD COLUMN finished INTEGER NOT NULL DEFAULT 0;
                    ALTER TABLE gp_job ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0;
                    UPDATE gp_job SET finished = status IN ('esriJobSucceeded', 'esriJobFailed', 'esriJobTimedOut', 'esriJobCancelled');
                    CREATE INDEX gp_job_unfinished ON gp_job(finished, lease_until);
                    """)
        }
        try migrator.migrate(queue)
    }

    var isShared: Bool { false }

    func insert(_ job: StoredGPJob, host: String, until: Int64) async throws {
        try await queue.write { db in
            try db.execute(
                sql: """
                    INSERT INTO gp_job(id, task, status, submitted, updated, inputs, environment, results, host, lease_until)
                    VALUES (?, ?, ?, ?, ?, ?, ?, NULL, ?, ?)
                    """,
                arguments: [job.id, job.task, job.status, job.submitted, job.updated, job.inputs, job.environment, host, until])
        }
    }

    func update(_ id: String, status: String, finishes: Bool, results: String?, now: Int64) async throws -> Bool {
        try await queue.write { db in
            try db.execute(
                sql: "UPDATE gp_job SET status = ?, finished = ?, updated = ?, results = coalesce(?, results) WHERE id = ? AND NOT finished",
                arguments: [status, finishes, now, results, id])
            return db.changesCount > 0
        }
    }

    func append(_ id: String, type: String, description: String) async throws {
        try await queue.write { db in
            try db.execute(sql: "INSERT INTO gp_message(job, type, description) SELECT id, ?, ? FROM gp_job WHERE id = ?", arguments: [type, description, id])
        }
    }

    func job(_ id: String) async throws -> StoredGPJob? {
        try await queue.read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM gp_job WHERE id = ?", arguments: [id]).map { row in
                StoredGPJob(
                    id: row["id"], task: row["task"], status: row["status"], submitted: row["submitted"], updated: row["updated"], inputs: row["inputs"],
                    environment: row["environment"], results: row["results"])
            }
        }
    }

    func summary(_ id: String) async throws -> GPJobSummary? {
        try await queue.read { db in
            guard
                let row = try Row.fetchOne(
                    db,
                    sql: """
                        SELECT task, status, updated, cancel_requested, (SELECT json_group_array(key) FROM json_each(inputs)) AS inputs,
                               (SELECT json_group_array(key) FROM json_each(results)) AS results
                        FROM gp_job WHERE id = ?
                        """, arguments: [id])
            else { return nil }
            func names(_ text: String?) throws -> [String] {
                try text.map { try JSONValue.parse($0).arrayValue?.compactMap(\.stringValue) ?? [] } ?? []
            }
            return GPJobSummary(
                task: row["task"], status: row["status"], inputs: try names(row["inputs"]), results: try names(row["results"]), updated: row["updated"],
                cancelRequested: row["cancel_requested"])
        }
    }

    func value(_ id: String, _ name: String, result: Bool) async throws -> String? {
        try await queue.read { db in
            let column = result ? "results" : "inputs"
            return try String.fetchOne(
                // `->` answers the member as JSON text (json_extract would turn true into 1 and
                // a string into bare text).
                db, sql: "SELECT \(column) -> ('$.' || json_quote(?)) FROM gp_job WHERE id = ? AND json_type(\(column), '$.' || json_quote(?)) IS NOT NULL",
                arguments: [name, id, name])
        }
    }

    func messages(_ id: String) async throws -> [(type: String, description: String)] {
        try await queue.read { db in
            try Row.fetchAll(db, sql: "SELECT type, description FROM gp_message WHERE job = ? ORDER BY seq", arguments: [id]).map { ($0["type"], $0["description"]) }
        }
    }

    func requestCancel(_ id: String) async throws {
        try await queue.write { db in try db.execute(sql: "UPDATE gp_job SET cancel_requested = 1 WHERE id = ? AND NOT finished", arguments: [id]) }
    }

    func cancelsRequested(host: String) async throws -> [String] {
        try await queue.read { db in
            try String.fetchAll(db, sql: "SELECT id FROM gp_job WHERE host = ? AND cancel_requested AND NOT finished", arguments: [host])
        }
    }

    func renew(host: String, until: Int64) async throws {
        try await queue.write { db in try db.execute(sql: "UPDATE gp_job SET lease_until = ? WHERE host = ? AND NOT finished", arguments: [until, host]) }
    }

    func release(_ ids: [String], host: String) async throws {
        try await queue.write { db in
            for id in ids { try db.execute(sql: "UPDATE gp_job SET lease_until = 0 WHERE id = ? AND host = ? AND NOT finished", arguments: [id, host]) }
        }
    }

    func claim(host: String, until: Int64, now: Int64) async throws -> [(id: String, status: String)] {
        // One server uses the file: whatever had not finished was left by a server before it.
        try await queue.write { db in
            let rows = try Row.fetchAll(db, sql: "SELECT id, status FROM gp_job WHERE NOT finished AND (host IS NULL OR host <> ?) ORDER BY submitted", arguments: [host])
            try db.execute(sql: "UPDATE gp_job SET host = ?, lease_until = ? WHERE NOT finished AND (host IS NULL OR host <> ?)", arguments: [host, until, host])
            return rows.map { ($0["id"], $0["status"]) }
        }
    }

    func removeFinished(before time: Int64) async throws -> [String] {
        try await queue.write { db in
            let ids = try String.fetchAll(db, sql: "SELECT id FROM gp_job WHERE finished AND updated < ?", arguments: [time])
            for id in ids {
                try db.execute(sql: "DELETE FROM gp_message WHERE job = ?", arguments: [id])
                try db.execute(sql: "DELETE FROM gp_job WHERE id = ?", arguments: [id])
            }
            return ids
        }
    }
}
