import OutpostCore

/// Why an offline map could not be made, opened or synced: a code (``OfflineMapFailure``) and a
/// message.
public typealias OfflineMapError = CodedError<OfflineMapFailure>

/// What kind of failure an ``OfflineMapError`` is.
public enum OfflineMapFailure: String, FailureCode {
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
