import Foundation
import OutpostCore
import OutpostGeoprocessing
import OutpostServer
import OutpostTestSupport
import Testing

/// GeoprocessingTask against GPServer over real HTTP: loading, default parameters, execute and
/// jobs, resume after the client stops, cancel, and the same task run offline.
@Suite("GeoprocessingTask")
struct GeoprocessingTaskTests {
    static func taskURL(_ client: Client, _ service: String, _ task: String) -> URL {
        URL(string: "http://127.0.0.1:\(client.client.port!)/arcgis/rest/services/\(service)/GPServer/\(task)")!
    }

    /// A job's state for a failure message: its status, step and last messages.
    static func describe(_ job: Job<GeoprocessingJob>) -> String {
        let snapshot = job.snapshot
        return "job \(snapshot.status.rawValue) at step \(snapshot.currentStep + 1), last messages \(snapshot.messages.suffix(4).map(\.text))"
    }

    static func points(_ count: Int) throws -> GPValue {
        try GPValue(json: try JSONValue.parse(GPServerTests.points(count)), as: .featureRecordSetLayer)
    }

    @Test func aServerTaskGivesWhatTheSameToolGivesOffline() async throws {
        try await GPServerTests.withServer(["quick": GPServerTests.sync, "batch": GPServerTests.async()]) { client, _ in
            let input = try Self.points(5)
            // Offline: the built-in tool on this device.
            let local = GeoprocessingTask(tool: "Buffer")
            var offline = try await local.makeDefaultParameters()
            offline.inputs["Input_Features"] = input
            offline.inputs["Distance"] = .linearUnit(distance: 250, units: .esriMeters)
            let localJob = local.makeJob(parameters: offline)
            try localJob.start()
            let expected = try await localJob.output
            #expect(expected.messages.contains { $0.description.contains("Buffered 5 features") })

            for service in ["quick", "batch"] {
                let task = GeoprocessingTask(url: Self.taskURL(client, service, "Buffer"))
                try await task.load()
                #expect(task.taskInfo?.executionType == (service == "quick" ? .synchronous : .asynchronous))
                #expect(task.taskInfo?.parameter("Method")?.choiceList == ["PLANAR", "GEODESIC"])
                var parameters = try await task.makeDefaultParameters()
                #expect(parameters.inputs["Distance"] == .linearUnit(distance: 100, units: .esriMeters))
                parameters.inputs["Input_Features"] = input
                parameters.inputs["Distance"] = .linearUnit(distance: 250, units: .esriMeters)
                var definition = GeoprocessingJob(source: task.source, parameters: parameters, transport: HTTPGPTransport())
                definition.pollInterval = .milliseconds(20)
                let job = Job(definition)
                try job.start()
                let result = try await job.output
                #expect(result.outputs["Output_Features"] == expected.outputs["Output_Features"], "\(service)")
                #expect((service == "batch") == (result.jobID != nil))
                if let id = result.jobID { #expect(result.resultMapURL?.absoluteString.hasSuffix("/batch/MapServer/jobs/\(id)") == true) }
                #expect(job.messages.contains { $0.text.contains("Buffered 5 features") })
            }
        }
    }

    /// A long geodesic buffer run on this device in the structured form (`job.run()`), as a view's
    /// `.task` runs it: cancelling the Task ends the call within the bound, the job ends
    /// cancelled, and no output is left. Awaited with `output` instead, the job goes on.
    @Test(.scaledTimeLimit(minutes: 2))
    func anOfflineToolRunEndsWithItsTask() async throws {
        let task = GeoprocessingTask(tool: "Buffer")
        var parameters = try await task.makeDefaultParameters()
        parameters.inputs["Input_Features"] = try Self.points(30_000)
        parameters.inputs["Distance"] = .linearUnit(distance: 250, units: .esriMeters)
        parameters.inputs["Method"] = .string("GEODESIC")

        let structured = task.makeJob(parameters: parameters)
        let running = Task { try await structured.run() }
        while structured.status != .started { try await Task.sleep(for: .milliseconds(5)) }
        try await Task.sleep(for: .milliseconds(200))
        let cancelled = ContinuousClock.now
        running.cancel()
        guard let ended = await CancellationBound.outcome(of: running) else {
            Issue.record("run() went on \(CancellationBound.loaded) after its Task was cancelled: \(Self.describe(structured))")
            return
        }
        #expect(throws: CancellationError.self) { _ = try ended.get() }
        #expect(ContinuousClock.now - cancelled < CancellationBound.loaded)
        #expect(await structured.waitUntilFinished() == .failed)
        #expect(structured.error?.code == .cancelled, "\(String(describing: structured.error))")
        #expect(ContinuousClock.now - cancelled < CancellationBound.loaded, "the tool stopped at its next feature")

        // Awaited from a Task that goes away: the job is not the Task's, and goes on.
        let shared = task.makeJob(parameters: parameters)
        try shared.start()
        let watching = Task { try await shared.output }
        while shared.status != .started { try await Task.sleep(for: .milliseconds(5)) }
        watching.cancel()
        guard let left = await CancellationBound.outcome(of: watching) else {
            Issue.record("awaiting output went on \(CancellationBound.loaded) after its Task was cancelled: \(Self.describe(shared))")
            shared.cancel()
            return
        }
        #expect(throws: CancellationError.self) { _ = try left.get() }
        #expect(shared.status == .started, "the job goes on for whoever else observes it")
        shared.cancel()
        #expect(await shared.waitUntilFinished() == .failed)
    }

    /// A synchronous service's `execute` is one long HTTP request. Run in the structured form and
    /// cancelled while the server computes, the call throws `CancellationError` within the
    /// bound, the job ends cancelled, the server's tool stops when the connection closes, and
    /// the server answers the next request.
    @Test(.scaledTimeLimit(minutes: 2))
    func aSynchronousExecuteEndsWithItsTask() async throws {
        let roomy: JSONValue = ["executionType": "esriExecutionTypeSynchronous", "maximumRecords": 100_000, "tasks": [["tool": "Buffer"]]]
        try await GPServerTests.withServer(["quick": roomy]) { client, _ in
            let task = GeoprocessingTask(url: Self.taskURL(client, "quick", "Buffer"))
            var parameters = try await task.makeDefaultParameters()
            parameters.inputs["Input_Features"] = try GPValue(json: try JSONValue.parse(GPServerTests.longInput), as: .featureRecordSetLayer)
            parameters.inputs["Method"] = .string("GEODESIC")
            let job = task.makeJob(parameters: parameters)
            let running = Task { try await job.run() }
            // Cancelled once the server has the request (the client first encodes 30,000 points).
            let executing = #"outpost_http_requests_in_flight{route="gpserver.execute"} 1"#
            while try await !client.get("/metrics").text.contains(executing) { try await Task.sleep(for: .milliseconds(20)) }
            try await Task.sleep(for: .milliseconds(200))
            let (took, error) = try await CancellationBound.cancel(running) { job.status == .started }
            #expect(error is CancellationError, "\(String(describing: error))")
            #expect(took < CancellationBound.loaded)
            #expect(await job.waitUntilFinished() == .failed)
            #expect(job.error?.code == .cancelled, "\(String(describing: job.error))")
            // The server heard the client leave: the tool stopped and the request was counted
            // as cancelled (499) long before 30,000 geodesic buffers could have been drawn.
            let stopped = ContinuousClock.now
            while try await !client.get("/metrics").text.contains(#"outpost_http_requests_total{route="gpserver.execute",method="POST",status="499"} 1"#) {
                #expect(ContinuousClock.now - stopped < CancellationBound.loaded, "the server's tool runs on for nobody")
                if ContinuousClock.now - stopped > CancellationBound.loaded { break }
                try await Task.sleep(for: .milliseconds(20))
            }

            parameters.inputs["Input_Features"] = try Self.points(3)
            let next = task.makeJob(parameters: parameters)
            let answer = try await next.run()
            if case .featureSet(let set)? = answer.outputs["Output_Features"] { #expect(set.features.count == 3) } else { Issue.record("no output") }

            // A client that half-closes after its request (`nc -N`) still gets its answer where
            // the route is not a long computation.
            let script = """
                import socket, sys
                s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
                s.sendall(b"GET /arcgis/rest/services/quick/GPServer/Buffer?f=json HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n")
                s.shutdown(socket.SHUT_WR)
                data = b""
                while chunk := s.recv(65536): data += chunk
                print(data.split(b"\\r\\n")[0].decode(), b'"name":"Buffer"' in data)
                """
            let halfClosed = try await ExternalTools.run(ExternalTools.python, ["-c", script, String(client.client.port!)])
            #expect(halfClosed.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "HTTP/1.1 200 OK True", "\(halfClosed.stdout)\(halfClosed.stderr)")
        }
    }

    @Test func aServerErrorFailsTheJobWithTheServersWords() async throws {
        try await GPServerTests.withServer(["quick": GPServerTests.sync, "batch": GPServerTests.async()]) { client, _ in
            for service in ["quick", "batch"] {
                let task = GeoprocessingTask(url: Self.taskURL(client, service, "Buffer"))
                var parameters = try await task.makeDefaultParameters()
                parameters.inputs["Input_Features"] = try Self.points(3)
                parameters.inputs["Distance_Field"] = .string("nosuch")
                var definition = GeoprocessingJob(source: task.source, parameters: parameters, transport: HTTPGPTransport())
                definition.pollInterval = .milliseconds(20)
                let job = Job(definition)
                try job.start()
                #expect(await job.waitUntilFinished() == .failed)
                #expect(job.error?.message.contains("nosuch") == true, "\(service): \(job.error?.message ?? "")")
            }
            // A task that is not there fails to load.
            let missing = GeoprocessingTask(url: Self.taskURL(client, "quick", "Teleport"))
            await #expect(throws: GeoprocessingError.self) { try await missing.load() }
        }
    }

    @Test func aJobRebuiltFromItsJSONReattachesToTheServersJob() async throws {
        try await GPServerTests.withServer(["one": GPServerTests.async(concurrent: 1)]) { client, services in
            // A long job holds the only slot, so ours waits on the server.
            let blocker = try await GPServerTests.submitLong(client, service: "one")
            let task = GeoprocessingTask(url: Self.taskURL(client, "one", "Buffer"))
            var parameters = try await task.makeDefaultParameters()
            parameters.inputs["Input_Features"] = try Self.points(2)
            var definition = GeoprocessingJob(source: task.source, parameters: parameters, transport: HTTPGPTransport())
            definition.pollInterval = .milliseconds(20)
            let job = Job(definition)
            try job.start()
            var serverJob: String?
            for _ in 0..<500 {
                if let id = job.snapshot.results["jobId"]?.stringValue, job.snapshot.checkpoint != nil {
                    serverJob = id
                    break
                }
                try await Task.sleep(for: .milliseconds(10))
            }
            let id = try #require(serverJob)
            try job.pause()
            for await status in job.statusUpdates where status == .paused { break }
            // The client process "ends"; a new one rebuilds the job from its JSON.
            var registry = JobRegistry.standard
            registry.withGeoprocessingJobs()
            let rebuilt = try #require(try registry.makeJob(from: try JobSnapshot.decode(try job.toJSON())) as? Job<GeoprocessingJob>)
            _ = try await client.post("/arcgis/rest/services/one/GPServer/Buffer/jobs/\(blocker)/cancel", ["f": "json"])
            try rebuilt.resume()
            #expect(await rebuilt.waitUntilFinished() == .succeeded)
            #expect(rebuilt.messages.contains { $0.text == "following server job \(id)" })
            // Submitted once, by the first process; the second only followed it.
            #expect(rebuilt.messages.filter { $0.text.hasPrefix("submitted as server job") }.count == 1)
            let result = try await rebuilt.output
            #expect(result.jobID == id)
            if case .featureSet(let set)? = result.outputs["Output_Features"] { #expect(set.features.count == 2) } else { Issue.record("no output") }
            await services["one"]!.waitForRunningJobs()
        }
    }

    @Test func cancellingTheJobCancelsTheServersJob() async throws {
        try await GPServerTests.withServer(["batch": GPServerTests.async()]) { client, services in
            let task = GeoprocessingTask(url: Self.taskURL(client, "batch", "Buffer"))
            var parameters = try await task.makeDefaultParameters()
            parameters.inputs["Input_Features"] = try GPValue(json: try JSONValue.parse(GPServerTests.longInput), as: .featureRecordSetLayer)
            parameters.inputs["Method"] = .string("GEODESIC")
            var definition = GeoprocessingJob(source: task.source, parameters: parameters, transport: HTTPGPTransport())
            definition.pollInterval = .milliseconds(20)
            let job = Job(definition)
            try job.start()
            var id: String?
            for _ in 0..<1000 where id == nil {
                id = job.snapshot.results["jobId"]?.stringValue
                try await Task.sleep(for: .milliseconds(10))
            }
            let serverJob = try #require(id)
            job.cancel()
            #expect(await job.waitUntilFinished() == .failed)
            let status = try await GPServerTests.poll(client, "/arcgis/rest/services/batch/GPServer/Buffer/jobs/\(serverJob)")
            #expect(status["jobStatus"] == "esriJobCancelled")
            await services["batch"]!.waitForRunningJobs()
        }
    }

    @Test func aModelFileRunsOfflineAsATask() async throws {
        let directory = TemporaryDirectory("outpost-gp-model")
        let file = directory.file("buffer-dissolve.model.json")
        try GPServerTests.model.jsonData.write(to: file)
        let task = GeoprocessingTask(url: file)
        var parameters = try await task.makeDefaultParameters()
        #expect(task.taskInfo?.name == "BufferDissolve")
        parameters.inputs["Points"] = try Self.points(4)
        parameters.outputSpatialReference = SpatialReference(wkid: 4326)
        let job = task.makeJob(parameters: parameters)
        try job.start()
        let result = try await job.output
        guard case .featureSet(let areas)? = result.outputs["Areas"] else { throw GPValueError("no Areas") }
        #expect(areas.features.count == 1 && areas.spatialReference?.wkid == 4326)
        // Its JSON names the model file, so it can be rebuilt.
        #expect(try JSONValue.parse(try job.toJSON())["parameters"]?["local"]?["modelFile"] == .string(file.path))
    }

    /// A run here writes its files into the folder the parameters name (and its JSON keeps it), so
    /// nothing is left in a temporary folder; fetching a file already there changes nothing.
    @Test func aLocalRunWritesItsFilesWhereTheParametersSay() async throws {
        let directory = TemporaryDirectory("outpost-gp-files")
        let task = GeoprocessingTask(tool: "ExportTable")
        var parameters = try await task.makeDefaultParameters()
        parameters.inputs["Input_Rows"] = try Self.points(3)
        parameters.inputs["File_Name"] = .string("points.csv")
        parameters.outputDirectory = directory.file("reports")
        let job = task.makeJob(parameters: parameters)
        try job.start()
        let result = try await job.output
        guard case .dataFile(let report)? = result.outputs["Output_File"], let url = report.url.flatMap(URL.init(string:)) else {
            throw GPValueError("no Output_File")
        }
        #expect(url.path == directory.file("reports/points.csv").path)
        let written = try Data(contentsOf: url)
        #expect(String(decoding: written, as: UTF8.self).split(whereSeparator: \.isNewline).count == 4, "a header and three rows")
        try await task.download(report, to: url)
        #expect(try Data(contentsOf: url) == written)
        try await task.download(report, to: directory.file("copy.csv"))
        #expect(try Data(contentsOf: directory.file("copy.csv")) == written)
        let rebuilt = try JSONValue.parse(try job.toJSON())["parameters"]?["outputDirectory"]
        #expect(rebuilt == .string(directory.file("reports").path))
    }
}
