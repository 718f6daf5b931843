import Foundation
import Hummingbird
import NIOCore
import OutpostCore
import OutpostREST
import OutpostGeoprocessing

/// `…/<name>/GPServer/…`, as the ArcGIS REST API shapes a geoprocessing service: service info,
/// task info, `execute` (synchronous services), `submitJob` and `jobs/{id}` with its results,
/// inputs and cancel (asynchronous services), and `uploads/upload`.
struct GPServerRoutes {
    let service: GeoprocessingService
    let resolver: GPLayerResolver
    let parameters: RequestParameters
    var writing: ResponseWriting
    /// `…/<name>/GPServer` as the client reaches it.
    let serviceURL: String

    /// Parameters every operation may carry besides the task's own.
    static let common: Set<String> = ["f", "token", "returnmessages", "returnz", "returnm", "context", "returnfeaturecollection", "returncolumnname", "returntype"]

    /// The routes below `…/<name>/GPServer`, for callers who may query the service. `service`
    /// makes the request's answerer (it finds the service, or refuses the name).
    static func table(service: @escaping @Sendable (RoutedRequest) throws -> GPServerRoutes) -> RouteTable {
        var table = RouteTable()
        func on(_ path: RouterPath, _ answer: @escaping @Sendable (GPServerRoutes, RoutedRequest) async throws -> Response) {
            table.on(path, by: service, answer)
        }
        /// A route below a task the service has.
        func onTask(_ path: RouterPath, _ answer: @escaping @Sendable (GPServerRoutes, GPTaskDefinition, RoutedRequest) async throws -> Response) {
            on(path) { r, call in
                let name = try call.value("task")
                guard let task = r.service.definition.task(named: name) else { throw ServiceError.notFound("task \(name)") }
                return try await answer(r, task, call)
            }
        }
        on("") { r, _ in r.writing.json(r.serviceInfo()) }
        on("uploads/upload") { r, _ in try r.upload() }
        on("uploads/:item") { r, call in try r.uploadInfo(try call.value("item")) }
        on("files/:job/:file") { r, call in
            let (job, name) = (try call.value("job"), try call.value("file"))
            guard let file = r.service.files.written(job, name) else { throw ServiceError.notFound("file \(name)") }
            return try ReplicaRoutes.streamFile(file, contentType: Self.contentType(name), removeAfter: false)
        }
        // ArcGIS also answers a job below the service (`…/GPServer/jobs/{id}`).
        on("jobs/:job") { r, call in try await r.job(try call.value("job"), task: nil) }
        onTask(":task") { r, task, _ in
            var info = try task.infoJSON.objectValue ?? [:]
            info["executionType"] = .string(r.service.definition.executionType.rawValue)
            return r.writing.json(.object(info))
        }
        onTask(":task/execute") { r, task, call in
            if let form = r.form(task, operation: "execute", call) { return form }
            guard r.service.definition.executionType == .synchronous else {
                throw ServiceError(400, "\(r.service.definition.name) is an asynchronous service: use submitJob, not execute")
            }
            // The client waits for the answer; if it leaves, reading its inputs or the tool stops
            // at its next check.
            return try await ClientDeparture.cancelling { try await r.operationPage("execute", call).execute(task) }
        }
        onTask(":task/submitJob") { r, task, call in
            if let form = r.form(task, operation: "submitJob", call) { return form }
            guard r.service.definition.executionType == .asynchronous else {
                throw ServiceError(400, "\(r.service.definition.name) is a synchronous service: use execute, not submitJob")
            }
            let (inputs, environment) = try await r.inputs(task)
            let id = try await r.service.queue.submit(task: task.name, inputs: try inputs.mapValues { try $0.json }, environment: environment)
            return r.operationPage("submitJob", call).writing.json(try await r.status(id, task: task))
        }
        onTask(":task/jobs/:job") { r, task, call in try await r.job(try call.value("job"), task: task) }
        onTask(":task/jobs/:job/cancel") { r, task, call in
            let id = try call.value("job")
            guard try await r.service.queue.cancel(id) else { throw ServiceError.notFound("job \(id)") }
            return r.writing.json(try await r.status(id, task: task))
        }
        for part in ["results", "inputs"] {
            onTask(RouterPath(":task/jobs/:job/\(part)/:parameter")) { r, task, call in
                try await r.parameterValue(try call.value("job"), task: task, name: try call.value("parameter"), output: part == "results")
            }
        }
        return table
    }

    /// A browser on `execute` or `submitJob` with none of the task's inputs gets the task's form.
    private func form(_ task: GPTaskDefinition, operation: String, _ call: RoutedRequest) -> Response? {
        guard let view = call.directoryView(), task.inputs.allSatisfy({ parameters[$0.name] == nil }) else { return nil }
        return writing.html(
            view.operation(
                title: "\(operation == "execute" ? "Execute" : "Submit Job"): \(task.displayName)", description: task.summary,
                form: DirectoryForms.geoprocessing(task, operation: operation), result: nil))
    }

