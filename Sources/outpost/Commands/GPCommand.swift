import ArgumentParser
import Foundation
import OutpostCore
import OutpostGeoprocessing
import OutpostServer
import OutpostStorage

struct GPCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gp",
        abstract: "Geoprocessing: describe and run GPServer tasks, built-in tools and models (offline too).",
        subcommands: [Info.self, Run.self])

    /// A GPServer task URL, a model file, or a built-in tool's name.
    static func task(_ location: String, token: String?) throws -> GeoprocessingTask {
        if location.hasPrefix("http://") || location.hasPrefix("https://") {
            guard let url = URL(string: location) else { throw CLIFailure(message: "\(location) is not a URL") }
            return GeoprocessingTask(url: url, token: serviceToken(token))
        }
        if FileManager.default.fileExists(atPath: location) { return GeoprocessingTask(url: URL(fileURLWithPath: location)) }
        guard GPToolbox.task(named: location) != nil else {
            throw CLIFailure(message: "\(location) is neither a task URL, a model file nor a tool (tools: \(GPToolbox.names.joined(separator: ", ")))")
        }
        return GeoprocessingTask(tool: location)
    }

    static func load(_ task: GeoprocessingTask) async throws -> GPTaskInfo {
        do {
            try await task.load()
        } catch let error as GeoprocessingError {
            throw CLIFailure(message: error.description)
        } catch let error as GPModelError {
            throw CLIFailure(message: error.description)
        } catch let error as RemoteJobUnreachable {
            throw CLIFailure(message: "cannot reach \(error.description)")
        }
        return task.taskInfo!
    }

    struct Info: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show a task's parameters (name, type, direction, default, choices).")
        @Argument(help: "A task URL (…/GPServer/<task>), a model .json file, or a built-in tool (Buffer, Clip, …).") var task: String
        @Option(help: "Service token (default: $OUTPOST_TOKEN).") var token: String?
        @Flag(help: "Print the task info as JSON.") var json = false

        func run() async throws {
            let info = try await GPCommand.load(try GPCommand.task(task, token: token))
            if json {
                printJSON([
                    "name": .string(info.name), "displayName": .string(info.displayName), "description": .string(info.summary),
                    "executionType": .string(info.executionType.rawValue), "parameters": .array(try info.parameters.map { try $0.json }),
                ])
                return
            }
            print("\(info.displayName) (\(info.name)), \(info.executionType == .synchronous ? "synchronous" : "asynchronous")")
            if !info.summary.isEmpty { print(info.summary) }
            let rows = try info.parameters.map { p -> [String] in
                [
                    p.name, p.dataType.description, p.direction == .input ? "in" : "out",
                    p.kind == .required ? "required" : p.kind == .optional ? "optional" : "derived",
                    try p.defaultValue.map { if case .string(let s) = $0 { s } else { try $0.json.jsonString } } ?? "",
                    p.choiceList.joined(separator: "|"),
                ]
            }
            let header = ["NAME", "TYPE", "DIR", "KIND", "DEFAULT", "CHOICES"]
            let widths = header.indices.map { i in ([header] + rows).map { $0[i].count }.max() ?? 0 }
            for row in [header] + rows {
                print(row.enumerated().map { i, cell in cell.padding(toLength: widths[i], withPad: " ", startingAt: 0) }.joined(separator: "  ").trimmingCharacters(in: .whitespaces))
            }
        }
    }

    struct Run: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Run a task as a job: a GPServer task, a model file or a built-in tool, with a progress line and its messages as they come.",
            discussion: """
                --param NAME=VALUE gives an input: text for strings, numbers and booleans, JSON for the rest \
                ({"distance":5,"units":"esriKilometers"}), layer:<name> for a layer of --input, @file.geojson or \
                @file.json for features in a file, a file path for a GPDataFile (uploaded first). Feature outputs are \
                written to --out as <name>.geojson, output files (reports, rasters) downloaded into it. Exit code 0 when the job succeeded, 1 when it failed.
                """)
        @Argument(help: "A task URL (…/GPServer/<task>), a model .json file, or a built-in tool (Buffer, Clip, …).") var task: String
        @Option(name: .customLong("param"), parsing: .unconditionalSingleValue, help: "An input as NAME=VALUE (repeat for each).") var params: [String] = []
        @Option(help: "A JSON file of inputs: {\"NAME\": <REST JSON value>, …}.") var paramFile: String?
        @Option(help: "A geodatabase (a replica) whose layers inputs name as layer:<name>.") var input: String?
        @Option(help: "A directory for the outputs (<name>.geojson, output files, other values in outputs.json).") var out: String?
        @Option(help: "Process in this spatial reference (env:processSR), an EPSG code.") var processSr: Int?
        @Option(help: "Outputs in this spatial reference (env:outSR), an EPSG code.") var outSr: Int?
        @Option(help: "Milliseconds between status requests to an asynchronous service.") var pollMs = 5_000
        @Option(help: "Service token (default: $OUTPOST_TOKEN).") var token: String?
        @Flag(help: "Print the outputs and messages as JSON.") var json = false

        func validate() throws {
            guard pollMs >= 10 else { throw ValidationError("--poll-ms must be at least 10") }
            for p in params where !p.contains("=") { throw ValidationError("--param takes NAME=VALUE, not \(p)") }
        }

        func run() async throws {
            let task = try GPCommand.task(self.task, token: token)
            let info = try await GPCommand.load(task)
            var parameters = try await task.makeDefaultParameters()
            parameters.processSpatialReference = processSr.map { SpatialReference(wkid: $0) }
            parameters.outputSpatialReference = outSr.map { SpatialReference(wkid: $0) }
            // A run here writes its files straight into --out (none left in a temporary folder).
            if case .local = task.source, let out { parameters.outputDirectory = URL(fileURLWithPath: out) }
            let geodatabase = try input.map { try Geodatabase.open(at: URL(fileURLWithPath: $0), readOnly: true) }
            defer { try? geodatabase?.close() }
            if let paramFile {
                guard let data = FileManager.default.contents(atPath: paramFile), let object = (try? JSONValue.parse(data))?.objectValue else {
                    throw CLIFailure(message: "\(paramFile) is not a JSON object of inputs")
                }
                for (name, value) in object {
                    let type = try Self.type(of: name, in: info)
                    parameters.inputs[name] = try Self.checked(name) { try GPValue(json: value, as: type, parameter: name) }
                }
            }
            for p in params {
                let parts = p.split(separator: "=", maxSplits: 1).map(String.init)
                let name = parts[0], text = parts.count > 1 ? parts[1] : ""
                parameters.inputs[name] = try await Self.value(text, name: name, type: try Self.type(of: name, in: info), geodatabase: geodatabase)
            }
            var definition = GeoprocessingJob(source: task.source, parameters: parameters, transport: HTTPGPTransport(token: serviceToken(token)))
            definition.pollInterval = .milliseconds(pollMs)
            let job = Job(definition)
            // Messages on stderr as they come (the result alone on stdout).
            let messages = job.messageUpdates
            let printer = Task {
                for await m in messages where !json { FileHandle.standardError.write(Data("\(m.severity == .info ? "" : "\(m.severity.rawValue): ")\(m.text)\n".utf8)) }
            }
            try job.start()
            let status = await runShowingProgress(job, label: info.name)
            printer.cancel()
            guard status == .succeeded else {
                if json { printJSON(["status": .string(status.rawValue), "error": .string(job.error?.message ?? "")]) }
                throw CLIFailure(message: job.error?.message ?? "the task did not finish (\(status.rawValue))")
            }
            var result = try await job.output
            // File outputs (reports, rasters) come down into --out.
            if let out {
                let directory = URL(fileURLWithPath: out)
                try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
                for (name, value) in result.outputs {
                    switch value {
                    case .dataFile(let file), .rasterData(let file), .rasterDataLayer(let file):
                        guard let remote = file.url.flatMap(URL.init(string:)) else { continue }
                        let local = directory.appendingPathComponent(remote.lastPathComponent.isEmpty ? name : remote.lastPathComponent)
                        try await task.download(file, to: local)
                        var copy = file
                        copy.url = local.absoluteString
                        result.outputs[name] = value.replacingFile(copy)
                    default: continue
                    }
                }
            }
            try write(result, info: info)
        }

        static func type(of name: String, in info: GPTaskInfo) throws -> GPDataType {
            guard let p = info.parameter(name), p.direction == .input else {
                throw CLIFailure(message: "\(info.name) has no input \(name) (inputs: \(info.parameters.filter { $0.direction == .input }.map(\.name).joined(separator: ", ")))")
            }
            return p.dataType
        }

        static func checked<T>(_ name: String, _ body: () throws -> T) throws -> T {
            do {
                return try body()
            } catch let error as GPValueError {
                throw CLIFailure(message: error.description)
            } catch let error as GeometryError {
                throw CLIFailure(message: "parameter \(name): \(error.description)")
            }
        }

        /// A --param value as its type wants it.
        static func value(_ text: String, name: String, type: GPDataType, geodatabase: Geodatabase?) async throws -> GPValue {
            switch type {
            case .featureRecordSetLayer, .recordSet:
                let geometry = type == .featureRecordSetLayer
                if text.hasPrefix("layer:") {
                    guard let geodatabase else { throw CLIFailure(message: "parameter \(name): layer:… needs --input <geodatabase>") }
                    let table = try geodatabase.table(named: String(text.dropFirst(6)))
                    let set = GPFeatureSet(
                        layer: table.definition, spatialReference: table.spatialReference ?? geodatabase.schema.spatialReference,
                        features: try await table.features(), geometry: geometry)
                    return geometry ? .featureSet(set) : .recordSet(set)
                }
                if text.hasPrefix("@") {
                    let path = String(text.dropFirst())
                    guard let data = FileManager.default.contents(atPath: path), let json = try? JSONValue.parse(data) else {
                        throw CLIFailure(message: "parameter \(name): cannot read JSON from \(path)")
                    }
                    if json["type"]?.stringValue == "FeatureCollection" {
                        let features = try checked(name) { try (json["features"]?.arrayValue ?? []).map { try GeoJSONFeature(json: $0) } }
                        let set = GPFeatureSet(
                            geometryType: nil, spatialReference: .wgs84, fields: [],
                            features: features.map { GPFeatureSet.Feature(geometry: geometry ? $0.geometry : nil, attributes: $0.properties) })
                        return geometry ? .featureSet(set) : .recordSet(set)
                    }
                    return try checked(name) { try GPValue(json: json, as: type, parameter: name) }
                }
                return try checked(name) { try GPValue(formValue: text, as: type, parameter: name) }
            case .dataFile, .rasterData, .rasterDataLayer:
                if FileManager.default.fileExists(atPath: text) {
                    let file = GPFileReference(url: URL(fileURLWithPath: text).absoluteString)
                    return type == .dataFile ? .dataFile(file) : type == .rasterData ? .rasterData(file) : .rasterDataLayer(file)
                }
                return try checked(name) { try GPValue(formValue: text, as: type, parameter: name) }
            default:
                if text.hasPrefix("@"), let data = FileManager.default.contents(atPath: String(text.dropFirst())) {
                    return try checked(name) { try GPValue(json: try JSONValue.parse(data), as: type, parameter: name) }
                }
                return try checked(name) { try GPValue(formValue: text, as: type, parameter: name) }
            }
        }

        /// Feature outputs as GeoJSON files in --out (RFC 7946: WGS 84), the rest in
        /// outputs.json there and on stdout.
        func write(_ result: GeoprocessingResult, info: GPTaskInfo) throws {
            var printed: [String: JSONValue] = [:]
            var files: [String: JSONValue] = [:]
            let directory = out.map { URL(fileURLWithPath: $0) }
            if let directory { try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true) }
            for (name, value) in result.outputs.sorted(by: { $0.key < $1.key }) {
                switch value {
                case .featureSet(let set), .recordSet(let set):
                    if let directory {
                        let file = directory.appendingPathComponent("\(name).geojson")
                        try FeatureFiles.geoJSON(set).write(to: file)
                        files[name] = .string(file.path)
                    }
                    printed[name] = ["features": .integer(Int64(set.features.count)), "geometryType": set.geometryType.map(JSONValue.string) ?? .null]
                default:
                    printed[name] = try value.json
                }
            }
            if let directory {
                try JSONValue.object(try result.outputs.filter { if case .featureSet = $0.value { false } else if case .recordSet = $0.value { false } else { true } }
                    .mapValues { try $0.json }).jsonData.write(to: directory.appendingPathComponent("outputs.json"))
            }
            if json {
                printJSON([
                    "status": "succeeded", "jobId": result.jobID.map(JSONValue.string) ?? .null, "outputs": .object(printed), "files": .object(files),
                    "messages": .array(result.messages.map(\.json)),
                ])
            } else {
                for (name, value) in printed.sorted(by: { $0.key < $1.key }) {
                    if let count = value["features"]?.integerValue {
                        print("\(name): \(count) features\(files[name]?.stringValue.map { " → \($0)" } ?? "")")
                    } else {
                        print("\(name): \(value.jsonString)")
                    }
                }
            }
        }
    }
}
