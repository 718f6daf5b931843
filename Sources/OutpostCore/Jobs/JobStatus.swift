/// Where a ``Job`` is in its lifecycle (the ArcGIS `JobStatus` values).
public enum JobStatus: String, Sendable, Hashable, Codable, CaseIterable {
    case notStarted
    case started
    case paused
    case succeeded
    case failed
    case canceling

    /// Succeeded or failed: nothing more will happen.
    public var isFinished: Bool { self == .succeeded || self == .failed }
}
