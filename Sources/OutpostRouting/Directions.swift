import Foundation
import OutpostCore

/// ArcGIS maneuver types (`esriDMT…`).
public enum ManeuverType: String, Sendable, Hashable {
    /// Leave the first stop.
    case depart = "esriDMTDepart"
    /// Arrive at a stop.
    case stop = "esriDMTStop"
    /// Go straight on.
    case straight = "esriDMTStraight"
    /// Bear slightly left.
    case bearLeft = "esriDMTBearLeft"
    /// Bear slightly right.
    case bearRight = "esriDMTBearRight"
    /// Turn left.
    case turnLeft = "esriDMTTurnLeft"
    /// Turn right.
    case turnRight = "esriDMTTurnRight"
    /// Turn sharply left.
    case sharpLeft = "esriDMTSharpLeft"
    /// Turn sharply right.
    case sharpRight = "esriDMTSharpRight"
    /// Turn back.
    case uTurn = "esriDMTUTurn"

    /// The turn from one bearing to another (degrees clockwise from north).
    static func turn(from a: Double, to b: Double) -> ManeuverType {
        var delta = (b - a).truncatingRemainder(dividingBy: 360)
        if delta > 180 { delta -= 360 }
        if delta <= -180 { delta += 360 }
        let size = abs(delta), right = delta > 0
        switch size {
        case ..<20: return .straight
        case ..<45: return right ? .bearRight : .bearLeft
        case ..<135: return right ? .turnRight : .turnLeft
        case ..<170: return right ? .sharpRight : .sharpLeft
        default: return .uTurn
        }
    }
}

/// One line of turn-by-turn directions.
public struct DirectionManeuver: Sendable, Hashable {
    /// What the maneuver is.
    public var type: ManeuverType
    /// The direction as text ("Turn left onto Mannerheimintie").
    public var text: String
    /// Metres and seconds until the next maneuver.
    public var length: Double
    /// Seconds until the next maneuver.
    public var time: Double
    /// The street the maneuver leads onto.
    public var streetName: String?
    /// The line from this maneuver to the next.
    public var geometry: [Position]
}

extension SolvedRoute {
    /// Turn-by-turn directions: depart, a maneuver wherever the street changes (consecutive
    /// parts of one street are one maneuver), arrive at each stop. Lengths add up to the route's.
    public var directions: [DirectionManeuver] {
        var out: [DirectionManeuver] = []
        for (i, leg) in legs.enumerated() {
            // Unnamed stops are called by their place in the request.
            let from = stops[i].name ?? "stop \(sequence[i] + 1)", to = stops[i + 1].name ?? "stop \(sequence[i + 1] + 1)"
            // Consecutive steps on one street, merged.
            var runs: [(name: String?, steps: [RouteStep])] = []
            for step in leg {
                if let last = runs.last, last.name == step.name { runs[runs.count - 1].steps.append(step) } else { runs.append((step.name, [step])) }
            }
            for (r, run) in runs.enumerated() {
                let geometry = run.steps.flatMap(\.geometry).reduce(into: [Position]()) { if $0.last != $1 { $0.append($1) } }
                let length = run.steps.reduce(0) { $0 + $1.length }, time = run.steps.reduce(0) { $0 + $1.time }
                let street = run.name ?? "an unnamed street"
                var type: ManeuverType
                var text: String
                if r == 0 {
                    type = .depart
                    text = i == 0
                        ? "Start at \(from) and go \(Self.compass(Self.bearing(geometry, atStart: true))) on \(street)"
                        : "Continue \(Self.compass(Self.bearing(geometry, atStart: true))) on \(street)"
                } else {
                    let previous = runs[r - 1].steps.flatMap(\.geometry)
                    type = ManeuverType.turn(from: Self.bearing(previous, atStart: false), to: Self.bearing(geometry, atStart: true))
                    switch type {
                    case .straight: text = "Continue onto \(street)"
                    case .bearLeft: text = "Bear left onto \(street)"
                    case .bearRight: text = "Bear right onto \(street)"
                    case .turnLeft: text = "Turn left onto \(street)"
                    case .turnRight: text = "Turn right onto \(street)"
                    case .sharpLeft: text = "Make a sharp left onto \(street)"
                    case .sharpRight: text = "Make a sharp right onto \(street)"
                    default: text = "Make a U-turn onto \(street)"
                    }
                }
                out.append(DirectionManeuver(type: type, text: text, length: length, time: time, streetName: run.name, geometry: geometry))
            }
            let last = leg.last?.geometry.last ?? snaps[i + 1].point
            out.append(DirectionManeuver(
                type: .stop, text: i + 1 == legs.count ? "Finish at \(to)" : "Arrive at \(to)", length: 0, time: 0, streetName: nil,
                geometry: [last]))
        }
        return out
    }

    /// The bearing (degrees clockwise from north) of a line's first or last stretch of a few
    /// metres, the part a driver sees at a junction.
    static func bearing(_ line: [Position], atStart: Bool) -> Double {
        let points = atStart ? line : line.reversed()
        guard let origin = points.first else { return 0 }
        let scale = cos(origin.y * .pi / 180)
        for p in points.dropFirst() {
            let dx = (p.x - origin.x) * scale, dy = p.y - origin.y
            guard hypot(dx, dy) > 1e-7 else { continue }
            // Towards p from the line's start; for the end, from p towards the end.
            let angle = atan2(dx, dy) * 180 / .pi
            return atStart ? (angle + 360).truncatingRemainder(dividingBy: 360) : (angle + 180 + 360).truncatingRemainder(dividingBy: 360)
        }
        return 0
    }

    static func compass(_ bearing: Double) -> String {
        ["north", "northeast", "east", "southeast", "south", "southwest", "west", "northwest"][Int(((bearing + 22.5) / 45).rounded(.down)) % 8]
    }
}
