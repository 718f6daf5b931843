import Foundation
import OutpostCore

/// A geoprocessing task run as a Job (ArcGIS `GeoprocessingJob`). Steps:
///
/// 1. `upload` — file inputs (GPDataFile, rasters) given as file URLs go to the service's `uploads/upload`
///    and are replaced by their item ids.
/// 2. `run` — a synchronous service answers `execute`; an asynchronous one gets `submitJob`,
///    the server's job id goes into the checkpoint, and the job polls `jobs/<id>` every
///    `pollInterval` (5 s by default, as the SDK does), logging the server's messages as they
///    come and riding out network loss for `connectionLossWindow`. A local task runs here.
/// 3. `fetch` — each output of a server job is read from `jobs/<id>/results/<name>`.
///
/// Its JSON holds the task, the inputs and, once submitted, the server's job id: a job rebuilt
/// after a kill reattaches to the server's job rather than submitting again. Cancelling it
/// sends `cancel` to the server's job.
public struct GeoprocessingJob: JobDefinition {
    public static let jobType = "outpost.geoprocessing"

    /// The task: a GPServer task or a local tool or model.
    public let source: GeoprocessingTask.Source
    /// The inputs and settings of the run.
    public let settings: GeoprocessingParameters
    /// The time between two status polls of a server job.
    public var pollInterval: Duration
    /// How long the job rides out a lost connection before it fails.
    public var connectionLossWindow: Duration
    let transport: any GPTransport

    /// A job running `parameters` on `source`.
    public init(
        source: GeoprocessingTask.Source, parameters: GeoprocessingParameters, transport: any GPTransport, pollInterval: Duration = .seconds(5),
        connectionLossWindow: Duration = .seconds(600)
    ) {
        self.source = source
        self.settings = parameters
        self.transport = transport
        self.pollInterval = pollInterval
        self.connectionLossWindow = connectionLossWindow
    }

    public var parameters: JSONValue {
        var p: [String: JSONValue] = [
            "executionType": .string(settings.executionType.rawValue),
            "inputs": .object(settings.inputs.mapValues { (try? $0.json) ?? .null }),
            "inputTypes": .object(settings.inputs.mapValues { .string($0.dataType.description) }),
            "pollIntervalMilliseconds": .integer(pollInterval.wholeMilliseconds),
            "connectionLossWindowMilliseconds": .integer(connectionLossWindow.wholeMilliseconds),
            "returnZ": .bool(settings.returnZ), "returnM": .bool(settings.returnM),
        ]
        switch source {
        case .remote(let url): p["taskUrl"] = .string(url.absoluteString)
        case .local(let local): p["local"] = local.json
        }
        if let sr = settings.processSpatialReference { p["processSR"] = .integer(Int64(sr.wkid)) }
        if let sr = settings.outputSpatialReference { p["outSR"] = .integer(Int64(sr.wkid)) }
        if let directory = settings.outputDirectory { p["outputDirectory"] = .string(directory.path) }
        return .object(p)
    }

    public init(parameters: JSONValue, environment: JobEnvironment) throws {
        let source: GeoprocessingTask.Source
        if let url = parameters["taskUrl"]?.stringValue.flatMap(URL.init(string:)) {
            source = .remote(url)
        } else if let local = parameters["local"].flatMap(GPLocalTask.init(json:)) {
            source = .local(local)
        } else {
            throw JobError(.invalidJSON, "a geoprocessing job needs taskUrl or local")
        }
        guard let type = parameters["executionType"]?.stringValue.flatMap(GPServiceDefinition.ExecutionType.init(rawValue:)) else {
            throw JobError(.invalidJSON, "a geoprocessing job needs its executionType")
        }
        var settings = GeoprocessingParameters(executionType: type)
        let types = parameters["inputTypes"]?.objectValue ?? [:]
        for (name, value) in parameters["inputs"]?.objectValue ?? [:] {
            guard let type = types[name]?.stringValue.flatMap(GPDataType.init(name:)) else { throw JobError(.invalidJSON, "input \(name) has no data type") }
            do {
                settings.inputs[name] = try GPValue(json: value, as: type, parameter: name)
            } catch {
                throw JobError(.invalidJSON, "input \(name): \(error)")
            }
        }
        settings.processSpatialReference = parameters["processSR"]?.integerValue.map { SpatialReference(wkid: Int($0)) }
        settings.outputSpatialReference = parameters["outSR"]?.integerValue.map { SpatialReference(wkid: Int($0)) }
        settings.returnZ = parameters["returnZ"]?.boolValue ?? false
        settings.returnM = parameters["returnM"]?.boolValue ?? false
        settings.outputDirectory = parameters["outputDirectory"]?.stringValue.map { URL(fileURLWithPath: $0) }
        self.init(
            source: source, parameters: settings, transport: environment[(any GPTransport).self] ?? HTTPGPTransport(),
            pollInterval: .milliseconds(parameters["pollIntervalMilliseconds"]?.integerValue ?? 5_000),
            connectionLossWindow: .milliseconds(parameters["connectionLossWindowMilliseconds"]?.integerValue ?? 600_000))
    }


