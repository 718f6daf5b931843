import Foundation
import OutpostCore
import Testing

@testable import OutpostVectorTiles

@Suite("Mapbox Vector Tile encoding")
struct VectorTileCodecTests {
    static let square: [TilePoint] = [TilePoint(0, 0), TilePoint(10, 0), TilePoint(10, 10), TilePoint(0, 10)]
    static let hole: [TilePoint] = [TilePoint(2, 2), TilePoint(2, 8), TilePoint(8, 8), TilePoint(8, 2)]

    @Test func aTileRoundTripsWithEveryGeometryAndValueKind() throws {
        let tile = VectorTile(layers: [
            VectorTileLayer(name: "places", features: [
                VectorTileFeature(id: 7, properties: ["name": .string("Kallio"), "pop": .int(-12), "big": .int(1 << 40), "ok": .bool(true), "area": .double(2.5)], geometry: .points([TilePoint(5, 5), TilePoint(-3, 4100)])),
            ]),
            VectorTileLayer(name: "roads", extent: 512, features: [
                VectorTileFeature(id: nil, properties: ["name": .string("Kallio")], geometry: .lines([[TilePoint(0, 0), TilePoint(100, 3)], [TilePoint(5, 5), TilePoint(6, 7), TilePoint(9, 9)]])),
            ]),
            VectorTileLayer(name: "parks", features: [
                VectorTileFeature(id: 1, properties: [:], geometry: .polygons([[Self.square, Self.hole], [[TilePoint(20, 20), TilePoint(30, 20), TilePoint(30, 30)]]])),
            ]),
        ])
        // Exterior rings have positive area, holes negative (the format's rule).
        #expect(VectorTileGeometry.doubleArea(Self.square) > 0 && VectorTileGeometry.doubleArea(Self.hole) < 0)
        let bytes = tile.encoded()
        #expect(try VectorTile(decoding: bytes) == tile)
        #expect(try VectorTile(decoding: VectorTileCompression.plain(VectorTileCompression.gzip(bytes))) == tile)
    }

    /// The commands of the format's own example (a point at 25,17 is `9 50 34`).
    @Test func commandsMatchTheSpecificationsExamples() {
        var commands: [UInt32] = []
        VectorTileLayerEncoder.commands(.points([TilePoint(25, 17)]), into: &commands)
        #expect(commands == [9, 50, 34])
        commands = []
        VectorTileLayerEncoder.commands(.lines([[TilePoint(2, 2), TilePoint(2, 10), TilePoint(10, 10)]]), into: &commands)
        #expect(commands == [9, 4, 4, 18, 0, 16, 16, 0])
        commands = []
        VectorTileLayerEncoder.commands(.polygons([[[TilePoint(3, 6), TilePoint(8, 12), TilePoint(20, 34)]]]), into: &commands)
        #expect(commands == [9, 6, 12, 18, 10, 12, 24, 44, 15])
    }

    @Test(arguments: [
        [UInt8]([0x1A, 0x05, 0x0A]),  // a layer whose length runs past the end
        [0x1A, 0x02, 0x28, 0x00],  // a layer with extent 0 and no name
        [0x1A, 0x08, 0x0A, 0x01, 0x61, 0x12, 0x03, 0x22, 0x01, 0x0A],  // a feature whose geometry starts with LineTo
        [0x1F, 0x8B, 0x08, 0x00, 0x01],  // damaged gzip
        [0x1A, 0x0B, 0x0A, 0x01, 0x61, 0x12, 0x06, 0x12, 0x02, 0x00, 0x00, 0x18, 0x01],  // tags naming keys the layer lacks
    ])
    func damagedTilesAreRefusedNotTrapped(bytes: [UInt8]) {
        #expect(throws: VectorTileError.self) { try VectorTile(decoding: try VectorTileCompression.plain(bytes)) }
    }
}

@Suite("Cutting geometry to a tile")
struct TileClipperTests {
    let clipper = TileClipper(extent: 100, buffer: 0)

    func c(_ pairs: [(Double, Double)]) -> [TileCoordinate] { pairs.map { TileCoordinate($0.0, $0.1) } }

    @Test func aLineLeavingAndComingBackIsTwoParts() {
        let parts = clipper.line(c([(-10, 50), (50, 50), (50, 150), (80, 150), (80, 50), (120, 50)]))
        #expect(parts.count == 2)
        #expect(parts[0] == c([(0, 50), (50, 50), (50, 100)]))
        #expect(parts[1] == c([(80, 100), (80, 50), (100, 50)]))
    }

