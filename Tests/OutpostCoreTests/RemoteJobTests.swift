import Foundation
import OutpostTestSupport
import Testing

@testable import OutpostCore

/// A transport that answers from a script (no network): for the polling rules themselves. The
/// HTTP transport is tested against a loopback server in OutpostSyncTests.
final class ScriptedTransport: RemoteJobTransport {
    enum Answer: Sendable {
        case status(JSONValue)
        case unreachable
    }
    let answers: Locked<[Answer]>
    let cancels = Locked(0)
    let polls = Locked(0)

    init(_ answers: [Answer]) { self.answers = Locked(answers) }

    func status(at url: URL) async throws -> JSONValue {
        polls.withLock { $0 += 1 }
        let answer = answers.withLock { a -> Answer in a.count > 1 ? a.removeFirst() : a[0] }
        switch answer {
        case .status(let json): return json
        case .unreachable: throw RemoteJobUnreachable("connection refused")
        }
    }

    func cancel(at url: URL) async throws { cancels.withLock { $0 += 1 } }
}

@Suite("Remote jobs (polling rules)")
struct RemoteJobTests {
    let url = URL(string: "http://127.0.0.1:1/jobs/7")!

    func job(_ transport: ScriptedTransport, window: Duration = .seconds(5)) -> Job<RemoteJob> {
        Job(RemoteJob(statusURL: url, cancelURL: url.appendingPathComponent("cancel"), transport: transport,
                      initialInterval: .milliseconds(10), maximumInterval: .milliseconds(40), connectionLossWindow: window))
    }

    @Test(.scaledTimeLimit(minutes: 1))
    func followsTheServerThroughOutagesToItsResult() async throws {
        let transport = ScriptedTransport([
            .status(["jobStatus": "esriJobSubmitted"]), .unreachable, .unreachable,
            .status(["jobStatus": "esriJobExecuting"]), .unreachable,
            .status(["status": "Completed", "resultUrl": "http://127.0.0.1:1/out/7.gpkg"]),
        ])
        let j = job(transport)
        try j.start()
        let result = try await j.output
        #expect(result.state == .succeeded && result.resultURL?.lastPathComponent == "7.gpkg")
        #expect(transport.polls.withLock { $0 } == 6)
        #expect(j.messages.contains { $0.severity == .warning && $0.text.contains("cannot reach") })
    }

    @Test(.scaledTimeLimit(minutes: 1))
    func failsWithConnectionLostAfterTheWindow() async throws {
        let transport = ScriptedTransport([.status(["jobStatus": "esriJobExecuting"]), .unreachable])
        let j = job(transport, window: .milliseconds(300))
        try j.start()
        let error = await #expect(throws: JobError.self) { try await j.output }
        #expect(error?.code == .connectionLost && error?.message.contains("connection lost") == true)
        #expect(transport.polls.withLock { $0 } >= 3)
    }

    /// The outage is measured on the job's clock, not by waiting: each reading of this clock is
    /// four minutes after the last, so a ten-minute window closes at the fourth unanswered poll
    /// (lost 0, 240, 480, then 720 s), with no sleep longer than the poll interval. The job's
    /// own clock dates its snapshot and its messages.
    @Test(.scaledTimeLimit(minutes: 1))
    func theOutageIsMeasuredOnTheJobsClock() async throws {
        let transport = ScriptedTransport([.status(["jobStatus": "esriJobExecuting"]), .unreachable])
        let readings = Locked(0)
        let fourMinutesAPoll = WallClock {
            Date(timeIntervalSince1970: 1_796_212_800 + 240 * Double(readings.withLock { n in
                defer { n += 1 }
                return n
            }))
        }
        let stopped = WallClock { Date(timeIntervalSince1970: 1_796_212_800) }
        let j = Job(
            RemoteJob(statusURL: url, transport: transport, initialInterval: .milliseconds(10), maximumInterval: .milliseconds(20),
                      connectionLossWindow: .seconds(600), clock: fourMinutesAPoll),
            clock: stopped)
        try j.start()
        let error = await #expect(throws: JobError.self) { try await j.output }
        #expect(error?.code == .connectionLost && error?.message.contains("has not answered for 720 s") == true, "\(String(describing: error))")
        #expect(transport.polls.withLock { $0 } == 5)
        #expect(j.messages.allSatisfy { $0.timestamp == stopped.now() } && !j.messages.isEmpty)
        #expect(j.snapshot.createdAt == stopped.now() && j.snapshot.updatedAt == stopped.now())
    }

    @Test(.scaledTimeLimit(minutes: 1))
    func serverFailuresAndCancellation() async throws {
        let failing = ScriptedTransport([.status(["jobStatus": "esriJobFailed", "messages": [["type": "esriJobMessageTypeError", "description": "disk full"]]]) ])
        let f = job(failing)
        try f.start()
        let error = await #expect(throws: JobError.self) { try await f.output }
        #expect(error?.code == .remoteFailed && error?.message.contains("disk full") == true)

        let running = ScriptedTransport([.status(["jobStatus": "esriJobExecuting"])])
        let c = job(running)
        try c.start()
        while running.polls.withLock({ $0 }) < 2 { try await Task.sleep(for: .milliseconds(5)) }
        c.cancel()
        #expect(await c.waitUntilFinished() == .failed)
        #expect(c.error?.code == .cancelled)
        #expect(running.cancels.withLock { $0 } == 1, "cancelling the client job cancels the server's")
    }

    @Test func readsBothArcGISStatusShapes() throws {
        #expect(try RemoteJobStatus(json: ["status": "ExportingData"]).state == .running)
        #expect(try RemoteJobStatus(json: ["status": "Pending"]).state == .pending)
        #expect(try RemoteJobStatus(json: ["jobStatus": "esriJobCancelled"]).state == .cancelled)
        #expect(try RemoteJobStatus(json: ["error": ["code": 500, "message": "boom"]]).message == "boom")
        #expect(throws: JobError.self) { try RemoteJobStatus(json: ["foo": 1]) }
    }
}
