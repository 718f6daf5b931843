/// Where a job's JSON is kept while it lives (`JobManager` writes it to a directory).
public protocol JobStore: Sendable {
    /// Persists the latest state; called at every checkpoint and status change.
    func save(_ snapshot: JobSnapshot) throws
    /// Whether another process asked this job to cancel (checked at checkpoints).
    func isCancelRequested(id: String) -> Bool
}
