import Foundation
import Testing

@testable import OutpostCore

@Suite("GeoJSON codec")
struct GeoJSONTests {
    @Test(arguments: [CoordinateLayout.xy, .xyz])
    func roundTripsEveryType(layout: CoordinateLayout) throws {
        for g in try GeometryFixtures.all(layout) {
            let text = GeoJSON.encode(g)
            let back = try GeoJSON.decodeGeometry(Data(text.utf8))
            // Empty geometries come back XY (GeoJSON cannot say an empty geometry has Z), and
            // ring winding follows RFC 7946, so compare canonical forms.
            #expect(GeoJSON.encode(back) == text, "\(g.type)")
            #expect(back.type == g.type)
            #expect(back.envelope.map { [$0.xmin, $0.ymin, $0.xmax, $0.ymax] } == g.envelope.map { [$0.xmin, $0.ymin, $0.xmax, $0.ymax] })
        }
    }

    @Test func writesRightHandRuleWinding() throws {
        let clockwiseExterior = GeometryFixtures.ring(0, 0, 10, .xy, clockwise: true)
        let counterClockwiseHole = GeometryFixtures.ring(2, 2, 1, .xy)
        let g = Geometry.polygon(try Polygon(rings: [clockwiseExterior, counterClockwiseHole]))
        let back = try GeoJSON.decodeGeometry(Data(GeoJSON.encode(g).utf8))
        guard case .polygon(let p) = back else {
            Issue.record("not a polygon")
            return
        }
        #expect(!RingOrientation.isClockwise(p.rings[0]))
        #expect(RingOrientation.isClockwise(p.rings[1]))
    }

    @Test func readsZAndMeasuresAndEmpties() throws {
        let z = try GeoJSON.decodeGeometry(Data(#"{"type":"LineString","coordinates":[[1,2,3],[4,5,6]]}"#.utf8))
        #expect(z.layout == .xyz)
        let zm = try GeoJSON.decodeGeometry(Data(#"{"type":"Point","coordinates":[1,2,3,4]}"#.utf8))
        #expect(zm.layout == .xyzm)
        let empty = try GeoJSON.decodeGeometry(Data(#"{"type":"Polygon","coordinates":[]}"#.utf8))
        #expect(empty.isEmpty && empty.type == .polygon)
        let emptyPoint = try GeoJSON.decodeGeometry(Data(#"{"type":"Point","coordinates":[]}"#.utf8))
        #expect(emptyPoint.isEmpty)
    }

    @Test(arguments: [
        #"[]"#,
        #"{"coordinates":[1,2]}"#,
        #"{"type":"Circle","coordinates":[1,2]}"#,
        #"{"type":"Point"}"#,
        #"{"type":"Point","coordinates":[1]}"#,
        #"{"type":"Point","coordinates":[1,2,3,4,5]}"#,
        #"{"type":"Point","coordinates":["a","b"]}"#,
        #"{"type":"LineString","coordinates":[[1,2]]}"#,
        #"{"type":"Polygon","coordinates":[[[0,0],[1,0],[1,1],[0,0.5]]]}"#,
        #"{"type":"Polygon","coordinates":[[0,0]]}"#,
        #"{"type":"GeometryCollection"}"#,
        #"{"type":"Point","coordinates":[1e999,2]}"#,
        #"{"type":"Point","coordinates":[1,2]"#,
    ])
    func malformedGeometriesAreRefused(json: String) {
        #expect(throws: GeometryError.self) { try GeoJSON.decodeGeometry(Data(json.utf8)) }
    }

    @Test func deepCollectionsAreRefused() {
        var json = #"{"type":"Point","coordinates":[0,0]}"#
        for _ in 0..<40 { json = #"{"type":"GeometryCollection","geometries":[\#(json)]}"# }
        let error = #expect(throws: GeometryError.self) { try GeoJSON.decodeGeometry(Data(json.utf8)) }
        #expect(error?.code == .nestingTooDeep)
    }

    @Test func featuresCarryPropertiesAndNullGeometry() throws {
        let f = try GeoJSONFeature(json: JSONValue.parse(#"{"type":"Feature","id":7,"geometry":null,"properties":{"a":1,"b":"x"}}"#))
        #expect(f.geometry == nil)
        #expect(f.id == .integer(7))
        #expect(f.properties["b"] == .string("x"))
        #expect(throws: GeometryError.self) { try GeoJSONFeature(json: JSONValue.parse(#"{"type":"Feature","properties":[]}"#)) }
    }
}

@Suite("Streaming FeatureCollection reader")
struct GeoJSONFeatureReaderTests {
    @Test func readsFeaturesOneByOne() throws {
        let json = """
            \u{FEFF}{"type":"FeatureCollection","name":"x","crs":{"features":[1,2]},
             "features":[
               {"type":"Feature","properties":{"features":"not these","s":"a ] } [ { \\" quote"},"geometry":{"type":"Point","coordinates":[1,2]}},
               {"type":"Feature","properties":null,"geometry":null}
             ],"bbox":[0,0,1,1]}
            """
        var reader = try GeoJSONFeatureReader(data: Data(json.utf8))
        let first = try #require(try reader.next())
        #expect(first.properties["s"] == .string("a ] } [ { \" quote"))
        #expect(first.geometry == .point(try Point(x: 1, y: 2)))
        let second = try #require(try reader.next())
        #expect(second.geometry == nil)
        #expect(try reader.next() == nil)
        #expect(try reader.next() == nil)
    }

    @Test func emptyCollection() throws {
        var reader = try GeoJSONFeatureReader(data: Data(#"{"type":"FeatureCollection","features":[]}"#.utf8))
        #expect(try reader.next() == nil)
    }

    @Test(arguments: [
        #"[1,2]"#,
        #"{"type":"FeatureCollection"}"#,
        #"{"type":"FeatureCollection","features":{}}"#,
        #"{"type":"FeatureCollection","features":[{"type":"Feature","properties":{},"geometry":null} {"#,
        #"{"type":"FeatureCollection","features":[{"type":"Feature","properties":{"a":"unterminated}"#,
    ])
    func malformedCollectionsFailWithAnError(json: String) {
        #expect(throws: GeometryError.self) {
            var reader = try GeoJSONFeatureReader(data: Data(json.utf8))
            while try reader.next() != nil {}
        }
    }

    @Test func errorsNameTheFeature() throws {
        let json = #"{"type":"FeatureCollection","features":[{"type":"Feature","properties":{},"geometry":null},{"type":"Feature","properties":{},"geometry":{"type":"Point","coordinates":[1]}}]}"#
        var reader = try GeoJSONFeatureReader(data: Data(json.utf8))
        _ = try reader.next()
        let error = #expect(throws: GeometryError.self) { _ = try reader.next() }
        #expect(error?.message.contains("feature 2") == true)
    }
}
