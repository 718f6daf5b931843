import Foundation
import OutpostCore
import OutpostGeoprocessing
import OutpostRouting
import OutpostStorage
import OutpostTestSupport
import Testing

/// RouteTask on a network file: loading, default parameters, solving with arrival times, errors.
@Suite struct RouteTaskTests {
    @Test func aTaskLoadsItsNetworkAndSolvesWithArrivalTimes() async throws {
        let directory = TemporaryDirectory("outpost-route-task")
        let (_, url, _) = try NetworkTests.network(in: directory)
        let task = RouteTask(url: url)
        var parameters = try await task.makeDefaultParameters()
        #expect(task.loadStatus == .loaded)
        #expect(parameters.travelMode == .drivingTime && parameters.returnsDirections && !parameters.findsBestSequence)
        parameters.stops = [RouteStop(Position(x: 24.941428, y: 60.167769), name: "A"), RouteStop(Position(x: 24.947429, y: 60.168943), name: "B")]
        parameters.travelMode = .walking
        let start = Date(timeIntervalSince1970: 1_790_000_000)
        parameters.startTime = start
        let result = try await task.solveRoute(parameters: parameters)
        let route = try #require(result.routes.first)
        let arrivals = try #require(result.arrivalTimes)
        #expect(arrivals.count == 2 && arrivals[0] == start)
        #expect(abs(arrivals[1].timeIntervalSince(start) - route.totalTime) < 1e-6)
        #expect(route.directionManeuvers.last?.text == "Finish at B")
        #expect(route.stops.map(\.name) == ["A", "B"] && route.stops[1].arrivalTime == arrivals[1])
        #expect(result.solvedRoutes.first?.legs.count == 1)

        parameters.stops = [parameters.stops[0]]
        await #expect(throws: RoutingError.self) { try await task.solveRoute(parameters: parameters) }
    }

    @Test func aDamagedFileOrAnUnreachableServiceFailsToLoad() async throws {
        let directory = TemporaryDirectory("outpost-route-task-bad")
        let bad = directory.file("bad.network")
        try Data("not a network".utf8).write(to: bad)
        let task = RouteTask(url: bad)
        await #expect(throws: RoutingError.self) { try await task.load() }
        #expect(task.loadStatus == .failed)
        // Nothing listens there (a short timeout: the HTTP client retries connecting until it).
        let remote = RouteTask(url: URL(string: "http://127.0.0.1:1/arcgis/rest/services/city/NAServer/Route")!, transport: HTTPGPTransport(timeout: .seconds(2)))
        await #expect { try await remote.load() } throws: { ($0 as? RoutingError)?.code == .service }
    }
}
