import Foundation
import OutpostCore

/// A geoprocessing service as its `<name>.gp.json` file describes it (schema:
/// `Schemas/gp-service.schema.json`): how its tasks run and which tasks it offers, each a
/// built-in tool or a model (inline, or in a file beside it).
public struct GPServiceDefinition: Sendable {
    /// How a service's tasks run.
    public enum ExecutionType: String, Sendable {
        /// By `execute`: the answer holds the outputs.
        case synchronous = "esriExecutionTypeSynchronous"
        /// As jobs: `submitJob`, then status polls and results.
        case asynchronous = "esriExecutionTypeAsynchronous"
    }

    /// The definition format version this build reads.
    public static let version = 1

    /// The service's name.
    public var name: String
    /// What the service offers.
    public var summary: String
    /// How its tasks run.
    public var executionType: ExecutionType
    /// Most features an input or output feature set may hold (`maximumRecords`).
    public var maximumRecords: Int
    /// Jobs that run at once; later ones wait as `esriJobWaiting`.
    public var maximumConcurrentJobs: Int
    /// A job still running after this long ends as `esriJobTimedOut`.
    public var maximumExecutionTime: Duration
    /// Finished jobs (records, results, files) are removed this long after they finished.
    public var jobRetention: Duration
    /// Whether `…/MapServer/jobs/{id}` draws a job's outputs.
    public var resultMapServer: Bool
    /// The tasks it offers.
    public var tasks: [GPTaskDefinition]

    /// The task called `name`, if the service offers one.
    public func task(named name: String) -> GPTaskDefinition? { tasks.first { $0.name == name } }

    /// Reads `<name>.gp.json`; model files named in it are read from beside it.
    public init(contentsOf url: URL) throws {
        let data: Data
        do { data = try Data(contentsOf: url) } catch { throw GPValueError("cannot read \(url.path)") }
        let json: JSONValue
        do { json = try JSONValue.parse(data) } catch { throw GPValueError("\(url.lastPathComponent) is not JSON: \(error)") }
        var name = url.lastPathComponent
        if name.hasSuffix(".gp.json") { name.removeLast(".gp.json".count) }
        try self.init(json: json, name: name, directory: url.deletingLastPathComponent())
    }

    /// A service definition from its JSON; model files named in it are read from `directory`.
    /// - Throws: ``GPValueError`` for a definition that is wrong.
    public init(json: JSONValue, name: String, directory: URL? = nil) throws {
        func fail(_ reason: String) -> GPValueError { GPValueError("geoprocessing service \(name): \(reason)") }
        guard json.objectValue != nil else { throw fail("the definition is a JSON object") }
        let version = json["version"]?.integerValue ?? 1
        guard version == Self.version else { throw fail("version \(version) is not known (this build reads version \(Self.version))") }
        self.name = name
        summary = json["description"]?.stringValue ?? ""
        let type = json["executionType"]?.stringValue ?? ExecutionType.asynchronous.rawValue
        guard let execution = ExecutionType(rawValue: type) else { throw fail("executionType \(type) is not esriExecutionTypeSynchronous or esriExecutionTypeAsynchronous") }
        executionType = execution
        func positive(_ key: String, _ fallback: Int64) throws -> Int64 {
            guard let v = json[key] else { return fallback }
            guard let n = v.integerValue, n > 0 else { throw fail("\(key) must be a positive integer") }
            return n
        }
        maximumRecords = Int(try positive("maximumRecords", 10_000))
        maximumConcurrentJobs = Int(try positive("maximumConcurrentJobs", 2))
        maximumExecutionTime = .seconds(try positive("maximumExecutionSeconds", 3_600))
        // Minutes, fractions allowed (0.5 is thirty seconds).
        if let v = json["jobRetentionMinutes"] {
            guard let minutes = v.doubleValue, minutes > 0, minutes.isFinite else { throw fail("jobRetentionMinutes must be a positive number") }
            jobRetention = .milliseconds(Int64(minutes * 60_000))
        } else {
            jobRetention = .seconds(1_440 * 60)
        }
        resultMapServer = json["resultMapServer"]?.boolValue ?? true
        guard let list = json["tasks"]?.arrayValue, !list.isEmpty else { throw fail("it needs at least one task") }
        var tasks: [GPTaskDefinition] = []
        // Models may use the tasks listed before them as well as the built-in tools.
        let lookup = { (tasks: [GPTaskDefinition]) in
            { (name: String) in tasks.first { $0.name == name } ?? GPToolbox.task(named: name) }
        }
        for (index, entry) in list.enumerated() {
            var task: GPTaskDefinition
            if let tool = entry["tool"]?.stringValue {
                guard let found = GPToolbox.task(named: tool) else {
                    throw fail("tasks[\(index)]: there is no tool \(tool) (tools: \(GPToolbox.names.joined(separator: ", ")))")
                }
                task = found
            } else if let model = entry["model"], model.objectValue != nil {
                task = try Self.model(model, lookup(tasks), fail).task
            } else if let file = entry["modelFile"]?.stringValue {
                guard let directory else { throw fail("tasks[\(index)]: a modelFile needs the service to be read from a file") }
                let url = directory.appendingPathComponent(file)
                guard !file.contains(".."), let text = try? Data(contentsOf: url), let model = try? JSONValue.parse(text) else {
                    throw fail("tasks[\(index)]: cannot read the model file \(file)")
                }
                task = try Self.model(model, lookup(tasks), fail).task
            } else {
                throw fail("tasks[\(index)] needs \"tool\", \"model\" or \"modelFile\"")
            }
            if let renamed = entry["name"]?.stringValue {
                guard renamed.range(of: "^[A-Za-z][A-Za-z0-9_]*$", options: .regularExpression) != nil else {
                    throw fail("tasks[\(index)]: a task name is letters, digits and _ (\(renamed))")
                }
                task.name = renamed
                task.displayName = entry["displayName"]?.stringValue ?? renamed
            }
            for (key, path) in [("processSR", \GPEnvironment.processSpatialReference), ("outSR", \GPEnvironment.outputSpatialReference)] {
                guard let value = entry[key] else { continue }
                guard let wkid = value.integerValue, wkid > 0, (try? CoordinateSystemInfo(SpatialReference(wkid: Int(wkid)))) != nil else {
                    throw fail("tasks[\(index)]: \(key) must be an EPSG code PROJ knows")
                }
                task.environment[keyPath: path] = SpatialReference(wkid: Int(wkid))
            }
            guard !tasks.contains(where: { $0.name == task.name }) else { throw fail("two tasks are named \(task.name)") }
            tasks.append(task)
        }
        self.tasks = tasks
    }

    private static func model(_ json: JSONValue, _ lookup: (String) -> GPTaskDefinition?, _ fail: (String) -> GPValueError) throws -> GPModel {
        do {
            return try GPModel(json: json, tasks: lookup)
        } catch let error as GPModelError {
            throw fail(error.description)
        }
    }
}
