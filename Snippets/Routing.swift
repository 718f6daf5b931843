// A route through several stops, in the best order, with directions: on a `.network` file
// offline or against an NAServer route layer.
import Foundation
import OutpostCore
import OutpostRouting

// snippet.hide
guard let networkPath = CommandLine.arguments.dropFirst().first else {
    print("usage: Routing <file.network or NAServer route layer URL>")
    exit(2)
}
let networkURL = networkPath.hasPrefix("http") ? URL(string: networkPath)! : URL(fileURLWithPath: networkPath)
// snippet.show
let task = RouteTask(url: networkURL)
try await task.load()

var parameters = try await task.makeDefaultParameters()
parameters.stops = [
    RouteStop(Position(x: 24.9414, y: 60.1699), name: "Depot"),
    RouteStop(Position(x: 24.9520, y: 60.1675), name: "Hydrant 17"),
    RouteStop(Position(x: 24.9330, y: 60.1730), name: "Valve 4"),
]
parameters.findsBestSequence = true
parameters.preserveLastStop = false

let result = try await task.solveRoute(parameters: parameters)
let route = result.routes[0]
print("\(Int(route.totalLength)) m, \(Int(route.totalTime)) min")
for maneuver in route.directionManeuvers { print(maneuver.text) }
