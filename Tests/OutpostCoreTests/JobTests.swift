import Foundation
import OutpostTestSupport
import Testing

@testable import OutpostCore

@Suite("Jobs")
struct JobTests {
    static let fullRun = ["first", "second", "third"].flatMap { s in (0..<SampleJob.itemsPerStep).map { "\(s):\($0)" } }
    static let checkpointCount = 3 * SampleJob.itemsPerStep

    func environment(_ log: SampleJobLog) -> JobEnvironment {
        var e = JobEnvironment()
        e[SampleJobLog.self] = log
        return e
    }

    @Test(.scaledTimeLimit(minutes: 1))
    func runsEveryStepToItsOutput() async throws {
        let log = SampleJobLog()
        let job = Job(SampleJob(label: "a", log: log))
        let statuses = job.statusUpdates
        try job.start()
        #expect(try await job.output == Self.fullRun)
        #expect(job.status == .succeeded && job.progress.fraction == 1)
        #expect(log.cleanups == 3 && log.rollbacks == 0)
        var seen: [JobStatus] = []
        for await s in statuses {
            if seen.last != s { seen.append(s) }
            if s.isFinished { break }
        }
        #expect(seen == [.notStarted, .started, .succeeded])
        #expect(job.messages.contains { $0.text == "succeeded" })
        #expect(throws: JobError.self) { try job.start() }
        job.cancel()
        #expect(job.status == .succeeded)
    }

    @Test(.scaledTimeLimit(minutes: 1), arguments: 1...checkpointCount)
    func pausesAtEveryCheckpointAndResumes(at checkpoint: Int) async throws {
        let log = SampleJobLog()
        let job = Job(SampleJob(label: "p", log: log))
        log.onCheckpoint.withLock { $0 = { n in if n == checkpoint { try? job.pause() } } }
        try job.start()
        for await s in job.statusUpdates where s == .paused { break }
        #expect(job.status == .paused)
        #expect(log.items.count == checkpoint)
        log.onCheckpoint.withLock { $0 = nil }
        try job.resume()
        #expect(try await job.output == Self.fullRun)
        #expect(log.rollbacks == 0)
    }

    @Test(.scaledTimeLimit(minutes: 1), arguments: 1...checkpointCount)
    func cancelsAtEveryCheckpoint(at checkpoint: Int) async throws {
        let log = SampleJobLog()
        let job = Job(SampleJob(label: "c", log: log))
        log.onCheckpoint.withLock { $0 = { n in if n == checkpoint { job.cancel() } } }
        try job.start()
        let error = await #expect(throws: JobError.self) { try await job.output }
        #expect(error?.code == .cancelled)
        #expect(job.status == .failed && job.error?.code == .cancelled)
        let stepsRun = (checkpoint - 1) / SampleJob.itemsPerStep + 1
        #expect(log.rollbacks == stepsRun, "the rollback of every step that ran")
        #expect(log.items.isEmpty, "the job's rollback ran")
        #expect(log.cleanups == stepsRun, "every step that ran was cleaned up")
        #expect(throws: JobError.self) { try job.start() }
    }

    @Test(.scaledTimeLimit(minutes: 1), arguments: 1...checkpointCount)
    func jsonRoundTripResumesFromTheCheckpoint(at checkpoint: Int) async throws {
        let log = SampleJobLog()
        let job = Job(SampleJob(label: "j", log: log))
        log.onCheckpoint.withLock { $0 = { n in if n == checkpoint { try? job.pause() } } }
        try job.start()
        for await s in job.statusUpdates where s == .paused { break }
        let json = try job.toJSON()
        log.onCheckpoint.withLock { $0 = nil }
        // The old job is gone (as in a killed process); a new one is built from the JSON.
        let rebuilt = try Job<SampleJob>.fromJSON(json, environment: environment(log))
        #expect(rebuilt.status == .paused)
        #expect(rebuilt.snapshot.checkpoint != nil || rebuilt.snapshot.currentStep > 0)
        try rebuilt.start()
        #expect(try await rebuilt.output == Self.fullRun)
    }

    @Test(.scaledTimeLimit(minutes: 1))
    func aRunningJobSavedMidwayComesBackPaused() async throws {
        // As if the process was killed: the JSON says "started" with a checkpoint, and the log
        // holds one item more than the checkpoint knows about.
        let log = SampleJobLog()
        for item in ["first:0", "first:1", "first:2"] { log.append(item) }
        let snapshot = JobSnapshot(
            id: "killed", jobType: SampleJob.jobType, status: .started, parameters: ["label": "k"], steps: ["first", "second", "third"],
            currentStep: 0, checkpoint: ["next": 2, "written": 2])
        let job = try Job<SampleJob>.fromJSON(try snapshot.encoded(), environment: environment(log))
        #expect(job.status == .paused)
        try job.start()
        #expect(try await job.output == Self.fullRun)
    }

