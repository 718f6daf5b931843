import Foundation

/// A job as JSON: what `toJSON()` writes and `fromJSON` reads (Schemas/job.schema.json).
///
/// It carries the parameters, the step being run and that step's last checkpoint, so a job
/// rebuilt in a new process continues where the old one stopped.
public struct JobSnapshot: Hashable, Sendable, Codable {
    /// The JSON format version this build writes.
    public static let currentFormatVersion = 1
    /// Messages kept in the JSON (the newest ones).
    public static let maxMessages = 200

    /// The JSON format version the snapshot was written in.
    public var formatVersion: Int
    /// The job's id.
    public var id: String
    /// Which ``JobDefinition`` runs it (``JobDefinition/jobType``).
    public var jobType: String
    /// Where the job was in its lifecycle.
    public var status: JobStatus
    /// The job definition's parameters, from which it is rebuilt.
    public var parameters: JSONValue
    /// Step names, in order.
    public var steps: [String]
    /// Index of the step running or next to run; `steps.count` when every step is done.
    public var currentStep: Int
    /// The last checkpoint of the current step, nil before its first one.
    public var checkpoint: JSONValue?
    /// Values steps recorded for later steps and for the output (``JobContext/record(_:_:)``).
    public var results: [String: JSONValue]
    /// How far the job had got.
    public var progress: JobProgress
    /// What the job had logged.
    public var messages: [JobMessage]
    /// Why the job failed, when it did.
    public var error: JobError?
    /// When the job was made.
    public var createdAt: Date
    /// When the snapshot was taken.
    public var updatedAt: Date

    /// A snapshot with every field given.
    public init(
        id: String, jobType: String, status: JobStatus, parameters: JSONValue, steps: [String], currentStep: Int = 0,
        checkpoint: JSONValue? = nil, results: [String: JSONValue] = [:], progress: JobProgress = JobProgress(), messages: [JobMessage] = [],
        error: JobError? = nil, createdAt: Date = WallClock.system.now(), updatedAt: Date = WallClock.system.now()
    ) {
        self.formatVersion = Self.currentFormatVersion
        self.id = id
        self.jobType = jobType
        self.status = status
        self.parameters = parameters
        self.steps = steps
        self.currentStep = currentStep
        self.checkpoint = checkpoint
        self.results = results
        self.progress = progress
        self.messages = messages
        self.error = error
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }

    private enum CodingKeys: String, CodingKey {
        case formatVersion, id, jobType, status, parameters, steps, currentStep, checkpoint, results, progress, messages
        case error, createdAt, updatedAt
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        formatVersion = try c.decode(Int.self, forKey: .formatVersion)
        id = try c.decode(String.self, forKey: .id)
        jobType = try c.decode(String.self, forKey: .jobType)
        status = try c.decode(JobStatus.self, forKey: .status)
        parameters = try c.decode(JSONValue.self, forKey: .parameters)
        steps = try c.decode([String].self, forKey: .steps)
        currentStep = try c.decode(Int.self, forKey: .currentStep)
        checkpoint = try c.decodeIfPresent(JSONValue.self, forKey: .checkpoint)
        results = try c.decodeIfPresent([String: JSONValue].self, forKey: .results) ?? [:]
        progress = try c.decode(JobProgress.self, forKey: .progress)
        messages = try c.decode([JobMessage].self, forKey: .messages)
        error = try c.decodeIfPresent(JobError.self, forKey: .error)
        createdAt = try c.decode(Date.self, forKey: .createdAt)
        updatedAt = try c.decode(Date.self, forKey: .updatedAt)
    }

    /// Stable JSON: sorted keys, ISO 8601 dates with milliseconds.
    public func encoded() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var c = encoder.singleValueContainer()
            try c.encode(ISO8601.format(date))
        }
        return try encoder.encode(self)
    }

    /// Reads job JSON.
    /// - Throws: ``JobError/Code/invalidJSON`` with the reason.
    public static func decode(_ data: Data) throws -> JobSnapshot {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let text = try decoder.singleValueContainer().decode(String.self)
            guard let date = ISO8601.parse(text) else {
                throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "\"\(text)\" is not an ISO 8601 date"))
            }
            return date
        }
        let snapshot: JobSnapshot
        do {
            snapshot = try decoder.decode(JobSnapshot.self, from: data)
        } catch {
            throw JobError(.invalidJSON, "invalid job JSON: \(error)")
        }
        guard snapshot.formatVersion <= currentFormatVersion else {
            throw JobError(.invalidJSON, "job JSON version \(snapshot.formatVersion) is newer than this Outpost reads")
        }
        guard snapshot.currentStep >= 0, snapshot.currentStep <= snapshot.steps.count else {
            throw JobError(.invalidJSON, "currentStep \(snapshot.currentStep) is outside the \(snapshot.steps.count) steps")
        }
        return snapshot
    }
}

/// ISO 8601 timestamps in UTC with milliseconds (`2026-11-22T04:31:08.123Z`).
enum ISO8601 {
    static func format(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: date)
    }

    static func parse(_ text: String) -> Date? {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let d = formatter.date(from: text) { return d }
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.date(from: text)
    }
}
