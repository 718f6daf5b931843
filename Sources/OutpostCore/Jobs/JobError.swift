/// Why a job failed, or why a request to a job was refused.
public struct JobError: Error, Hashable, Sendable, CustomStringConvertible, Codable {
    /// The kind of failure. New codes may be added; switch with a `default`.
    public struct Code: Hashable, Sendable, CustomStringConvertible, Codable {
        /// The code's name, as in a job's JSON (`cancelled`, `stepFailed`…).
        public let rawValue: String
        /// A code by name.
        public init(rawValue: String) { self.rawValue = rawValue }

        /// The job was cancelled (`cancel()`); it ended `failed`.
        public static let cancelled = Code(rawValue: "cancelled")
        /// start/pause/resume in a state that does not allow it.
        public static let invalidTransition = Code(rawValue: "invalidTransition")
        /// A step threw; `message` says what failed.
        public static let stepFailed = Code(rawValue: "stepFailed")
        /// A remote job could not be reached for longer than the tolerated window.
        public static let connectionLost = Code(rawValue: "connectionLost")
        /// The server reported that the remote job failed.
        public static let remoteFailed = Code(rawValue: "remoteFailed")
        /// Job JSON that cannot be read (wrong version, unknown job type, bad fields).
        public static let invalidJSON = Code(rawValue: "invalidJSON")
        /// The job is being run by another process.
        public static let busy = Code(rawValue: "busy")

        public var description: String { rawValue }

        public init(from decoder: any Decoder) throws {
            rawValue = try decoder.singleValueContainer().decode(String.self)
        }

        public func encode(to encoder: any Encoder) throws {
            var c = encoder.singleValueContainer()
            try c.encode(rawValue)
        }

        /// Matches an error that is a ``JobError`` with this code, in a `catch` pattern.
        public static func ~= (code: Code, error: any Error) -> Bool {
            (error as? JobError)?.code == code
        }
    }

    /// The kind of failure.
    public var code: Code
    /// What went wrong, in words.
    public var message: String
    /// For `stepFailed`: the failing error's own code when it has one (``JobFailureCause``), for
    /// example `sync.rejected`, so callers can react without parsing the message.
    public var cause: String?

    /// An error of `code` with its message and, for a failed step, its cause's own code.
    public init(_ code: Code, _ message: String, cause: String? = nil) {
        self.code = code
        self.message = message
        self.cause = cause
    }

    public var description: String { message }

    /// The error a cancelled job ends with.
    public static func cancelled() -> JobError { JobError(.cancelled, "the job was cancelled") }
}

/// An error that names its kind for ``JobError/cause`` when it fails a job step.
public protocol JobFailureCause: Error {
    /// The error's own code, kept as the `cause` of the job error of the step that failed with it.
    var jobFailureCause: String { get }
}