    public var stepNames: [String] { ["upload", "run", "fetch"] }

    public func run(step: Int, context: JobContext) async throws {
        switch step {
        case 0: try await upload(context)
        case 1: try await execute(context)
        default: try await fetch(context)
        }
    }

    // MARK: - Steps

    private var taskURL: URL? { if case .remote(let url) = source { url } else { nil } }

    /// The inputs with uploaded files' item ids (recorded by the upload step).
    private func inputs(_ context: JobContext) throws -> [String: GPValue] {
        var inputs = settings.inputs
        for (name, item) in context.recorded("uploads")?.objectValue ?? [:] {
            guard let id = item.stringValue, let value = inputs[name], var file = value.fileReference else { continue }
            file.url = nil
            file.itemID = id
            inputs[name] = value.replacingFile(file)
        }
        return inputs
    }

    private func upload(_ context: JobContext) async throws {
        guard let taskURL else { return }
        var uploads = context.recorded("uploads")?.objectValue ?? [:]
        for (name, value) in settings.inputs.sorted(by: { $0.key < $1.key }) where uploads[name] == nil {
            guard let file = value.fileReference, let text = file.url, let url = URL(string: text), url.isFileURL else { continue }
            context.log("uploading \(url.lastPathComponent) for \(name)")
            let answer = try await transport.upload(taskURL.deletingLastPathComponent().appendingPathComponent("uploads/upload"), file: url)
            guard let id = answer["item"]?["itemID"]?.stringValue else { throw GeoprocessingError(code: 500, "the upload of \(url.lastPathComponent) gave no item id") }
            uploads[name] = .string(id)
            context.record("uploads", .object(uploads))
            try await context.checkpoint(nil)
        }
    }

    private func form(_ inputs: [String: GPValue]) throws -> [(String, String)] {
        var form: [(String, String)] = [("f", "json")]
        for (name, value) in inputs.sorted(by: { $0.key < $1.key }) {
            if case .string(let s) = value { form.append((name, s)) } else { form.append((name, try value.json.jsonString)) }
        }
        if let sr = settings.processSpatialReference { form.append(("env:processSR", String(sr.wkid))) }
        if let sr = settings.outputSpatialReference { form.append(("env:outSR", String(sr.wkid))) }
        if settings.returnZ { form.append(("returnZ", "true")) }
        if settings.returnM { form.append(("returnM", "true")) }
        return form
    }

    private func execute(_ context: JobContext) async throws {
        guard let taskURL else { return try await runLocally(context) }
        if settings.executionType == .synchronous {
            guard context.recorded("results") == nil else { return }
            let answer = try await transport.post(taskURL.appendingPathComponent("execute"), form: try form(try inputs(context)))
            for message in answer["messages"]?.arrayValue ?? [] { Self.log(message, context) }
            context.record("messages", .array(answer["messages"]?.arrayValue ?? []))
            context.record("results", .array(answer["results"]?.arrayValue ?? []))
            return
        }
        var jobID = context.checkpointData?["jobId"]?.stringValue ?? context.recorded("jobId")?.stringValue
        if jobID == nil {
            let answer = try await transport.post(taskURL.appendingPathComponent("submitJob"), form: try form(try inputs(context)))
            guard let id = answer["jobId"]?.stringValue else { throw GeoprocessingError(code: 500, "submitJob answered no jobId") }
            jobID = id
            context.record("jobId", .string(id))
            context.log("submitted as server job \(id)")
            try await context.checkpoint(["jobId": .string(id), "seen": 0])
        } else {
            context.log("following server job \(jobID!)")
        }
        try await poll(jobID!, taskURL: taskURL, context: context)
    }

    private func poll(_ id: String, taskURL: URL, context: JobContext) async throws {
        let statusURL = taskURL.appendingPathComponent("jobs/\(id)")
        var seen = Int(context.checkpointData?["seen"]?.integerValue ?? 0)
        var unreachableSince: ContinuousClock.Instant?
        while true {
            let status: JSONValue
            do {
                status = try await transport.get(statusURL)
                unreachableSince = nil
            } catch let error as RemoteJobUnreachable {
                let since = unreachableSince ?? .now
                unreachableSince = since
                if ContinuousClock.now - since >= connectionLossWindow {
                    throw JobError(.connectionLost, "connection lost: \(statusURL.host ?? "the server") has not answered for \(connectionLossWindow) (\(error))")
                }
                context.log("cannot reach the server (\(error)); retrying", severity: .warning)
                try await Task.sleep(for: pollInterval)
                continue
            }
            let messages = status["messages"]?.arrayValue ?? []
            for message in messages.dropFirst(seen) { Self.log(message, context) }
            if messages.count > seen { context.record("messages", .array(messages)) }
            seen = max(seen, messages.count)
            let state = status["jobStatus"]?.stringValue.flatMap(GPJobStatus.init(rawValue:))
            switch state {
            case .succeeded?:
                context.record("resultNames", .array((status["results"]?.objectValue ?? [:]).keys.sorted().map { .string($0) }))
                try await context.checkpoint(["jobId": .string(id), "seen": .integer(Int64(seen))])
                return
            case .failed?, .timedOut?:
                let reason = messages.last { $0["type"] == "esriJobMessageTypeError" }?["description"]?.stringValue
                throw JobError(.remoteFailed, "the server's job \(state == .timedOut ? "timed out" : "failed"): \(reason ?? "no reason given")")
            case .cancelled?:
                throw JobError.cancelled()
            case nil:
                throw GeoprocessingError(code: 500, "\(statusURL.absoluteString) gave no jobStatus")
            default:
                try await context.checkpoint(["jobId": .string(id), "seen": .integer(Int64(seen))])
                try await Task.sleep(for: pollInterval)
            }
        }
    }

