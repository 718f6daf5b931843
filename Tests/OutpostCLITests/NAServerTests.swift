import Foundation
import OutpostCore
import OutpostRouting
import OutpostTestSupport
import Testing

/// NAServer route solving in `outpost serve` (a `.network` beside the services), RouteTask and
/// `outpost route` against it: the same routes as on the file, in ArcGIS shapes.
@Suite struct NAServerTests {
    static let stops = "24.941428,60.167769;24.947429,60.168943"

    /// The Helsinki network built by the CLI into a folder of its own, and that folder served.
    static func serve(in directory: TemporaryDirectory) async throws -> (URL, ServeProcess) {
        let gpkg = directory.file("helsinki.gpkg")
        #expect(try await outpost(["service", "create", Repository.sampleData("helsinki").path, "--out", gpkg.path]).succeeded)
        let services = directory.file("services")
        try FileManager.default.createDirectory(at: services, withIntermediateDirectories: true)
        let network = services.appendingPathComponent("helsinki.network")
        let built = try await outpost([
            "network", "create", gpkg.path, "--layer", "streets", "--name-field", "name", "--oneway-field", "oneway", "--speed-field", "maxspeed",
            "--class-field", "highway", "--out", network.path,
        ])
        #expect(built.succeeded && built.stdout.contains("contraction hierarchies"), "\(built.stdout) \(built.stderr)")
        return (network, try await ServeProcess.start(service: services))
    }

    /// curl: the HTTP status and the JSON body.
    static func call(_ url: URL, _ form: [String: String]) async throws -> (Int, JSONValue) {
        var arguments = ["-s", "-w", "\n%{http_code}"]
        for (key, value) in form.sorted(by: { $0.key < $1.key }) { arguments += ["--data-urlencode", "\(key)=\(value)"] }
        let result = try await ExternalTools.run("curl", arguments + ["--data-urlencode", "f=json", url.absoluteString])
        let lines = result.stdout.split(separator: "\n", omittingEmptySubsequences: false)
        return (Int(lines.last ?? "") ?? 0, try JSONValue.parse(String(lines.dropLast().joined(separator: "\n"))))
    }

