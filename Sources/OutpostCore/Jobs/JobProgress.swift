import Foundation

/// How far a job has come: an overall fraction and named counters per phase
/// (rows, bytes, tiles), as a progress bar or a status screen shows them.
public struct JobProgress: Hashable, Sendable, Codable {
    /// One counter, for example `{"name": "bytes", "done": 1048576, "total": 4194304}`.
    public struct Phase: Hashable, Sendable, Codable {
        public var name: String
        public var done: Int64
        /// nil while the total is not known yet.
        public var total: Int64?

        public init(name: String, done: Int64, total: Int64?) {
            self.name = name
            self.done = done
            self.total = total
        }

        public var fraction: Double? {
            guard let total, total > 0 else { return nil }
            return min(1, Double(done) / Double(total))
        }
    }

    /// 0…1 over the whole job.
    public var fraction: Double
    public var phases: [Phase]

    public init(fraction: Double = 0, phases: [Phase] = []) {
        self.fraction = fraction
        self.phases = phases
    }
}

/// A timestamped line of the job's log.
public struct JobMessage: Hashable, Sendable, Codable {
    public enum Severity: String, Hashable, Sendable, Codable {
        case info, warning, error
    }

    public var timestamp: Date
    public var severity: Severity
    public var text: String

    public init(timestamp: Date = Date(), severity: Severity = .info, text: String) {
        self.timestamp = timestamp
        self.severity = severity
        self.text = text
    }
}
