import Foundation

/// What a route minimises and which streets it may use (ArcGIS travel modes).
public enum TravelMode: String, Sendable, Hashable, CaseIterable, Codable {
    /// Driving, fastest: travel time from the speed limit or the road class's default; one-way
    /// streets in their direction only; no footways, steps, paths or closed ways
    /// (``roadClassesLeftOut``).
    case drivingTime
    /// Driving, shortest: the same streets as `drivingTime`, by length.
    case drivingDistance
    /// Walking, 5 km/h, both ways on every street but motorways, bus-only and closed ways
    /// (``roadClassesLeftOut``).
    case walking

    /// Walking speed, metres per second (5 km/h).
    static let walkingSpeed = 5_000.0 / 3_600

    /// Road classes (OpenStreetMap `highway`) no car drives on: ways for people on foot, bikes
    /// or horses, bus-only ways, and ways that are closed or not built (docs/routing.md).
    static let notDrivable: Set<String> = [
        "footway", "pedestrian", "path", "steps", "cycleway", "bridleway", "corridor", "elevator", "escalator", "platform", "bus_stop",
        "trail", "busway", "bus_guideway", "raceway", "construction", "proposed", "abandoned",
    ]
    /// Road classes no one walks on: motorways and bus-only ways, and ways that are closed or not
    /// built (a construction site is fenced off until its street opens).
    static let notWalkable: Set<String> = [
        "motorway", "motorway_link", "busway", "bus_guideway", "raceway", "construction", "proposed", "abandoned",
    ]

    /// The road classes (OpenStreetMap `highway`) this mode leaves out; every other class,
    /// and a street with none, is used.
    public var roadClassesLeftOut: Set<String> { self == .walking ? Self.notWalkable : Self.notDrivable }

    /// Default speeds (km/h) per road class when the street has no speed limit.
    static let defaultSpeeds: [String: Double] = [
        "motorway": 100, "motorway_link": 60, "trunk": 80, "trunk_link": 50, "primary": 50, "primary_link": 40, "secondary": 40,
        "secondary_link": 30, "tertiary": 40, "tertiary_link": 30, "unclassified": 30, "residential": 30, "living_street": 10,
        "service": 20, "track": 15, "road": 30,
    ]

    /// A speed limit as OpenStreetMap writes it ("50", "30 mph", "FI:urban"), in km/h.
    static func speed(_ text: String?) -> Double? {
        guard let text = text?.trimmingCharacters(in: .whitespaces).lowercased(), !text.isEmpty else { return nil }
        let digits = text.prefix { $0.isNumber || $0 == "." }
        guard let value = Double(digits), value > 0 else {
            switch text {
            case "fi:urban": return 50
            case "fi:rural": return 80
            case "fi:motorway": return 120
            case "walk": return 5
            default: return nil
            }
        }
        return text.contains("mph") ? value * 1.609_344 : value
    }
}
