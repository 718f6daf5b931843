import Foundation
import OutpostCore

/// Solves routes (ArcGIS `RouteTask`) on a network on this device. Loadable: ``load()`` opens the
/// `.network` file (refusing a damaged or foreign one) and loads its graphs.
///
/// ```swift
/// let task = RouteTask(url: URL(fileURLWithPath: "helsinki.network"))
/// var parameters = try await task.makeDefaultParameters()
/// parameters.stops = [RouteStop(a, name: "Depot"), RouteStop(b), RouteStop(c)]
/// parameters.findsBestSequence = true
/// let result = try await task.solveRoute(parameters: parameters)
/// print(result.routes[0].directions.map(\.text))
/// ```
///
/// NAServer URLs are not served yet (issue 24): loading one fails with a clear error.
public final class RouteTask: LoadableForwarding, Sendable {
    public let url: URL
    public let loadSupport: LoadableSupport
    private let network = LockedValue<RoadNetwork?>(nil)

    public init(url: URL) {
        self.url = url
        let box = network
        loadSupport = LoadableSupport {
            guard url.isFileURL else { throw RoutingError(.invalidInput, "routing against an NAServer is not built yet; open a .network file") }
            box.set(try await runBlocking { try RoadNetwork(url: url) })
        }
    }

    /// The parameters a route starts from: driving time, directions and stops returned, no
    /// barriers, stops in the order given.
    public func makeDefaultParameters() async throws -> RouteParameters {
        try await load()
        return RouteParameters()
    }

    /// Solves the route.
    /// - Throws: ``RoutingError`` naming a stop off the network, two stops nothing joins, or too
    ///   many stops.
    public func solveRoute(parameters: RouteParameters) async throws -> RouteResult {
        try await load()
        guard let network = network.get() else { throw RoutingError(.notANetwork, "the network did not load") }
        let options = RouteOptions(
            mode: parameters.travelMode, snapDistance: parameters.snapDistance, barriers: parameters.pointBarriers,
            findsBestSequence: parameters.findsBestSequence, preserveFirstStop: parameters.preserveFirstStop,
            preserveLastStop: parameters.preserveLastStop)
        let stops = parameters.stops
        let route = try await runBlocking { try network.solve(stops, parameters: options) }
        return RouteResult(routes: [route], returnsDirections: parameters.returnsDirections, startTime: parameters.startTime)
    }
}

/// What to solve (ArcGIS `RouteParameters`).
public struct RouteParameters: Sendable, Hashable {
    public var stops: [RouteStop] = []
    public var pointBarriers: [Position] = []
    public var travelMode: TravelMode = .drivingTime
    public var findsBestSequence = false
    public var preserveFirstStop = true
    public var preserveLastStop = true
    public var returnsDirections = true
    /// Metres a stop may be from the nearest street.
    public var snapDistance = 500.0
    /// When the route starts: arrival times follow from it (travel-time modes).
    public var startTime: Date?

    public init() {}
}

/// A solved route (ArcGIS `RouteResult`).
public struct RouteResult: Sendable {
    public var routes: [SolvedRoute]
    public var returnsDirections: Bool
    public var startTime: Date?

    /// Each stop's arrival time along the first route (nil without a start time, or by distance).
    public var arrivalTimes: [Date]? {
        guard let startTime, let route = routes.first else { return nil }
        var times: [Date] = [startTime]
        var elapsed = 0.0
        for leg in route.legs {
            elapsed += leg.reduce(0) { $0 + $1.time }
            times.append(startTime.addingTimeInterval(elapsed))
        }
        return times
    }
}
