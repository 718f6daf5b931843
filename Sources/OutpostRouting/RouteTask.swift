import Foundation
import OutpostCore
import OutpostREST

/// Solves routes (ArcGIS `RouteTask`): against an NAServer route layer by URL, or offline on a
/// `.network` file by file URL — the same parameters and results either way. Loadable:
/// `load()` opens the file (refusing a damaged or foreign one) and loads its graphs, or reads
/// the route layer's description.
///
/// ```swift
/// let task = RouteTask(url: URL(fileURLWithPath: "helsinki.network"))
/// var parameters = try await task.makeDefaultParameters()
/// parameters.stops = [RouteStop(a, name: "Depot"), RouteStop(b), RouteStop(c)]
/// parameters.findsBestSequence = true
/// let result = try await task.solveRoute(parameters: parameters)
/// print(result.routes[0].directionManeuvers.map(\.text))
/// ```
public final class RouteTask: LoadableForwarding, Sendable {
    /// The NAServer route layer or `.network` file.
    public let url: URL
    public let loadSupport: LoadableSupport
    private let backend = Locked<Backend?>(nil)
    let transport: any RESTTransport

    enum Backend: Sendable {
        case local(RoadNetwork)
        case remote(RouteTaskInfo)
    }

    /// A task for the network at `url`.
    /// - Parameters:
    ///   - url: `…/NAServer/<route layer>`, or a file URL of a `.network`.
    ///   - token: sent as a bearer token to a secured service.
    /// - Parameter transport: the HTTP client for an NAServer (by default one with the token and a 120 s
    ///   timeout).
    public init(url: URL, token: String? = nil, transport: (any RESTTransport)? = nil) {
        self.url = url
        let transport = transport ?? RESTClient(token: token, timeout: .seconds(120))
        self.transport = transport
        let box = backend
        loadSupport = LoadableSupport {
            if url.isFileURL {
                box.set(.local(try await runBlocking { try RoadNetwork(url: url) }))
            } else {
                let json: JSONValue
                do {
                    json = try await transport.get(url)
                } catch let error as CancellationError {
                    throw error
                } catch {
                    throw RoutingError(.service, "\(url.absoluteString): \(error)")
                }
                guard json["layerType"]?.stringValue == "esriNAServerRouteLayer" else {
                    throw RoutingError(.service, "\(url.absoluteString) does not answer as an NAServer route layer")
                }
                box.set(.remote(RouteTaskInfo(json)))
            }
        }
    }

    /// What the network or service offers (after loading).
    public var routeTaskInfo: RouteTaskInfo? {
        switch backend.get() {
        case .local(let network): RouteTaskInfo(network: network)
        case .remote(let info): info
        case nil: nil
        }
    }

    /// The parameters a route starts from: the service's default travel mode (driving time),
    /// directions and stops returned, no barriers, stops in the order given.
    public func makeDefaultParameters() async throws -> RouteParameters {
        try await load()
        var parameters = RouteParameters()
        parameters.travelMode = routeTaskInfo?.defaultTravelMode ?? .drivingTime
        return parameters
    }

    /// Solves the route.
    /// - Throws: ``RoutingError`` naming a stop off the network, two stops nothing joins, or too
    ///   many stops (`.service` with the service's message when an NAServer refuses).
    public func solveRoute(parameters: RouteParameters) async throws -> RouteResult {
        try await load()
        switch backend.get() {
        case .local(let network):
            let options = RouteOptions(
                mode: parameters.travelMode, snapDistance: parameters.snapDistance, barriers: parameters.pointBarriers,
                findsBestSequence: parameters.findsBestSequence, preserveFirstStop: parameters.preserveFirstStop,
                preserveLastStop: parameters.preserveLastStop)
            let stops = parameters.stops
            let route = try await runBlocking { try network.solve(stops, parameters: options, cancellation: $0) }
            var solution = route.solution(spatialReference: network.spatialReference, startTime: parameters.startTime, directions: parameters.returnsDirections)
            if let target = parameters.outputSpatialReference { solution = try solution.projected(to: target) }
            return RouteResult(routes: [solution], solvedRoutes: [route])
        case .remote:
            return RouteResult(routes: try await solveRemotely(parameters), solvedRoutes: [])
        case nil:
            throw RoutingError(.notANetwork, "the route task did not load")
        }
    }

