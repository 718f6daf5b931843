import Foundation
import OutpostCore
import Testing

@testable import OutpostTiles

@Suite("Tiling scheme")
struct TilingTests {
    let scheme = TilingScheme.webMercator

    @Test func webMercatorLevelsMatchArcGIS() throws {
        #expect(scheme.lods.count == 24)
        let lod0 = try #require(scheme.lod(0))
        #expect(abs(lod0.resolution - 156_543.033928) < 1e-5)
        #expect(abs(lod0.scale - 591_657_527.591555) < 0.01)
        #expect(abs(try #require(scheme.lod(17)).scale - 4_513.988705) < 0.001)
        let world = try #require(scheme.envelope(of: TileKey(level: 0, row: 0, col: 0)))
        for (value, expected) in [(world.xmin, -20037508.342789), (world.ymin, -20037508.342789), (world.xmax, 20037508.342789), (world.ymax, 20037508.342789)] {
            #expect(abs(value - expected) < 1e-3)
        }
        // Row/col at level n are XYZ y/x: Berlin (13.4, 52.52) at z12 is x 2200, y 1343.
        let (x, y) = WebMercator.project(longitude: 13.4, latitude: 52.52)
        let range = try #require(scheme.tileRange(level: 12, covering: Envelope(xmin: x, ymin: y, xmax: x, ymax: y)))
        #expect(range.minCol == 2200 && range.minRow == 1343 && range.count == 1)
    }

    /// The worked counts of the reference notes (tiles of a box summed over levels 0…n).
    @Test(arguments: [
        (13.0, 52.3, 13.8, 52.7, 15, 6_169), (13.0, 52.3, 13.8, 52.7, 16, 23_956), (13.0, 52.3, 13.8, 52.7, 17, 94_328),
        (13.0, 52.3, 13.8, 52.7, 19, 1_491_196), (7.0, 45.0, 7.127, 45.09, 15, 256), (7.0, 45.0, 7.127, 45.09, 19, 46_286),
    ])
    func countsForBoxes(_ w: Double, _ s: Double, _ e: Double, _ n: Double, _ maxLevel: Int, _ expected: Int) throws {
        let selection = try TileSelection(
            scheme: scheme, area: .envelope(Envelope(xmin: w, ymin: s, xmax: e, ymax: n), .wgs84), levels: Array(0...maxLevel))
        #expect(selection.tileCount == expected)
    }

    @Test func edgesOnTileBoundariesDoNotPullInTheNextTile() throws {
        // Exactly the north-west quarter of the world at level 1.
        let half = WebMercator.originShift
        let range = try #require(scheme.tileRange(level: 1, covering: Envelope(xmin: -half, ymin: 0, xmax: 0, ymax: half)))
        #expect(range == TileRange(level: 1, minRow: 0, maxRow: 0, minCol: 0, maxCol: 0))
        // The whole world, and beyond it, clamps to the grid.
        let world = try #require(scheme.tileRange(level: 3, covering: Envelope(xmin: -3e7, ymin: -3e7, xmax: 3e7, ymax: 3e7)))
        #expect(world.count == 64)
        #expect(scheme.tileRange(level: 3, covering: Envelope(xmin: 3e7, ymin: 0, xmax: 4e7, ymax: 1)) == nil)
    }

    @Test func polygonAreaSkipsTilesOutsideIt() throws {
        // A thin diagonal triangle: its envelope spans many tiles the triangle does not touch.
        let triangle = Geometry.polygon(try Polygon(rings: [[
            Position(x: 13.0, y: 52.3), Position(x: 13.8, y: 52.7), Position(x: 13.8, y: 52.69), Position(x: 13.0, y: 52.3),
        ]]))
        let polygon = try TileSelection(scheme: scheme, area: .polygon(triangle, .wgs84), levels: [14])
        let box = try TileSelection(scheme: scheme, area: .envelope(try #require(triangle.envelope), .wgs84), levels: [14])
        #expect(polygon.tileCount < box.tileCount / 2)
        let shape = try WebMercator.convert(triangle, from: .wgs84, to: .webMercator)
        var seen = 0
        for key in polygon.tiles {
            seen += 1
            #expect(GeometryRelations.intersects(try #require(scheme.envelope(of: key)), shape))
        }
        #expect(seen == polygon.tileCount)
        // The corner tile away from the diagonal is in the box but not the triangle.
        let range = try #require(box.ranges.first)
        #expect(box.wants(TileKey(level: 14, row: range.maxRow, col: range.minCol + 2)))
        #expect(!polygon.wants(TileKey(level: 14, row: range.minRow, col: range.minCol)))
    }

    @Test func bundleOrderFinishesEachBundleBeforeTheNext() {
        let range = TileRange(level: 9, minRow: 120, maxRow: 135, minCol: 250, maxCol: 260)
        let keys = Array(range.inBundleOrder())
        #expect(keys.count == range.count && Set(keys).count == range.count)
        var finished = Set<String>(), current = ""
        for key in keys {
            let bundle = CompactBundle.fileName(row: key.row, col: key.col)
            if bundle != current {
                #expect(!finished.contains(bundle))
                finished.insert(current)
                current = bundle
            }
        }
        #expect(finished.count == 4)  // three finished, plus the empty start
        #expect(CompactBundle.fileName(row: 135, col: 260) == "R0080C0100.bundle")
        #expect(CompactBundle.fileName(row: 70_000, col: 5) == "R11100C0000.bundle")
        #expect(CompactBundle.levelFolder(7) == "L07" && CompactBundle.levelFolder(17) == "L17")
    }

    @Test func invalidAreasAreTypedErrors() throws {
        #expect(throws: TileCacheError.self) { try TileSelection(scheme: scheme, area: .envelope(Envelope(xmin: 0, ymin: 0, xmax: 1, ymax: 1), .wgs84), levels: []) }
        #expect(throws: TileCacheError.self) { try TileSelection(scheme: scheme, area: .envelope(Envelope(xmin: 0, ymin: 0, xmax: 1, ymax: 1), .wgs84), levels: [24]) }
        #expect(throws: TileCacheError.self) {
            try TileSelection(scheme: scheme, area: .polygon(.point(try Point(x: 1, y: 1)), .wgs84), levels: [3])
        }
    }
}
