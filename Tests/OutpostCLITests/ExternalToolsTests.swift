import Foundation
import OutpostTestSupport
import Testing

/// The tests' runner of other programs never waits forever: a tool past its deadline is stopped
/// with what it started, and what a tool leaves running cannot hold its output open.
@Suite("Running other programs")
struct ExternalToolsTests {
    @Test(.scaledTimeLimit(minutes: 1)) func aToolPastItsDeadlineIsStoppedWithWhatItStarted() async throws {
        let started = Date()
        let run = try await ExternalTools.run("bash", ["-c", "sleep 120 & echo started; sleep 120"], timeout: 1)
        #expect(run.status == ExternalTools.timedOutStatus && run.stdout == "started\n", "\(run)")
        #expect(run.stderr.contains("killed after 1 s"), "\(run.stderr)")
        #expect(Date().timeIntervalSince(started) < 30)
    }

    @Test(.scaledTimeLimit(minutes: 1)) func aBackgroundChildDoesNotHoldTheOutputOpen() async throws {
        let started = Date()
        let run = try await ExternalTools.run("bash", ["-c", "sleep 120 & echo done"])
        #expect(run.succeeded && run.stdout == "done\n", "\(run)")
        #expect(Date().timeIntervalSince(started) < 30)
    }
}
