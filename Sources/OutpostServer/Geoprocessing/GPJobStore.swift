import Foundation
import GRDB
import OutpostCore
import OutpostGeoprocessing
import OutpostSyncService

/// A geoprocessing job as it is kept on disk.
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

/// Geoprocessing job records in a SQLite file (`jobs.sqlite` in the service's jobs directory):
/// they outlive the server process, so a client polling across a restart finds its job.
final class GPJobStore: Sendable {
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
        try migrator.migrate(queue)
    }

    static func now() -> Int64 { ServiceClock.system.milliseconds() }

    func insert(_ record: GPJobRecord) throws {
        // Encoded before the write: the database is not held while megabytes of input are written out.
        let inputs = JSONValue.object(record.inputs).jsonString, environment = Self.encode(record.environment).jsonString
        try queue.write { db in
            try db.execute(
                sql: "INSERT INTO gp_job(id, task, status, submitted, updated, inputs, environment, results) VALUES (?, ?, ?, ?, ?, ?, ?, NULL)",
                arguments: [record.id, record.task, record.status.rawValue, record.submitted, record.updated, inputs, environment])
        }
    }

    /// Sets the status (and the results, when given); false when the job is unknown.
    @discardableResult
    func update(_ id: String, status: GPJobStatus, results: [String: JSONValue]? = nil) throws -> Bool {
        try update(id, status: status, encodedResults: results.map { JSONValue.object($0).jsonString })
    }

    /// As ``update(_:status:results:)``, with the results already written as JSON (a tool's
    /// output can be megabytes: it is encoded before the job's final state is decided).
    @discardableResult
    func update(_ id: String, status: GPJobStatus, encodedResults encoded: String?) throws -> Bool {
        try queue.write { db in
            try db.execute(
                sql: "UPDATE gp_job SET status = ?, updated = ?, results = coalesce(?, results) WHERE id = ?",
                arguments: [status.rawValue, Self.now(), encoded, id])
            return db.changesCount > 0
        }
    }

    func append(_ id: String, _ message: GPMessage) throws {
        try queue.write { db in
            try db.execute(
                sql: "INSERT INTO gp_message(job, type, description) SELECT id, ?, ? FROM gp_job WHERE id = ?",
                arguments: [message.kind.rawValue, message.description, id])
        }
    }

    func record(_ id: String) throws -> GPJobRecord? {
        // Parsed after the read, not while holding the database.
        try queue.read { db in try Row.fetchOne(db, sql: "SELECT * FROM gp_job WHERE id = ?", arguments: [id]) }.map(Self.record)
    }

    /// A job's task, status and the names of its inputs and results, without reading their
    /// values (a status request must stay cheap while a job with megabytes of input runs).
    func summary(_ id: String) throws -> (task: String, status: GPJobStatus, inputs: [String], results: [String], updated: Int64)? {
        try queue.read { db in
            guard
                let row = try Row.fetchOne(
                    db,
                    sql: """
                        SELECT task, status, updated, (SELECT json_group_array(key) FROM json_each(inputs)) AS inputs,
                               (SELECT json_group_array(key) FROM json_each(results)) AS results
                        FROM gp_job WHERE id = ?
                        """, arguments: [id])
            else { return nil }
            func names(_ text: String?) throws -> [String] {
                try text.map { try JSONValue.parse($0).arrayValue?.compactMap(\.stringValue) ?? [] } ?? []
            }
            return (row["task"], GPJobStatus(rawValue: row["status"]) ?? .failed, try names(row["inputs"]), try names(row["results"]), row["updated"])
        }
    }

    /// One input or result value of a job (REST JSON), nil when it has none.
    func value(_ id: String, _ name: String, result: Bool) throws -> JSONValue? {
        try queue.read { db in
            let column = result ? "results" : "inputs"
            let text = try String.fetchOne(
                // `->` answers the member as JSON text (json_extract would turn true into 1 and
                // a string into bare text).
                db, sql: "SELECT \(column) -> ('$.' || json_quote(?)) FROM gp_job WHERE id = ? AND json_type(\(column), '$.' || json_quote(?)) IS NOT NULL",
                arguments: [name, id, name])
            return try text.map { try JSONValue.parse($0) }
        }
    }

    func messages(_ id: String) throws -> [GPMessage] {
        try queue.read { db in
            try Row.fetchAll(db, sql: "SELECT type, description FROM gp_message WHERE job = ? ORDER BY seq", arguments: [id]).map {
                GPMessage(GPMessage.Kind(rawValue: $0["type"]) ?? .informative, $0["description"])
            }
        }
    }

    /// Jobs that had not finished, oldest first.
    func unfinished() throws -> [(id: String, status: GPJobStatus)] {
        try queue.read { db in
            let finished = GPJobStatus.allCases.filter(\.isFinished).map(\.rawValue)
            return try Row.fetchAll(
                db, sql: "SELECT id, status FROM gp_job WHERE status NOT IN (\(finished.map { _ in "?" }.joined(separator: ","))) ORDER BY submitted",
                arguments: StatementArguments(finished)
            ).map { ($0["id"], GPJobStatus(rawValue: $0["status"]) ?? .failed) }
        }
    }

    /// Removes finished jobs last updated before `time` (epoch ms) and returns their ids.
    func removeFinished(before time: Int64) throws -> [String] {
        try queue.write { db in
            let finished = GPJobStatus.allCases.filter(\.isFinished).map(\.rawValue)
            let marks = finished.map { _ in "?" }.joined(separator: ",")
            let ids = try String.fetchAll(
                db, sql: "SELECT id FROM gp_job WHERE status IN (\(marks)) AND updated < ?", arguments: StatementArguments(finished + [String(time)]))
            for id in ids {
                try db.execute(sql: "DELETE FROM gp_message WHERE job = ?", arguments: [id])
                try db.execute(sql: "DELETE FROM gp_job WHERE id = ?", arguments: [id])
            }
            return ids
        }
    }

    private static func record(_ row: Row) throws -> GPJobRecord {
        let inputs = try JSONValue.parse(row["inputs"] as String).objectValue ?? [:]
        let environment = try JSONValue.parse(row["environment"] as String)
        let results = try (row["results"] as String?).map { try JSONValue.parse($0).objectValue ?? [:] }
        return GPJobRecord(
            id: row["id"], task: row["task"], status: GPJobStatus(rawValue: row["status"]) ?? .failed, submitted: row["submitted"],
            updated: row["updated"], inputs: inputs,
            environment: GPEnvironment(
                processSpatialReference: environment["processSR"]?.integerValue.map { SpatialReference(wkid: Int($0)) },
                outputSpatialReference: environment["outSR"]?.integerValue.map { SpatialReference(wkid: Int($0)) }),
            results: results)
    }

    private static func encode(_ environment: GPEnvironment) -> JSONValue {
        var out: [String: JSONValue] = [:]
        if let sr = environment.processSpatialReference { out["processSR"] = .integer(Int64(sr.wkid)) }
        if let sr = environment.outputSpatialReference { out["outSR"] = .integer(Int64(sr.wkid)) }
        return .object(out)
    }
}
