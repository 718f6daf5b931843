import Foundation
import OutpostCore
import OutpostTestSupport
import OutpostHTTPTestSupport
import Testing

@testable import OutpostSync

/// A server-side job as a loopback server plays it: running for a few polls, unreachable for a
/// while (connections dropped without a response), then finished.
final class FlakyJobServer: Sendable {
    struct State {
        var polls = 0
        var cancels = 0
        var dropUntil: Date?
    }
    let state = Locked(State())
    let dropAfterPolls: Int
    let dropFor: TimeInterval
    let succeedAfterPolls: Int

    init(dropAfterPolls: Int, dropFor: TimeInterval, succeedAfterPolls: Int) {
        self.dropAfterPolls = dropAfterPolls
        self.dropFor = dropFor
        self.succeedAfterPolls = succeedAfterPolls
    }

    func handle(_ request: LoopbackHTTPServer.Request) -> LoopbackHTTPServer.Response? {
        if request.path.hasSuffix("/cancel") {
            state.withLock { $0.cancels += 1 }
            return .json(#"{"jobStatus":"esriJobCancelling"}"#)
        }
        return state.withLock { s -> LoopbackHTTPServer.Response? in
            if let until = s.dropUntil, Date() < until { return nil }
            s.polls += 1
            if s.polls == dropAfterPolls, s.dropUntil == nil {
                s.dropUntil = Date().addingTimeInterval(dropFor)
                return nil
            }
            if s.polls >= succeedAfterPolls {
                return .json(#"{"jobId":"j7","jobStatus":"esriJobSucceeded","results":{"url":"http://127.0.0.1/out/j7.tpkx"}}"#)
            }
            return .json(#"{"jobId":"j7","jobStatus":"esriJobExecuting","messages":[{"type":"esriJobMessageTypeInformative","description":"exporting level 12"}]}"#)
        }
    }
}

@Suite("Remote jobs over HTTP")
struct HTTPRemoteJobTests {
    func job(_ server: LoopbackHTTPServer, window: Duration) -> Job<RemoteJob> {
        let status = server.baseURL.appendingPathComponent("arcgis/rest/services/base/MapServer/jobs/j7")
        return Job(RemoteJob(
            statusURL: status, cancelURL: status.appendingPathComponent("cancel"), transport: HTTPRemoteJobTransport(timeout: .seconds(2)),
            initialInterval: .milliseconds(20), maximumInterval: .milliseconds(100), connectionLossWindow: window))
    }

    @Test(.scaledTimeLimit(minutes: 1))
    func ridesOutDroppedConnectionsAndFinishes() async throws {
        let script = FlakyJobServer(dropAfterPolls: 3, dropFor: 1.0, succeedAfterPolls: 6)
        let server = try await LoopbackHTTPServer.start { script.handle($0) }
        let j = job(server, window: .seconds(20))
        try j.start()
        let result = try await j.output
        #expect(result.state == .succeeded && result.resultURL?.lastPathComponent == "j7.tpkx")
        #expect(j.messages.contains { $0.severity == .warning && $0.text.contains("cannot reach") })
        #expect(j.messages.contains { $0.text.contains("answers again") })
        try await server.stop()
    }

    @Test(.scaledTimeLimit(minutes: 1))
    func failsWithConnectionLostWhenTheOutageOutlastsTheWindow() async throws {
        let script = FlakyJobServer(dropAfterPolls: 2, dropFor: 30, succeedAfterPolls: 99)
        let server = try await LoopbackHTTPServer.start { script.handle($0) }
        let j = job(server, window: .milliseconds(600))
        try j.start()
        let error = await #expect(throws: JobError.self) { try await j.output }
        #expect(error?.code == .connectionLost)
        #expect(j.status == .failed)
        try await server.stop()
    }

    @Test(.scaledTimeLimit(minutes: 1))
    func cancellingSendsTheCancelAndResumingFromJSONContinues() async throws {
        let script = FlakyJobServer(dropAfterPolls: 99, dropFor: 0, succeedAfterPolls: 99)
        let server = try await LoopbackHTTPServer.start { script.handle($0) }
        let j = job(server, window: .seconds(20))
        try j.start()
        while script.state.withLock({ $0.polls }) < 3 { try await Task.sleep(for: .milliseconds(10)) }
        // Pause, carry the JSON to a "new process", resume polling there.
        try j.pause()
        for await s in j.statusUpdates where s == .paused { break }
        var environment = JobEnvironment()
        environment[(any RemoteJobTransport).self] = HTTPRemoteJobTransport(timeout: .seconds(2))
        let rebuilt = try Job<RemoteJob>.fromJSON(try j.toJSON(), environment: environment)
        try rebuilt.start()
        let before = script.state.withLock { $0.polls }
        while script.state.withLock({ $0.polls }) < before + 2 { try await Task.sleep(for: .milliseconds(10)) }
        rebuilt.cancel()
        #expect(await rebuilt.waitUntilFinished() == .failed)
        #expect(rebuilt.error?.code == .cancelled)
        #expect(script.state.withLock { $0.cancels } == 1)
        try await server.stop()
    }

    @Test(.scaledTimeLimit(minutes: 1))
    func aRefusedPortCountsAsUnreachable() async throws {
        // Bind and close a server to get a port nobody listens on.
        let server = try await LoopbackHTTPServer.start { _ in nil }
        let port = server.port
        try await server.stop()
        let transport = HTTPRemoteJobTransport(timeout: .seconds(2))
        await #expect(throws: RemoteJobUnreachable.self) {
            _ = try await transport.status(at: URL(string: "http://127.0.0.1:\(port)/jobs/1")!)
        }
        let errors = try await LoopbackHTTPServer.start { request in
            request.path == "/bad" ? .json("not json") : .json(#"{"error":"nope"}"#, status: 404)
        }
        await #expect(throws: JobError.self) { _ = try await transport.status(at: errors.baseURL.appendingPathComponent("bad")) }
        await #expect(throws: JobError.self) { _ = try await transport.status(at: errors.baseURL.appendingPathComponent("missing")) }
        try await errors.stop()
    }
}
