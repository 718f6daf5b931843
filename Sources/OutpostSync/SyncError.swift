import Foundation
import OutpostCore

/// Why a sync operation failed, in one line a field user can act on.
public struct SyncError: Error, Sendable, Hashable, CustomStringConvertible, JobFailureCause {
    /// What kind of failure it is.
    public enum Code: String, Sendable, Hashable {
        /// The server could not be reached (refused, dropped, timed out, 502/503/504).
        case unreachable
        /// The server answered with an error (`status` says which).
        case server
        /// The server rejected the upload as a whole (rollback on failure); nothing was applied
        /// and the local edits are still pending.
        case rejected
        /// The replica is not registered on the service (unregistered, or another server).
        case notRegistered
        /// The server's ledger disagrees with this replica's batch numbering (HTTP 409).
        case ledgerConflict
        /// The server's answer is not what the protocol says.
        case invalidResponse
        /// Another sync of the same geodatabase is running.
        case busy
        /// The geodatabase is not a replica of a service.
        case notAReplica
        /// What was asked is not possible with this replica or service.
        case unsupported
    }

    /// What kind of failure it is.
    public var code: Code
    /// What went wrong, in words a field user can act on.
    public var message: String
    /// The HTTP status, for `.server`, `.ledgerConflict` and `.notRegistered`.
    public var status: Int?

    /// An error of `code` with its message.
    public init(_ code: Code, _ message: String, status: Int? = nil) {
        self.code = code
        self.message = message
        self.status = status
    }

    public var description: String { message }

    /// `sync.<code>`.
    public var jobFailureCause: String { "sync.\(code.rawValue)" }
}

extension JobError {
    /// The ``SyncError`` code of a sync job that failed on one.
    public var syncErrorCode: SyncError.Code? {
        guard let cause, cause.hasPrefix("sync.") else { return nil }
        return SyncError.Code(rawValue: String(cause.dropFirst(5)))
    }
}
