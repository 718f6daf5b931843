import Foundation

/// Why a feature service's store or its sync service refused or failed a request, said in the
/// service's own terms. Stores and the sync service throw it; only the HTTP layer turns it into a
/// status and the ArcGIS error JSON (`ServiceError.from` in OutpostServer), and the command line
/// prints its ``description``.
public struct SyncServiceError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure it is.
    public enum Code: String, Sendable, Hashable {
        /// An input of the request is wrong (``SyncServiceError/parameter`` names it).
        case invalidParameter
        /// The request cannot be met as asked (a replica that does not sync, a generation outside
        /// its history, a layer that takes no attachments).
        case invalidRequest
        /// What the request names is not there (a layer, a feature, a replica, an attachment).
        case notFound
        /// The request meets the service's state: uploaded content that already arrived to
        /// another length, or a service of that name that exists.
        case conflict
        /// Uploaded content does not match the hash it was announced with.
        case contentMismatch
        /// The service cannot answer now (its database is unreachable or restarting); the same
        /// request may succeed later.
        case unavailable
        /// The service failed (a file it cannot read or write); nothing about the request is wrong.
        case failed
    }

    /// What kind of failure it is.
    public var code: Code
    /// What went wrong, for a person.
    public var message: String
    /// The input at fault, for an `invalidParameter` error.
    public var parameter: String?
    /// More lines about it (may be empty).
    public var details: [String]
    /// The error that caused it, when there is one.
    public var underlying: (any Error)?

    /// An error of this code and message.
    public init(_ code: Code, _ message: String, parameter: String? = nil, details: [String] = [], underlying: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.parameter = parameter
        self.details = details
        self.underlying = underlying
    }

    /// `what` is not there.
    public static func notFound(_ what: String) -> SyncServiceError { SyncServiceError(.notFound, "\(what) not found") }

    /// Input `name` is wrong, for `reason`.
    public static func invalidParameter(_ name: String, _ reason: String) -> SyncServiceError {
        SyncServiceError(.invalidParameter, reason, parameter: name)
    }

    /// The message, naming the parameter at fault when there is one.
    public var description: String { parameter.map { "invalid \($0): \(message)" } ?? message }
}
