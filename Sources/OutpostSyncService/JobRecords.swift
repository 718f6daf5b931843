import Foundation
import OutpostCore

/// One server job as a status request reports it.
public struct JobRecord: Sendable, Equatable {
    /// The job's id.
    public var id: String
    /// `Pending`, `InProgress`, `Completed`, `Failed` or `Cancelled`.
    public var status: String
    /// What the job answers with (`esriReplicaResponseTypeData`, `esriExportTiles`, …).
    public var responseType: String
    /// When it was submitted (epoch ms).
    public var submissionTime: Int64
    /// When its status last changed (epoch ms).
    public var lastUpdatedTime: Int64
    /// Its result, once completed.
    public var result: JSONValue?
    /// Why it failed, when it did.
    public var error: String?

    /// A record of these values.
    public init(
        id: String, status: String, responseType: String, submissionTime: Int64, lastUpdatedTime: Int64, result: JSONValue? = nil, error: String? = nil
    ) {
        self.id = id
        self.status = status
        self.responseType = responseType
        self.submissionTime = submissionTime
        self.lastUpdatedTime = lastUpdatedTime
        self.result = result
        self.error = error
    }

    /// Whether the job is still pending or in progress.
    public var isRunning: Bool { status == "Pending" || status == "InProgress" }
}

/// What another host needs to run a job again from its start when the host running it stopped:
/// the kind of job (the name its server registered a way to run it under) and its input.
public struct ResumableJob: Sendable, Equatable {
    /// The kind of job (`createReplica`, `exportTiles`).
    public var kind: String
    /// Everything the job is run from, as the kind reads it.
    public var input: JSONValue

    /// A job of this kind and input.
    public init(kind: String, input: JSONValue) {
        self.kind = kind
        self.input = input
    }
}

/// Where job records live: in the server process (the default), or in a database shared by
/// several server processes, so a status request or a cancel may reach any of them.
///
/// In a shared store each running job is held by its host under a lease the host renews
/// (``renew(host:until:)``). A job whose lease ran out (its host stopped) is failed by another
/// host with ``failAbandoned(now:error:)``, so its clients hear that it ended rather than
/// polling a job that runs nowhere; a job's end is written once, by its host, while it runs.
public protocol JobRecordStore: Sendable {
    /// Adds a new job's record, held by `host` until `until` (epoch ms).
    func insert(_ record: JobRecord, host: String, until: Int64) async throws
    /// Sets a running job's status (and its result or error), stamping the update time; a job
    /// already ended (failed by another host when its lease ran out) is left as it is.
    func update(_ id: String, status: String, result: JSONValue?, error: String?) async throws
    /// Extends the lease of every running job `host` holds to `until` (epoch ms).
    func renew(host: String, until: Int64) async throws
    /// Fails every running job whose lease ran out before `now` (epoch ms) with `error`, and
    /// returns their ids.
    func failAbandoned(now: Int64, error: String) async throws -> [String]
    /// The record of job `id`, nil for an unknown job.
    func record(_ id: String) async throws -> JobRecord?
    /// Asks the process running a job to cancel it. Returns false for an unknown job.
    func requestCancel(_ id: String) async throws -> Bool
    /// Whether a cancel of job `id` was asked for.
    func cancelRequested(_ id: String) async throws -> Bool
    /// Forgets finished jobs last updated before `time` (epoch ms).
    func sweep(finishedBefore time: Int64) async throws
    /// Whether other processes can see the jobs (and so may ask for a cancel through the store).
    var isShared: Bool { get }
    /// Returns once the store answers, and throws when it does not (a server's readiness).
    func check() async throws
    /// Adds a new job's record as ``insert(_:host:until:)`` does, with what another host needs
    /// to run it again should this one stop.
    func insert(_ record: JobRecord, host: String, until: Int64, resumable: ResumableJob?) async throws
    /// Takes over every running job that can be run again whose lease ran out before `now`
    /// and that has been started fewer than `maximumStarts` times: each is held by `host` until
    /// `until` from then on, and returned once, to one caller, with what it is run from.
    func takeAbandoned(now: Int64, host: String, until: Int64, maximumStarts: Int) async throws -> [(id: String, job: ResumableJob)]
    /// Ends `host`'s leases on its unfinished jobs `ids` (a draining host hands back the jobs it
    /// could not finish), so another host takes them at its next look. Nothing for a store of
    /// one process.
    func release(_ ids: [String], host: String) async throws
}

extension JobRecordStore {
    /// A store in this process always answers.
    public func check() async throws {}
    /// A store no other process sees keeps nothing to run again.
    public func insert(_ record: JobRecord, host: String, until: Int64, resumable: ResumableJob?) async throws {
        try await insert(record, host: host, until: until)
    }
    /// A store no other process sees has no other host's jobs.
    public func takeAbandoned(now: Int64, host: String, until: Int64, maximumStarts: Int) async throws -> [(id: String, job: ResumableJob)] { [] }

    /// Nothing to hand back: no other process shares the store.
    public func release(_ ids: [String], host: String) async throws {}
}

/// Job records in this process's memory: a restarted server forgets them, and their status URLs
/// answer "not found", which a client treats as a failed job and retries (every operation behind a job
/// is idempotent or registers nothing until it succeeds).
public final class MemoryJobStore: JobRecordStore {
    private let records = Locked<[String: (record: JobRecord, cancel: Bool)]>([:])
    private let clock: ServiceClock

    /// An empty store; `clock` gives the time updates are stamped with.
    public init(clock: ServiceClock = .system) {
        self.clock = clock
    }

    public var isShared: Bool { false }

    public func insert(_ record: JobRecord, host: String, until: Int64) async throws { records.withLock { $0[record.id] = (record, false) } }

    public func update(_ id: String, status: String, result: JSONValue?, error: String?) async throws {
        records.withLock { records in
            guard var r = records[id]?.record, r.isRunning else { return }
            r.status = status
            r.result = result ?? r.result
            r.error = error ?? r.error
            r.lastUpdatedTime = clock.milliseconds()
            records[id]?.record = r
        }
    }

    public func record(_ id: String) async throws -> JobRecord? { records.withLock { $0[id]?.record } }

    public func requestCancel(_ id: String) async throws -> Bool {
        records.withLock { records in
            guard records[id] != nil else { return false }
            records[id]?.cancel = true
            return true
        }
    }

    public func cancelRequested(_ id: String) async throws -> Bool { records.withLock { $0[id]?.cancel ?? false } }

    /// Nothing to renew: the jobs run in the process that keeps their records.
    public func renew(host: String, until: Int64) async throws {}

    /// None: the jobs end with the process that keeps their records.
    public func failAbandoned(now: Int64, error: String) async throws -> [String] { [] }

    public func sweep(finishedBefore time: Int64) async throws {
        records.withLock { records in records = records.filter { $0.value.record.isRunning || $0.value.record.lastUpdatedTime >= time } }
    }
}
