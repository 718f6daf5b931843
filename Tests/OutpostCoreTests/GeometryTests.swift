import Testing

@testable import OutpostCore

@Suite("Geometry values")
struct GeometryTests {
    @Test func ringsMustBeClosedAndLongEnough() {
        let open = [Position(x: 0, y: 0), Position(x: 1, y: 0), Position(x: 1, y: 1), Position(x: 0, y: 1)]
        #expect(throws: GeometryError.self) { try Polygon(rings: [open]) }
        let short = [Position(x: 0, y: 0), Position(x: 1, y: 0), Position(x: 0, y: 0)]
        let error = #expect(throws: GeometryError.self) { try Polygon(rings: [short]) }
        #expect(error?.code == .invalidRing)
    }

    @Test func lineStringsNeedTwoPositions() {
        let error = #expect(throws: GeometryError.self) { try LineString([Position(x: 0, y: 0)]) }
        #expect(error?.code == .invalidCount)
        #expect(throws: Never.self) { try LineString([]) }
    }

    @Test func nonFiniteCoordinatesAreRejected() {
        #expect(throws: GeometryError.self) { try Point(x: .nan, y: 1) }
        #expect(throws: GeometryError.self) { try Point(x: 1, y: .infinity) }
        #expect(throws: GeometryError.self) { try LineString([Position(x: 0, y: 0), Position(x: 1, y: 1, z: .nan)]) }
    }

    @Test func partsMustShareOneLayout() throws {
        let xy = try Point(x: 1, y: 2)
        let xyz = try Point(x: 1, y: 2, z: 3)
        let error = #expect(throws: GeometryError.self) { try MultiPoint([xy, xyz]) }
        #expect(error?.code == .mixedLayout)
        #expect(throws: GeometryError.self) { try LineString([Position(x: 0, y: 0), Position(x: 1, y: 1, m: 2)]) }
    }

    @Test(arguments: CoordinateLayout.allCases)
    func envelopesCoverEveryPosition(layout: CoordinateLayout) throws {
        for g in try GeometryFixtures.all(layout) {
            guard let e = g.envelope else {
                #expect(g.isEmpty)
                continue
            }
            g.forEachPosition { p in
                #expect(e.contains(x: p.x, y: p.y))
            }
            #expect((e.zRange != nil) == layout.hasZ)
            #expect((e.mRange != nil) == layout.hasM)
        }
    }

    @Test func singlePartsPromoteToMultiParts() throws {
        let polygon = Geometry.polygon(try Polygon(rings: [GeometryFixtures.ring(0, 0, 1, .xy)]))
        let promoted = try #require(polygon.promoted(to: .multiPolygon))
        #expect(promoted.type == .multiPolygon)
        if case .multiPolygon(let m) = promoted { #expect(m.polygons.count == 1) }
        #expect(polygon.promoted(to: .multiPoint) == nil)
        #expect(Geometry.empty(.point).promoted(to: .multiPoint)?.isEmpty == true)
    }

    @Test func ringOrientation() {
        let ccw = GeometryFixtures.ring(0, 0, 1, .xy)
        #expect(!RingOrientation.isClockwise(ccw))
        #expect(RingOrientation.isClockwise(ccw.reversed()))
        #expect(RingOrientation.contains(ccw, x: 0.5, y: 0.5))
        #expect(!RingOrientation.contains(ccw, x: 1.5, y: 0.5))
    }
}
