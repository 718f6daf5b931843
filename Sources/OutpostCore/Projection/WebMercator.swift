import Foundation

/// Spherical Web Mercator (EPSG:3857) ⇄ WGS 84 longitude/latitude (EPSG:4326).
///
/// The forward formula is the one EPSG method 1024 defines (a sphere of radius = WGS 84 semi-major
/// axis); latitudes are clamped to ±85.05112878° so the square world extent maps to itself.
public enum WebMercator {
    /// WGS 84 semi-major axis in metres.
    public static let earthRadius = 6_378_137.0
    /// Half the side of the square world, in metres (π × R).
    public static let originShift = Double.pi * earthRadius
    /// Latitude at which the projected world becomes square.
    public static let maxLatitude = 85.051_128_779_806_59

    /// Longitude/latitude in degrees to metres.
    public static func project(longitude: Double, latitude: Double) -> (x: Double, y: Double) {
        let lat = min(max(latitude, -maxLatitude), maxLatitude)
        let x = longitude * originShift / 180
        let y = log(tan((90 + lat) * .pi / 360)) * earthRadius
        return (x, y)
    }

    /// Metres to longitude/latitude in degrees.
    public static func unproject(x: Double, y: Double) -> (longitude: Double, latitude: Double) {
        let lon = x / originShift * 180
        let lat = (2 * atan(exp(y / earthRadius)) - .pi / 2) * 180 / .pi
        return (lon, lat)
    }

    /// Projects `geometry` between two spatial references Outpost can convert (4326 and 3857).
    ///
    /// - Throws: ``GeometryError/Code/unsupportedProjection`` for any other pair.
    public static func convert(
        _ geometry: Geometry, from source: SpatialReference, to target: SpatialReference
    ) throws -> Geometry {
        let transform = try transformer(from: source, to: target)
        guard let transform else { return geometry }
        return try geometry.mapPositions(transform)
    }

    /// Projects an envelope by its corners (exact for these two systems: both are axis-aligned).
    public static func convert(
        _ envelope: Envelope, from source: SpatialReference, to target: SpatialReference
    ) throws -> Envelope {
        guard let transform = try transformer(from: source, to: target) else { return envelope }
        let lower = transform(Position(x: envelope.xmin, y: envelope.ymin))
        let upper = transform(Position(x: envelope.xmax, y: envelope.ymax))
        return Envelope(
            xmin: lower.x, ymin: lower.y, xmax: upper.x, ymax: upper.y,
            zRange: envelope.zRange, mRange: envelope.mRange)
    }

    /// nil means "same system, nothing to do".
    private static func transformer(
        from source: SpatialReference, to target: SpatialReference
    ) throws -> (@Sendable (Position) -> Position)? {
        if source == target { return nil }
        switch (source.wkid, target.wkid) {
        case (4326, 3857):
            return { p in
                let (x, y) = project(longitude: p.x, latitude: p.y)
                return Position(x: x, y: y, z: p.z, m: p.m)
            }
        case (3857, 4326):
            return { p in
                let (lon, lat) = unproject(x: p.x, y: p.y)
                return Position(x: lon, y: lat, z: p.z, m: p.m)
            }
        default:
            throw GeometryError(
                .unsupportedProjection,
                "cannot project from \(source) to \(target); Outpost converts only between EPSG:4326 and EPSG:3857")
        }
    }
}
