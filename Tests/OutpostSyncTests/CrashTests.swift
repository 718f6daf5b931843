import Foundation
import OutpostCore
import OutpostProtocol
import OutpostServer
import OutpostStorage
import OutpostTestSupport
import OutpostServiceTestSupport
import Testing

@testable import OutpostSync

/// I10 with real crashes: the process is killed (SIGKILL) at each step, on the client (`outpost
/// sync`) and on the server (`outpost serve`), and the next sync reaches the same end as an
/// uninterrupted run.
@Suite("Crashes: processes killed mid-sync", .serialized)
struct CrashTests {
    @Test(.scaledTimeLimit(minutes: 5), arguments: BackendKind.syncing)
    func outpostSyncKilledAtEveryStep(kind: BackendKind) async throws {
        let expected = try await Scenario.reference(kind)
        for point in ExactlyOnceTests.clientPoints {
            let h = try await SyncHarness.start(kind)
            let gdb = try await h.replica()
            try await Scenario.edit(h, gdb)
            let staged = point == "client.afterStage" ? ["--stage-downloads"] : []
            let killed = try await ExternalTools.run(
                Repository.outpostExecutable.path, ["sync", gdb.url.path, "--json"] + staged, environment: ["OUTPOST_FAULT": "\(point):kill"])
            #expect(killed.status == SIGKILL, "outpost sync was killed at \(point) (status \(killed.status), \(killed.stderr))")
            let again = try await ExternalTools.run(Repository.outpostExecutable.path, ["sync", gdb.url.path, "--json"])
            #expect(again.status == 0, "the next sync after a kill at \(point) succeeds: \(again.stderr)")
            let summary = try JSONValue.parse(Data(again.stdout.utf8))
            #expect(summary["checksumsMatch"] == true, "\(again.stdout)")
            let state = try await Scenario.state(h, gdb)
            #expect(state == expected, "after a kill at \(point): \(state) vs \(expected)")
            try await h.stop()
        }
    }

    @Test(.scaledTimeLimit(minutes: 3), arguments: BackendKind.syncing)
    func outpostServeKilledBeforeItCommits(kind: BackendKind) async throws {
        let expected = try await Scenario.reference(kind, serverEdits: false)
        let service = try await TestService.fieldInspection(kind)
        try await service.backend.close()
        let doomed = try await ServeProcess.start(service, environment: ["OUTPOST_FAULT": "server.beforeCommit:kill"])
        let directory = TemporaryDirectory("outpost-crash")
        let task = try GeodatabaseSyncTask(url: doomed.featureServer("field_inspection"))
        let generate = task.makeGenerateGeodatabaseJob(
            parameters: try await task.makeDefaultGenerateGeodatabaseParameters(extent: nil), downloadFileURL: directory.file("replica.gpkg"), faults: FaultInjector())
        try generate.start()
        let gdb = try await generate.output
        try await Scenario.editLocally(gdb)

        let error = await #expect(throws: JobError.self) {
            let job = task.makeSyncGeodatabaseJob(parameters: SyncGeodatabaseParameters(attempts: 1), geodatabase: gdb, faults: FaultInjector())
            try job.start()
            _ = try await job.output
        }
        #expect(error?.syncErrorCode == .unreachable, "\(String(describing: error))")
        #expect(await doomed.stop() == SIGKILL, "the server died in the batch's transaction")
        #expect(try await gdb.read { try $0.sealedBatch() } != nil)

        let restarted = try await ServeProcess.start(service)
        let moved = try GeodatabaseSyncTask(url: restarted.featureServer("field_inspection"))
        let job = moved.makeSyncGeodatabaseJob(parameters: SyncGeodatabaseParameters(), geodatabase: gdb, faults: FaultInjector())
        try job.start()
        let results = try await job.output
        #expect(results.allSatisfy { $0.checksumMatches == true })
        #expect(await restarted.stop() == 0)
        let backend = try await service.reopened()
        let state = try await Scenario.state(backend, gdb)
        #expect(state == expected)
        try await backend.close()
        try gdb.close()
    }
}
