import Foundation
import Synchronization
import OutpostTestSupport
import Testing

@testable import OutpostCore

/// A job that holds at a checkpoint loop until its gate opens, with a file that exists while it
/// runs and that its rollback removes (what a partial output is).
struct GateJob: JobDefinition {
    final class Gate: Sendable {
        let opened = Locked(false)
        /// Where the job writes its partial output, in a directory of its own that lives as
        /// long as the gate.
        let directory = TemporaryDirectory("outpost-gate")
        var file: URL { directory.file("out") }
        func open() { opened.withLock { $0 = true } }
        var isOpen: Bool { opened.withLock { $0 } }
    }

    static let jobType = "test.gate"
    let gate: Gate

    init(gate: Gate) { self.gate = gate }
    init(parameters: JSONValue, environment: JobEnvironment) throws { throw JobError(.invalidJSON, "not rebuilt in these tests") }

    var parameters: JSONValue { [:] }
    var stepNames: [String] { ["hold"] }

    func run(step: Int, context: JobContext) async throws {
        try Data("partial".utf8).write(to: gate.file)
        context.log("holding")
        var round: Int64 = 0
        while !gate.isOpen {
            round += 1
            context.reportProgress("rounds", done: round, total: nil)
            try await context.checkpoint(nil)
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    func output(context: JobContext) async throws -> String { "done" }

    func rollback(context: JobContext) async { try? FileManager.default.removeItem(at: gate.file) }
}

/// Cancellation as Swift apps expect it: a cancelled Task's wait ends at once (well within the
/// 250 ms the library promises; the bounds below leave room for a loaded 2-core machine), the
/// shared work goes on for others or stops with its last waiter, and update streams end.
@Suite("Cancellation")
struct CancellationTests {
    /// The tests' bounded wait on a task: the task's value or error when it ends in time, nil
    /// when it does not (the task going on).
    @Test func aBoundedWaitGivesTheOutcomeOrNilWhenTheTaskRunsOn() async throws {
        let quick = Task<Int, any Error> { 7 }
        #expect(try await CancellationBound.outcome(of: quick, within: .seconds(30))?.get() == 7)
        let failing = Task<Int, any Error> { throw CancellationError() }
        let failed = await CancellationBound.outcome(of: failing, within: .seconds(30))
        #expect(throws: CancellationError.self) { _ = try failed?.get() }
        let endless = Task<Int, any Error> {
            try await Task.sleep(for: .seconds(600))
            return 0
        }
        let started = ContinuousClock.now
        #expect(await CancellationBound.outcome(of: endless, within: .milliseconds(100)) == nil)
        #expect(ContinuousClock.now - started < .seconds(60), "the bound ended the wait, not the task")
        endless.cancel()
    }

    /// How long a cancelled wait may take here: the promise is 250 ms.
    static let bound: Duration = CancellationBound.loaded

    /// Blocking work hears its caller leave (and ends at its next look), and an interrupt
    /// reaches it only while it runs the part it registered the interrupt for.
    @Test(.scaledTimeLimit(minutes: 1))
    func blockingWorkHearsItsCallerLeave() async throws {
        let started = Locked(false)
        let ended = Locked(false)
        let work = Task {
            try await runBlocking { cancellation in
                started.withLock { $0 = true }
                while !cancellation.isCancelled { usleep(1_000) }
                ended.withLock { $0 = true }
                return 1
            }
        }
        while !started.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(2)) }
        let cancelled = ContinuousClock.now
        work.cancel()
        await #expect(throws: CancellationError.self) { _ = try await work.value }
        while !ended.withLock({ $0 }) {
            guard ContinuousClock.now - cancelled < Self.bound else {
                Issue.record("the work did not hear the cancel")
                return
            }
            try await Task.sleep(for: .milliseconds(2))
        }

        let interrupts = Atomic<Int>(0)
        let finished = BlockingCancellation()
        try finished.whileRunning(interrupt: { interrupts.add(1, ordering: .relaxed) }) {}
        finished.cancel()
        #expect(interrupts.load(ordering: .relaxed) == 0, "no interrupt after the part it was for returned")
        #expect(throws: CancellationError.self) { try finished.whileRunning(interrupt: {}) {} }

        let running = BlockingCancellation()
        try running.whileRunning(interrupt: { interrupts.add(1, ordering: .relaxed) }) {
            running.cancel()
            running.cancel()
        }
        #expect(interrupts.load(ordering: .relaxed) == 1, "one interrupt while it ran")
        #expect(running.isCancelled)
    }

