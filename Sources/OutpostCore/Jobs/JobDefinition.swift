import Foundation

/// The work of one kind of job: its parameters, its steps and how to run each.
///
/// A step must be restartable from its last checkpoint: whatever it did after that checkpoint
/// may be done again (after a pause or a crash), so it records enough in the checkpoint to undo
/// or skip repeated work.
///
/// ```swift
/// struct ExportJob: JobDefinition {
///     static let jobType = "example.export"
///     var stepNames: [String] { ["fetch", "write"] }
///     func run(step: Int, context: JobContext) async throws {
///         var done = context.checkpointData?["done"]?.integerValue ?? 0
///         while done < total {
///             … work …
///             done += 1
///             try await context.checkpoint(["done": .integer(done)])
///         }
///     }
///     …
/// }
/// ```
public protocol JobDefinition: Sendable {
    /// What the job gives when it succeeds (a replica, a tile cache, per-layer results…).
    associatedtype Output: Sendable

    /// A stable name stored in the job JSON, used to rebuild the job (for example `outpost.copyFile`).
    static var jobType: String { get }

    /// The parameters as JSON (they go into the job JSON).
    var parameters: JSONValue { get }

    /// Rebuilds the definition from ``parameters`` and the services in `environment` (an HTTP
    /// client, a geodatabase) that cannot go into JSON.
    init(parameters: JSONValue, environment: JobEnvironment) throws

    /// Step names, in order.
    var stepNames: [String] { get }

    /// Runs step `step` from `context.checkpointData` (nil when the step starts fresh).
    func run(step: Int, context: JobContext) async throws

    /// The job's result, after the last step.
    func output(context: JobContext) async throws -> Output

    /// Undoes what the job did, when it fails or is cancelled. It must work from the parameters
    /// and the persisted step/checkpoint alone: it also runs for a job cancelled after a restart.
    func rollback(context: JobContext) async
}

extension JobDefinition {
    public func rollback(context: JobContext) async {}
}

/// Services a job needs besides its JSON parameters (an HTTP transport, an open geodatabase),
/// handed to ``JobDefinition/init(parameters:environment:)`` when a job is rebuilt from JSON.
///
/// ```swift
/// var environment = JobEnvironment()
/// environment[(any RemoteJobTransport).self] = transport
/// ```
public struct JobEnvironment: Sendable {
    private var values: [ObjectIdentifier: any Sendable] = [:]

    /// An empty environment.
    public init() {}

    /// The value of that type, when one was put in.
    public subscript<Service: Sendable>(_ type: Service.Type) -> Service? {
        get { values[ObjectIdentifier(type)] as? Service }
        set { values[ObjectIdentifier(type)] = newValue }
    }
}
