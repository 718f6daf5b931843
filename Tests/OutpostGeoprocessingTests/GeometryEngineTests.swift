import Foundation
import OutpostCore
import OutpostTestSupport
import Testing

@testable import OutpostGeoprocessing

/// The engine against independent implementations on the same inputs: shapely 2 (GEOS through
/// Python) and pyproj (PROJ through Python), both from PyPI.
@Suite("Geometry engine: GEOS and PROJ")
struct GeometryEngineTests {
    /// The Natural Earth countries of the sample, by name.
    static func countries(_ names: Set<String>) throws -> [String: Geometry] {
        var reader = try GeoJSONFeatureReader(data: try Data(contentsOf: Repository.sampleData("natural_earth/data/countries.geojson")))
        var out: [String: Geometry] = [:]
        while let feature = try reader.next() {
            if case .string(let name)? = feature.properties["name"], names.contains(name), let g = feature.geometry { out[name] = g }
        }
        return out
    }

    static func hex(_ g: Geometry) -> String { WKB.encode(g).map { String(format: "%02x", $0) }.joined() }

    /// Runs a Python snippet whose last printed line is JSON; geometries arrive as WKB hex.
    static func python(_ script: String, _ arguments: [String]) async throws -> JSONValue {
        let run = try await ExternalTools.python(script, arguments)
        #expect(run.succeeded, "\(run.stderr)")
        return try JSONValue.parse(String(run.stdout.split(separator: "\n").last ?? ""))
    }

    static func close(_ a: Double, _ b: Double, relative: Double = 1e-6) -> Bool { abs(a - b) <= relative * max(abs(a), abs(b), 1e-12) }

