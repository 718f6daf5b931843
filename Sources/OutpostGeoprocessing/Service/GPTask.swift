import OutpostCore

/// Something a geoprocessing service offers as a task: a built-in tool or a model, with the
/// parameters its task info lists. Runs the same on a server and offline.
public struct GPTaskDefinition: Sendable {
    public var name: String
    public var displayName: String
    public var summary: String
    public var parameters: [GPParameterInfo]
    /// The environment the task runs in unless a request says otherwise (a service may have
    /// its tasks process in a projected system, as ArcGIS services set a default processSR).
    public var environment = GPEnvironment()
    private let body: @Sendable ([String: GPValue], GPToolContext) async throws -> [String: GPValue]

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

    public func parameter(_ name: String) -> GPParameterInfo? { parameters.first { $0.name == name } }

    public var inputs: [GPParameterInfo] { parameters.filter { $0.direction == .input } }
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
    public static let tools: [any GPTool] = [
        BufferTool(), ClipTool(), DissolveTool(), IntersectTool(), UnionTool(), SelectLayerByLocationTool(), SelectLayerByAttributeTool(),
        SummarizeWithinTool(), IDWTool(), ContourTool(), ExportTableTool(), ExtractDataTool(),
    ]

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
    public var processSpatialReference: SpatialReference?
    public var outputSpatialReference: SpatialReference?

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
    case submitted = "esriJobSubmitted"
    case waiting = "esriJobWaiting"
    case executing = "esriJobExecuting"
    case succeeded = "esriJobSucceeded"
    case failed = "esriJobFailed"
    case timedOut = "esriJobTimedOut"
    case cancelling = "esriJobCancelling"
    case cancelled = "esriJobCancelled"

    public var isFinished: Bool { [.succeeded, .failed, .timedOut, .cancelled].contains(self) }
}

/// A message of a job or an `execute` answer.
public struct GPMessage: Hashable, Sendable {
    public enum Kind: String, Sendable {
        case informative = "esriJobMessageTypeInformative"
        case warning = "esriJobMessageTypeWarning"
        case error = "esriJobMessageTypeError"
    }

    public var kind: Kind
    public var description: String

    public init(_ kind: Kind, _ description: String) {
        self.kind = kind
        self.description = description
    }

    public var json: JSONValue { ["type": .string(kind.rawValue), "description": .string(description)] }

    public init?(json: JSONValue) {
        guard let text = json["description"]?.stringValue else { return nil }
        self.init(json["type"]?.stringValue.flatMap(Kind.init(rawValue:)) ?? .informative, text)
    }
}
