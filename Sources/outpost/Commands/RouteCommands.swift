import ArgumentParser
import Foundation
import OutpostCore
import OutpostRouting
import OutpostStorage

/// `outpost network create`.
struct NetworkCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "network", abstract: "Build road networks (for outpost route) from street line layers.", subcommands: [Create.self])

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Build a .network from a line layer: nodes where lines meet, edges with length, travel times and one-way direction.",
            discussion: "docs/routing.md describes the file and how speeds and road classes are read.")
        @Argument(help: "The geodatabase (.gpkg) holding the street lines.") var geodatabase: String
        @Option(help: "The line layer.") var layer: String
        @Option(help: "The street name field (for directions).") var nameField: String?
        @Option(help: "The one-way field (yes/true/1 along the line, -1 against it).") var onewayField: String?
        @Option(help: "The speed limit field (50, 30 mph); road classes give the default.") var speedField: String?
        @Option(help: "The road class field (OpenStreetMap highway): which modes may use a street.") var classField: String?
        @Option(help: "Leave out rows matching this where clause (e.g. \"highway = 'footway'\").") var restrict: String?
        @Option(name: .customLong("where"), help: "Only rows matching this where clause.") var whereClause: String?
        @Option(help: "Metres within which line vertices are one node.") var tolerance = 0.01
        @Option(help: "The network file to write.") var out: String
        @Flag(help: "Replace an existing file.") var overwrite = false
        @Flag(help: "Print the summary as JSON.") var json = false

        func run() async throws {
            let gdb: Geodatabase
            do {
                gdb = try Geodatabase.open(at: URL(fileURLWithPath: geodatabase), readOnly: true)
            } catch {
                throw CLIFailure(message: "\(geodatabase): \(error)")
            }
            defer { try? gdb.close() }
            let summary: NetworkBuildSummary
            do {
                summary = try NetworkBuilder.create(
                    from: gdb, layer: layer, fields: NetworkFieldMap(name: nameField, oneway: onewayField, speed: speedField, roadClass: classField),
                    whereClause: whereClause, restrict: restrict, tolerance: tolerance, at: URL(fileURLWithPath: out), overwrite: overwrite)
            } catch let error as RoutingError {
                throw CLIFailure(message: error.message)
            }
            if json {
                printJSON([
                    "nodes": .integer(Int64(summary.nodes)), "edges": .integer(Int64(summary.edges)), "skipped": .integer(Int64(summary.skipped)),
                    "seconds": .number(summary.seconds), "hierarchySeconds": .number(summary.hierarchySeconds),
                    "shortcuts": .object(Dictionary(uniqueKeysWithValues: summary.shortcuts.map { ($0.key.rawValue, JSONValue.integer(Int64($0.value))) })),
                ])
            } else {
                print("\(summary.nodes) nodes, \(summary.edges) edges" + (summary.skipped > 0 ? ", \(summary.skipped) lines left out" : "") + String(format: " in %.2f s", summary.seconds))
                let shortcuts = TravelMode.allCases.map { "\($0.rawValue) \(summary.shortcuts[$0] ?? 0)" }.joined(separator: ", ")
                print("contraction hierarchies (shortcuts: \(shortcuts))" + String(format: " in %.2f s", summary.hierarchySeconds))
            }
        }
    }
}