    /// Buffer, intersection, union, difference and dissolve of real country outlines: the same
    /// areas and lengths as shapely, within 1e-6 relative.
    @Test func overlayAndBufferMatchShapely() async throws {
        let c = try Self.countries(["Finland", "Russia", "Sweden", "Norway", "Estonia"])
        let finland = try #require(c["Finland"]), russia = try #require(c["Russia"]), sweden = try #require(c["Sweden"])
        let norway = try #require(c["Norway"]), estonia = try #require(c["Estonia"])
        let engine = GeometryEngine()
        let buffered = try #require(try engine.buffer(finland, distance: 0.5))
        let ours: [Double] = [
            try engine.area(buffered), try engine.length(buffered),
            try engine.area(try #require(try engine.intersection(buffered, russia))),
            try engine.area(try #require(try engine.union(finland, sweden))),
            try engine.area(try #require(try engine.difference(buffered, finland))),
            try engine.area(try #require(try engine.unaryUnion([finland, sweden, norway, buffered]))),
            try engine.distance(finland, estonia),
        ]
        #expect(try engine.intersection(finland, estonia) == nil, "no overlap is an empty result")
        let theirs = try await Self.python("""
            import sys, json, shapely
            f, r, s, n, e = (shapely.from_wkb(bytes.fromhex(h)) for h in sys.argv[1:6])
            b = shapely.buffer(f, 0.5, quad_segs=8)
            print(json.dumps([b.area, b.length, b.intersection(r).area, f.union(s).area, b.difference(f).area,
                              shapely.union_all([f, s, n, b]).area, f.distance(e)]))
            """, [finland, russia, sweden, norway, estonia].map(Self.hex))
        let values = try #require(theirs.arrayValue).compactMap(\.doubleValue)
        #expect(values.count == ours.count)
        for (i, (a, b)) in zip(ours, values).enumerated() { #expect(Self.close(a, b), "measure \(i): ours \(a), shapely \(b)") }
    }

    /// A bowtie is invalid with GEOS's reason; repaired it is valid, with shapely's area; the
    /// predicates agree with shapely.
    @Test func validityRepairAndPredicates() async throws {
        let engine = GeometryEngine()
        let bowtie = Geometry.polygon(try Polygon(rings: [[
            Position(x: 0, y: 0), Position(x: 10, y: 10), Position(x: 10, y: 0), Position(x: 0, y: 10), Position(x: 0, y: 0),
        ]]))
        let (valid, reason) = try engine.validity(bowtie)
        #expect(!valid && reason?.contains("Self-intersection") == true, "\(reason ?? "")")
        let repaired = try #require(try engine.makeValid(bowtie))
        #expect(try engine.validity(repaired).valid)
        let square = Geometry.polygon(try Polygon(rings: [[Position(x: 2, y: 2), Position(x: 8, y: 2), Position(x: 8, y: 8), Position(x: 2, y: 8), Position(x: 2, y: 2)]]))
        let inside = Geometry.point(try Point(x: 5, y: 5))
        let ours: [Double] = [
            try engine.area(repaired), try engine.test(square, .contains, inside) ? 1 : 0, try engine.test(inside, .within, square) ? 1 : 0,
            try engine.test(square, .intersects, bowtie) ? 1 : 0, try engine.test(square, .disjoint, inside) ? 1 : 0,
        ]
        let theirs = try await Self.python("""
            import sys, json, shapely
            bowtie, square, point = (shapely.from_wkb(bytes.fromhex(h)) for h in sys.argv[1:4])
            print(json.dumps([shapely.make_valid(bowtie).area, float(square.contains(point)), float(point.within(square)),
                              float(square.intersects(bowtie)), float(square.disjoint(point))]))
            """, [bowtie, square, inside].map(Self.hex))
        #expect(try #require(theirs.arrayValue).compactMap(\.doubleValue) == ours)
    }

    /// PROJ through the engine and through pyproj: the same coordinates to the millimetre, for
    /// Web Mercator and ETRS-TM35FIN (EPSG:3067, a system the old code did not know); geodesic
    /// distance and area as pyproj's Geod computes them.
    @Test func transformsAndGeodesicsMatchPyproj() async throws {
        let places = [Position(x: 24.9384, y: 60.1699), Position(x: 24.7536, y: 59.4370), Position(x: 25.4651, y: 65.0121)]
        var ours: [Double] = []
        for target in [3857, 3067] {
            let transform = try CoordinateTransform(from: SpatialReference(wkid: 4326), to: SpatialReference(wkid: target))
            for p in places {
                let q = try transform.transform(p)
                ours += [q.x, q.y]
            }
        }
        let ring = [Position(x: 24, y: 60), Position(x: 26, y: 60), Position(x: 26, y: 61), Position(x: 24, y: 61), Position(x: 24, y: 60)]
        ours += [Geodesic.distance(places[0], places[1]), Geodesic.area(ring: ring)]
        let theirs = try await Self.python("""
            import json
            from pyproj import Transformer, Geod
            places = [(24.9384, 60.1699), (24.7536, 59.4370), (25.4651, 65.0121)]
            out = []
            for target in (3857, 3067):
                t = Transformer.from_crs(4326, target, always_xy=True)
                for x, y in places:
                    out += list(t.transform(x, y))
            g = Geod(ellps="WGS84")
            out.append(g.inv(24.9384, 60.1699, 24.7536, 59.4370)[2])
            out.append(abs(g.polygon_area_perimeter([24, 26, 26, 24], [60, 60, 61, 61])[0]))
            print(json.dumps(out))
            """, [])
        let values = try #require(theirs.arrayValue).compactMap(\.doubleValue)
        #expect(values.count == ours.count)
        for (i, (a, b)) in zip(ours, values).enumerated() {
            #expect(abs(a - b) < 1e-3 || Self.close(a, b), "value \(i): ours \(a), pyproj \(b)")
        }
        // A polygon in and out again comes back where it was.
        let there = try CoordinateTransform(from: SpatialReference(wkid: 4326), to: SpatialReference(wkid: 3067))
        let back = try CoordinateTransform(from: SpatialReference(wkid: 3067), to: SpatialReference(wkid: 4326))
        let polygon = Geometry.polygon(try Polygon(rings: [ring]))
        let round = try back.transform(try there.transform(polygon))
        guard case .polygon(let p) = round else { Issue.record("not a polygon"); return }
        for (a, b) in zip(p.rings[0], ring) { #expect(abs(a.x - b.x) < 1e-9 && abs(a.y - b.y) < 1e-9) }
    }

    /// Every geometry type, with and without Z, crosses into GEOS and back unchanged; a
    /// geometry with M crosses (through WKB) and comes back without it, as GEOS 3.11 keeps none.
    @Test func geometriesCrossIntoGEOSAndBackUnchanged() throws {
        let engine = GeometryEngine()
        let ring = [Position(x: 0, y: 0), Position(x: 0, y: 10), Position(x: 10, y: 10), Position(x: 10, y: 0), Position(x: 0, y: 0)]
        let hole = [Position(x: 2, y: 2), Position(x: 4, y: 2), Position(x: 4, y: 4), Position(x: 2, y: 2)]
        let square = try Polygon(rings: [ring, hole])
        let line = try LineString([Position(x: 1, y: 1, z: 5), Position(x: 3, y: 4, z: 6)])
        let samples: [Geometry] = [
            .point(try Point(x: 1, y: 2)), .point(try Point(x: 1, y: 2, z: 3)), .lineString(line), .polygon(square),
            .multiPoint(try MultiPoint([try Point(x: 1, y: 2), try Point(x: 3, y: 4)])), .multiLineString(try MultiLineString([line, line])),
            .multiPolygon(try MultiPolygon([square, try Polygon(rings: [ring.map { Position(x: $0.x + 20, y: $0.y) }])])),
            .geometryCollection(try GeometryCollection([.point(try Point(x: 1, y: 2)), .polygon(square)])),
        ]
        for g in samples {
            let crossed = try engine.geos(g)
            defer { engine.release(crossed) }
            #expect(try engine.geometry(crossed) == g, "\(g.type)")
        }
        let measured = Geometry.point(try Point(x: 1, y: 2, m: 7))
        let crossed = try engine.geos(measured)
        defer { engine.release(crossed) }
        #expect(try engine.geometry(crossed) == .point(try Point(x: 1, y: 2)))
    }

    @Test func unknownSystemsAndUnplaceableCoordinatesAreErrors() throws {
        #expect(throws: CoordinateTransform.Failure.self) { try CoordinateTransform(from: SpatialReference(wkid: 4326), to: SpatialReference(wkid: 999_999)) }
        let mercator = try CoordinateTransform(from: SpatialReference(wkid: 4326), to: SpatialReference(wkid: 3857))
        #expect(throws: CoordinateTransform.Failure.self) { try mercator.transform(Position(x: 10, y: 95)) }
    }

    /// One engine per task: eight tasks buffering at once get the same answers.
    @Test func enginesInConcurrentTasksAgree() async throws {
        let finland = try #require(try Self.countries(["Finland"])["Finland"])
        let areas = try await withThrowingTaskGroup(of: Double.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    let engine = GeometryEngine()
                    return try engine.area(try #require(try engine.buffer(finland, distance: 0.25)))
                }
            }
            return try await group.reduce(into: [Double]()) { $0.append($1) }
        }
        #expect(Set(areas).count == 1)
    }
}
