import OutpostCore

/// A geoprocessing tool: named parameters in, named values out. Tools run the same on a server
/// (a GPServer task) and offline on a device.
public protocol GPTool: Sendable {
    /// The task name (`Buffer`, `Clip`, …).
    static var name: String { get }
    static var summary: String { get }
    static var parameters: [GPParameterInfo] { get }
    /// Runs with inputs already checked against `parameters` (defaults applied); returns the
    /// output parameters' values by name.
    func run(_ inputs: [String: GPValue], context: GPToolContext) async throws -> [String: GPValue]
}

/// What a running tool may report, and whether it should stop.
public final class GPToolContext: Sendable {
    private let report: @Sendable (String) -> Void

    public init(report: @escaping @Sendable (String) -> Void = { _ in }) {
        self.report = report
    }

    /// A progress message (a job's message list; the `execute` answer's `messages`).
    public func message(_ text: String) { report(text) }

    /// Throws `CancellationError` when the task running the tool was cancelled.
    public func checkCancellation() throws { try Task.checkCancellation() }
}

extension GPTool {
    /// Checks `given` against the parameters (types, choices, required values, defaults) and
    /// runs the tool. Unknown names are refused, naming them.
    public func execute(_ given: [String: GPValue], context: GPToolContext = GPToolContext()) async throws -> [String: GPValue] {
        let known = Set(Self.parameters.map(\.name))
        if let unknown = given.keys.sorted().first(where: { !known.contains($0) }) {
            throw GPValueError(parameter: unknown, "is not a parameter of \(Self.name)")
        }
        var inputs: [String: GPValue] = [:]
        for parameter in Self.parameters where parameter.direction == .input {
            if let value = try parameter.accept(given[parameter.name]) { inputs[parameter.name] = value }
        }
        return try await run(inputs, context: context)
    }
}

/// Reading tool inputs.
enum ToolInputs {
    /// The inline feature set given for `name`.
    static func features(_ inputs: [String: GPValue], _ name: String) throws -> GPFeatureSet {
        guard case .featureSet(let set)? = inputs[name] else { throw GPValueError(parameter: name, "is required") }
        guard set.url == nil else { throw GPValueError(parameter: name, "a layer URL must be resolved to features before the tool runs") }
        return set
    }

    static func string(_ inputs: [String: GPValue], _ name: String) -> String? {
        if case .string(let s)? = inputs[name], !s.isEmpty { return s }
        return nil
    }

    /// Both sets in one spatial reference (the second's geometries transformed to the first's).
    static func aligned(_ a: GPFeatureSet, _ b: GPFeatureSet) throws -> GPFeatureSet {
        let target = a.spatialReference ?? SpatialReference(wkid: 4326), source = b.spatialReference ?? target
        guard source != target else { return b }
        let transform = try CoordinateTransform(from: source, to: target)
        var out = b
        out.spatialReference = target
        out.features = try b.features.map { GPFeatureSet.Feature(geometry: try $0.geometry.map(transform.transform), attributes: $0.attributes) }
        return out
    }
}