    @Test func aCancelledCallerLeavesASharedOutcomeAndTheOthersGetIt() async throws {
        let outcome = SharedOutcome<Int>()
        let left = Locked<[Int]>([])
        let first = Task { try await outcome.value { remaining in left.withLock { $0.append(remaining) } } }
        let second = Task { try await outcome.value() }
        while outcome.waiting < 2 { await Task.yield() }
        first.cancel()
        await #expect(throws: CancellationError.self) { try await first.value }
        #expect(left.withLock { $0 } == [1], "one caller still waits")
        #expect(outcome.settle(.success(7)) && !outcome.settle(.success(8)))
        #expect(try await second.value == 7)
        #expect(try await outcome.value() == 7, "settled: at once")
        // Cancelled before it waits: it never waits.
        let late = SharedOutcome<Int>()
        let cancelledFirst = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await late.value()
        }
        await #expect(throws: CancellationError.self) { try await cancelledFirst.value }
        #expect(late.waiting == 0)
    }

    @Test(.scaledTimeLimit(minutes: 1))
    func awaitingAJobFromACancelledTaskReturnsAtOnceAndTheJobGoesOn() async throws {
        let gate = GateJob.Gate()
        let job = Job(GateJob(gate: gate))
        try job.start()
        let waiter = Task { try await job.output }
        while !FileManager.default.fileExists(atPath: gate.file.path) { try await Task.sleep(for: .milliseconds(5)) }
        let (took, error) = try await CancellationBound.cancel(waiter) { true }
        #expect(error is CancellationError && took < Self.bound, "\(String(describing: error)) after \(took)")
        #expect(job.status == .started, "the job goes on")
        gate.open()
        #expect(try await job.output == "done")
    }

    @Test(.scaledTimeLimit(minutes: 1))
    func runningAJobInACancelledTaskCancelsTheJobAndLeavesNothing() async throws {
        let gate = GateJob.Gate()
        let job = Job(GateJob(gate: gate))
        let owner = Task { try await job.run() }
        while !FileManager.default.fileExists(atPath: gate.file.path) { try await Task.sleep(for: .milliseconds(5)) }
        let (took, error) = try await CancellationBound.cancel(owner) { true }
        #expect(error is CancellationError && took < Self.bound, "\(String(describing: error)) after \(took)")
        #expect(await job.waitUntilFinished() == .failed && job.error?.code == .cancelled)
        #expect(!FileManager.default.fileExists(atPath: gate.file.path), "the partial output was rolled back")
        // A job already running cannot be run again.
        #expect(throws: JobError.self) { _ = try job.start() }
    }

    @Test(.scaledTimeLimit(minutes: 1))
    func aJobsUpdateStreamsEndWhenItFinishes() async throws {
        let gate = GateJob.Gate()
        let job = Job(GateJob(gate: gate))
        let statuses = Task { var seen: [JobStatus] = []; for await s in job.statusUpdates { seen.append(s) }; return seen }
        let progress = Task { var n = 0; for await _ in job.progressUpdates { n += 1 }; return n }
        let messages = Task { var seen: [String] = []; for await m in job.messageUpdates { seen.append(m.text) }; return seen }
        try job.start()
        while !FileManager.default.fileExists(atPath: gate.file.path) { try await Task.sleep(for: .milliseconds(5)) }
        gate.open()
        _ = try await job.output
        // Each loop ends on its own once the job has finished.
        #expect(await statuses.value.last == .succeeded)
        #expect(await progress.value > 0)
        #expect(await messages.value.contains("holding"))
        // Subscribed after the end: the last value, then the end.
        var late: [JobStatus] = []
        for await s in job.statusUpdates { late.append(s) }
        #expect(late == [.succeeded])
    }

    /// A resource whose load hangs until told, noting the attempts and their cancellation.
    final class Hanging: LoadableForwarding {
        let attempts = Locked(0)
        let cancelled = Locked(0)
        let hangs = Locked(true)
        let loadSupport: LoadableSupport

        init() {
            let (attempts, cancelled, hangs) = (attempts, cancelled, hangs)
            loadSupport = LoadableSupport {
                attempts.update { $0 += 1 }
                guard hangs.get() else { return }
                do {
                    try await Task.sleep(for: .seconds(600))
                } catch {
                    cancelled.update { $0 += 1 }
                    throw error
                }
            }
        }
    }

    @Test(.scaledTimeLimit(minutes: 1))
    func aSharedLoadGoesOnForItsOtherCallersAndStopsWithItsLast() async throws {
        let resource = Hanging()
        let first = Task { try await resource.load() }
        let second = Task { try await resource.load() }
        while resource.attempts.get() == 0 { await Task.yield() }
        try await Task.sleep(for: .milliseconds(20))
        let (took, error) = try await CancellationBound.cancel(first) { true }
        #expect(error is CancellationError && took < Self.bound)
        #expect(resource.loadStatus == .loading && resource.cancelled.get() == 0, "the other caller still waits")
        let (took2, error2) = try await CancellationBound.cancel(second) { true }
        #expect(error2 is CancellationError && took2 < Self.bound)
        // The attempt is cancelled with its last caller, and the resource is not loaded.
        let deadline = ContinuousClock.now + .seconds(10)
        while resource.cancelled.get() == 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
        #expect(resource.cancelled.get() == 1 && resource.loadStatus == .notLoaded && resource.loadError == nil)
        // load() again starts a new attempt.
        resource.hangs.set(false)
        try await resource.load()
        #expect(resource.loadStatus == .loaded && resource.attempts.get() == 2)
        // Loaded is final: the status stream ends.
        var statuses: [LoadStatus] = []
        for await s in resource.loadStatusUpdates { statuses.append(s) }
        #expect(statuses == [.loaded])
    }

    @Test(.scaledTimeLimit(minutes: 1))
    func blockingWorkLetsACancelledCallerGo() async throws {
        let started = Locked(false)
        let caller = Task {
            try await runBlocking {
                started.withLock { $0 = true }
                Thread.sleep(forTimeInterval: 2)
                return 1
            }
        }
        while !started.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(5)) }
        let (took, error) = try await CancellationBound.cancel(caller) { true }
        #expect(error is CancellationError && took < Self.bound, "\(String(describing: error)) after \(took)")
        // Cancelled before it began: the work never runs.
        let ran = Locked(false)
        let never = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await runBlocking { ran.withLock { $0 = true } }
        }
        await #expect(throws: CancellationError.self) { try await never.value }
        try await Task.sleep(for: .milliseconds(50))
        #expect(!ran.withLock { $0 })
    }
}
