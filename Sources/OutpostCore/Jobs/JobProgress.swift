import Foundation

/// How far a job has come: an overall fraction and named counters per phase
/// (rows, bytes, tiles), as a progress bar or a status screen shows them.
public struct JobProgress: Hashable, Sendable, Codable {
    /// One counter, for example `{"name": "bytes", "done": 1048576, "total": 4194304}`.
    public struct Phase: Hashable, Sendable, Codable {
        /// What the phase counts (`tiles`, `batches uploaded`…).
        public var name: String
        /// How many are done.
        public var done: Int64
        /// nil while the total is not known yet.
        public var total: Int64?

        /// A phase with its count, and its total when known.
        public init(name: String, done: Int64, total: Int64?) {
            self.name = name
            self.done = done
            self.total = total
        }

        /// The phase's share done, 0…1, when its total is known and not zero.
        public var fraction: Double? {
            guard let total, total > 0 else { return nil }
            return min(1, Double(done) / Double(total))
        }
    }

    /// 0…1 over the whole job.
    public var fraction: Double
    /// The job's phases with their counts, in the order they began.
    public var phases: [Phase]

    /// Progress of `fraction` (0 to 1) with its phases.
    public init(fraction: Double = 0, phases: [Phase] = []) {
        self.fraction = fraction
        self.phases = phases
    }
}

/// A timestamped line of the job's log.
public struct JobMessage: Hashable, Sendable, Codable {
    /// How much a message matters.
    public enum Severity: String, Hashable, Sendable, Codable {
        /// An informative line, a warning, or an error.
        case info, warning, error
    }

    /// When the job logged it.
    public var timestamp: Date
    /// How much it matters.
    public var severity: Severity
    /// The message.
    public var text: String

    /// A message logged at `timestamp`.
    public init(timestamp: Date = WallClock.system.now(), severity: Severity = .info, text: String) {
        self.timestamp = timestamp
        self.severity = severity
        self.text = text
    }
}
