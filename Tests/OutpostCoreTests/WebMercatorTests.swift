import Testing

@testable import OutpostCore

@Suite("Web Mercator")
struct WebMercatorTests {
    @Test func knownValues() {
        let (x, y) = WebMercator.project(longitude: 180, latitude: 0)
        #expect(abs(x - 20_037_508.342_789_244) < 1e-6)
        #expect(abs(y) < 1e-6)
        let (_, top) = WebMercator.project(longitude: 0, latitude: WebMercator.maxLatitude)
        #expect(abs(top - 20_037_508.342_789_244) < 1e-3)
        // Clamped beyond the square world.
        #expect(WebMercator.project(longitude: 0, latitude: 89.9).y == top)
        // Reference values from PROJ (pyproj Transformer EPSG:4326 -> EPSG:3857).
        let (wx, wy) = WebMercator.project(longitude: 174.7762, latitude: -41.2865)
        #expect(abs(wx - 19_455_997.586_783_34) < 1e-6)
        #expect(abs(wy - (-5_054_692.636_579_76)) < 1e-6)
        let (px, py) = WebMercator.project(longitude: -122.6784, latitude: 45.5152)
        #expect(abs(px - (-13_656_497.019_333_53)) < 1e-6)
        #expect(abs(py - 5_702_997.145_798_147) < 1e-6)
    }

    @Test func roundTrips() {
        for lon in stride(from: -180.0, through: 180, by: 22.5) {
            for lat in stride(from: -85.0, through: 85, by: 8.5) {
                let (x, y) = WebMercator.project(longitude: lon, latitude: lat)
                let (lon2, lat2) = WebMercator.unproject(x: x, y: y)
                #expect(abs(lon - lon2) < 1e-9 && abs(lat - lat2) < 1e-9)
            }
        }
    }

    @Test func convertsGeometriesAndEnvelopes() throws {
        let g = Geometry.lineString(try LineString([Position(x: 0, y: 0, z: 5), Position(x: 10, y: 10, z: 6)]))
        let projected = try WebMercator.convert(g, from: .wgs84, to: .webMercator)
        #expect(projected.layout == .xyz)
        let back = try WebMercator.convert(projected, from: SpatialReference(wkid: 102100), to: .wgs84)
        back.forEachPosition { p in #expect(p.x == 0 || abs(p.x - 10) < 1e-9) }
        let e = try WebMercator.convert(Envelope(xmin: -10, ymin: -10, xmax: 10, ymax: 10), from: .wgs84, to: .webMercator)
        #expect(e.xmax > 1_000_000 && e.xmin < -1_000_000)
        #expect(try WebMercator.convert(g, from: .wgs84, to: .wgs84) == g)
        let error = #expect(throws: GeometryError.self) { try WebMercator.convert(g, from: .wgs84, to: SpatialReference(wkid: 2193)) }
        #expect(error?.code == .unsupportedProjection)
    }
}
