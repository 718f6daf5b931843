import Foundation
import OutpostCore

/// Runs a geoprocessing task (ArcGIS `GeoprocessingTask`): a GPServer task by URL, or a tool or
/// model on this device (offline, the same tools as the server). Loadable: `load()` reads the
/// task info (parameters, execution type).
///
/// ```swift
/// let task = GeoprocessingTask(url: URL(string: "https://gis.example.org/arcgis/rest/services/analysis/GPServer/Buffer")!)
/// var parameters = try await task.makeDefaultParameters()
/// parameters.inputs["Input_Features"] = .featureSet(points)
/// let job = task.makeJob(parameters: parameters)
/// try job.start()
/// let result = try await job.output      // outputs by name, messages
/// ```
public final class GeoprocessingTask: LoadableForwarding, Sendable {
    /// Where a task runs.
    public enum Source: Sendable {
        /// `…/GPServer/<task>`.
        case remote(URL)
        /// A built-in tool by name, or a model file, run here.
        case local(GPLocalTask)
    }

    /// Where the task runs.
    public let source: Source
    let transport: any GPTransport
    public let loadSupport: LoadableSupport
    private let loaded = Locked<GPTaskInfo?>(nil)

    /// A task for the GPServer task or model file at `url`.
    /// - Parameter url: a task URL (`…/GPServer/<task>`), or a file URL of a model JSON file.
    /// - Parameter token: sent as a bearer token to a secured service.
    /// - Parameter transport: the HTTP client for a GPServer (by default one with the token).
    public convenience init(url: URL, token: String? = nil, transport: (any GPTransport)? = nil) {
        self.init(source: url.isFileURL ? .local(.modelFile(url.path)) : .remote(url), transport: transport ?? HTTPGPTransport(token: token))
    }

    /// A built-in tool (`Buffer`, `Clip`, …) run on this device.
    public convenience init(tool: String) {
        self.init(source: .local(.tool(tool)), transport: HTTPGPTransport())
    }

    /// A task for `source`, reaching a service through `transport`.
    public init(source: Source, transport: any GPTransport) {
        self.source = source
        self.transport = transport
        let box = loaded
        loadSupport = LoadableSupport {
            switch source {
            case .remote(let url): box.set(try await GPTaskInfo.fetch(url, transport: transport))
            case .local(let local):
                let task = try local.definition()
                box.set(GPTaskInfo(name: task.name, displayName: task.displayName, summary: task.summary, parameters: task.parameters, executionType: .synchronous))
            }
        }
    }

    /// The task's name, parameters and execution type (after loading).
    public var taskInfo: GPTaskInfo? { loaded.get() }

    /// Parameters with each input's default and the service's execution type.
    public func makeDefaultParameters() async throws -> GeoprocessingParameters {
        try await load()
        guard let info = taskInfo else { throw GeoprocessingError(code: 500, "the task did not load") }
        var parameters = GeoprocessingParameters(executionType: info.executionType)
        for p in info.parameters where p.direction == .input {
            if let value = p.defaultValue { parameters.inputs[p.name] = value }
        }
        return parameters
    }

    /// Fetches an output file (a GPDataFile or raster output) into `destination`: downloaded
    /// from the service, or copied when the task ran here (nothing to do when it ran here and
    /// wrote the file at `destination`, through ``GeoprocessingParameters/outputDirectory``).
    public func download(_ file: GPFileReference, to destination: URL) async throws {
        guard let text = file.url, let url = URL(string: text) else { throw GeoprocessingError(code: 400, "the output has no URL") }
        if url.isFileURL {
            // A local run that wrote into the destination's folder has nothing to copy.
            guard url.standardizedFileURL.path != destination.standardizedFileURL.path else { return }
            try? FileManager.default.removeItem(at: destination)
            try FileManager.default.copyItem(at: url, to: destination)
        } else {
            try await transport.download(url, to: destination)
        }
    }

    /// A job that runs the task with `parameters` (start it with `start()`). A job saved to a
    /// store and rebuilt after a restart reattaches to the server's job.
    public func makeJob(parameters: GeoprocessingParameters, store: (any JobStore)? = nil) -> Job<GeoprocessingJob> {
        Job(GeoprocessingJob(source: source, parameters: parameters, transport: transport), store: store)
    }
}

/// A task on this device: a built-in tool or a model file.
public enum GPLocalTask: Hashable, Sendable {
    /// A built-in tool by name (`Buffer`, `Clip`, …).
    case tool(String)
    /// A model JSON file, by path.
    case modelFile(String)