    /// A ring crossing itself (a bow tie of unequal lobes, as an invalid source or rounding on
    /// the grid leaves one): two polygons touching at the crossing, each turning the exterior's
    /// way, neither crossing itself, holding both lobes' areas. A ring that loops back inside
    /// itself keeps the loop as a hole.
    @Test func aRingCrossingItselfBecomesValidPolygons() throws {
        let clipper = TileClipper(extent: 4096, buffer: 80)
        func polygons(_ ring: [(Double, Double)]) throws -> [[[TilePoint]]] {
            let polygon = try Polygon(rings: [(ring + [ring[0]]).map { Position(x: $0.0, y: $0.1) }])
            var weight = 0.0
            guard case .polygons(let out)? = VectorTileGenerator.polygons([polygon], project: { TileCoordinate($0.x, $0.y) }, clipper: clipper, tolerance: 0, weight: &weight) else { return [] }
            return out
        }
        let bowTie = try polygons([(0, 0), (400, 400), (400, 0), (0, 200)])
        #expect(bowTie.count == 2 && bowTie.allSatisfy { $0.count == 1 }, "\(bowTie)")
        for p in bowTie {
            #expect(VectorTileGeometry.doubleArea(p[0]) > 0 && TileGrid.noded(p[0]) == p[0], "\(p)")
        }
        let areas = bowTie.map { Double(VectorTileGeometry.doubleArea($0[0])) / 2 }.sorted()
        #expect(abs(areas[0] - 13_333) < 150 && abs(areas[1] - 53_333) < 300, "\(areas)")
        // Round a square, then a smaller turn the same way inside it, crossing two sides: the
        // inner rectangle (covered twice) stays inside the square, the corner it cuts off is a
        // strip outside, and a triangle beyond the first side touches the square at a point.
        let looped = try polygons([(0, 0), (1000, 0), (1000, 1000), (0, 1000), (0, 100), (500, 100), (500, 600), (200, 600), (200, -50)])
        #expect(looped.count == 2 && looped.allSatisfy { $0.count == 1 }, "\(looped)")
        for p in looped { #expect(VectorTileGeometry.doubleArea(p[0]) > 0 && TileGrid.noded(p[0]) == p[0], "\(p)") }
        let total = looped.map { Double(VectorTileGeometry.doubleArea($0[0])) / 2 }.reduce(0, +)
        let expected: Double = 1_000_000 - 20_000 + 5_000
        #expect(total == expected, "\(looped)")
    }

    /// A U-shaped polygon whose arms leave the tile: two pieces, not one ring joined by a
    /// zero-width bridge along the edge (what clipping each ring alone gives).
    @Test func aConcavePolygonCutByTheEdgeBecomesSeparatePieces() {
        // Anticlockwise as numbers go (positive area): a U opening downwards past y = 100.
        let u = c([(10, 10), (90, 10), (90, 150), (70, 150), (70, 30), (30, 30), (30, 150), (10, 150)].reversed())
        let ring = TileClipper.doubleArea(u) > 0 ? u : Array(u.reversed())
        let pieces = clipper.polygon([ring])
        #expect(pieces.count == 1, "the top of the U joins both arms inside the tile")
        #expect(abs(TileClipper.doubleArea(pieces[0][0]) / 2 - (80 * 20 + 2 * 20 * 70)) < 1e-9)
        // Moved up so the bar lies outside and only the arms cross the tile: two polygons of 20 × 100.
        let armsOnly = clipper.polygon([ring.map { TileCoordinate($0.x, $0.y - 40) }])
        #expect(armsOnly.count == 2)
        let areas = armsOnly.map { TileClipper.doubleArea($0[0]) / 2 }
        #expect(areas == [2000, 2000])
    }

    @Test func aTileInsideAPolygonIsTheWholeSquareAndAHoleAroundItEmptiesIt() {
        let big = c([(-50, -50), (150, -50), (150, 150), (-50, 150)])
        let whole = clipper.polygon([big])
        #expect(whole.count == 1 && abs(TileClipper.doubleArea(whole[0][0]) / 2 - 10_000) < 1e-9)
        let hole = c([(-20, -20), (-20, 120), (120, 120), (120, -20)])
        #expect(clipper.polygon([big, hole]).isEmpty)
        // A hole inside the tile stays a hole of the square.
        let small = c([(40, 40), (40, 60), (60, 60), (60, 40)])
        let holed = clipper.polygon([big, small])
        #expect(holed.count == 1 && holed[0].count == 2)
        // A hole crossing the edge takes a bite out of the square.
        let bite = c([(80, 40), (80, 60), (120, 60), (120, 40)])
        let bitten = clipper.polygon([big, bite])
        #expect(bitten.count == 1 && bitten[0].count == 1 && abs(TileClipper.doubleArea(bitten[0][0]) / 2 - (10_000 - 400)) < 1e-9)
    }

    @Test func roundingDropsSliversAndSpikes() {
        #expect(TileGrid.ring(c([(0, 0), (0.2, 0.1), (0.4, 0.3)]), exterior: true) == nil)
        let spiked = TileGrid.ring(c([(0, 0), (10, 0), (20, 0), (10, 0), (10, 10), (0, 10)]).reversed(), exterior: false)
        #expect(spiked?.contains(TilePoint(20, 0)) == false)
        #expect(TileGrid.simplify(c([(0, 0), (5, 0.2), (10, 0)]), tolerance: 1) == c([(0, 0), (10, 0)]))
    }
}
