import Foundation

/// A job of any definition, for code that handles jobs by their JSON (`JobManager`, the CLI).
public protocol AnyJob: AnyObject, Sendable {
    /// The job's id.
    var id: String { get }
    /// The job type's name in JSON (`outpost.syncGeodatabase`…).
    var jobType: String { get }
    /// Where the job is in its lifecycle.
    var status: JobStatus { get }
    /// Everything about the job as its JSON holds it.
    var snapshot: JobSnapshot { get }
    /// Each status change; ends when the job finishes.
    var statusUpdates: AsyncStream<JobStatus> { get }
    /// Each progress report; ends when the job finishes.
    var progressUpdates: AsyncStream<JobProgress> { get }
    /// Starts the job, or resumes a paused one.
    func start() throws
    /// Stops the job at its next checkpoint.
    func pause() throws
    /// Cancels the job: it undoes what it did and ends failed.
    func cancel()
    /// Waits until the job succeeds or fails, and gives that status.
    func waitUntilFinished() async -> JobStatus
    /// The job's JSON.
    func toJSON() throws -> Data
    /// Keeps the job's JSON in `store` from now on.
    func persist(in store: any JobStore) throws
}

extension Job: AnyJob {
    /// The job type's name in JSON.
    public var jobType: String { Definition.jobType }
}

/// The job types a process can rebuild from JSON, with the services they need.
public struct JobRegistry: Sendable {
    private var factories: [String: @Sendable (JobSnapshot, (any JobStore)?) throws -> any AnyJob] = [:]
    /// What rebuilt jobs are given (tokens, fault points) that their JSON does not hold.
    public var environment: JobEnvironment

    /// A registry with no job types, whose jobs get `environment`.
    public init(environment: JobEnvironment = JobEnvironment()) {
        self.environment = environment
    }

    /// Adds a job type, so that its JSON can be rebuilt into a job.
    public mutating func register<D: JobDefinition>(_ type: D.Type) {
        factories[D.jobType] = { [environment] snapshot, store in
            try Job<D>(snapshot: snapshot, environment: environment, store: store)
        }
    }

    /// The names of the registered job types.
    public var jobTypes: [String] { factories.keys.sorted() }

    /// Rebuilds a job from its JSON state.
    /// - Throws: ``JobError/Code/invalidJSON`` for a job type this registry does not know.
    public func makeJob(from snapshot: JobSnapshot, store: (any JobStore)? = nil) throws -> any AnyJob {
        guard let factory = factories[snapshot.jobType] else {
            throw JobError(.invalidJSON, "unknown job type \"\(snapshot.jobType)\" (known: \(jobTypes.joined(separator: ", ")))")
        }
        return try factory(snapshot, store)
    }
}
