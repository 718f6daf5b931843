import Foundation
import OutpostStorage
import OutpostTestSupport
import Testing

@testable import OutpostCore

@Suite("Job JSON schema")
struct JobSchemaTests {
    @Test func producedJSONAndCheckedInExamplesValidate() async throws {
        let dir = TemporaryDirectory()
        let log = SampleJobLog()
        let job = Job(SampleJob(label: "schema", log: log))
        log.onCheckpoint.withLock { $0 = { n in if n == 6 { try? job.pause() } } }
        try job.start()
        for await s in job.statusUpdates where s == .paused { break }
        try job.toJSON().write(to: dir.file("paused.json"))
        log.onCheckpoint.withLock { $0 = nil }
        try job.resume()
        _ = try await job.output
        try job.toJSON().write(to: dir.file("succeeded.json"))
        let failed = Job(SampleJob(label: "x", log: SampleJobLog()))
        failed.cancel()
        try failed.toJSON().write(to: dir.file("failed.json"))

        let examples = try FileManager.default.contentsOfDirectory(at: Repository.schema("examples"), includingPropertiesForKeys: nil)
            .filter { $0.lastPathComponent.hasPrefix("job-") }
        #expect(examples.count >= 3)
        let files = [dir.file("paused.json"), dir.file("succeeded.json"), dir.file("failed.json")] + examples
        var running = try JSONValue.parse(try Data(contentsOf: files[0])).objectValue ?? [:]
        running["status"] = "running"
        let result = try await ExternalTools.checkJSONSchema(Repository.schema("job.schema.json"), valid: files, invalid: [.object(running)])
        #expect(result.succeeded, "\(result.stderr)")
        // The examples decode, and jobs rebuilt from them behave as their status says.
        var registry = JobRegistry.standard
        registry.register(RemoteJob.self)
        for example in examples {
            let snapshot = try JobSnapshot.decode(try Data(contentsOf: example))
            #expect(!snapshot.steps.isEmpty)
            if snapshot.jobType == CopyFileJob.jobType {
                let rebuilt = try registry.makeJob(from: snapshot)
                #expect(rebuilt.status == (snapshot.status == .started ? .paused : snapshot.status))
            }
        }
    }
}
