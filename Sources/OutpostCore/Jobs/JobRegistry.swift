import Foundation

/// A job of any definition, for code that handles jobs by their JSON (`JobManager`, the CLI).
public protocol AnyJob: AnyObject, Sendable {
    var id: String { get }
    var jobType: String { get }
    var status: JobStatus { get }
    var snapshot: JobSnapshot { get }
    var statusUpdates: AsyncStream<JobStatus> { get }
    var progressUpdates: AsyncStream<JobProgress> { get }
    func start() throws
    func pause() throws
    func cancel()
    func waitUntilFinished() async -> JobStatus
    func toJSON() throws -> Data
    func persist(in store: any JobStore) throws
}

extension Job: AnyJob {
    public var jobType: String { Definition.jobType }
}

/// The job types a process can rebuild from JSON, with the services they need.
public struct JobRegistry: Sendable {
    private var factories: [String: @Sendable (JobSnapshot, (any JobStore)?) throws -> any AnyJob] = [:]
    public var environment: JobEnvironment

    public init(environment: JobEnvironment = JobEnvironment()) {
        self.environment = environment
    }

    public mutating func register<D: JobDefinition>(_ type: D.Type) {
        factories[D.jobType] = { [environment] snapshot, store in
            try Job<D>(snapshot: snapshot, environment: environment, store: store)
        }
    }

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
