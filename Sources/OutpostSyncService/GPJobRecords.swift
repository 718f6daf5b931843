import Foundation
import OutpostCore

/// A geoprocessing job as a ``GPJobRecordStore`` keeps it. Values are REST JSON text, so a store
/// needs no geoprocessing types.
public struct StoredGPJob: Sendable, Equatable {
    /// The job's id (`j` and 32 hex digits).
    public var id: String
    /// The task it runs.
    public var task: String
    /// Its `esriJob…` status.
    public var status: String
    /// When it was submitted (epoch ms).
    public var submitted: Int64
    /// When it last changed (epoch ms).
    public var updated: Int64
    /// The inputs as a JSON object by parameter name, layer URLs already resolved to features.
    public var inputs: String
    /// The environment (process and output spatial references) as a JSON object.
    public var environment: String
    /// The outputs as a JSON object by parameter name, once it succeeded.
    public var results: String?

    /// A job of these values.
    public init(id: String, task: String, status: String, submitted: Int64, updated: Int64, inputs: String, environment: String, results: String? = nil) {
        (self.id, self.task, self.status, self.submitted, self.updated) = (id, task, status, submitted, updated)
        (self.inputs, self.environment, self.results) = (inputs, environment, results)
    }
}

/// What a job status request reads: no input or result values, which may be megabytes.
public struct GPJobSummary: Sendable, Equatable {
    /// The task it runs.
    public var task: String
    /// Its `esriJob…` status.
    public var status: String
    /// The names of its inputs.
    public var inputs: [String]
    /// The names of its results (none until it has succeeded).
    public var results: [String]
    /// When it last changed (epoch ms).
    public var updated: Int64
    /// Whether a cancel was asked for (through any server host).
    public var cancelRequested: Bool

    /// A summary of these values.
    public init(task: String, status: String, inputs: [String], results: [String], updated: Int64, cancelRequested: Bool = false) {
        (self.task, self.status, self.inputs, self.results, self.updated, self.cancelRequested) = (task, status, inputs, results, updated, cancelRequested)
    }
}

/// Where a geoprocessing service's job records and messages live: a SQLite file beside the
/// service (one server process), or PostgreSQL (a site: any host answers a job's status,
/// messages and results, and passes a cancel to the host running it).
///
/// Each unfinished job is held by one host under a lease its host renews
/// (``renew(host:until:)``); a job whose lease ran out (its host stopped) is taken by another
/// host with ``claim(host:until:now:)``. A finished job's status is never changed again, so a
/// late write (a cancel crossing a finish) does not reopen it.
public protocol GPJobRecordStore: Sendable {
    /// Whether other server processes see these records.
    var isShared: Bool { get }
    /// Adds a submitted job, held by `host` until `until` (epoch ms).
    func insert(_ job: StoredGPJob, host: String, until: Int64) async throws
    /// Sets an unfinished job's status (and its results, when given) stamped `now`; `finishes`
    /// says the status ends the job. False when the job is unknown or had finished.
    func update(_ id: String, status: String, finishes: Bool, results: String?, now: Int64) async throws -> Bool
    /// Adds a message to a job's list.
    func append(_ id: String, type: String, description: String) async throws
    /// The whole record of job `id`.
    func job(_ id: String) async throws -> StoredGPJob?
    /// The summary of job `id`.
    func summary(_ id: String) async throws -> GPJobSummary?
    /// One input (or, with `result`, one output) of job `id` as JSON text.
    func value(_ id: String, _ name: String, result: Bool) async throws -> String?
    /// A job's messages, oldest first, as (type, description).
    func messages(_ id: String) async throws -> [(type: String, description: String)]
    /// Marks that a cancel of unfinished job `id` was asked for (the host holding it stops it).
    func requestCancel(_ id: String) async throws
    /// Of the jobs `host` holds, those whose cancel was asked for.
    func cancelsRequested(host: String) async throws -> [String]
    /// Extends to `until` the leases of the unfinished jobs `host` holds.
    func renew(host: String, until: Int64) async throws
    /// Ends `host`'s leases on the unfinished jobs `ids` (a draining host hands back the jobs it
    /// has not started), so another host takes them at its next look.
    func release(_ ids: [String], host: String) async throws
    /// Takes the unfinished jobs whose lease ended before `now` (every unfinished job when the
    /// store is not shared: its one server is starting), held by `host` until `until`; returns
    /// them with their status, oldest first.
    func claim(host: String, until: Int64, now: Int64) async throws -> [(id: String, status: String)]
    /// Removes finished jobs last changed before `time` (epoch ms), with their messages; returns
    /// their ids.
    func removeFinished(before time: Int64) async throws -> [String]
}