    /// The task's definition: the tool's, or the model read and checked.
    /// - Throws: ``GeoprocessingError`` for an unknown tool or an unreadable model, ``GPModelError`` for a
    /// wrong one.
    public func definition() throws -> GPTaskDefinition {
        switch self {
        case .tool(let name):
            guard let task = GPToolbox.task(named: name) else {
                throw GeoprocessingError(code: 404, "there is no tool \(name) (tools: \(GPToolbox.names.joined(separator: ", ")))")
            }
            return task
        case .modelFile(let path):
            let data: Data
            do { data = try Data(contentsOf: URL(fileURLWithPath: path)) } catch { throw GeoprocessingError(code: 404, "cannot read the model \(path)") }
            let json: JSONValue
            do { json = try JSONValue.parse(data) } catch { throw GeoprocessingError(code: 400, "\(path) is not JSON: \(error)") }
            return try GPModel(json: json).task
        }
    }

    var json: JSONValue {
        switch self {
        case .tool(let name): ["tool": .string(name)]
        case .modelFile(let path): ["modelFile": .string(path)]
        }
    }

    init?(json: JSONValue) {
        if let tool = json["tool"]?.stringValue {
            self = .tool(tool)
        } else if let path = json["modelFile"]?.stringValue {
            self = .modelFile(path)
        } else {
            return nil
        }
    }
}

/// A task's description, as its task info gives it.
public struct GPTaskInfo: Sendable {
    /// The task's name.
    public var name: String
    /// Its name as people see it.
    public var displayName: String
    /// What it does.
    public var summary: String
    /// Its parameters, inputs and outputs.
    public var parameters: [GPParameterInfo]
    /// Whether it runs by `execute` or as a job.
    public var executionType: GPServiceDefinition.ExecutionType

    /// The parameter called `name`, if the task has one.
    public func parameter(_ name: String) -> GPParameterInfo? { parameters.first { $0.name == name } }

    /// Reads `…/GPServer/<task>?f=json` (and the service's info when the task does not say how it runs).
    static func fetch(_ url: URL, transport: any GPTransport) async throws -> GPTaskInfo {
        let json = try await transport.get(url)
        guard let name = json["name"]?.stringValue, let list = json["parameters"]?.arrayValue else {
            throw GeoprocessingError(code: 400, "\(url.absoluteString) is not a geoprocessing task")
        }
        let parameters = try list.map { try GPParameterInfo(json: $0) }
        var type = json["executionType"]?.stringValue
        if type == nil { type = try await transport.get(url.deletingLastPathComponent())["executionType"]?.stringValue }
        return GPTaskInfo(
            name: name, displayName: json["displayName"]?.stringValue ?? name, summary: json["description"]?.stringValue ?? "", parameters: parameters,
            executionType: type.flatMap(GPServiceDefinition.ExecutionType.init(rawValue:)) ?? .asynchronous)
    }
}

/// What a geoprocessing job runs with (ArcGIS `GeoprocessingParameters`).
public struct GeoprocessingParameters: Sendable {
    /// Whether to run by `execute` (synchronous) or as a submitted job.
    public var executionType: GPServiceDefinition.ExecutionType
    /// Input values by parameter name. A GPDataFile input given as a file URL
    /// (`{"url": "file:///…"}`) is uploaded to the service first.
    public var inputs: [String: GPValue] = [:]
    /// The system feature inputs are projected into before the task runs (`env:processSR`).
    public var processSpatialReference: SpatialReference?
    /// The system feature outputs are given in (`env:outSR`).
    public var outputSpatialReference: SpatialReference?
    /// Whether outputs keep their Z values.
    public var returnZ = false
    /// Whether outputs keep their M values.
    public var returnM = false
    /// Where a run on this device writes its output files (rasters, reports, extracts): the
    /// outputs' file URLs point into it. Nil: a new folder under the system's temporary directory.
    /// A service's run ignores it (fetch its files with ``GeoprocessingTask/download(_:to:)``).
    public var outputDirectory: URL?

    /// Parameters of no inputs yet, run as `executionType` says.
    public init(executionType: GPServiceDefinition.ExecutionType) {
        self.executionType = executionType
    }
}

/// A finished job's outputs (ArcGIS `GeoprocessingResult`).
public struct GeoprocessingResult: Sendable {
    /// Output values by parameter name.
    public var outputs: [String: GPValue]
    /// The messages the task logged.
    public var messages: [GPMessage]
    /// The server's job id (asynchronous services).
    public var jobID: String?
    /// The job's result map (`…/MapServer/jobs/<id>`; add `/export?bbox=…` for an image), when
    /// the service has one.
    public var resultMapURL: URL?
}
