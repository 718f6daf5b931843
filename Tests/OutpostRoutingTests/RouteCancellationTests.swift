import Foundation
import OutpostCore
import OutpostRouting
import OutpostStorage
import OutpostTestSupport
import Synchronization
import Testing

/// A Task that solves routes is stopped by its cancel, whether it awaits one solve or loops.
@Suite("Route cancellation")
struct RouteCancellationTests {
    @Test(.scaledTimeLimit(minutes: 2))
    func aRouteLoopEndsWithItsTask() async throws {
        let directory = TemporaryDirectory("outpost-route-cancel")
        let (_, url, _) = try NetworkTests.network(in: directory)
        let task = RouteTask(url: url)
        var parameters = try await task.makeDefaultParameters()
        parameters.stops = [
            RouteStop(Position(x: 24.941428, y: 60.167769), name: "A"), RouteStop(Position(x: 24.947429, y: 60.168943), name: "B"),
            RouteStop(Position(x: 24.9384, y: 60.1699), name: "C"), RouteStop(Position(x: 24.9452, y: 60.1712), name: "D"),
        ]
        parameters.findsBestSequence = true
        let solved = Atomic<Int>(0)
        let loop = Task { [parameters] in
            while true {
                _ = try await task.solveRoute(parameters: parameters)
                solved.add(1, ordering: .relaxed)
            }
        }
        let (took, error) = try await CancellationBound.cancel(loop) { solved.load(ordering: .relaxed) >= 2 }
        #expect(error is CancellationError, "\(String(describing: error))")
        #expect(took < CancellationBound.loaded)
        #expect(try await task.solveRoute(parameters: parameters).routes.count == 1, "the task still solves")
    }

    /// The solve itself looks at its cancellation between legs and pairs of stops: cancelled
    /// before it starts, it does no work.
    @Test(.scaledTimeLimit(minutes: 2))
    func aCancelledSolveStopsAtItsNextCheck() async throws {
        let directory = TemporaryDirectory("outpost-route-cancel-solve")
        let (_, url, _) = try NetworkTests.network(in: directory)
        let network = try RoadNetwork(url: url)
        let stops = [RouteStop(Position(x: 24.941428, y: 60.167769)), RouteStop(Position(x: 24.947429, y: 60.168943)), RouteStop(Position(x: 24.9384, y: 60.1699))]
        let cancellation = BlockingCancellation()
        cancellation.cancel()
        #expect(throws: CancellationError.self) {
            try network.solve(stops, parameters: RouteOptions(mode: .walking, findsBestSequence: true), cancellation: cancellation)
        }
        #expect(throws: CancellationError.self) {
            try network.solve(Array(stops.prefix(2)), parameters: RouteOptions(mode: .walking), cancellation: cancellation)
        }
        #expect(try network.solve(stops, parameters: RouteOptions(mode: .walking)).legs.count == 2)
    }
}