    private func solveRemotely(_ p: RouteParameters) async throws -> [RouteSolution] {
        guard p.stops.count >= 2 else { throw RoutingError(.invalidInput, "a route needs at least two stops (got \(p.stops.count))") }
        func features(_ points: [(Position, String?)]) -> String {
            let list: [JSONValue] = points.map { point, name in
                ["geometry": ["x": .number(point.x), "y": .number(point.y)], "attributes": name.map { ["Name": .string($0)] } ?? [:]]
            }
            return (["type": "features", "features": .array(list), "spatialReference": ["wkid": .integer(Int64(p.inputSpatialReference.wkid))]] as JSONValue).jsonString
        }
        var form: [(String, String)] = [
            ("stops", features(p.stops.map { ($0.location, $0.name) })),
            ("travelMode", NAServerJSON.description(p.travelMode).id),
            ("findBestSequence", String(p.findsBestSequence)), ("preserveFirstStop", String(p.preserveFirstStop)),
            ("preserveLastStop", String(p.preserveLastStop)), ("returnDirections", String(p.returnsDirections)), ("returnRoutes", "true"),
            ("returnStops", "true"), ("directionsLengthUnits", "esriNAUMeters"), ("directionsLanguage", "en"),
        ]
        if !p.pointBarriers.isEmpty { form.append(("barriers", features(p.pointBarriers.map { ($0, nil) }))) }
        if let sr = p.outputSpatialReference { form.append(("outSR", String(sr.wkid))) }
        if let start = p.startTime { form.append(("startTime", String(Int64((start.timeIntervalSince1970 * 1_000).rounded())))) }
        let json: JSONValue
        do {
            json = try await transport.post(url.appendingPathComponent("solve"), form: form)
        } catch let error as CancellationError {
            throw error
        } catch {
            throw RoutingError(.service, "solve: \(error)")
        }
        return try NAServerJSON.solutions(json, mode: p.travelMode, lengthUnitMetres: 1)
    }
}

/// What a route task offers (ArcGIS `RouteTaskInfo`).
public struct RouteTaskInfo: Sendable, Hashable {
    /// The travel modes it routes with.
    public var travelModes: [TravelMode]
    /// The mode used when none is asked for.
    public var defaultTravelMode: TravelMode
    /// The spatial reference of its network.
    public var spatialReference: SpatialReference
    /// Most stops a route may have.
    public var maximumStops: Int
    /// Whether it gives turn-by-turn directions.
    public var supportsDirections: Bool

    init(network: RoadNetwork) {
        travelModes = TravelMode.allCases
        defaultTravelMode = .drivingTime
        spatialReference = network.spatialReference
        maximumStops = RouteOptions.maximumStops
        supportsDirections = true
    }

    init(_ json: JSONValue) {
        let modes = (json["supportedTravelModes"]?.arrayValue ?? []).compactMap { $0["id"]?.stringValue.flatMap(NAServerJSON.mode(named:)) }
        travelModes = modes.isEmpty ? [.drivingTime] : modes
        defaultTravelMode = json["defaultTravelMode"]?.stringValue.flatMap(NAServerJSON.mode(named:)) ?? travelModes[0]
        spatialReference = SpatialReference(wkid: Int(json["spatialReference"]?["wkid"]?.doubleValue ?? 4326))
        maximumStops = Int(json["maxStops"]?.doubleValue ?? Double(RouteOptions.maximumStops))
        supportsDirections = json["directionsLanguage"] != nil
    }
}

/// What to solve (ArcGIS `RouteParameters`).
public struct RouteParameters: Sendable, Hashable {
    /// The places to visit.
    public var stops: [RouteStop] = []
    /// Points that close the street they stand on.
    public var pointBarriers: [Position] = []
    /// How the route is measured and who travels it.
    public var travelMode: TravelMode = .drivingTime
    /// Visit the stops in the cheapest order found.
    public var findsBestSequence = false
    /// With `findsBestSequence`: the first stop stays first.
    public var preserveFirstStop = true
    /// With `findsBestSequence`: the last stop stays last.
    public var preserveLastStop = true
    /// Whether to give turn-by-turn directions.
    public var returnsDirections = true
    /// Metres a stop may be from the nearest street.
    public var snapDistance = 500.0
    /// When the route starts: arrival times follow from it.
    public var startTime: Date?
    /// The system the stops and barriers are given in (NAServer requests).
    public var inputSpatialReference = SpatialReference(wkid: 4326)
    /// The system results come back in (an NAServer projects them; nil: the network's own).
    public var outputSpatialReference: SpatialReference?

    /// Parameters with ArcGIS's defaults (driving time, stops in the order given, directions).
    public init() {}
}

/// A solved route (ArcGIS `RouteResult`).
public struct RouteResult: Sendable {
    /// The routes solved (one).
    public var routes: [RouteSolution]
    /// The routes edge by edge (solved on this device only; empty from an NAServer).
    public var solvedRoutes: [SolvedRoute]

    /// Each stop's arrival time along the first route (nil without a start time).
    public var arrivalTimes: [Date]? {
        guard let stops = routes.first?.stops, stops.allSatisfy({ $0.arrivalTime != nil }) else { return nil }
        return stops.compactMap(\.arrivalTime)
    }
}
