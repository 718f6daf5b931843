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