    /// For a browser, the answer shown as the operation's result.
    private func operationPage(_ operation: String, _ call: RoutedRequest) -> GPServerRoutes {
        guard let view = call.directoryView() else { return self }
        var routes = self
        routes.writing.directory = (view, .operation(description: operation == "execute" ? "The task ran:" : "The job was submitted; follow it at jobs/<jobId>.", form: nil))
        return routes
    }

    private func serviceInfo() -> JSONValue {
        let d = service.definition
        return [
            "currentVersion": ServiceInfo.currentVersion, "serviceDescription": .string(d.summary),
            "tasks": .array(d.tasks.map { .string($0.name) }), "executionType": .string(d.executionType.rawValue),
            // The result map service (…/<name>/MapServer/jobs/<id>), when the definition asks for it.
            "resultMapServerName": .string(d.resultMapServer ? d.name : ""), "maximumRecords": .integer(Int64(d.maximumRecords)),
            "capabilities": .string(d.executionType == .asynchronous ? "Uploads" : ""),
        ]
    }

    // MARK: - Inputs

    /// The task's inputs from the request: each read as its type (a 400 naming it when it does
    /// not parse), layer URLs resolved to features, feature counts within `maximumRecords`,
    /// required values present; `env:outSR` and `env:processSR`.
    func inputs(_ task: GPTaskDefinition) async throws -> (values: [String: GPValue], environment: GPEnvironment) {
        let inputNames = Set(task.inputs.map(\.name))
        for name in parameters.names.sorted() where !inputNames.contains(name) && !Self.common.contains(name.lowercased()) && !name.lowercased().hasPrefix("env:") {
            throw ServiceError.badParameter(name, "\(task.name) has no parameter \(name) (its inputs: \(task.inputs.map(\.name).joined(separator: ", ")))")
        }
        var values: [String: GPValue] = [:]
        for parameter in task.inputs {
            guard let text = parameters[parameter.name] else { continue }
            values[parameter.name] = try GPValue(formValue: text, as: parameter.dataType, parameter: parameter.name)
        }
        // Defaults first, then layer URLs read (a default may name a served layer).
        var checked = try GPParameterInfo.check(values, against: task.parameters, task: task.name)
        for (name, value) in checked {
            let resolved = try await resolver.resolve(value, parameter: name)
            try check(resolved, parameter: name)
            checked[name] = resolved
        }
        let environment = GPEnvironment(
            processSpatialReference: try parameters.knownSpatialReference("env:processSR") ?? task.environment.processSpatialReference,
            outputSpatialReference: try parameters.knownSpatialReference("env:outSR") ?? task.environment.outputSpatialReference)
        return (checked, environment)
    }

    private func check(_ value: GPValue, parameter: String) throws {
        let limit = service.definition.maximumRecords
        switch value {
        case .featureSet(let set), .recordSet(let set):
            guard set.features.count <= limit else {
                throw ServiceError.badParameter(parameter, "\(set.features.count) features are more than the \(limit) this service takes (maximumRecords)")
            }
        case .dataFile, .rasterData, .rasterDataLayer:
            _ = try service.files.local(value, parameter: parameter)
        case .multiValue(_, let items):
            for item in items { try check(item, parameter: parameter) }
        default:
            break
        }
    }


    // MARK: - execute

    private func execute(_ task: GPTaskDefinition) async throws -> Response {
        let (given, environment) = try await inputs(task)
        let files = service.files
        let inputs = try given.reduce(into: [String: GPValue]()) { $0[$1.key] = try files.local($1.value, parameter: $1.key) }
        let messages = MessageLog()
        let output = files.root.appendingPathComponent("x" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased())
        let context = GPToolContext(outputDirectory: output) { messages.append(GPMessage(.informative, $0)) }
        let outputs: [String: GPValue]
        do {
            outputs = try await GPWorkExecutor.run { try await task.execute(inputs, environment: environment, context: context) }
        } catch {
            // A tool that failed leaves no files behind.
            try? FileManager.default.removeItem(at: output)
            switch error {
            case let error as GPValueError: throw ServiceError.from(error)
            case is CancellationError: throw ServiceError(499, "the request was cancelled")
            default:
                throw ServiceError(500, "Error executing tool \(task.name): \(GPJobQueue.describe(error))", details: messages.all.map(\.description))
            }
        }
        var results: [JSONValue] = []
        for parameter in task.outputs {
            guard let value = outputs[parameter.name] else { continue }
            results.append([
                "paramName": .string(parameter.name), "dataType": .string(parameter.dataType.description),
                "value": files.published(try limited(value), serviceURL: serviceURL),
            ])
        }
        let wantMessages = try parameters.bool("returnMessages", default: true)
        return writing.json(["results": .array(results), "messages": .array(wantMessages ? messages.all.map(\.json) : [])])
    }

