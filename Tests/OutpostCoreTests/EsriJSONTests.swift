import Foundation
import Testing

@testable import OutpostCore

@Suite("Esri JSON geometry codec")
struct EsriJSONTests {
    func decode(_ json: String) throws -> Geometry { try EsriJSON.decodeGeometry(JSONValue.parse(json)) }

    /// Found by the esri-json fuzz target: a ring with no positions crashed the decoder (an
    /// index out of range, taking the server down with one applyEdits); it is refused.
    @Test func aRingWithNoPositionsIsRefusedNotACrash() throws {
        let input = #"{"rings":[[],[[2,2],[4,4],[2,4],[1,2]],[[3,2],[2,4],[4,4],[2,2]]],"spatialeRrfeence":{"wkid":4326,"latestWkid":4326}}"#
        let error = #expect(throws: GeometryError.self) { try EsriJSON.decodeGeometry(try JSONValue.parse(input)) }
        #expect(error?.code == .invalidEncoding && error?.message.contains("no positions") == true, "\(String(describing: error))")
        #expect(throws: GeometryError.self) { try EsriJSON.decodeGeometry(try JSONValue.parse(#"{"rings":[[]]}"#)) }
    }

    @Test func pointsWithZAndM() throws {
        #expect(try decode(#"{"x":1,"y":2}"#) == .point(try Point(x: 1, y: 2)))
        #expect(try decode(#"{"x":1,"y":2,"z":3,"m":4}"#) == .point(try Point(x: 1, y: 2, z: 3, m: 4)))
        #expect(try decode(#"{"x":null,"y":null}"#).isEmpty)
        #expect(try decode(#"{"x":"NaN","y":"NaN"}"#).isEmpty)
    }

