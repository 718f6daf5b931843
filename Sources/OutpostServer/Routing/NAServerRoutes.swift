import Foundation
import Hummingbird
import OutpostCore
import OutpostGeoprocessing
import OutpostRouting

/// `…/<name>/NAServer/…`, as the ArcGIS REST API shapes a network analysis service: the
/// service (its route layer named), the route layer's description, and `solve` over a
/// `.network` file served beside the services.
struct NAServerRoutes {
    static let layerName = "Route"

    let name: String
    let network: RoadNetwork
    let parameters: RequestParameters
    var writing: ResponseWriting

    /// The routes below `…/<name>/NAServer`, for callers who may query the network.
    static func table(network: @escaping @Sendable (RoutedRequest) throws -> NAServerRoutes) -> RouteTable {
        var table = RouteTable()
        func on(_ path: RouterPath, _ answer: @escaping @Sendable (NAServerRoutes, RoutedRequest) async throws -> Response) {
            table.on(path, by: network, answer)
        }
        on("") { r, _ in
            r.writing.json([
                "currentVersion": ServiceInfo.currentVersion, "serviceDescription": .string("Routes on the \(r.name) street network"),
                "routeLayers": [.string(Self.layerName)], "serviceAreaLayers": [], "closestFacilityLayers": [],
            ])
        }
        on(RouterPath(Self.layerName)) { r, _ in
            r.writing.json(NAServerJSON.layerInfo(
                name: r.name, nodeCount: r.network.nodeCount, edgeCount: r.network.edgeCount, spatialReference: r.network.spatialReference,
                extent: r.network.extent))
        }
        on(RouterPath("\(Self.layerName)/solve")) { r, call in
            var r = r
            // A browser on solve with no stops gets the form; the answer then shows as its result.
            if let view = call.directoryView() {
                if r.parameters["stops"] == nil {
                    return r.writing.html(view.operation(
                        title: "Solve Route: \(r.name)", description: "Route through the stops on the \(r.name) street network.", form: DirectoryForms.solveRoute,
                        result: nil))
                }
                r.writing.directory = (view, .operation(description: "The route:", form: nil))
            }
            return r.writing.json(try await r.solve())
        }
        on("**") { _, call in throw ServiceError.notFound("NAServer resource \(call.rest.joined(separator: "/"))") }
        return table
    }

    /// Reads the request, solves on a thread of its own (searches are synchronous), answers
    /// the ArcGIS shapes. Bad input is a 400 naming the parameter or the stop.
    private func solve() async throws -> JSONValue {
        let language = (parameters["directionsLanguage"] ?? "en").lowercased()
        guard language == "en" || language.hasPrefix("en-") || language.hasPrefix("en_") else {
            throw ServiceError.badParameter("directionsLanguage", "\(language.prefix(20)) is not supported; directions are written in en")
        }
        var output = NAServerJSON.SolveOutput()
        output.returnsRoutes = try parameters.bool("returnRoutes", default: true)
        output.returnsStops = try parameters.bool("returnStops", default: false)
        output.returnsDirections = try parameters.bool("returnDirections", default: true)
        if let units = parameters["directionsLengthUnits"] {
            guard let metres = NAServerJSON.lengthUnits[units] else {
                throw ServiceError.badParameter("directionsLengthUnits", "expected one of \(NAServerJSON.lengthUnits.keys.sorted().joined(separator: ", "))")
            }
            output.lengthUnit = (units, metres)
        }
        var mode = TravelMode.drivingTime
        if let text = parameters["travelMode"] ?? parameters["impedanceAttributeName"] {
            guard let found = NAServerJSON.mode(named: text) else {
                throw ServiceError.badParameter(
                    parameters["travelMode"] != nil ? "travelMode" : "impedanceAttributeName",
                    "expected one of \(NAServerJSON.modes.map { "\($0.name) (\($0.id))" }.joined(separator: ", "))")
            }
            mode = found
        }
        let startTime: Date?
        if let text = parameters["startTime"], text.lowercased() != "none" {
            if text.lowercased() == "now" {
                startTime = Date()
            } else {
                guard let ms = Double(text), ms.isFinite else { throw ServiceError.badParameter("startTime", "expected milliseconds since 1970 or now") }
                startTime = Date(timeIntervalSince1970: ms / 1_000)
            }
        } else {
            startTime = nil
        }
        let outSR = try parameters.knownSpatialReference("outSR")
        let stops = try points("stops", required: true)
        let barriers = try points("barriers", required: false).map(\.location)
        let options = RouteOptions(
            mode: mode, barriers: barriers, findsBestSequence: try parameters.bool("findBestSequence", default: false),
            preserveFirstStop: try parameters.bool("preserveFirstStop", default: true), preserveLastStop: try parameters.bool("preserveLastStop", default: true))
        let network = network
                let (wanted, travel) = (output, mode)
        return try await runBlocking {
            do {
                let solved = try network.solve(stops, parameters: options)
                var solution = solved.solution(spatialReference: network.spatialReference, startTime: startTime, directions: wanted.returnsDirections)
                if let outSR { solution = try solution.projected(to: outSR) }
                return NAServerJSON.solveAnswer(solution, mode: travel, output: wanted)
            } catch let error as RoutingError {
                switch (error.code, error.input) {
                case (.invalidInput, let input?): throw ServiceError.badParameter(Self.parameter(input), error.message)
                case (.invalidInput, nil), (.noRoute, _): throw ServiceError(400, "Unable to complete operation.", details: [error.message])
                default: throw ServiceError(500, error.message)
                }
            }
        }
    }

    /// The REST parameter that carries a solve's input.
    static func parameter(_ input: RoutingError.Input) -> String {
        switch input {
        case .stops: "stops"
        case .barriers: "barriers"
        case .outputSpatialReference: "outSR"
        }
    }

    /// `stops` / `barriers` (``RoutePoints``) in the network's system.
    private func points(_ parameter: String, required: Bool) throws -> [RouteStop] {
        guard let text = parameters[parameter] else {
            if required { throw ServiceError.badParameter(parameter, "required: x,y;x,y or features JSON") }
            return []
        }
        let input: RoutingError.Input = parameter == "stops" ? .stops : .barriers
        do {
            return try RoutePoints(parsing: text, as: input).stops(in: network.spatialReference, as: input)
        } catch let error as RoutingError {
            throw ServiceError.badParameter(parameter, error.message)
        }
    }
}
