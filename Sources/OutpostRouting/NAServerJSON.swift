import Foundation
import OutpostCore

/// The ArcGIS REST shapes of an NAServer route layer: the layer description, the `solve`
/// answer (routes, stops, directions) written from a solved route, and read back into
/// ``RouteSolution``s by ``RouteTask``. Times are minutes and route lengths kilometres (and
/// miles), as ArcGIS route services give them; direction lengths are in the requested units.
public enum NAServerJSON {
    /// How a travel mode is named and measured in the service.
    public struct ModeDescription: Sendable {
        /// The travel mode.
        public var mode: TravelMode
        /// Its name in the service ("Driving Time").
        public var name: String
        /// Its id in the service.
        public var id: String
        /// The impedance attribute it minimises.
        public var impedance: String
        /// Its ArcGIS travel mode type (`AUTOMOBILE`, `WALK`).
        public var type: String
    }

    /// The travel modes a service offers, with their names and ids.
    public static let modes: [ModeDescription] = [
        .init(mode: .drivingTime, name: "Driving Time", id: "1", impedance: "TravelTime", type: "AUTOMOBILE"),
        .init(mode: .drivingDistance, name: "Driving Distance", id: "2", impedance: "Kilometers", type: "AUTOMOBILE"),
        .init(mode: .walking, name: "Walking Time", id: "3", impedance: "WalkTime", type: "WALK"),
    ]

    /// The description of `mode`.
    public static func description(_ mode: TravelMode) -> ModeDescription { modes.first { $0.mode == mode }! }