    @Test func solveAnswersTheRouteTheFileGivesInArcGISShapes() async throws {
        let directory = TemporaryDirectory("outpost-naserver")
        let (network, server) = try await Self.serve(in: directory)
        defer { Task { await server.stop() } }
        let base = server.url.appendingPathComponent("arcgis/rest/services/helsinki/NAServer")
        let catalog = try await Self.call(server.url.appendingPathComponent("arcgis/rest/services"), [:]).1
        #expect((catalog["services"]?.arrayValue ?? []).contains { $0["name"] == "helsinki" && $0["type"] == "NAServer" })
        #expect(try await Self.call(base, [:]).1["routeLayers"] == ["Route"])
        // In a browser: solve's form, and the answer as a page.
        let form = try await ExternalTools.run("curl", ["-s", base.appendingPathComponent("Route/solve").absoluteString + "?f=html"])
        #expect(form.stdout.contains("Solve Route (POST)") && form.stdout.contains("name=\"stops\""), "\(form.stdout.prefix(300))")
        let page = try await ExternalTools.run("curl", ["-s", "--data-urlencode", "stops=\(Self.stops)", "--data-urlencode", "f=html", base.appendingPathComponent("Route/solve").absoluteString])
        #expect(page.stdout.contains("The route:") && page.stdout.contains("Finish at stop 2"), "\(page.stdout.prefix(300))")
        let layer = try await Self.call(base.appendingPathComponent("Route"), [:]).1
        #expect(layer["layerType"] == "esriNAServerRouteLayer" && layer["defaultTravelMode"] == "1")
        let attributes = (layer["networkDataset"]?["networkAttributes"]?.arrayValue ?? []).compactMap { $0["name"]?.stringValue }
        #expect(Set(attributes).isSuperset(of: ["TravelTime", "WalkTime", "Kilometers", "Oneway"]))
        #expect((layer["supportedTravelModes"]?.arrayValue ?? []).compactMap { $0["name"]?.stringValue } == ["Driving Time", "Driving Distance", "Walking Time"])

        // The route on the file, and through the service (stops as x,y;x,y).
        let local = try RoadNetwork(url: network).solve(
            [RouteStop(Position(x: 24.941428, y: 60.167769)), RouteStop(Position(x: 24.947429, y: 60.168943))], mode: .drivingTime)
        let (status, answer) = try await Self.call(base.appendingPathComponent("Route/solve"), ["stops": Self.stops, "returnStops": "true"])
        #expect(status == 200, "\(answer)")
        let route = try #require(answer["routes"]?["features"]?.arrayValue?.first)
        #expect(abs((route["attributes"]?["Total_TravelTime"]?.doubleValue ?? 0) * 60 - local.totalTime) < 1e-6)
        #expect(abs((route["attributes"]?["Total_Kilometers"]?.doubleValue ?? 0) * 1_000 - local.totalLength) < 1e-6)
        let path = (route["geometry"]?["paths"]?.arrayValue?.first?.arrayValue ?? []).compactMap { $0.arrayValue?.compactMap(\.doubleValue) }
        #expect(path.count == local.geometry.count && zip(path, local.geometry).allSatisfy { abs($0[0] - $1.x) < 1e-9 && abs($0[1] - $1.y) < 1e-9 })
        let stops = answer["stops"]?["features"]?.arrayValue ?? []
        #expect(stops.compactMap { $0["attributes"]?["Sequence"]?.integerValue } == [1, 2])
        #expect(abs((stops.last?["attributes"]?["Cumul_TravelTime"]?.doubleValue ?? 0) * 60 - local.totalTime) < 1e-6)
        // Directions: ArcGIS maneuver types, the texts the file gives, lengths (km by default)
        // adding up, and each line in compressed geometry a third-party decoder reads.
        let features = answer["directions"]?.arrayValue?.first?["features"]?.arrayValue ?? []
        #expect(features.compactMap { $0["attributes"]?["text"]?.stringValue } == local.directions.map(\.text))
        #expect(features.compactMap { $0["attributes"]?["maneuverType"]?.stringValue } == local.directions.map(\.type.rawValue))
        let kilometres = features.compactMap { $0["attributes"]?["length"]?.doubleValue }.reduce(0, +)
        #expect(abs(kilometres * 1_000 - local.totalLength) < 1e-6)
        let lines = features.compactMap { $0["compressedGeometry"]?.stringValue }
        try Data(lines.joined(separator: "\n").utf8).write(to: directory.file("lines.txt"))
        let decoded = try await ExternalTools.python("""
            import sys, json
            from arcgis_compressed_geometry import decode
            print(json.dumps([decode(line) for line in open(sys.argv[1]).read().split("\\n")]))
            """, [directory.file("lines.txt").path])
        #expect(decoded.succeeded, "\(decoded.stderr)")
        let theirs = try JSONValue.parse(decoded.stdout).arrayValue ?? []
        #expect(theirs.count == local.directions.count)
        for (line, maneuver) in zip(theirs, local.directions) {
            let points = (line.arrayValue ?? []).compactMap { $0.arrayValue?.compactMap(\.doubleValue) }
            #expect(points.count == maneuver.geometry.count)
            #expect(zip(points, maneuver.geometry).allSatisfy { abs($0[0] - $1.x) < 1e-6 && abs($0[1] - $1.y) < 1e-6 })
        }

        // Stops as features in Web Mercator with names, the answer in Web Mercator, walking.
        let mercator = [(24.941428, 60.167769), (24.947429, 60.168943)].map { WebMercator.project(longitude: $0.0, latitude: $0.1) }
        let featureStops = #"{"type":"features","spatialReference":{"wkid":3857},"features":["#
            + mercator.enumerated().map { i, p in #"{"geometry":{"x":\#(p.x),"y":\#(p.y)},"attributes":{"Name":"Site \#(i + 1)"}}"# }.joined(separator: ",") + "]}"
        let (walkStatus, walk) = try await Self.call(
            base.appendingPathComponent("Route/solve"),
            ["stops": featureStops, "travelMode": #"{"name":"Walking Time"}"#, "outSR": "3857", "returnStops": "true", "directionsLengthUnits": "esriNAUMeters"])
        #expect(walkStatus == 200, "\(walk)")
        let walked = try RoadNetwork(url: network).solve(
            [RouteStop(Position(x: 24.941428, y: 60.167769)), RouteStop(Position(x: 24.947429, y: 60.168943))], mode: .walking)
        #expect(abs((walk["routes"]?["features"]?.arrayValue?.first?["attributes"]?["Total_WalkTime"]?.doubleValue ?? 0) * 60 - walked.totalTime) < 1e-3)
        let first = walk["stops"]?["features"]?.arrayValue?.first
        #expect(first?["attributes"]?["Name"] == "Site 1" && abs((first?["geometry"]?["x"]?.doubleValue ?? 0) - mercator[0].x) < 0.01)
        #expect(walk["routes"]?["spatialReference"]?["wkid"] == 3857)
        #expect(walk["directions"]?.arrayValue?.first?["features"]?.arrayValue?.last?["attributes"]?["text"] == "Finish at Site 2")
    }

    @Test func badRequestsAreRefusedNamingWhatIsWrong() async throws {
        let directory = TemporaryDirectory("outpost-naserver-bad")
        let (_, server) = try await Self.serve(in: directory)
        defer { Task { await server.stop() } }
        let solve = server.url.appendingPathComponent("arcgis/rest/services/helsinki/NAServer/Route/solve")
        func refused(_ form: [String: String], _ needle: String) async throws {
            let (status, body) = try await Self.call(solve, form)
            let text = body.jsonString
            #expect(status == 400 && text.contains(needle), "\(form): \(status) \(text)")
        }
        try await refused([:], "'stops'")
        try await refused(["stops": "24.94,60.16"], "at least two stops")
        try await refused(["stops": "24.94,60.16;25.5,60.5"], "stop 2 is more than 500 m from any street")
        try await refused(["stops": "24.94,60.16;25.5,60.5"], "'stops'")
        try await refused(["stops": "200,100;24.94,60.16"], "'stops'")
        try await refused(["stops": Self.stops, "barriers": "25.5,60.5"], "'barriers'")
        try await refused(["stops": Self.stops, "outSR": "999999"], "'outSR'")
        try await refused(["stops": Self.stops, "outSR": "abc"], "'outSR'")
        try await refused(["stops": "north;south"], "'stops'")
        try await refused(["stops": #"{"features": [{"geometry": {"x": "a"}}]}"#], "feature 1 has no point geometry")
        try await refused(["stops": Self.stops, "directionsLanguage": "fi"], "'directionsLanguage'")
        try await refused(["stops": Self.stops, "travelMode": "Helicopter"], "'travelMode'")
        try await refused(["stops": Self.stops, "returnStops": "maybe"], "'returnStops'")
        try await refused(["stops": Self.stops, "directionsLengthUnits": "cubits"], "'directionsLengthUnits'")
        let many = (0...RouteOptions.maximumStops).map { _ in "24.94,60.16" }.joined(separator: ";")
        try await refused(["stops": many], "more than the 10000")
        let (missing, _) = try await Self.call(server.url.appendingPathComponent("arcgis/rest/services/nowhere/NAServer/Route/solve"), ["stops": Self.stops])
        #expect(missing == 404)
    }

    @Test func routeTaskAndTheCLISolveThroughTheServiceAsOnTheFile() async throws {
        let directory = TemporaryDirectory("outpost-naserver-task")
        let (network, server) = try await Self.serve(in: directory)
        defer { Task { await server.stop() } }
        let layer = server.url.appendingPathComponent("arcgis/rest/services/helsinki/NAServer/Route")
        let remote = RouteTask(url: layer), local = RouteTask(url: network)
        var parameters = try await remote.makeDefaultParameters()
        #expect(remote.routeTaskInfo?.travelModes == [.drivingTime, .drivingDistance, .walking])
        // Four stops, best order with the first kept, a barrier, a start time.
        parameters.stops = [(24.9414, 60.1678), (24.9520, 60.1690), (24.9450, 60.1710), (24.9474, 60.1689)].enumerated().map {
            RouteStop(Position(x: $1.0, y: $1.1), name: "Site \($0 + 1)")
        }
        parameters.findsBestSequence = true
        parameters.preserveLastStop = false
        parameters.travelMode = .walking
        parameters.pointBarriers = [Position(x: 24.9474, y: 60.16894)]
        parameters.startTime = Date(timeIntervalSince1970: 1_790_000_000)
        let there = try #require(try await remote.solveRoute(parameters: parameters).routes.first)
        let here = try #require(try await local.solveRoute(parameters: parameters).routes.first)
        #expect(there.stops.map(\.name) == here.stops.map(\.name) && there.stops.first?.name == "Site 1")
        #expect(abs(there.totalTime - here.totalTime) < 1e-6 && abs(there.totalLength - here.totalLength) < 1e-6)
        #expect(there.directionManeuvers.map(\.text) == here.directionManeuvers.map(\.text))
        #expect(zip(there.directionManeuvers, here.directionManeuvers).allSatisfy { abs($0.length - $1.length) < 1e-6 && $0.geometry.count == $1.geometry.count })
        for (a, b) in zip(there.stops, here.stops) {
            #expect(abs((a.arrivalTime?.timeIntervalSince1970 ?? 0) - (b.arrivalTime?.timeIntervalSince1970 ?? 1)) < 0.002)
        }
        parameters.stops[1] = RouteStop(Position(x: 25.5, y: 60.5))
        await #expect { try await remote.solveRoute(parameters: parameters) } throws: {
            ($0 as? RoutingError)?.message.contains("stop 2 is more than 500 m") == true
        }
        let nowhere = RouteTask(url: server.url.appendingPathComponent("arcgis/rest/services/helsinki/FeatureServer"))
        await #expect { try await nowhere.load() } throws: { ($0 as? RoutingError)?.code == .service }

        // The CLI prints the same directions from the file and from the service.
        let fromFile = try await outpost(["route", network.path, "--stops", Self.stops])
        let fromService = try await outpost(["route", layer.absoluteString, "--stops", Self.stops])
        #expect(fromFile.succeeded && fromService.succeeded, "\(fromService.stderr)")
        #expect(fromFile.stdout == fromService.stdout, "\(fromFile.stdout)\n---\n\(fromService.stdout)")
    }

    /// A crew's network follows its replica: after a sync brings a street added at the office,
    /// `network create --overwrite` rebuilds it and the route takes the new street.
    @Test(.scaledTimeLimit(minutes: 3))
    func aNetworkBuiltFromAReplicaIsRebuiltAfterASync() async throws {
        let directory = TemporaryDirectory("outpost-network-replica")
        let (server, url, replica) = try await helsinkiCrew(in: directory, layer: 1)
        defer { Task { await server.stop() } }
        let network = directory.file("crew.network").path
        let build = ["network", "create", replica, "--layer", "streets", "--name-field", "name", "--oneway-field", "oneway", "--class-field", "highway", "--out", network]
        #expect(try await outpost(build).succeeded)
        // Two street ends a few hundred metres apart, joined only the long way round.
        let before = try RoadNetwork(url: URL(fileURLWithPath: network))
        let a = try before.edge(1).line[0]
        var b = a
        var far: [Int] = []
        try before.forEachEdge { if $0.walkSeconds != nil { far.append($0.id) } }
        for id in far {
            let p = try before.edge(id).line[0]
            let metres = hypot((p.x - a.x) * 111_320 * cos(a.y * .pi / 180), (p.y - a.y) * 111_320)
            if metres > 300, metres < 400 { b = p; break }
        }
        let stops = "\(a.x),\(a.y);\(b.x),\(b.y)"
        let first = try JSONValue.parse(try await outpost(["route", network, "--stops", stops, "--mode", "walking", "--json"]).stdout)
        let straight = hypot((b.x - a.x) * 111_320 * cos(a.y * .pi / 180), (b.y - a.y) * 111_320)
        #expect((first["totalLength"]?.doubleValue ?? 0) > straight * 1.05, "\(first)")

        // The office draws a footpath straight between them; the crew syncs and rebuilds.
        let adds = #"[{"geometry":{"paths":[[[\#(a.x),\#(a.y)],[\#(b.x),\#(b.y)]]]},"attributes":{"name":"Oikopolku","highway":"footway","osm_id":"office"}}]"#
        let answer = try await applyEdits(url.absoluteString, layer: 1, "adds", adds)
        #expect(answer["addResults"]?[0]?["success"] == true, "\(answer)")
        #expect(try await outpost(["sync", replica]).succeeded)
        let rebuilt = try await outpost(build + ["--overwrite"])
        #expect(rebuilt.succeeded, "\(rebuilt.stderr)")
        let second = try JSONValue.parse(try await outpost(["route", network, "--stops", stops, "--mode", "walking", "--json"]).stdout)
        #expect(abs((second["totalLength"]?.doubleValue ?? 0) - straight) < straight * 0.01, "\(second)")
        #expect((second["directions"]?.arrayValue ?? []).contains { $0["text"]?.stringValue?.contains("Oikopolku") == true }, "\(second)")
    }
}

