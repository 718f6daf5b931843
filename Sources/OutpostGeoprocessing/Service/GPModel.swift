import OutpostCore

/// A model is wrong: a cycle, a type that does not fit, a name that leads nowhere.
public struct GPModelError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The model's name.
    public var model: String
    /// What is wrong.
    public var reason: String

    /// An error of `model` saying `reason`.
    public init(model: String, _ reason: String) {
        self.model = model
        self.reason = reason
    }

    public var description: String { "model \(model): \(reason)" }
}

/// A model: tools chained into one task. Its JSON (documented in docs/geoprocessing.md, schema
/// `Schemas/gp-service.schema.json#/$defs/model`):
///
/// ```json
/// {"name": "BufferAndClip",
///  "parameters": [{"name": "Points", "dataType": "GPFeatureRecordSetLayer"}, …,
///                 {"name": "Result", "dataType": "GPFeatureRecordSetLayer", "direction": "esriGPParameterDirectionOutput"}],
///  "steps": [{"id": "buffer", "tool": "Buffer", "inputs": {"Input_Features": {"parameter": "Points"},
///                                                          "Distance": {"value": {"distance": 50, "units": "esriMeters"}}}},
///            {"id": "clip", "tool": "Clip", "inputs": {"Input_Features": {"step": "buffer", "output": "Output_Features"},
///                                                      "Clip_Features": {"parameter": "Area"}}}],
///  "outputs": {"Result": {"step": "clip", "output": "Output_Features"}}}
/// ```
///
/// A step's input is bound to a model parameter, to an output of another step, or to a fixed
/// value; inputs left unbound take the tool's default. Loading checks everything a run would
/// find too late: unknown tools, steps and parameters; types that differ between what feeds an
/// input and the input; required inputs left unbound; cycles. Steps run in dependency order.
public struct GPModel: Sendable {
    /// What feeds a step's input or a model output.
    public enum Source: Hashable, Sendable {
        /// A model parameter, by name.
        case parameter(String)
        /// An output of another step.
        case step(String, output: String)
        /// A fixed value.
        case value(GPValue)
        /// A where clause (GPString) with `:Name` replaced by model parameter Name's value as
        /// an SQL literal (text quoted, quotes doubled; numbers as they are): the clause parser
        /// then sees a literal, never SQL a user typed.
        case sql(String)
    }

    /// A tool run as part of the model.
    public struct Step: Sendable {
        /// The step's id, which other steps name.
        public var id: String
        /// The tool (or model) it runs.
        public var task: GPTaskDefinition
        /// What feeds each of its inputs.
        public var inputs: [String: Source]
    }

    /// The model's name, as a task.
    public var name: String
    /// Its name as people see it.
    public var displayName: String
    /// What it does.
    public var summary: String
    /// Its parameters, inputs and outputs.
    public var parameters: [GPParameterInfo]
    /// In the order they run.
    public private(set) var steps: [Step]
    /// What feeds each output parameter.
    public var outputs: [String: Source]

