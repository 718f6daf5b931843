import OutpostCore

/// Something a geoprocessing service offers as a task: a built-in tool or a model, with the
/// parameters its task info lists. Runs the same on a server and offline.
public struct GPTaskDefinition: Sendable {
    /// The task's name.
    public var name: String
    /// Its name as people see it.
    public var displayName: String
    /// What it does.
    public var summary: String
    /// Its parameters, inputs and outputs.
    public var parameters: [GPParameterInfo]
    /// The environment the task runs in unless a request says otherwise (a service may have
    /// its tasks process in a projected system, as ArcGIS services set a default processSR).
    public var environment = GPEnvironment()
    private let body: @Sendable ([String: GPValue], GPToolContext) async throws -> [String: GPValue]

    /// A task that runs `run` with inputs already checked against `parameters`.
    public init(
        name: String, displayName: String? = nil, summary: String, parameters: [GPParameterInfo],
        run: @escaping @Sendable ([String: GPValue], GPToolContext) async throws -> [String: GPValue]
    ) {
        self.name = name
        self.displayName = displayName ?? name
        self.summary = summary
        self.parameters = parameters
        body = run
    }

    /// A built-in tool as a task (under its own name unless renamed).
    public init(tool: some GPTool, name: String? = nil) {
        let type = type(of: tool)
        self.init(name: name ?? type.name, summary: type.summary, parameters: type.parameters) { inputs, context in
            do {
                return try await tool.run(inputs, context: context)
            } catch {
                throw ToolInputs.explain(error, inputs)
            }
        }
    }

    /// The parameter called `name`, if the task has one.
    public func parameter(_ name: String) -> GPParameterInfo? { parameters.first { $0.name == name } }

    /// The input parameters.
    public var inputs: [GPParameterInfo] { parameters.filter { $0.direction == .input } }
    /// The output parameters.
    public var outputs: [GPParameterInfo] { parameters.filter { $0.direction == .output } }

    /// Checks `given` (unknown names, types, choices, required values; defaults filled in) and
    /// runs the task. Only the output parameters come back.
    public func execute(_ given: [String: GPValue], context: GPToolContext = GPToolContext()) async throws -> [String: GPValue] {
        let inputs = try GPParameterInfo.check(given, against: parameters, task: name)
        let produced = try await body(inputs, context)
        var out: [String: GPValue] = [:]
        for parameter in outputs {
            if let value = produced[parameter.name] { out[parameter.name] = value }
        }
        return out
    }

    /// The task info of the REST API (`…/GPServer/<task>`), less the service-level fields.
    public var infoJSON: JSONValue {
        get throws {
            [
                "name": .string(name), "displayName": .string(displayName), "description": .string(summary), "category": "",
                "helpUrl": "", "parameters": .array(try parameters.map { try $0.json }),
            ]
        }
    }
}

/// The built-in tools by name.
public enum GPToolbox {
    /// Every built-in tool.
    public static let tools: [any GPTool] = [
        BufferTool(), ClipTool(), DissolveTool(), IntersectTool(), UnionTool(), SelectLayerByLocationTool(), SelectLayerByAttributeTool(),
        SummarizeWithinTool(), IDWTool(), ContourTool(), ExportTableTool(), ExtractDataTool(),
    ]

    /// The names of the built-in tools.
    public static var names: [String] { tools.map { type(of: $0).name } }

    /// The tool called `name` (exact, as task infos spell them), as a task.
    public static func task(named name: String) -> GPTaskDefinition? {
        tools.first { type(of: $0).name == name }.map { GPTaskDefinition(tool: $0) }
    }
}

/// The environment a task runs in (`env:processSR`, `env:outSR`): feature inputs are projected
/// into the processing system before the task sees them, feature outputs into the output
/// system after it.
public struct GPEnvironment: Hashable, Sendable {
    /// The system feature inputs are projected into (`env:processSR`).
    public var processSpatialReference: SpatialReference?
    /// The system feature outputs are given in (`env:outSR`).
    public var outputSpatialReference: SpatialReference?

    /// An environment of these systems (nil: the inputs' own).
    public init(processSpatialReference: SpatialReference? = nil, outputSpatialReference: SpatialReference? = nil) {
        self.processSpatialReference = processSpatialReference
        self.outputSpatialReference = outputSpatialReference
    }

    /// Every feature set in `values` (also inside multivalues) in `target`.
    static func project(_ values: [String: GPValue], to target: SpatialReference?) throws -> [String: GPValue] {
        guard let target else { return values }
        func project(_ value: GPValue) throws -> GPValue {
            switch value {
            case .featureSet(let set) where set.url == nil: return .featureSet(try set.projected(to: target))
            case .multiValue(let type, let items): return .multiValue(type, try items.map(project))
            default: return value
            }
        }
        return try values.mapValues(project)
    }
}

extension GPTaskDefinition {
    /// Runs in `environment`: inputs projected to its processing system, outputs to its output
    /// system.
    public func execute(_ given: [String: GPValue], environment: GPEnvironment, context: GPToolContext = GPToolContext()) async throws -> [String: GPValue] {
        let inputs = try GPEnvironment.project(given, to: environment.processSpatialReference)
        return try GPEnvironment.project(try await execute(inputs, context: context), to: environment.outputSpatialReference)
    }
}

/// A geoprocessing job's status, as the REST API spells it.
public enum GPJobStatus: String, Sendable, CaseIterable {
    /// The job waits to be run.
    case submitted = "esriJobSubmitted"
    /// The job waits for a free slot.
    case waiting = "esriJobWaiting"
    /// The job runs.
    case executing = "esriJobExecuting"
    /// The job ended with its outputs.
    case succeeded = "esriJobSucceeded"
    /// The job ended with an error.
    case failed = "esriJobFailed"
    /// The job ran longer than the service allows.
    case timedOut = "esriJobTimedOut"
    /// The job was asked to stop and is stopping.
    case cancelling = "esriJobCancelling"
    /// The job stopped when asked to.
    case cancelled = "esriJobCancelled"

    /// Whether the job has ended (succeeded, failed, timed out or cancelled).
    public var isFinished: Bool { [.succeeded, .failed, .timedOut, .cancelled].contains(self) }
}

/// A message of a job or an `execute` answer.
public struct GPMessage: Hashable, Sendable {
    /// What a message is.
    public enum Kind: String, Sendable {
        /// Information.
        case informative = "esriJobMessageTypeInformative"
        /// A warning.
        case warning = "esriJobMessageTypeWarning"
        /// An error.
        case error = "esriJobMessageTypeError"
    }

    /// What the message is.
    public var kind: Kind
    /// Its text.
    public var description: String

    /// A message of this kind and text.
    public init(_ kind: Kind, _ description: String) {
        self.kind = kind
        self.description = description
    }

    /// The message as REST JSON (`type`, `description`).
    public var json: JSONValue { ["type": .string(kind.rawValue), "description": .string(description)] }

    /// A message from its REST JSON; nil when it is not one.
    public init?(json: JSONValue) {
        guard let text = json["description"]?.stringValue else { return nil }
        self.init(json["type"]?.stringValue.flatMap(Kind.init(rawValue:)) ?? .informative, text)
    }
}