/// `outpost route`.
struct RouteCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "route",
        abstract: "Route through stops on a .network or an NAServer and print turn-by-turn directions.",
        discussion: """
            Stops are lon,lat pairs separated by semicolons, visited in order. Prints each maneuver \
            with its distance and time, then the totals; --json prints the route, stops and \
            directions; --geojson writes the route line and the stops. A stop more than \
            --snap-distance metres from any street, or stops no street joins: exit 1 naming them.
            """)
    @Argument(help: "A .network file, or an NAServer route layer URL (…/NAServer/Route).") var network: String
    @Option(help: "lon,lat;lon,lat;… (two or more), or features JSON as NAServer takes it.") var stops: String
    @Option(help: "driving (fastest), driving-distance (shortest) or walking.") var mode = "driving"
    @Option(help: "Metres a stop may be from the nearest street.") var snapDistance = 500.0
    @Flag(help: "Visit the stops in the cheapest order found (the first stays first).") var bestSequence = false
    @Flag(help: "With --best-sequence, keep the last stop last too.") var preserveLast = false
    @Option(help: "lon,lat;… points that close the street they stand on.") var barriers: String?
    @Option(help: "Write the route and stops as GeoJSON to this file.") var geojson: String?
    @Flag(help: "Print as JSON.") var json = false
    @Option(help: "A token for a secured NAServer.") var token: String?

    func run() async throws {
        let travel: TravelMode
        switch mode.lowercased() {
        case "driving", "driving-time": travel = .drivingTime
        case "driving-distance": travel = .drivingDistance
        case "walking": travel = .walking
        default: throw CLIFailure(message: "--mode \(mode): expected driving, driving-distance or walking")
        }
        let remote = network.hasPrefix("http://") || network.hasPrefix("https://")
        guard let url = remote ? URL(string: network) : URL(fileURLWithPath: network) else { throw CLIFailure(message: "\(network) is not a URL") }
        let task = RouteTask(url: url, token: token)
        var parameters = RouteParameters()
        parameters.stops = try Self.points(stops, option: "--stops", input: .stops)
        parameters.pointBarriers = try barriers.map { try Self.points($0, option: "--barriers", input: .barriers).map(\.location) } ?? []
        parameters.travelMode = travel
        parameters.snapDistance = snapDistance
        parameters.findsBestSequence = bestSequence
        parameters.preserveLastStop = preserveLast
        let route: RouteSolution
        do {
            guard let solved = try await task.solveRoute(parameters: parameters).routes.first else { throw CLIFailure(message: "no route came back") }
            route = solved
        } catch let error as RoutingError {
            throw CLIFailure(message: error.message)
        }
        let directions = route.directionManeuvers
        if let geojson {
            var features: [JSONValue] = [[
                "type": "Feature", "properties": ["totalLength": .number(route.totalLength), "totalTime": .number(route.totalTime), "mode": .string(travel.rawValue)],
                "geometry": ["type": "LineString", "coordinates": .array(route.geometry.map { [.number($0.x), .number($0.y)] })],
            ]]
            for stop in route.stops {
                features.append([
                    "type": "Feature",
                    "properties": [
                        "name": .string(stop.name), "sequence": .integer(Int64(stop.sequence)), "cumulativeTime": .number(stop.cumulativeTime),
                        "cumulativeLength": .number(stop.cumulativeLength),
                    ],
                    "geometry": ["type": "Point", "coordinates": [.number(stop.snappedLocation.x), .number(stop.snappedLocation.y)]],
                ])
            }
            try (["type": "FeatureCollection", "features": .array(features)] as JSONValue).jsonData.write(to: URL(fileURLWithPath: geojson))
        }
        if json {
            printJSON([
                "mode": .string(travel.rawValue), "totalLength": .number(route.totalLength), "totalTime": .number(route.totalTime),
                "stops": .array(route.stops.map { s in
                    [
                        "name": .string(s.name), "sequence": .integer(Int64(s.sequence)), "cumulativeTime": .number(s.cumulativeTime),
                        "cumulativeLength": .number(s.cumulativeLength), "x": .number(s.snappedLocation.x), "y": .number(s.snappedLocation.y),
                    ]
                }),
                "directions": .array(directions.map {
                    ["text": .string($0.text), "maneuverType": .string($0.type.rawValue), "length": .number($0.length), "time": .number($0.time)]
                }),
            ])
            return
        }
        for (i, d) in directions.enumerated() {
            let distance = d.type == .stop ? "" : "  " + Self.metres(d.length) + "  " + Self.duration(d.time)
            print("\(i + 1). \(d.text)\(distance)")
        }
        print("Total: \(Self.metres(route.totalLength)), \(Self.duration(route.totalTime))")
    }

    /// `x,y;x,y;…` as positions.
    /// `--stops` / `--barriers` (``RoutePoints``: lon,lat pairs or features JSON) in WGS 84.
    static func points(_ text: String, option: String, input: RoutingError.Input) throws -> [RouteStop] {
        do {
            return try RoutePoints(parsing: text, as: input).stops(in: .wgs84, as: input)
        } catch let error as RoutingError {
            throw CLIFailure(message: "\(option): \(error.message)")
        }
    }

    static func metres(_ m: Double) -> String { m >= 1_000 ? String(format: "%.1f km", m / 1_000) : "\(Int(m.rounded())) m" }

    static func duration(_ s: Double) -> String {
        let seconds = Int(s.rounded())
        return seconds >= 60 ? "\(seconds / 60) min \(seconds % 60) s" : "\(seconds) s"
    }
}