    /// A travel mode by its name, id, impedance attribute or Outpost name (`walking`), or as
    /// a travel mode JSON object carrying one of those.
    public static func mode(named text: String) -> TravelMode? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if trimmed.hasPrefix("{"), let json = try? JSONValue.parse(trimmed) {
            for key in ["name", "id", "impedanceAttributeName"] {
                if let value = json[key]?.stringValue, let mode = mode(named: value) { return mode }
            }
            return nil
        }
        let lower = trimmed.lowercased()
        return modes.first { [$0.name.lowercased(), $0.id, $0.impedance.lowercased(), $0.mode.rawValue.lowercased()].contains(lower) }?.mode
            ?? (lower == "driving" ? .drivingTime : nil)
    }

    /// Direction length units ArcGIS names, as metres per unit.
    public static let lengthUnits: [String: Double] = [
        "esriNAUMeters": 1, "esriNAUKilometers": 1_000, "esriNAUMiles": 1_609.344, "esriNAUFeet": 0.3048, "esriNAUYards": 0.9144,
        "esriNAUNauticalMiles": 1_852,
    ]

    static func sr(_ reference: SpatialReference) -> JSONValue {
        ["wkid": .integer(Int64(reference.wkid)), "latestWkid": .integer(Int64(reference.wkid))]
    }

    /// The route layer's description (`…/NAServer/Route`).
    public static func layerInfo(name: String, nodeCount: Int, edgeCount: Int, spatialReference: SpatialReference, extent: Envelope?) -> JSONValue {
        let attributes: [JSONValue] = [
            ["name": "TravelTime", "dataType": "esriNADTDouble", "units": "esriNAUMinutes", "usageType": "esriNAUTCost", "restrictionUsageParameterName": .null],
            ["name": "WalkTime", "dataType": "esriNADTDouble", "units": "esriNAUMinutes", "usageType": "esriNAUTCost", "restrictionUsageParameterName": .null],
            ["name": "Kilometers", "dataType": "esriNADTDouble", "units": "esriNAUKilometers", "usageType": "esriNAUTCost", "restrictionUsageParameterName": .null],
            ["name": "Oneway", "dataType": "esriNADTBoolean", "units": "esriNAUUnknown", "usageType": "esriNAUTRestriction", "restrictionUsageParameterName": "Restriction Usage"],
            ["name": "Driving", "dataType": "esriNADTBoolean", "units": "esriNAUUnknown", "usageType": "esriNAUTRestriction", "restrictionUsageParameterName": "Restriction Usage"],
            ["name": "Walking", "dataType": "esriNADTBoolean", "units": "esriNAUUnknown", "usageType": "esriNAUTRestriction", "restrictionUsageParameterName": "Restriction Usage"],
        ]
        let travelModes: [JSONValue] = modes.map { m in
            [
                "name": .string(m.name), "id": .string(m.id), "type": .string(m.type), "impedanceAttributeName": .string(m.impedance),
                "timeAttributeName": .string(m.mode == .walking ? "WalkTime" : "TravelTime"), "distanceAttributeName": "Kilometers",
                "restrictionAttributeNames": .array(m.mode == .walking ? ["Walking"] : ["Driving", "Oneway"]),
                "uturnAtJunctions": "esriNFSBAllowBacktrack", "useHierarchy": false, "simplificationTolerance": .null, "attributeParameterValues": [],
                "description": .string(m.mode == .walking ? "Walking at 5 km/h on every street but motorways, both ways." : "Cars on drivable streets, one-way streets their way; \(m.mode == .drivingTime ? "fastest" : "shortest")."),
            ]
        }
        var info: [String: JSONValue] = [
            "currentVersion": 11.3, "layerName": "Route", "layerType": "esriNAServerRouteLayer",
            "impedance": "TravelTime", "restrictions": ["Driving", "Oneway"], "snapTolerance": 500, "snapToleranceUnits": "esriMeters",
            "maxSnapTolerance": 5_000, "maxSnapToleranceUnits": "esriMeters",
            "findBestSequence": false, "preserveFirstStop": true, "preserveLastStop": true, "useStartTime": false,
            "useTimeWindows": false, "restrictUTurns": "esriNFSBAllowBacktrack", "outputLineType": "esriNAOutputLineTrueShape",
            "useHierarchy": false, "ignoreInvalidLocations": false, "accumulateAttributeNames": ["TravelTime", "WalkTime", "Kilometers"],
            "directionsLanguage": "en", "directionsSupportedLanguages": ["en"], "directionsLengthUnits": "esriNAUKilometers",
            "directionsTimeAttribute": "TravelTime", "directionsStyleNames": ["NA Desktop"],
            "hasZ": false, "supportedTravelModes": .array(travelModes), "defaultTravelMode": "1",
            "spatialReference": sr(spatialReference),
            "networkDataset": [
                "name": .string(name), "networkAttributes": .array(attributes),
                "nodeCount": .integer(Int64(nodeCount)), "edgeCount": .integer(Int64(edgeCount)),
            ],
            "maxStops": .integer(Int64(RouteOptions.maximumStops)), "maxStopsForBestSequence": .integer(Int64(RouteOptions.maximumSequencedStops)),
            "capabilities": "Route",
        ]
        if let extent {
            info["extent"] = [
                "xmin": .number(extent.xmin), "ymin": .number(extent.ymin), "xmax": .number(extent.xmax), "ymax": .number(extent.ymax),
                "spatialReference": sr(spatialReference),
            ]
        }
        return .object(info)
    }

    /// What a `solve` answer holds.
    public struct SolveOutput: Sendable {
        /// Whether the answer has the routes.
        public var returnsRoutes = true
        /// Whether it has the stops.
        public var returnsStops = false
        /// Whether it has the directions.
        public var returnsDirections = true
        /// Metres per direction length unit, and the unit's name.
        public var lengthUnit = (name: "esriNAUKilometers", metres: 1_000.0)
        /// Routes and directions, in kilometres.
        public init() {}
    }

    /// The `solve` answer for one route (in the route's spatial reference).
    public static func solveAnswer(_ route: RouteSolution, mode: TravelMode, output: SolveOutput) -> JSONValue {
        let timeName = mode == .walking ? "WalkTime" : "TravelTime"
        let outSR = sr(route.spatialReference)
        var answer: [String: JSONValue] = ["messages": []]
        if output.returnsRoutes {
            let path = route.geometry
            answer["routes"] = [
                "fieldAliases": ["ObjectID": "ObjectID", "Name": "Name", "Total_\(timeName)": .string("Total_\(timeName)"), "Total_Kilometers": "Total_Kilometers"],
                "geometryType": "esriGeometryPolyline", "spatialReference": outSR,
                "features": [[
                    "attributes": [
                        "ObjectID": 1, "Name": .string(route.name), "FirstStopID": 1, "LastStopID": .integer(Int64(route.stops.count)),
                        "StopCount": .integer(Int64(route.stops.count)), "Total_\(timeName)": .number(route.totalTime / 60),
                        "Total_Kilometers": .number(route.totalLength / 1_000), "Total_Miles": .number(route.totalLength / 1_609.344),
                        "Shape_Length": .number(route.totalLength),
                    ],
                    "geometry": ["paths": [.array(path.map { [.number($0.x), .number($0.y)] })]],
                ]],
            ]
        }
        if output.returnsStops {
            answer["stops"] = [
                "fieldAliases": ["ObjectID": "ObjectID", "Name": "Name", "Sequence": "Sequence"],
                "geometryType": "esriGeometryPoint", "spatialReference": outSR,
                "features": .array(route.stops.enumerated().map { i, stop in
                    let p = stop.location, snap = stop.snappedLocation
                    let arrival: JSONValue = stop.arrivalTime.map { .integer(Int64(($0.timeIntervalSince1970 * 1_000).rounded())) } ?? .null
                    return [
                        "attributes": [
                            "ObjectID": .integer(Int64(i + 1)), "Name": .string(stop.name), "RouteName": .string(route.name),
                            "Sequence": .integer(Int64(stop.sequence)), "TimeWindowStart": .null, "TimeWindowEnd": .null,
                            "ArriveCurbApproach": .null, "DepartCurbApproach": .null, "ArriveTime": arrival, "DepartTime": arrival,
                            "Cumul_\(timeName)": .number(stop.cumulativeTime / 60), "Cumul_Kilometers": .number(stop.cumulativeLength / 1_000),
                            "Status": 0, "SnapX": .number(snap.x), "SnapY": .number(snap.y), "LocationType": 0,
                        ],
                        "geometry": ["x": .number(p.x), "y": .number(p.y)],
                    ]
                }),
            ]
        }
        if output.returnsDirections {
            var eta = route.stops.first?.arrivalTime
            let features: [JSONValue] = route.directionManeuvers.map { d in
                let line = d.geometry
                let etaValue: JSONValue = eta.map { .integer(Int64(($0.timeIntervalSince1970 * 1_000).rounded())) } ?? .null
                eta = eta?.addingTimeInterval(d.time)
                return [
                    "attributes": [
                        "length": .number(d.length / output.lengthUnit.metres), "time": .number(d.time / 60), "text": .string(d.text),
                        "ETA": etaValue, "maneuverType": .string(d.type.rawValue), "streetName": d.streetName.map { .string($0) } ?? .null,
                    ],
                    "compressedGeometry": .string(CompressedGeometry.encode(line)),
                ]
            }
            let all = route.geometry
            answer["directions"] = [[
                "routeId": 1, "routeName": .string(route.name),
                "summary": [
                    "totalLength": .number(route.totalLength / output.lengthUnit.metres), "totalTime": .number(route.totalTime / 60),
                    "totalDriveTime": .number(route.totalTime / 60),
                    "envelope": [
                        "xmin": .number(all.map(\.x).min() ?? 0), "ymin": .number(all.map(\.y).min() ?? 0),
                        "xmax": .number(all.map(\.x).max() ?? 0), "ymax": .number(all.map(\.y).max() ?? 0), "spatialReference": outSR,
                    ],
                ],
                "features": .array(features),
            ]]
        }
        return .object(answer)
    }

    /// The routes of a `solve` answer (directions lengths in `lengthUnitMetres` per unit).
    /// - Throws: ``RoutingError`` `.service` when the answer is an error or not a route answer.
    public static func solutions(_ json: JSONValue, mode: TravelMode, lengthUnitMetres: Double = 1_000) throws -> [RouteSolution] {
        if let error = json["error"] {
            let details = (error["details"]?.arrayValue ?? []).compactMap(\.stringValue).joined(separator: "; ")
            throw RoutingError(.service, (error["message"]?.stringValue ?? "the service failed") + (details.isEmpty ? "" : ": \(details)"))
        }
        guard let routes = json["routes"]?["features"]?.arrayValue else { throw RoutingError(.service, "the answer has no routes") }
        let wkid = json["routes"]?["spatialReference"]?["wkid"]?.doubleValue.map { Int($0) } ?? 4326
        let timeName = mode == .walking ? "WalkTime" : "TravelTime"
        let stops = (json["stops"]?["features"]?.arrayValue ?? []).map { f -> StopResult in
            let a = f["attributes"]
            let location = Position(x: f["geometry"]?["x"]?.doubleValue ?? .nan, y: f["geometry"]?["y"]?.doubleValue ?? .nan)
            return StopResult(
                name: a?["Name"]?.stringValue ?? "", location: location,
                snappedLocation: Position(x: a?["SnapX"]?.doubleValue ?? location.x, y: a?["SnapY"]?.doubleValue ?? location.y),
                sequence: Int(a?["Sequence"]?.doubleValue ?? 0), cumulativeTime: (a?["Cumul_\(timeName)"]?.doubleValue ?? 0) * 60,
                cumulativeLength: (a?["Cumul_Kilometers"]?.doubleValue ?? 0) * 1_000,
                arrivalTime: a?["ArriveTime"]?.doubleValue.map { Date(timeIntervalSince1970: $0 / 1_000) })
        }.sorted { $0.sequence < $1.sequence }
        let maneuvers = (json["directions"]?.arrayValue?.first?["features"]?.arrayValue ?? []).map { f -> DirectionManeuver in
            let a = f["attributes"]
            return DirectionManeuver(
                type: ManeuverType(rawValue: a?["maneuverType"]?.stringValue ?? "") ?? .straight, text: a?["text"]?.stringValue ?? "",
                length: (a?["length"]?.doubleValue ?? 0) * lengthUnitMetres, time: (a?["time"]?.doubleValue ?? 0) * 60,
                streetName: a?["streetName"]?.stringValue, geometry: f["compressedGeometry"]?.stringValue.flatMap(CompressedGeometry.decode) ?? [])
        }
        return routes.map { f in
            let a = f["attributes"]
            let path = (f["geometry"]?["paths"]?.arrayValue ?? []).flatMap { $0.arrayValue ?? [] }.compactMap { p -> Position? in
                guard let x = p.arrayValue?.first?.doubleValue, let y = p.arrayValue?.dropFirst().first?.doubleValue else { return nil }
                return Position(x: x, y: y)
            }
            return RouteSolution(
                name: a?["Name"]?.stringValue ?? "", geometry: path, spatialReference: SpatialReference(wkid: wkid),
                totalLength: (a?["Total_Kilometers"]?.doubleValue ?? 0) * 1_000, totalTime: (a?["Total_\(timeName)"]?.doubleValue ?? 0) * 60,
                stops: stops, directionManeuvers: maneuvers)
        }
    }
}
