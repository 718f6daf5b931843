import Foundation
import OutpostServer
import OutpostStorage
import OutpostTestSupport
import OutpostTiles
import Synchronization
import Testing

@testable import OutpostVectorTiles

/// A service's tiles made on request: kept per data version, and one generator (with what it
/// learned of the source polygons) per version.
@Suite("Vector tiles made on request, per data version")
struct LayerVectorTilesTests {
    init() { GEOSPolygonRepair.install() }

    @Test func theGeneratorIsKeptWithinAVersionAndRenewedOnTheNext() async throws {
        let dir = TemporaryDirectory()
        let gdb = try VectorTileExportTests.service("natural_earth", in: dir)
        let version = Atomic<Int64>(7)
        let tiles = try LayerVectorTiles(name: "natural_earth", geodatabase: gdb, cacheDirectory: dir.file("cache")) {
            version.load(ordering: .relaxed)
        }
        func repairs() throws -> RepairedPolygons { try #require(tiles.generator.repaired) }

        let world = TileKey(level: 0, row: 0, col: 0)
        let first = try #require(try await tiles.tile(world))
        let learned = try repairs()
        // Another tile of the same version: the same generator, its repairs kept.
        _ = try await tiles.tile(TileKey(level: 1, row: 0, col: 0))
        #expect(try repairs() === learned)
        // The kept tile is read back as made.
        #expect(try await tiles.tile(world) == first)
        #expect(FileManager.default.fileExists(atPath: dir.file("cache/v7/0/0/0.pbf.gz").path))

        // An edit (a new version): a new generator, and the old version's tiles go.
        version.store(8, ordering: .relaxed)
        #expect(try await tiles.tile(world) == first)
        #expect(try repairs() !== learned)
        #expect(FileManager.default.fileExists(atPath: dir.file("cache/v8/0/0/0.pbf.gz").path))
        #expect(!FileManager.default.fileExists(atPath: dir.file("cache/v7").path))
        // Tiles outside the zooms or the grid: none, and nothing made.
        #expect(try await tiles.tile(TileKey(level: 2, row: 4, col: 0)) == nil)
        #expect(try await tiles.tile(TileKey(level: 30, row: 0, col: 0)) == nil)
        let renewed = try repairs()
        _ = try await tiles.tile(TileKey(level: 1, row: 1, col: 1))
        #expect(try repairs() === renewed)
    }
}