    private func runLocally(_ context: JobContext) async throws {
        guard case .local(let local) = source, context.recorded("results") == nil else { return }
        let task = try local.definition()
        let environment = GPEnvironment(processSpatialReference: settings.processSpatialReference, outputSpatialReference: settings.outputSpatialReference)
        let messages = Locked<[JSONValue]>([])
        let outputs = try await task.execute(
            settings.inputs, environment: environment,
            context: GPToolContext(outputDirectory: settings.outputDirectory) { text in
                context.log(text)
                messages.update { $0.append(GPMessage(.informative, text).json) }
            })
        context.record("messages", .array(messages.get()))
        context.record(
            "results",
            .array(try task.outputs.compactMap { p in
                try outputs[p.name].map { ["paramName": .string(p.name), "dataType": .string(p.dataType.description), "value": try $0.json] }
            }))
    }

    private func fetch(_ context: JobContext) async throws {
        guard let taskURL, context.recorded("results") == nil, let id = context.recorded("jobId")?.stringValue else { return }
        var results: [JSONValue] = []
        for name in (context.recorded("resultNames")?.arrayValue ?? []).compactMap(\.stringValue) {
            results.append(try await transport.get(taskURL.appendingPathComponent("jobs/\(id)/results/\(name)")))
        }
        // The result map service, when the service has one: …/<map name>/MapServer/jobs/<id>.
        let service = taskURL.deletingLastPathComponent()
        if let name = try? await transport.get(service)["resultMapServerName"]?.stringValue, !name.isEmpty {
            let map = service.deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent(name).appendingPathComponent("MapServer/jobs/\(id)")
            context.record("resultMap", .string(map.absoluteString))
        }
        context.record("results", .array(results))
    }

    static func log(_ message: JSONValue, _ context: JobContext) {
        guard let m = GPMessage(json: message) else { return }
        context.log(m.description, severity: m.kind == .error ? .error : m.kind == .warning ? .warning : .info)
    }

    public func output(context: JobContext) async throws -> GeoprocessingResult {
        var outputs: [String: GPValue] = [:]
        for item in context.recorded("results")?.arrayValue ?? [] {
            guard let name = item["paramName"]?.stringValue, let type = item["dataType"]?.stringValue.flatMap(GPDataType.init(name:)), let value = item["value"]
            else { continue }
            outputs[name] = try GPValue(json: value, as: type, parameter: name)
        }
        let messages = (context.recorded("messages")?.arrayValue ?? []).compactMap(GPMessage.init(json:))
        return GeoprocessingResult(
            outputs: outputs, messages: messages, jobID: context.recorded("jobId")?.stringValue,
            resultMapURL: context.recorded("resultMap")?.stringValue.flatMap(URL.init(string:)))
    }

    /// A cancelled or failed client job asks the server to cancel its job.
    public func rollback(context: JobContext) async {
        guard let taskURL, let id = context.recorded("jobId")?.stringValue else { return }
        do {
            _ = try await transport.post(taskURL.appendingPathComponent("jobs/\(id)/cancel"), form: [("f", "json")])
            context.log("asked the server to cancel job \(id)")
        } catch {
            context.log("could not ask the server to cancel job \(id): \(error)", severity: .warning)
        }
    }
}

extension JobRegistry {
    /// Registers geoprocessing jobs, reaching services through `transport`.
    public mutating func withGeoprocessingJobs(transport: any GPTransport = HTTPGPTransport()) {
        environment[(any GPTransport).self] = transport
        register(GeoprocessingJob.self)
    }
}

extension GPValue {
    /// The file a GPDataFile, GPRasterData or GPRasterDataLayer value names.
    public var fileReference: GPFileReference? {
        switch self {
        case .dataFile(let f), .rasterData(let f), .rasterDataLayer(let f): f
        default: nil
        }
    }

    /// The same kind of value naming `file`.
    public func replacingFile(_ file: GPFileReference) -> GPValue {
        switch self {
        case .dataFile: .dataFile(file)
        case .rasterData: .rasterData(file)
        case .rasterDataLayer: .rasterDataLayer(file)
        default: self
        }
    }
}
