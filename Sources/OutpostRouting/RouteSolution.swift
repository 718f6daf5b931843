import Foundation
import OutpostCore
import OutpostGeoprocessing

/// A solved route as a task answers it (ArcGIS `Route`), the same whether a network on this
/// device or an NAServer solved it.
public struct RouteSolution: Sendable, Hashable {
    /// The route's name (by default its first and last stops' names, "Depot - stop 3").
    public var name: String
    /// The route's line, in `spatialReference`.
    public var geometry: [Position]
    /// The spatial reference of every position of the solution.
    public var spatialReference: SpatialReference
    /// Metres and seconds.
    public var totalLength: Double
    /// Seconds of the whole route.
    public var totalTime: Double
    /// The stops, in the order visited.
    public var stops: [StopResult]
    /// Empty unless directions were asked for.
    public var directionManeuvers: [DirectionManeuver]
}

/// A stop of a solved route (ArcGIS `Stop` with its solved attributes).
public struct StopResult: Sendable, Hashable {
    /// The stop's name.
    public var name: String
    /// Where the stop was given, and where it met the network.
    public var location: Position
    /// Where it met the network.
    public var snappedLocation: Position
    /// 1-based place in the route (the order visited).
    public var sequence: Int
    /// Seconds and metres from the first stop.
    public var cumulativeTime: Double
    /// Metres from the first stop.
    public var cumulativeLength: Double
    /// Start time plus the travel time (nil without a start time).
    public var arrivalTime: Date?
}

extension RouteSolution {
    /// The same route with every position in `target` (through PROJ).
    /// - Throws: ``RoutingError`` `.invalidInput` when PROJ does not know the system.
    public func projected(to target: SpatialReference) throws -> RouteSolution {
        guard target.wkid != spatialReference.wkid else { return self }
        let transform: CoordinateTransform
        do {
            transform = try CoordinateTransform(from: spatialReference, to: target)
        } catch {
            throw RoutingError(.invalidInput, "cannot project routes to wkid \(target.wkid): \(error)", input: .outputSpatialReference)
        }
        func move(_ p: Position) throws -> Position {
            do {
                return try transform.transform(p)
            } catch {
                throw RoutingError(.invalidInput, "cannot project \(p) to wkid \(target.wkid): \(error)", input: .outputSpatialReference)
            }
        }
        var out = self
        out.spatialReference = target
        out.geometry = try geometry.map(move)
        for i in out.stops.indices {
            out.stops[i].location = try move(stops[i].location)
            out.stops[i].snappedLocation = try move(stops[i].snappedLocation)
        }
        for i in out.directionManeuvers.indices { out.directionManeuvers[i].geometry = try directionManeuvers[i].geometry.map(move) }
        return out
    }
}

extension SolvedRoute {
    /// The route as a task answers it; arrival times follow from `startTime`.
    public func solution(name: String? = nil, spatialReference: SpatialReference, startTime: Date? = nil, directions wanted: Bool = true) -> RouteSolution {
        var stopResults: [StopResult] = []
        var time = 0.0, length = 0.0
        for (i, stop) in stops.enumerated() {
            if i > 0 {
                time += legs[i - 1].reduce(0) { $0 + $1.time }
                length += legs[i - 1].reduce(0) { $0 + $1.length }
            }
            stopResults.append(StopResult(
                name: stop.name ?? "stop \(sequence[i] + 1)", location: stop.location, snappedLocation: snaps[i].point, sequence: i + 1,
                cumulativeTime: time, cumulativeLength: length, arrivalTime: startTime?.addingTimeInterval(time)))
        }
        let label = name ?? "\(stopResults.first?.name ?? "") - \(stopResults.last?.name ?? "")"
        return RouteSolution(
            name: label, geometry: geometry, spatialReference: spatialReference, totalLength: totalLength, totalTime: totalTime,
            stops: stopResults, directionManeuvers: wanted ? directions : [])
    }
}

/// Esri's compressed geometry: a scale factor, then each coordinate as the difference from the
/// previous one times the factor, rounded, written in base 32 with its sign (`+1m91-6fkfr+202tp…`).
/// Direction maneuvers carry their lines this way in NAServer answers.
public enum CompressedGeometry {
    static let digits = Array("0123456789abcdefghijklmnopqrstuv")

    /// `line` at a resolution of 1/`factor` coordinate units.
    public static func encode(_ line: [Position], factor: Int = 1_000_000) -> String {
        var out = number(factor)
        var lastX = 0, lastY = 0
        for p in line {
            let x = Int((p.x * Double(factor)).rounded()), y = Int((p.y * Double(factor)).rounded())
            out += number(x - lastX) + number(y - lastY)
            (lastX, lastY) = (x, y)
        }
        return out
    }

    /// The line, or nil when `text` is not compressed geometry (the `+0+1` versioned form with
    /// z or m values is read for its x and y).
    public static func decode(_ text: String) -> [Position]? {
        var numbers: [Int] = []
        var sign = 0, value = 0, started = false
        for ch in text.split(separator: "|").first ?? "" {
            if ch == "+" || ch == "-" {
                if started { numbers.append(sign * value) }
                (sign, value, started) = (ch == "+" ? 1 : -1, 0, true)
            } else if let d = digits.firstIndex(of: ch), started {
                value = value * 32 + d
                guard value < 1 << 52 else { return nil }
            } else {
                return nil
            }
        }
        if started { numbers.append(sign * value) }
        var rest = numbers[...]
        // Version 1 starts +0+1+flags; flags say whether z and m parts follow after "|".
        if rest.count >= 3, rest[rest.startIndex] == 0, rest[rest.startIndex + 1] == 1 { rest = rest.dropFirst(3) }
        guard let factor = rest.first, factor > 0, (rest.count - 1) % 2 == 0 else { return nil }
        var out: [Position] = []
        var x = 0, y = 0
        var i = rest.startIndex + 1
        while i < rest.endIndex {
            x += rest[i]
            y += rest[i + 1]
            out.append(Position(x: Double(x) / Double(factor), y: Double(y) / Double(factor)))
            i += 2
        }
        return out
    }

    static func number(_ n: Int) -> String {
        var magnitude = n.magnitude
        var chars: [Character] = []
        repeat {
            chars.append(digits[Int(magnitude % 32)])
            magnitude /= 32
        } while magnitude > 0
        return (n < 0 ? "-" : "+") + String(chars.reversed())
    }
}
