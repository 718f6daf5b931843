import Foundation
import OutpostCore
import OutpostTestSupport
import Testing

@testable import OutpostGeoprocessing

/// The Buffer tool against shapely 2 and pyproj doing the same on the same points.
@Suite("Buffer tool")
struct BufferToolTests {
    /// Central Helsinki, Tallinn and Stockholm (longitude, latitude).
    static let places = [(24.9384, 60.1699), (24.7536, 59.4370), (18.0686, 59.3293)]

    static func points(wkid: Int) throws -> GPFeatureSet {
        let transform = try CoordinateTransform(from: SpatialReference(wkid: 4326), to: SpatialReference(wkid: wkid))
        return GPFeatureSet(
            geometryType: "esriGeometryPoint", spatialReference: SpatialReference(wkid: wkid),
            fields: [GPField(name: "OBJECTID", type: "esriFieldTypeOID"), GPField(name: "reach", type: "esriFieldTypeDouble")],
            features: try places.enumerated().map { i, p in
                GPFeatureSet.Feature(
                    geometry: .point(try Point(try transform.transform(Position(x: p.0, y: p.1)))),
                    attributes: ["OBJECTID": .integer(Int64(i + 1)), "reach": .number(Double(i + 1) * 100)])
            })
    }

    static func areas(_ result: [String: GPValue]) throws -> [Double] {
        guard case .featureSet(let set)? = result["Output_Features"] else { throw GPValueError("no output") }
        let engine = GeometryEngine()
        return try set.features.map { try engine.area(try #require($0.geometry)) }
    }

    static func close(_ a: [Double], _ b: [Double], relative: Double = 1e-6) -> Bool {
        a.count == b.count && zip(a, b).allSatisfy { abs($0 - $1) <= relative * max(abs($0), abs($1)) }
    }

    @Test func planarBuffersInAProjectedSystemMatchShapely() async throws {
        let input = GPValue.featureSet(try Self.points(wkid: 3067))
        let tool = BufferTool()
        let metres = try Self.areas(try await tool.execute(["Input_Features": input, "Distance": .linearUnit(distance: 250, units: .esriMeters)]))
        let feet = try Self.areas(try await tool.execute(["Input_Features": input, "Distance": .linearUnit(distance: 250 / 0.3048, units: .esriFeet)]))
        let byField = try Self.areas(try await tool.execute(["Input_Features": input, "Distance": .linearUnit(distance: 1, units: .esriMeters), "Distance_Field": .string("reach")]))
        let dissolved = try Self.areas(
            try await tool.execute(["Input_Features": input, "Distance": .linearUnit(distance: 60, units: .esriKilometers), "Dissolve": .string("ALL")]))
        #expect(Self.close(metres, feet), "the same distance in feet")
        let check = try await ExternalTools.python("""
            import json, shapely
            from pyproj import Transformer
            t = Transformer.from_crs(4326, 3067, always_xy=True)
            pts = [shapely.Point(*t.transform(x, y)) for x, y in [(24.9384, 60.1699), (24.7536, 59.4370), (18.0686, 59.3293)]]
            print(json.dumps([[p.buffer(250, quad_segs=8).area for p in pts],
                              [p.buffer(100 * (i + 1), quad_segs=8).area for i, p in enumerate(pts)],
                              [g.area for g in shapely.get_parts(shapely.union_all([p.buffer(60000, quad_segs=8) for p in pts]))]]))
            """)
        #expect(check.succeeded, "\(check.stderr)")
        let theirs = try JSONValue.parse(check.stdout).arrayValue?.map { $0.arrayValue?.compactMap(\.doubleValue) ?? [] } ?? []
        #expect(theirs.count == 3)
        #expect(Self.close(metres, theirs[0]), "\(metres) vs \(theirs[0])")
        #expect(Self.close(byField, theirs[1]), "\(byField) vs \(theirs[1])")
        // Helsinki's and Tallinn's 60 km circles overlap: one multipart feature whose area is
        // shapely's two parts together (theirs and Stockholm's).
        #expect(theirs[2].count == 2)
        #expect(Self.close(dissolved, [theirs[2].reduce(0, +)]), "\(dissolved) vs \(theirs[2])")
    }

    /// Points in longitude/latitude are buffered on the ellipsoid: the same polygons as
    /// pyproj + shapely through the same local projection, and within the 32-gon's shortfall
    /// (0.64%) of a true 10 km circle.
    @Test func geodesicBuffersMatchPyprojAndTheEllipsoid() async throws {
        let result = try await BufferTool().execute([
            "Input_Features": .featureSet(try Self.points(wkid: 4326)), "Distance": .linearUnit(distance: 10, units: .esriKilometers),
        ])
        guard case .featureSet(let set)? = result["Output_Features"] else { Issue.record("no output"); return }
        #expect(set.spatialReference?.wkid == 4326 && set.features.count == 3)
        var geodesicAreas: [Double] = []
        for feature in set.features {
            guard case .polygon(let p)? = feature.geometry else { Issue.record("not a polygon"); continue }
            geodesicAreas.append(Geodesic.area(ring: p.rings[0]))
        }
        let circle = Double.pi * 10_000 * 10_000
        for a in geodesicAreas { #expect(a < circle && a > circle * (1 - 0.0070), "\(a) vs \(circle)") }
        let check = try await ExternalTools.python("""
            import json, shapely
            from pyproj import Transformer, Geod
            g = Geod(ellps="WGS84")
            out = []
            for x, y in [(24.9384, 60.1699), (24.7536, 59.4370), (18.0686, 59.3293)]:
                aeqd = f"+proj=aeqd +lat_0={y} +lon_0={x} +datum=WGS84 +units=m +type=crs"
                back = Transformer.from_crs(aeqd, 4326, always_xy=True)
                ring = shapely.Point(0, 0).buffer(10000, quad_segs=8).exterior
                lon, lat = back.transform(*zip(*ring.coords))
                out.append(abs(g.polygon_area_perimeter(lon, lat)[0]))
            print(json.dumps(out))
            """)
        #expect(check.succeeded, "\(check.stderr)")
        let theirs = try JSONValue.parse(check.stdout).arrayValue?.compactMap(\.doubleValue) ?? []
        #expect(Self.close(geodesicAreas, theirs, relative: 1e-6), "\(geodesicAreas) vs \(theirs)")

        // The same points in EPSG:3067 with Method GEODESIC: the same circles on the ellipsoid.
        let projected = try await BufferTool().execute([
            "Input_Features": .featureSet(try Self.points(wkid: 3067)), "Distance": .linearUnit(distance: 10, units: .esriKilometers),
            "Method": .string("GEODESIC"),
        ])
        guard case .featureSet(let inFinland)? = projected["Output_Features"] else { Issue.record("no output"); return }
        #expect(inFinland.spatialReference?.wkid == 3067)
        let back = try CoordinateTransform(from: SpatialReference(wkid: 3067), to: SpatialReference(wkid: 4326))
        let areas = try inFinland.features.map { f -> Double in
            guard case .polygon(let p)? = try f.geometry.map(back.transform) else { return 0 }
            return Geodesic.area(ring: p.rings[0])
        }
        #expect(Self.close(areas, geodesicAreas, relative: 1e-6), "\(areas) vs \(geodesicAreas)")
    }

    @Test func badInputsAreNamed() async throws {
        let input = GPValue.featureSet(try Self.points(wkid: 3067))
        let tool = BufferTool()
        for (given, parameter) in [
            (["Input_Features": input, "Distance": GPValue.linearUnit(distance: 1, units: .esriDecimalDegrees)], "Distance"),
            (["Input_Features": input, "Distance_Field": .string("nope")], "Distance_Field"),
            (["Input_Features": input, "Radius": .double(5)], "Radius"),
            (["Distance": .linearUnit(distance: 1, units: .esriMeters)], "Input_Features"),
            (["Input_Features": input, "Method": .string("SPHERICAL")], "Method"),
        ] as [([String: GPValue], String)] {
            await #expect {
                try await tool.execute(given)
            } throws: { error in
                (error as? GPValueError)?.parameter == parameter
            }
        }
    }
}
