import Foundation
import OutpostCore
import OutpostHTTPTestSupport
import OutpostStorage
import OutpostTestSupport
import Synchronization
import Testing

@testable import OutpostSync

/// `checkForUpdates`, asked of a service that takes the request and never answers, ends with its
/// Task: CancellationError within the bound (the HTTP request is cancelled), and the replica is
/// as it was.
@Suite("Sync cancellation")
struct SyncCancellationTests {
    @Test(.scaledTimeLimit(minutes: 2))
    func aCheckForUpdatesThatGetsNoAnswerEndsWithItsTask() async throws {
        let harness = try await SyncHarness.start()
        let replica = try await harness.replica()
        defer { try? replica.close() }
        let before = try await SampleGeodatabases.contents(of: replica)
        try await harness.stop()

        let (silent, asked) = try await LoopbackHTTPServer.startSilent()
        defer { Task { try? await silent.stop() } }
        let task = try GeodatabaseSyncTask(url: silent.baseURL.appendingPathComponent("arcgis/rest/services/field_inspection/FeatureServer"))
        let checking = Task { try await task.checkForUpdates(geodatabase: replica) }
        let (took, error) = try await CancellationBound.cancel(checking) { asked() > 0 }
        #expect(error is CancellationError, "\(String(describing: error))")
        #expect(took < CancellationBound.loaded)
        #expect(try await SampleGeodatabases.contents(of: replica) == before, "the replica is as it was")
    }
}
