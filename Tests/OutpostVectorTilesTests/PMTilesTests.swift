import Foundation
import OutpostCore
import OutpostServer
import OutpostSQLiteService
import OutpostStorage
import OutpostTestSupport
import OutpostTiles
import Testing

@testable import OutpostVectorTiles

/// PMTiles v3: Hilbert tile ids as the specification's vectors give them, directories with and
/// without leaves, read back by our reader and by the reference Python reader (`pmtiles`), and
/// a vector export that GDAL's PMTiles driver opens.
@Suite("PMTiles archives")
struct PMTilesTests {
    /// Invalid source polygons repaired with GEOS, as `outpost` and the server do.
    init() { GEOSPolygonRepair.install() }

    @Test func tileIDsMatchTheSpecificationsVectors() {
        let vectors: [(Int, Int, Int, UInt64)] = [
            (0, 0, 0, 0), (1, 0, 0, 1), (1, 0, 1, 2), (1, 1, 1, 3), (1, 1, 0, 4), (2, 0, 0, 5), (12, 3423, 1763, 19_078_479), (14, 8707, 5974, 317_221_134),
            (20, 0, 0, 366_503_875_925),
        ]
        for (z, x, y, id) in vectors {
            #expect(PMTiles.tileID(z: z, x: x, y: y) == id, "\(z)/\(x)/\(y)")
            #expect(PMTiles.tile(id: id) == TileKey(level: z, row: y, col: x))
        }
        for z in 0...6 {
            for x in 0..<(1 << z) {
                for y in 0..<(1 << z) { #expect(PMTiles.tile(id: PMTiles.tileID(z: z, x: x, y: y)) == TileKey(level: z, row: y, col: x)) }
            }
        }
    }

    /// 30,000 tiles (a root directory of that many entries would pass 16 KB, so leaves), a
    /// quarter of them repeats of one content, written out of order.
    @Test(.scaledTimeLimit(minutes: 2)) func aLargeArchiveUsesLeavesAndReadsBackEverywhere() async throws {
        let dir = TemporaryDirectory("outpost-pmtiles")
        let url = dir.file("many.pmtiles")
        let writer = try PMTilesWriter(at: url, tileType: .png, tileCompression: .none)
        var expected: [TileKey: [UInt8]] = [:]
        let keys = (0..<30_000).map { i in TileKey(level: 10, row: i / 1024, col: i % 1024) }.shuffled()
        for (n, key) in keys.enumerated() {
            let bytes: [UInt8] = n % 4 == 0 ? [1, 2, 3] : Array("tile \(key)".utf8)
            try writer.add(key, data: bytes)
            expected[key] = bytes
        }
        try writer.finish(metadata: ["name": "many"], minZoom: 10, maxZoom: 10, bounds: Envelope(xmin: -180, ymin: -85, xmax: 180, ymax: 85), center: (0, 0, 10))
        #expect(!FileManager.default.fileExists(atPath: url.path + ".tiles") && !FileManager.default.fileExists(atPath: url.path + ".partial"))
        let reader = try PMTilesReader(url: url)
        #expect(try reader.tile(TileKey(level: 10, row: 3, col: 5)) == expected[TileKey(level: 10, row: 3, col: 5)])
        #expect(try reader.tile(TileKey(level: 11, row: 0, col: 0)) == nil)
        var seen = 0
        try reader.forEachTile { key, bytes in
            seen += 1
            #expect(expected[key] == bytes)
        }
        #expect(seen == keys.count)
        let check = try await ExternalTools.python(
            """
            import sys
            from pmtiles.reader import Reader, MmapSource, all_tiles
            with open(sys.argv[1], "rb") as f:
                r = Reader(MmapSource(f))
                h = r.header()
                tiles = dict(all_tiles(r.get_bytes))
                print(len(tiles), h["leaf_directory_length"] > 0, h["clustered"], h["tile_contents_count"], r.metadata()["name"])
                print(tiles[(10, 5, 3)].decode())
            """, [url.path])
        #expect(check.status == 0, "\(check.stderr)")
        #expect(check.stdout.split(separator: "\n").first == "30000 True True 22501 many", "\(check.stdout)")
        #expect(check.stdout.contains(String(decoding: expected[TileKey(level: 10, row: 3, col: 5)]!, as: UTF8.self)))
    }

    @Test(arguments: [
        [UInt8](),  // empty
        Array("PMTiles".utf8) + [2] + [UInt8](repeating: 0, count: 119),  // version 2
        Array("PMTiles".utf8) + [3] + [127, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0, 0, 0, 0, 0, 0] + [UInt8](repeating: 0, count: 103),  // a root past the end
    ])
    func damagedArchivesAreRefused(bytes: [UInt8]) throws {
        let dir = TemporaryDirectory("outpost-pmtiles-bad")
        let url = dir.file("bad.pmtiles")
        try Data(bytes).write(to: url)
        #expect(throws: VectorTileError.self) { _ = try PMTilesReader(url: url).tile(TileKey(level: 0, row: 0, col: 0)) }
    }

    /// A file too short for a header is refused before it is mapped (the fuzzer found mapping an
    /// empty file leaks a page: its input is among the seeds), and a missing one is an io error.
    @Test func shortAndMissingFilesAreTold() throws {
        let dir = TemporaryDirectory("outpost-pmtiles-short")
        for (bytes, name) in [([UInt8](), "empty"), (Array("PMTiles".utf8) + [3], "short")] {
            let url = dir.file("\(name).pmtiles")
            try Data(bytes).write(to: url)
            let error = #expect(throws: VectorTileError.self) { _ = try PMTilesReader(url: url) }
            #expect(error?.code == .corrupt && error?.message == "\(name).pmtiles is not a PMTiles archive", "\(String(describing: error))")
        }
        let missing = #expect(throws: VectorTileError.self) { _ = try PMTilesReader(url: dir.file("none.pmtiles")) }
        #expect(missing?.code == .io, "\(String(describing: missing))")
    }

    /// An archive whose directory entries' offsets overflow 64 bits when added to the tile
    /// section's (the fuzzer's input, kept in its corpus) is refused, not a trap.
    @Test func entriesPastSixtyFourBitsAreRefused() throws {
        let found = Repository.root.appendingPathComponent("Tests/Fuzz/corpus/pmtiles/regression-offset-overflow")
        let error = #expect(throws: VectorTileError.self) { try PMTilesReader(url: found).forEachTile { _, _ in } }
        #expect(error?.code == .corrupt, "\(String(describing: error))")
        #expect(PMTiles.tile(id: UInt64.max).level == 31 && PMTiles.tile(id: PMTiles.tileID(z: 12, x: 5, y: 9)) == TileKey(level: 12, row: 9, col: 5))
    }

    /// The same generator's tiles in PMTiles and MBTiles are the same tiles; GDAL (the newer one
    /// in the pyogrio wheel, which has the PMTiles driver) lists the layers.
    @Test(.scaledTimeLimit(minutes: 3)) func aVectorExportEqualsTheMBTilesOneAndGDALReadsIt() async throws {
        let dir = TemporaryDirectory("outpost-pmtiles-ne")
        let gdb = try VectorTileExportTests.service("natural_earth", in: dir)
        defer { try? gdb.close() }
        let generator = try VectorTileGenerator(geodatabase: gdb, definition: VectorTileDefinition(layers: [.init(source: "countries")], maxZoom: 4))
        let pm = dir.file("ne.pmtiles"), mb = dir.file("ne.mbtiles")
        let a = try await VectorTilePMTiles.export(generator, to: pm)
        let b = try await VectorTileMBTiles.export(generator, to: mb)
        #expect(a.tiles == b.tiles && a.tiles > 100)
        var fromMB: [TileKey: [UInt8]] = [:]
        try VectorTileMBTilesReader(url: mb).forEachTile { fromMB[$0] = $1 }
        var same = 0
        try PMTilesReader(url: pm).forEachTile { key, bytes in if fromMB[key] == bytes { same += 1 } }
        #expect(same == b.tiles)
        let gdal = try await ExternalTools.python(
            "import sys, pyogrio; i = pyogrio.read_info(sys.argv[1], layer='countries'); print(i['driver'], i['features'] > 0, 'name' in list(i['fields']))", [pm.path])
        #expect(gdal.status == 0 && gdal.stdout.hasPrefix("PMTiles True True"), "\(gdal.stdout)\(gdal.stderr)")
    }
}
