import Foundation
import OutpostCore

/// A geoprocessing tool: named parameters in, named values out. Tools run the same on a server
/// (a GPServer task) and offline on a device.
public protocol GPTool: Sendable {
    /// The task name (`Buffer`, `Clip`, …).
    static var name: String { get }
    /// What the tool does, for its task info.
    static var summary: String { get }
    /// The tool's parameters, inputs and outputs.
    static var parameters: [GPParameterInfo] { get }
    /// Runs with inputs already checked against `parameters` (defaults applied); returns the
    /// output parameters' values by name.
    func run(_ inputs: [String: GPValue], context: GPToolContext) async throws -> [String: GPValue]
}

/// What a running tool may report, and whether it should stop.
public final class GPToolContext: Sendable {
    private let report: @Sendable (String) -> Void
    /// Where a tool writes the files it outputs (rasters, extracts); a server serves them from
    /// there, a local run hands back their file URLs.
    public let outputDirectory: URL

    /// A context writing into `outputDirectory` (a new temporary folder when nil) and reporting through
    /// `report`.
    public init(outputDirectory: URL? = nil, report: @escaping @Sendable (String) -> Void = { _ in }) {
        self.report = report
        self.outputDirectory = outputDirectory
            ?? FileManager.default.temporaryDirectory.appendingPathComponent("outpost-gp-\(UUID().uuidString.prefix(8).lowercased())")
    }

    /// A new file in the output directory (the directory made when needed).
    public func outputFile(_ name: String) throws -> URL {
        try FileManager.default.createDirectory(at: outputDirectory, withIntermediateDirectories: true)
        return outputDirectory.appendingPathComponent(name)
    }

    /// A progress message (a job's message list; the `execute` answer's `messages`).
    public func message(_ text: String) { report(text) }

    /// Throws `CancellationError` when the task running the tool was cancelled. It costs a
    /// flag's read: tools ask before each feature, cell row or GEOS call, so that a cancel ends
    /// them within a second however long each step is.
    public func checkCancellation() throws { try Task.checkCancellation() }
}

extension GPTool {
    /// Checks `given` against the parameters (types, choices, required values, defaults) and
    /// runs the tool. Unknown names are refused, naming them.
    public func execute(_ given: [String: GPValue], context: GPToolContext = GPToolContext()) async throws -> [String: GPValue] {
        let inputs = try GPParameterInfo.check(given, against: Self.parameters, task: Self.name)
        do {
            return try await run(inputs, context: context)
        } catch {
            throw ToolInputs.explain(error, inputs)
        }
    }
}

extension GPParameterInfo {
    /// The inputs a task runs with: `given` checked against `parameters` (an unknown name, a
    /// wrong type, a value outside a choice list, a missing required value are errors naming
    /// the parameter), defaults filled in.
    public static func check(_ given: [String: GPValue], against parameters: [GPParameterInfo], task: String) throws -> [String: GPValue] {
        let inputs = Set(parameters.filter { $0.direction == .input }.map(\.name))
        if let unknown = given.keys.sorted().first(where: { !inputs.contains($0) }) {
            throw GPValueError(parameter: unknown, "is not an input parameter of \(task)")
        }
        var checked: [String: GPValue] = [:]
        for parameter in parameters where parameter.direction == .input {
            if let value = try parameter.accept(given[parameter.name]) { checked[parameter.name] = value }
        }
        return checked
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

    /// Refuses a set with an invalid polygon (GEOS's validity: self-intersections, rings that
    /// cross): an overlay on it gives wrong answers or none. The error names the parameter, the
    /// feature (its object id when it has one) and GEOS's reason.
    /// When GEOS fails inside a tool: the first invalid polygon among the feature inputs, as an
    /// error naming its parameter and feature with GEOS's reason (the tool's own error when every
    /// input is valid). Tools run on what GEOS accepts — real data has self-touching rings that
    /// overlay handles — and only a failure is traced back to the feature that caused it.
    static func explain(_ error: any Error, _ inputs: [String: GPValue]) -> any Error {
        guard error is GeometryEngine.Failure else { return error }
        let engine = GeometryEngine()
        for (name, value) in inputs.sorted(by: { $0.key < $1.key }) {
            let sets: [GPFeatureSet]
            switch value {
            case .featureSet(let set): sets = [set]
            case .multiValue(_, let items): sets = items.compactMap { if case .featureSet(let s) = $0 { s } else { nil } }
            default: continue
            }
            for set in sets {
                do {
                    try requireValid(set, name, engine: engine)
                } catch {
                    return error
                }
            }
        }
        return error
    }

    static func requireValid(_ set: GPFeatureSet, _ parameter: String, engine: GeometryEngine) throws {
        for (index, feature) in set.features.enumerated() {
            guard let g = feature.geometry else { continue }
            switch g {
            case .polygon, .multiPolygon: break
            default: continue
            }
            let (valid, reason) = try engine.validity(g)
            guard !valid else { continue }
            let id = feature.attributes["OBJECTID"] ?? feature.attributes["objectid"] ?? feature.attributes["fid"]
            throw GPValueError(
                parameter: parameter,
                "feature \(index)\(id.map { " (object id \($0.jsonString))" } ?? "") has an invalid geometry: \(reason ?? "GEOS says it is not valid")")
        }
    }

    /// Both sets in one spatial reference (the second's geometries transformed to the first's).
    static func aligned(_ a: GPFeatureSet, _ b: GPFeatureSet) throws -> GPFeatureSet {
        try b.projected(to: a.spatialReference ?? SpatialReference(wkid: 4326))
    }
}

extension GPFeatureSet {
    /// The set with its geometries in `target` (itself when already there; a set without a
    /// spatial reference is taken to be WGS 84).
    public func projected(to target: SpatialReference) throws -> GPFeatureSet {
        let source = spatialReference ?? SpatialReference(wkid: 4326)
        guard source != target else { return self }
        let transform = try CoordinateTransform(from: source, to: target)
        var out = self
        out.spatialReference = target
        out.features = try features.map { Feature(geometry: try $0.geometry.map(transform.transform), attributes: $0.attributes) }
        return out
    }
}
