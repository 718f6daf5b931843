import OutpostCore

/// Why an offline map could not be made, opened or synced.
public struct OfflineMapError: Error, CustomStringConvertible, Sendable, JobFailureCause {
    /// What kind of failure it is.
    public enum Code: String, Sendable {
        /// The map definition cannot be used (unreadable, a relative URL without a base, no layers).
        case invalidMap
        /// A server could not be reached or answered with an error.
        case service
        /// The download directory exists and is not empty.
        case directoryExists
        /// The folder is not an offline map (no map.json, or one that does not read).
        case notAnOfflineMap
        /// Nothing of the map could be taken offline.
        case nothingTakenOffline
        /// A parameter asks for something the map does not have.
        case invalidParameters
    }

    /// What kind of failure it is.
    public var code: Code
    /// What went wrong, in words.
    public var message: String

    /// An error of `code` with its message.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
    public var jobFailureCause: String { code.rawValue }
}