    /// Reads and checks a model. `tasks` finds the task a step names (the built-in tools unless
    /// the service offers more).
    public init(json: JSONValue, tasks: (String) -> GPTaskDefinition? = GPToolbox.task(named:)) throws {
        guard json.objectValue != nil else { throw GPModelError(model: "(unnamed)", "a model is a JSON object") }
        guard let name = json["name"]?.stringValue, !name.isEmpty else { throw GPModelError(model: "(unnamed)", "a model needs a \"name\"") }
        func fail(_ reason: String) -> GPModelError { GPModelError(model: name, reason) }
        self.name = name
        displayName = json["displayName"]?.stringValue ?? name
        summary = json["description"]?.stringValue ?? ""
        do {
            parameters = try (json["parameters"]?.arrayValue ?? []).map { try GPParameterInfo(json: $0) }
        } catch let error as GPValueError {
            throw fail("parameter \(error.description)")
        }
        var seen = Set<String>()
        for p in parameters where !seen.insert(p.name).inserted { throw fail("two parameters are named \(p.name)") }
        let byName = Dictionary(uniqueKeysWithValues: parameters.map { ($0.name, $0) })

        guard let stepList = json["steps"]?.arrayValue, !stepList.isEmpty else { throw fail("a model needs at least one step") }
        var declared: [String: Step] = [:]
        var order: [String] = []
        for (index, item) in stepList.enumerated() {
            guard let id = item["id"]?.stringValue, !id.isEmpty else { throw fail("steps[\(index)] needs an \"id\"") }
            guard declared[id] == nil else { throw fail("two steps have the id \(id)") }
            guard let toolName = item["tool"]?.stringValue else { throw fail("step \(id) needs a \"tool\"") }
            guard let task = tasks(toolName) else { throw fail("step \(id): there is no tool \(toolName)") }
            var inputs: [String: Source] = [:]
            for (input, binding) in item["inputs"]?.objectValue ?? [:] {
                guard let target = task.parameter(input), target.direction == .input else {
                    throw fail("step \(id): \(input) is not an input of \(toolName)")
                }
                inputs[input] = try Self.source(binding, type: target.dataType, where: "step \(id) input \(input)", fail)
            }
            declared[id] = Step(id: id, task: task, inputs: inputs)
            order.append(id)
        }

        // What feeds each input has the input's type; required inputs are bound.
        func type(of source: Source, where place: String) throws -> GPDataType? {
            switch source {
            case .value(let v): return v.dataType
            case .sql(let text):
                for name in Self.sqlParameters(text) where byName[name]?.direction != .input {
                    throw fail("\(place): the clause names :\(name), which is not an input parameter of the model")
                }
                return .string
            case .parameter(let p):
                guard let parameter = byName[p], parameter.direction == .input else { throw fail("\(place): the model has no input parameter \(p)") }
                return parameter.dataType
            case .step(let s, let output):
                guard let step = declared[s] else { throw fail("\(place): there is no step \(s)") }
                guard let produced = step.task.parameter(output), produced.direction == .output else {
                    throw fail("\(place): \(step.task.name) (step \(s)) has no output \(output)")
                }
                return produced.dataType
            }
        }
        for id in order {
            let step = declared[id]!
            for target in step.task.inputs {
                guard let source = step.inputs[target.name] else {
                    if target.kind == .required, target.defaultValue == nil { throw fail("step \(id): the required input \(target.name) is not bound") }
                    continue
                }
                let place = "step \(id) input \(target.name)"
                if let given = try type(of: source, where: place), given != target.dataType {
                    throw fail("\(place) expects a \(target.dataType) but is fed a \(given)")
                }
            }
        }
        var outputs: [String: Source] = [:]
        for (output, binding) in json["outputs"]?.objectValue ?? [:] {
            guard let parameter = byName[output], parameter.direction == .output else { throw fail("outputs: \(output) is not an output parameter of the model") }
            let source = try Self.source(binding, type: parameter.dataType, where: "output \(output)", fail)
            if let given = try type(of: source, where: "output \(output)"), given != parameter.dataType {
                throw fail("output \(output) is a \(parameter.dataType) but is fed a \(given)")
            }
            outputs[output] = source
        }
        for parameter in parameters where parameter.direction == .output && outputs[parameter.name] == nil {
            throw fail("the output parameter \(parameter.name) is not fed by any step")
        }
        self.outputs = outputs
        steps = try Self.dependencyOrder(order, declared, fail)
    }

    private static func source(_ json: JSONValue, type: GPDataType, where place: String, _ fail: (String) -> GPModelError) throws -> Source {
        if let p = json["parameter"]?.stringValue { return .parameter(p) }
        if let s = json["step"]?.stringValue {
            guard let output = json["output"]?.stringValue else { throw fail("\(place): name the \"output\" of step \(s)") }
            return .step(s, output: output)
        }
        if let text = json["sql"]?.stringValue {
            guard type == .string else { throw fail("\(place): an \"sql\" binding feeds a GPString, not a \(type)") }
            return .sql(text)
        }
        if let v = json["value"] {
            do {
                return .value(try GPValue(json: v, as: type, parameter: place))
            } catch let error as GPValueError {
                throw fail(error.description)
            }
        }
        throw fail("\(place): bind it to {\"parameter\"}, {\"step\", \"output\"}, {\"value\"} or {\"sql\"}")
    }

