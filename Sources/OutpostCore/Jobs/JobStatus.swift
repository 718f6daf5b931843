/// Where a ``Job`` is in its lifecycle (the ArcGIS `JobStatus` values).
public enum JobStatus: String, Sendable, Hashable, Codable, CaseIterable {
    /// Made, not yet started.
    case notStarted
    /// Running.
    case started
    /// Stopped at a checkpoint; `start()` or `resume()` goes on from there.
    case paused
    /// Finished with its output.
    case succeeded
    /// Finished with an error (``Job/error``), also when cancelled.
    case failed
    /// Cancelled, and undoing what it did before it ends `failed`.
    case canceling

    /// Succeeded or failed: nothing more will happen.
    public var isFinished: Bool { self == .succeeded || self == .failed }
}
