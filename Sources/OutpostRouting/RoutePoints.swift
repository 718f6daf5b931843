import Foundation
import OutpostCore
import OutpostGeoprocessing

/// Points as a solve takes them in text: NAServer's `stops` and `barriers` parameters and the
/// command line's `--stops` and `--barriers`.
///
/// Two forms are read: `x,y;x,y` (longitude and latitude in WGS 84), and features JSON as
/// ArcGIS clients send it (`{"features": [{"geometry": {"x": …, "y": …}, "attributes":
/// {"Name": …}}], "spatialReference": {"wkid": …}}`, or the bare array of features), whose
/// points may carry names and be in any system PROJ knows.
public struct RoutePoints: Sendable {
    /// The points, with the names features gave them.
    public var stops: [RouteStop]
    /// The system the points are in.
    public var spatialReference: SpatialReference

    /// Reads `text`; `input` names what it is in errors (a service answers them as a 400
    /// naming its parameter).
    /// - Throws: ``RoutingError`` (``RoutingFailure/invalidInput``) naming the item at fault:
    ///   text that is neither form, a feature with no point, a coordinate that is not a finite
    ///   number, a longitude or latitude out of range, more points than a route takes.
    public init(parsing text: String, as input: RoutingError.Input) throws {
        func refuse(_ message: String) -> RoutingError { RoutingError(.invalidInput, message, input: input) }
        var stops: [RouteStop] = []
        var source = SpatialReference.wgs84
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        if trimmed.hasPrefix("{") || trimmed.hasPrefix("[") {
            guard let json = try? JSONValue.parse(trimmed) else { throw refuse("not valid JSON") }
            guard let features = json["features"]?.arrayValue ?? json.arrayValue else {
                throw refuse("expected {\"features\": [{\"geometry\": {\"x\": …, \"y\": …}}]}")
            }
            if let sr = json["spatialReference"].flatMap(EsriJSON.decodeSpatialReference) { source = sr }
            guard features.count <= RouteOptions.maximumStops else { throw Self.tooMany(features.count, refuse) }
            for (i, feature) in features.enumerated() {
                guard let x = feature["geometry"]?["x"]?.doubleValue, let y = feature["geometry"]?["y"]?.doubleValue, x.isFinite, y.isFinite else {
                    throw refuse("feature \(i + 1) has no point geometry")
                }
                let attributes = feature["attributes"]?.objectValue ?? [:]
                let name = attributes.first { $0.key.caseInsensitiveCompare("Name") == .orderedSame }?.value.stringValue
                stops.append(RouteStop(Position(x: x, y: y), name: name))
            }
        } else {
            for (i, pair) in trimmed.split(separator: ";").enumerated() {
                guard i < RouteOptions.maximumStops else { throw Self.tooMany(trimmed.split(separator: ";").count, refuse) }
                let parts = pair.split(separator: ",").map { Double($0.trimmingCharacters(in: .whitespaces)) }
                guard parts.count == 2, let x = parts[0], let y = parts[1], x.isFinite, y.isFinite else {
                    throw refuse("item \(i + 1) \"\(pair.prefix(40))\" is not lon,lat")
                }
                stops.append(RouteStop(Position(x: x, y: y)))
            }
        }
        if source.wkid == 4326, let i = stops.firstIndex(where: { abs($0.location.x) > 180 || abs($0.location.y) > 90 }) {
            throw refuse("item \(i + 1) (\(stops[i].location.x), \(stops[i].location.y)) is not a longitude and latitude")
        }
        self.stops = stops
        self.spatialReference = source
    }

    private static func tooMany(_ count: Int, _ refuse: (String) -> RoutingError) -> RoutingError {
        refuse("\(count) points are more than the \(RouteOptions.maximumStops) a route takes")
    }

    /// The stops in `target`'s system (a network's), names kept.
    /// - Throws: ``RoutingError`` (``RoutingFailure/invalidInput``, naming `input`) when PROJ
    ///   cannot take the points there.
    public func stops(in target: SpatialReference, as input: RoutingError.Input) throws -> [RouteStop] {
        guard spatialReference.wkid != target.wkid else { return stops }
        do {
            let transform = try CoordinateTransform(from: spatialReference, to: target)
            return try stops.map { RouteStop(try transform.transform($0.location), name: $0.name) }
        } catch {
            throw RoutingError(.invalidInput, "cannot project from wkid \(spatialReference.wkid): \(error)", input: input)
        }
    }
}