    /// A job resumed with every step done (killed after its last step, before its end was
    /// saved) ends at once, while ``Job/start()`` may still be writing its "started": the JSON
    /// must end as "succeeded", or the same command run again resumes a job that is done.
    @Test(.scaledTimeLimit(minutes: 1))
    func theLastStateSavedIsTheLastWritten() async throws {
        /// Keeps the statuses written, in order; the first write of "started" is slow.
        final class SlowStartStore: JobStore, @unchecked Sendable {
            // @unchecked: `written` is only touched under `lock`.
            private let lock = NSLock()
            private var written: [JobStatus] = []
            private var slowed = false
            func save(_ snapshot: JobSnapshot) throws {
                let slow = lock.withLock { () -> Bool in
                    defer { slowed = slowed || snapshot.status == .started }
                    return !slowed && snapshot.status == .started
                }
                if slow { Thread.sleep(forTimeInterval: 0.3) }
                lock.withLock { written.append(snapshot.status) }
            }
            func isCancelRequested(id: String) -> Bool { false }
            var statuses: [JobStatus] { lock.withLock { written } }
        }
        let log = SampleJobLog()
        for item in Self.fullRun { log.append(item) }
        let done = JobSnapshot(
            id: "done", jobType: SampleJob.jobType, status: .started, parameters: ["label": "d"], steps: ["first", "second", "third"],
            currentStep: 3)
        let store = SlowStartStore()
        let job = try Job<SampleJob>.fromJSON(try done.encoded(), environment: environment(log), store: store)
        try job.start()
        #expect(try await job.output == Self.fullRun)
        #expect(store.statuses.last == .succeeded, "written: \(store.statuses)")
    }

    @Test(.scaledTimeLimit(minutes: 1))
    func aFailingStepFailsTheJobAndRollsBack() async throws {
        let log = SampleJobLog()
        log.failAtItem.withLock { $0 = "second:2" }
        let job = Job(SampleJob(label: "f", log: log))
        try job.start()
        let error = await #expect(throws: JobError.self) { try await job.output }
        #expect(error?.code == .stepFailed && error?.message.contains("second") == true)
        #expect(job.status == .failed && log.items.isEmpty && log.rollbacks == 2 && log.cleanups == 2)
        #expect(job.messages.contains { $0.severity == .error })
    }

    @Test func illegalRequestsAreRefused() async throws {
        let log = SampleJobLog()
        let job = Job(SampleJob(label: "i", log: log))
        #expect(throws: JobError.self) { try job.pause() }
        #expect(throws: JobError.self) { try job.resume() }
        job.cancel()
        #expect(job.status == .failed)
        let error = await #expect(throws: JobError.self) { try await job.output }
        #expect(error?.code == .cancelled)
        #expect(log.items.isEmpty)
    }

    @Test func cancellingAPausedJobRollsItBack() async throws {
        let log = SampleJobLog()
        let job = Job(SampleJob(label: "pc", log: log))
        log.onCheckpoint.withLock { $0 = { n in if n == 5 { try? job.pause() } } }
        try job.start()
        for await s in job.statusUpdates where s == .paused { break }
        job.cancel()
        #expect(await job.waitUntilFinished() == .failed)
        #expect(job.error?.code == .cancelled && log.items.isEmpty)
    }

    @Test func snapshotsRejectOtherTypesAndBadJSON() throws {
        let log = SampleJobLog()
        let other = JobSnapshot(id: "x", jobType: "outpost.copyFile", status: .paused, parameters: [:], steps: [])
        let error = #expect(throws: JobError.self) { try Job<SampleJob>.fromJSON(try other.encoded(), environment: environment(log)) }
        #expect(error?.code == .invalidJSON)
        #expect(throws: JobError.self) { try JobSnapshot.decode(Data("{}".utf8)) }
        var future = JobSnapshot(id: "y", jobType: SampleJob.jobType, status: .paused, parameters: ["label": "y"], steps: ["first", "second", "third"])
        future.formatVersion = 99
        #expect(throws: JobError.self) { try JobSnapshot.decode(try future.encoded()) }
        var outOfRange = future
        outOfRange.formatVersion = 1
        outOfRange.currentStep = 7
        #expect(throws: JobError.self) { try JobSnapshot.decode(try outOfRange.encoded()) }
        let wrongSteps = JobSnapshot(id: "z", jobType: SampleJob.jobType, status: .paused, parameters: ["label": "z"], steps: ["only"])
        #expect(throws: JobError.self) { try Job<SampleJob>.fromJSON(try wrongSteps.encoded(), environment: environment(log)) }
    }
}