    /// Steps ordered so each runs after the steps that feed it (Kahn's algorithm); a cycle is
    /// an error naming its steps.
    private static func dependencyOrder(_ order: [String], _ steps: [String: Step], _ fail: (String) -> GPModelError) throws -> [Step] {
        func feeders(_ step: Step) -> Set<String> {
            Set(step.inputs.values.compactMap { if case .step(let s, _) = $0 { s } else { nil } })
        }
        var waiting = Dictionary(uniqueKeysWithValues: order.map { ($0, feeders(steps[$0]!)) })
        var sorted: [Step] = []
        while !waiting.isEmpty {
            guard let next = order.first(where: { waiting[$0]?.isEmpty == true }) else {
                throw fail("the steps \(order.filter { waiting[$0] != nil }.joined(separator: ", ")) form a cycle")
            }
            waiting[next] = nil
            for key in waiting.keys { waiting[key]?.remove(next) }
            sorted.append(steps[next]!)
        }
        return sorted
    }

    /// Runs the steps in order, each with its bound inputs; messages carry the step's id.
    public func run(_ inputs: [String: GPValue], context: GPToolContext) async throws -> [String: GPValue] {
        var produced: [String: [String: GPValue]] = [:]
        func value(_ source: Source) -> GPValue? {
            switch source {
            case .parameter(let p): inputs[p]
            case .step(let s, let output): produced[s]?[output]
            case .value(let v): v
            case .sql(let text): .string(Self.render(text, inputs))
            }
        }
        for step in steps {
            try context.checkCancellation()
            var given: [String: GPValue] = [:]
            for (name, source) in step.inputs {
                if let v = value(source) { given[name] = v }
            }
            let stepContext = GPToolContext(outputDirectory: context.outputDirectory) { context.message("\(step.id): \($0)") }
            produced[step.id] = try await step.task.execute(given, context: stepContext)
        }
        return outputs.compactMapValues(value)
    }

    /// The `:Name` parameters a clause template names.
    static func sqlParameters(_ text: String) -> [String] {
        var names: [String] = []
        var rest = Substring(text)
        while let colon = rest.firstIndex(of: ":") {
            let after = rest[rest.index(after: colon)...]
            let name = after.prefix { $0.isLetter || $0.isNumber || $0 == "_" }
            if !name.isEmpty { names.append(String(name)) }
            rest = after.dropFirst(name.count)
        }
        return names
    }

    /// A clause template with each `:Name` replaced by the parameter's value as an SQL literal.
    static func render(_ text: String, _ inputs: [String: GPValue]) -> String {
        var out = ""
        var rest = Substring(text)
        while let colon = rest.firstIndex(of: ":") {
            out += rest[..<colon]
            let after = rest[rest.index(after: colon)...]
            let name = String(after.prefix { $0.isLetter || $0.isNumber || $0 == "_" })
            if name.isEmpty {
                out += ":"
            } else {
                switch inputs[name] {
                case .string(let s)?: out += "'" + s.replacingOccurrences(of: "'", with: "''") + "'"
                case .long(let n)?: out += String(n)
                case .double(let d)?: out += String(d)
                case .boolean(let b)?: out += b ? "1" : "0"
                default: out += "NULL"
                }
            }
            rest = after.dropFirst(name.count)
        }
        return out + rest
    }

    /// The model as a task a service offers or a device runs.
    public var task: GPTaskDefinition {
        GPTaskDefinition(name: name, displayName: displayName, summary: summary, parameters: parameters) { inputs, context in
            try await run(inputs, context: context)
        }
    }
}