    /// `value` builds points directly; it must equal parsing the encoded text, as every other
    /// geometry still does.
    @Test func valueEqualsTheParsedEncoding() throws {
        let points = try [
            Point(x: 1, y: 2), Point(x: -122.6, y: 45.5), Point(x: 0.1 + 0.2, y: -0.0), Point(x: 1e15, y: -2e16), Point(x: 123456789.5, y: 1e-300), Point(x: 1e19, y: -9.3e18),
            Point(x: 1, y: 2, z: 3), Point(x: 1.5, y: 2.5, m: 7.25), Point(x: 1, y: 2, z: -4.125, m: 9),
        ]
        var geometries = points.map { Geometry.point($0) }
        geometries.append(try decode(#"{"x":null,"y":null}"#))
        geometries.append(try decode(#"{"rings":[[[0,0],[0,10],[10,10],[10,0],[0,0]]]}"#))
        for g in geometries {
            let direct = try EsriJSON.value(g), parsed = try JSONValue.parse(EsriJSON.encode(g))
            #expect(direct == parsed, "\(g): \(direct.jsonString) vs \(parsed.jsonString)")
        }
    }

    @Test func multipointsFollowHasZHasM() throws {
        let g = try decode(#"{"hasM":true,"points":[[1,2,7],[3,4,8]]}"#)
        #expect(g.layout == .xym)
        guard case .multiPoint(let m) = g else { throw GeometryError(.invalidType, "not multipoint") }
        #expect(m.points[1].position == Position(x: 3, y: 4, m: 8))
        #expect(try decode(#"{"points":[[1,2,3]]}"#).layout == .xyz)
    }

    @Test func pathsAndRings() throws {
        #expect(try decode(#"{"paths":[[[0,0],[1,1]]]}"#).type == .lineString)
        #expect(try decode(#"{"paths":[[[0,0],[1,1]],[[2,2],[3,3]]]}"#).type == .multiLineString)
        // Esri winding: exteriors clockwise, holes counter-clockwise.
        let polygonWithHole = #"{"rings":[[[0,0],[0,10],[10,10],[10,0],[0,0]],[[2,2],[4,2],[4,4],[2,4],[2,2]]]}"#
        guard case .polygon(let p) = try decode(polygonWithHole) else { throw GeometryError(.invalidType, "not a polygon") }
        #expect(p.rings.count == 2)
        let twoIslands = #"{"rings":[[[0,0],[0,1],[1,1],[1,0],[0,0]],[[5,5],[5,6],[6,6],[6,5],[5,5]]]}"#
        guard case .multiPolygon(let m) = try decode(twoIslands) else { throw GeometryError(.invalidType, "not a multipolygon") }
        #expect(m.polygons.count == 2)
        // A hole inside the second of two exteriors is assigned to that one.
        let holeInSecond = #"{"rings":[[[0,0],[0,1],[1,1],[1,0],[0,0]],[[5,5],[5,9],[9,9],[9,5],[5,5]],[[6,6],[7,6],[7,7],[6,7],[6,6]]]}"#
        guard case .multiPolygon(let h) = try decode(holeInSecond) else { throw GeometryError(.invalidType, "not a multipolygon") }
        #expect(h.polygons[0].rings.count == 1)
        #expect(h.polygons[1].rings.count == 2)
    }

    @Test(arguments: [CoordinateLayout.xy, .xyz, .xym, .xyzm])
    func roundTripsWithEsriWinding(layout: CoordinateLayout) throws {
        for g in try GeometryFixtures.all(layout) where g.type != .geometryCollection && !g.isEmpty {
            let text = try EsriJSON.encode(g, spatialReference: .wgs84)
            let json = try JSONValue.parse(text)
            #expect(EsriJSON.spatialReference(of: json) == .wgs84)
            let back = try EsriJSON.decodeGeometry(json)
            #expect(back.layout == layout)
            // Single parts may come back as themselves, multi parts with one member as single parts.
            let normalized = back.promoted(to: g.type) ?? back
            #expect(try EsriJSON.encode(normalized) == (try EsriJSON.encode(g)), "\(g.type) \(layout)")
            if case .polygon = g, let rings = json["rings"]?.arrayValue {
                let first = try EsriJSON.decodeGeometry(["rings": [rings[0]]])
                if case .polygon(let p) = first { #expect(RingOrientation.isClockwise(p.rings[0])) }
            }
        }
    }

    @Test func webMercatorAliases() throws {
        let sr = EsriJSON.decodeSpatialReference(try JSONValue.parse(#"{"wkid":102100,"latestWkid":3857}"#))
        #expect(sr == .webMercator)
        #expect(SpatialReference(wkid: 102113) == .webMercator)
        var out = ""
        EsriJSON.writeSpatialReference(.webMercator, to: &out)
        #expect(out == #"{"wkid":102100,"latestWkid":3857}"#)
    }

    @Test func envelopes() throws {
        let e = try EsriJSON.decodeEnvelope(try JSONValue.parse(#"{"xmin":-1,"ymin":-2,"xmax":3,"ymax":4}"#))
        #expect(e == Envelope(xmin: -1, ymin: -2, xmax: 3, ymax: 4))
        #expect(throws: GeometryError.self) { try EsriJSON.decodeEnvelope(try JSONValue.parse(#"{"xmin":5,"ymin":0,"xmax":3,"ymax":4}"#)) }
        #expect(throws: GeometryError.self) { try EsriJSON.decodeEnvelope(try JSONValue.parse(#"{"xmin":"a","ymin":0,"xmax":3,"ymax":4}"#)) }
        #expect(try decode(#"{"xmin":0,"ymin":0,"xmax":1,"ymax":1}"#).type == .polygon)
    }

    @Test(arguments: [
        #"[]"#, #"{}"#, #"{"x":"a","y":1}"#, #"{"x":1}"#, #"{"paths":[[[0,0]]]}"#, #"{"rings":[[[0,0],[1,1]]]}"#,
        #"{"points":[["a",1]]}"#, #"{"curvePaths":[]}"#, #"{"paths":{}}"#, #"{"hasZ":true,"points":[[1,2]]}"#,
    ])
    func malformedInputIsRefused(json: String) {
        #expect(throws: GeometryError.self) { try decode(json) }
    }

    @Test func collectionsHaveNoEsriForm() throws {
        let g = Geometry.geometryCollection(try GeometryCollection([.point(try Point(x: 0, y: 0))]))
        let error = #expect(throws: GeometryError.self) { try EsriJSON.encode(g) }
        #expect(error?.code == .unsupported)
    }
}
