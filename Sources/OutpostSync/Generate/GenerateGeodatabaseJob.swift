import Foundation
import OutpostCore
import OutpostStorage

/// What a rebuilt sync job cannot keep in its JSON: the service token (job files are not a place
/// for credentials) and, for tests, the fault points. Put it in the `JobEnvironment`.
public struct SyncJobEnvironment: Sendable {
    /// The token sent to a secured service.
    public var token: String?
    /// Fault points, for tests that break a sync at a chosen step.
    public var faults: FaultInjector

    /// An environment with the service's token (nil for an open service).
    public init(token: String? = nil, faults: FaultInjector = FaultInjector()) {
        self.token = token
        self.faults = faults
    }
}

/// Generates a replica geodatabase: asks the service for a replica (server-side job), follows that
/// job, downloads the GeoPackage beside the destination and moves it into place only when it is
/// complete and opens as a replica.
///
/// Steps: `submit` (createReplica, async), `wait` (polls the server job, riding out network loss
/// for 10 minutes), `download`. A job rebuilt from JSON after a kill continues with the step it
/// was in; a cancelled or failed job removes the partial file and unregisters a replica the
/// server already made.
public struct GenerateGeodatabaseJob: JobDefinition {
    public static let jobType = "outpost.generateGeodatabase"

    /// The FeatureServer the replica is made from.
    public var serviceURL: URL
    /// What to take offline: the area, the layers, the sync model (`parameters` is the job's JSON).
    public var parameters_: GenerateGeodatabaseParameters
    /// Where the replica's GeoPackage is written.
    public var downloadFileURL: URL
    let environment: SyncJobEnvironment

    /// A job that generates a replica of `serviceURL` at `downloadFileURL`.
    public init(serviceURL: URL, parameters: GenerateGeodatabaseParameters, downloadFileURL: URL, environment: SyncJobEnvironment = SyncJobEnvironment()) {
        self.serviceURL = serviceURL
        self.parameters_ = parameters
        self.downloadFileURL = downloadFileURL
        self.environment = environment
    }

    public var parameters: JSONValue {
        [
            "serviceUrl": .string(serviceURL.absoluteString), "downloadFile": .string(downloadFileURL.path),
            "generate": (try? parameters_.json) ?? .null,
        ]
    }

    public init(parameters: JSONValue, environment: JobEnvironment) throws {
        guard let url = parameters["serviceUrl"]?.stringValue.flatMap(URL.init(string:)), let file = parameters["downloadFile"]?.stringValue,
            let generate = parameters["generate"], !generate.isNull
        else { throw JobError(.invalidJSON, "a generate job needs serviceUrl, downloadFile and generate") }
        self.init(
            serviceURL: url, parameters: try GenerateGeodatabaseParameters(json: generate), downloadFileURL: URL(fileURLWithPath: file),
            environment: environment[SyncJobEnvironment.self] ?? SyncJobEnvironment())
    }

    public var stepNames: [String] { ["submit", "wait", "download"] }

    var partialURL: URL { downloadFileURL.deletingLastPathComponent().appendingPathComponent(downloadFileURL.lastPathComponent + ".partial") }

    func connection() throws -> ServiceConnection { try ServiceConnection(featureServerURL: serviceURL, token: environment.token) }

    public func run(step: Int, context: JobContext) async throws {
        let connection = try connection()
        switch step {
        case 0:
            guard !parameters_.layerOptions.isEmpty else { throw SyncError(.unsupported, "no layers to take offline") }
            context.log("asking \(connection.serviceName) for a replica of layers \(parameters_.layerOptions.map { String($0.layerID) }.joined(separator: ","))")
            let answer = try await connection.json(.POST, connection.featureServerURL.appendingPathComponent("createReplica"), form: try parameters_.formFields())
            guard let status = answer["statusUrl"]?.stringValue else { throw SyncError(.invalidResponse, "createReplica gave no statusUrl") }
            context.record("statusUrl", .string(status))
        case 1:
            guard let status = context.recorded("statusUrl")?.stringValue.flatMap(URL.init(string:)) else {
                throw JobError(.invalidJSON, "the job has no statusUrl")
            }
            let remote = RemoteJob(
                statusURL: status, cancelURL: status.appendingPathComponent("cancel"),
                transport: HTTPRemoteJobTransport(client: connection.rest.client, token: environment.token))
            try await remote.run(step: 0, context: context)
            let final = try await remote.output(context: context)
            context.record("replicaId", final.json["replicaID"] ?? .null)
            guard let result = final.resultURL else { throw SyncError(.invalidResponse, "the server's job finished without a resultUrl") }
            context.record("resultUrl", .string(result.absoluteString))
        default:
            guard let result = context.recorded("resultUrl")?.stringValue.flatMap(URL.init(string:)) else {
                throw JobError(.invalidJSON, "the job has no resultUrl")
            }
            try await connection.download(result, to: partialURL) { done, total in context.reportProgress("bytes", done: done, total: total) }
            // It must open as a replica before it takes the destination's place.
            do {
                let gdb = try Geodatabase.open(at: partialURL)
                defer { try? gdb.close() }
                let state = try await gdb.read({ try $0.replicaState() })
                guard state != nil || parameters_.syncModel == .none else {
                    throw SyncError(.invalidResponse, "the downloaded file is not a replica")
                }
                // The replica syncs through the address this client used (a proxy's, say), not
                // whatever address the server believed it had.
                if var state, state.serviceURL != serviceURL.absoluteString {
                    state.serviceURL = serviceURL.absoluteString
                    let updated = state
                    try await gdb.write { conn in try conn.setReplicaState(updated) }
                }
                // Each layer hashed once, here: a verify that compares a whole layer later (after
                // a large download, say) starts from its stored checksum instead of every row.
                if state != nil { try await gdb.write { conn in try conn.storeLayerChecksums() } }
            } catch let error as StorageError {
                throw SyncError(.invalidResponse, "the downloaded replica does not open: \(error)")
            }
            try? FileManager.default.removeItem(at: downloadFileURL)
            try FileManager.default.moveItem(at: partialURL, to: downloadFileURL)
            context.record("written", true)
            context.log("replica written to \(downloadFileURL.path)")
        }
    }

    public func output(context: JobContext) async throws -> Geodatabase {
        try Geodatabase.open(at: downloadFileURL)
    }

    public func rollback(context: JobContext) async {
        try? FileManager.default.removeItem(at: partialURL)
        guard context.recorded("written") == nil else { return }
        if let status = context.recorded("statusUrl")?.stringValue.flatMap(URL.init(string:)), context.recorded("resultUrl") == nil {
            try? await HTTPRemoteJobTransport(token: environment.token).cancel(at: status.appendingPathComponent("cancel"))
        }
        // A replica registered for a file that never arrived would only clutter the server.
        if let id = context.recorded("replicaId")?.stringValue, let connection = try? connection() {
            _ = try? await connection.json(.POST, connection.featureServerURL.appendingPathComponent("unRegisterReplica"), form: [("replicaID", id)])
            context.log("unregistered the unused replica \(id)")
        }
    }
}