    /// An output's JSON, a feature set cut at `maximumRecords` and marked so.
    private func limited(_ value: GPValue) throws -> JSONValue {
        let limit = service.definition.maximumRecords
        if case .featureSet(var set) = value, set.features.count > limit {
            set.features.removeLast(set.features.count - limit)
            var json = try GPValue.featureSet(set).json.objectValue ?? [:]
            json["exceededTransferLimit"] = true
            return .object(json)
        }
        return try value.json
    }

    // MARK: - Jobs

    private func job(_ id: String, task: GPTaskDefinition?) async throws -> Response {
        writing.json(try await status(id, task: task))
    }

    /// `jobs/{id}`: status, messages, and where each input and (once succeeded) output is.
    private func status(_ id: String, task: GPTaskDefinition?) async throws -> JSONValue {
        let jobs = service.queue
        guard let job = try await jobs.summary(id), task == nil || job.task == task?.name else { throw ServiceError.notFound("job \(id)") }
        var json: [String: JSONValue] = ["jobId": .string(id), "jobStatus": .string(job.status.rawValue)]
        json["inputs"] = .object(Dictionary(uniqueKeysWithValues: job.inputs.map { ($0, ["paramUrl": .string("inputs/\($0)")]) }))
        json["results"] = .object(Dictionary(uniqueKeysWithValues: job.results.map { ($0, ["paramUrl": .string("results/\($0)")]) }))
        if try parameters.bool("returnMessages", default: true) {
            json["messages"] = .array(try await jobs.messages(id).map(\.json))
        }
        return .object(json)
    }

    private func parameterValue(_ id: String, task: GPTaskDefinition, name: String, output: Bool) async throws -> Response {
        let jobs = service.queue
        guard let job = try await jobs.summary(id), job.task == task.name else { throw ServiceError.notFound("job \(id)") }
        guard let parameter = task.parameter(name), parameter.direction == (output ? .output : .input) else {
            throw ServiceError.notFound("\(output ? "output" : "input") parameter \(name) of \(task.name)")
        }
        if output, job.status != .succeeded {
            throw ServiceError(400, "job \(id) is \(job.status.rawValue); results exist once it has succeeded")
        }
        guard var value = try await jobs.value(id, name, result: output) else { throw ServiceError.notFound("a value of \(name) in job \(id)") }
        if output { value = service.files.published(try limited(GPValue(json: value, as: parameter.dataType, parameter: name)), serviceURL: serviceURL) }
        return writing.json(["paramName": .string(name), "dataType": .string(parameter.dataType.description), "value": value])
    }

    // MARK: - Uploads

    /// `uploads/upload`: a multipart body with the file in a part named `file`; answers the
    /// item id a GPDataFile input names (`{"itemID": …}`).
    private func upload() throws -> Response {
        let part = try parameters.filePart(named: "file")
        let fileName = Self.safeName(part.filename ?? "upload")
        let id = "i" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        let folder = service.files.uploads.appendingPathComponent(id)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try part.data.write(to: folder.appendingPathComponent(fileName))
        return writing.json(["success": true, "item": itemJSON(id, name: fileName, size: part.data.count)])
    }

    private func uploadInfo(_ id: String) throws -> Response {
        guard let file = service.files.uploaded(id) else { throw ServiceError.notFound("uploaded item \(id)") }
        let size = (try? FileManager.default.attributesOfItem(atPath: file.path)[.size] as? Int) ?? 0
        return writing.json(["item": itemJSON(id, name: file.lastPathComponent, size: size)])
    }

    private func itemJSON(_ id: String, name: String, size: Int) -> JSONValue {
        ["itemID": .string(id), "itemName": .string(name), "description": .null, "date": .integer(GPJobQueue.now()), "committed": true, "size": .integer(Int64(size))]
    }

    static func contentType(_ name: String) -> String {
        switch URL(fileURLWithPath: name).pathExtension.lowercased() {
        case "tif", "tiff": "image/tiff"
        case "json", "geojson": "application/json"
        case "csv": "text/csv"
        case "zip": "application/zip"
        case "gpkg": "application/geopackage+sqlite3"
        default: "application/octet-stream"
        }
    }

    /// A file name without directories or characters a file system might mind.
    static func safeName(_ name: String) -> String {
        let last = name.split(whereSeparator: { $0 == "/" || $0 == "\\" }).last.map(String.init) ?? "upload"
        let cleaned = String(last.map { $0.isLetter || $0.isNumber || "-_.".contains($0) ? $0 : "_" }).trimmingCharacters(in: CharacterSet(charactersIn: "."))
        return cleaned.isEmpty ? "upload" : String(cleaned.prefix(120))
    }
}

/// Messages an `execute` collects while its tool runs.
final class MessageLog: Sendable {
    private let messages = Locked<[GPMessage]>([])
    func append(_ m: GPMessage) { messages.withLock { $0.append(m) } }
    var all: [GPMessage] { messages.withLock { $0 } }
}
