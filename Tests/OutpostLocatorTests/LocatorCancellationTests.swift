import Foundation
import GRDB
import OutpostCore
import OutpostHTTPTestSupport
import OutpostREST
import OutpostStorage
import OutpostTestSupport
import Synchronization
import Testing

@testable import OutpostLocator

/// A Task that geocodes is stopped by its cancel: the awaiting call throws CancellationError at
/// once, and the SQLite statement the search was running is interrupted rather than run to its end.
@Suite("Locator cancellation")
struct LocatorCancellationTests {
    /// A statement that would run for ever, on the locator's own connection, under the
    /// cancellation a LocatorTask hands its searches: the cancel interrupts it, the search
    /// throws CancellationError, and the connection serves the next search.
    @Test(.scaledTimeLimit(minutes: 2))
    func aCancelInterruptsTheStatementASearchIsRunning() async throws {
        let directory = TemporaryDirectory("outpost-locator-cancel")
        let (gdb, url) = try HelsinkiLocator.build(in: directory)
        try gdb.close()
        let locator = try LocalLocator(url: url, connections: 1)
        let started = Locked(false)
        let ended = Locked<(any Error)?>(nil)
        let searching = Task {
            try await runBlocking { cancellation in
                do {
                    return try locator.read(cancellation) { db in
                        started.withLock { $0 = true }
                        return try Int.fetchOne(db, sql: "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c")
                    }
                } catch {
                    ended.withLock { $0 = error }
                    throw error
                }
            }
        }
        while !started.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(5)) }
        try await Task.sleep(for: .milliseconds(100))
        let cancelled = ContinuousClock.now
        searching.cancel()
        await #expect(throws: CancellationError.self) { _ = try await searching.value }
        #expect(ContinuousClock.now - cancelled < CancellationBound.loaded)
        // The statement itself stopped (it would never end on its own), with CancellationError.
        while ended.withLock({ $0 == nil }) {
            guard ContinuousClock.now - cancelled < CancellationBound.loaded else {
                Issue.record("the statement was not interrupted")
                return
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(ended.withLock { $0 } is CancellationError)
        // The one connection is free and not left interrupted.
        #expect(try locator.geocode("Mannerheimintie 12, Helsinki").isEmpty == false)
    }

    /// A geocode loop on a LocatorTask, as a search-as-you-type view runs it, ends with its Task.
    @Test(.scaledTimeLimit(minutes: 2))
    func aGeocodeLoopEndsWithItsTask() async throws {
        let directory = TemporaryDirectory("outpost-locator-loop")
        let (gdb, url) = try HelsinkiLocator.build(in: directory)
        try gdb.close()
        let task = LocatorTask(url: url)
        try await task.load()
        let rounds = Atomic<Int>(0)
        let loop = Task {
            while true {
                _ = try await task.geocode(searchText: "Mannerheimintie 12, Helsinki")
                _ = try await task.suggest(searchText: "Manner")
                _ = try await task.reverseGeocode(location: Position(x: 24.9384, y: 60.1699))
                rounds.add(1, ordering: .relaxed)
            }
        }
        let (took, error) = try await CancellationBound.cancel(loop) { rounds.load(ordering: .relaxed) >= 3 }
        #expect(error is CancellationError, "\(String(describing: error))")
        #expect(took < CancellationBound.loaded)
        // The task still answers.
        #expect(try await task.geocode(searchText: "Mannerheimintie 12, Helsinki").isEmpty == false)
    }
}

/// Against a GeocodeServer that takes the request and never answers, a cancelled geocode throws
/// CancellationError, not a network error, and its HTTP request is cancelled: the client closes
/// the connection. The client's timeout is an hour, so nothing but the cancel can end the call.
/// The bound on the cancel is two minutes, not ``CancellationBound/loaded``: alone the cancel
/// takes milliseconds, but in the full suite other tests' work on the two cores has held this
/// test's resumption for 27 s.
@Suite("Locator cancellation against a service")
struct RemoteLocatorCancellationTests {
    @Test(.scaledTimeLimit(minutes: 5))
    func aGeocodeAgainstAServerThatNeverAnswersEndsWithItsTask() async throws {
        let asked = Locked(0)
        let server = try await LoopbackHTTPServer.start { request in
            if request.path.hasSuffix("/GeocodeServer") {
                return .json(#"{"singleLineAddressField": {"name": "SingleLine"}, "candidateFields": [], "spatialReference": {"wkid": 4326}, "capabilities": "Geocode,Suggest,ReverseGeocode"}"#)
            }
            asked.withLock { $0 += 1 }
            return .held
        }
        defer { Task { try? await server.stop() } }
        let task = LocatorTask(
            url: server.baseURL.appendingPathComponent("arcgis/rest/services/Helsinki/GeocodeServer"),
            transport: RESTClient(timeout: .seconds(3600)))
        try await task.load()
        let bound = Duration.seconds(120) * CancellationBound.timeScale
        for round in 1...3 {
            let searching = Task {
                switch round {
                case 1: _ = try await task.geocode(searchText: "Mannerheimintie 12")
                case 2: _ = try await task.suggest(searchText: "Manner")
                default: _ = try await task.reverseGeocode(location: Position(x: 24.9384, y: 60.1699))
                }
            }
            while asked.withLock({ $0 }) < round { try await Task.sleep(for: .milliseconds(2)) }
            searching.cancel()
            guard let ended = await CancellationBound.outcome(of: searching, within: bound) else {
                Issue.record("round \(round): the cancelled call had not ended after \(bound)")
                return
            }
            #expect(throws: CancellationError.self) { try ended.get() }
            // The request itself was cancelled, not left open on the server.
            let cancelled = ContinuousClock.now
            while server.heldConnectionsClosed < round, ContinuousClock.now - cancelled < bound { try await Task.sleep(for: .milliseconds(5)) }
            #expect(server.heldConnectionsClosed == round)
        }
    }
}
