import Testing

@testable import OutpostCore

@Suite("Job state machine (no I/O)")
struct JobStateMachineTests {
    func machine(_ status: JobStatus, pauseRequested: Bool = false) throws -> JobStateMachine {
        var m = JobStateMachine()
        switch status {
        case .notStarted: break
        case .started: _ = try m.start()
        case .paused:
            _ = try m.start()
            try m.pause()
            #expect(m.checkpoint() == .pause)
        case .canceling:
            _ = try m.start()
            _ = m.cancel()
        case .succeeded:
            _ = try m.start()
            m.succeed()
        case .failed:
            _ = try m.start()
            m.fail()
        }
        if pauseRequested { try m.pause() }
        #expect(m.status == status)
        return m
    }

    @Test func legalTransitions() throws {
        var m = JobStateMachine()
        #expect(try m.start() == .run && m.status == .started)
        #expect(m.checkpoint() == .proceed)
        try m.pause()
        #expect(m.status == .started && m.pauseRequested)
        #expect(m.checkpoint() == .pause && m.status == .paused && !m.pauseRequested)
        try m.pause()  // pausing a paused job changes nothing
        #expect(try m.resume() == .run && m.status == .started)
        m.succeed()
        #expect(m.status == .succeeded)

        var c = try machine(.started)
        #expect(c.cancel() == .stopAtNextCheckpoint && c.status == .canceling)
        #expect(c.checkpoint() == .cancel)
        #expect(c.cancel() == .none)
        c.fail()
        #expect(c.status == .failed)

        var p = try machine(.paused)
        #expect(p.cancel() == .rollBackNow && p.status == .canceling)
        var n = JobStateMachine()
        #expect(n.cancel() == .finishedWithoutRunning && n.status == .failed)
        // A pause request is overtaken by a cancel.
        var both = try machine(.started, pauseRequested: true)
        _ = both.cancel()
        #expect(both.checkpoint() == .cancel)
    }

    @Test(arguments: JobStatus.allCases)
    func startIsRefusedUnlessNotStartedOrPaused(status: JobStatus) throws {
        var m = try machine(status)
        if status == .notStarted || status == .paused {
            #expect(try m.start() == .run)
        } else {
            let error = #expect(throws: JobError.self) { try m.start() }
            #expect(error?.code == .invalidTransition)
            #expect(m.status == status)
        }
    }

    @Test(arguments: JobStatus.allCases)
    func pauseIsRefusedUnlessRunningOrPaused(status: JobStatus) throws {
        var m = try machine(status)
        if status == .started || status == .paused {
            try m.pause()
        } else {
            #expect(throws: JobError.self) { try m.pause() }
            #expect(m.status == status)
        }
    }

    @Test(arguments: JobStatus.allCases)
    func resumeNeedsAPausedJob(status: JobStatus) throws {
        var m = try machine(status)
        if status == .paused {
            #expect(try m.resume() == .run)
        } else {
            #expect(throws: JobError.self) { try m.resume() }
        }
    }

    @Test func cancelOnAFinishedJobDoesNothing() throws {
        for status in [JobStatus.succeeded, .failed] {
            var m = try machine(status)
            #expect(m.cancel() == .none)
            #expect(m.status == status)
            m.succeed()
            m.fail()
            #expect(m.status == status, "finished states are final")
        }
    }

    @Test func checkpointsOutsideARunChangeNothing() throws {
        for status in [JobStatus.notStarted, .paused, .succeeded, .failed] {
            var m = try machine(status)
            #expect(m.checkpoint() == .proceed)
            #expect(m.status == status)
        }
    }

    @Test func restoredRunningJobsArePaused() {
        #expect(JobStateMachine(status: .started).status == .paused)
        #expect(JobStateMachine(status: .paused).status == .paused)
        #expect(JobStateMachine(status: .succeeded).status == .succeeded)
        #expect(JobStateMachine(status: .canceling).status == .canceling)
    }
}
