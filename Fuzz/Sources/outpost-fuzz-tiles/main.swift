import Foundation
import FuzzDriver
import OutpostCore
@testable import OutpostTiles
import OutpostVectorTiles

// The tile readers (raster and vector): kept apart from outpost-fuzz because OutpostTiles brings SwiftNIO into the
// instrumented build (several minutes more), so the test command's short run leaves them out
// (scripts/fuzz tiles).
try runFuzzer(targets: [
    FuzzTarget(name: "png", run: { _ = try? PNGDecoder.decode([UInt8]($0)) }, seeds: { try pngSeeds() }),
    FuzzTarget(
        name: "tile-package",
        run: { data in
            // A .tpkx (a stored ZIP of Compact Cache V2 bundles and root.json) as a file: loaded,
            // then the tiles of its first levels asked for.
            // Opened as `load()` opens it, on this thread: a loadable's task outlived the input
            // and left allocations libFuzzer counted as a possible leak, so it ran a leak check
            // after every input (11 inputs a second).
            guard (try? data.write(to: packageScratch)) != nil else { return }
            let cache = TileCache(fileURL: packageScratch)
            guard (try? cache.open()) != nil, let info = cache.info else { return }
            for level in info.minLevel...min(info.maxLevel, info.minLevel + 2) where level >= 0 && level < 31 {
                for row in 0..<min(1 << level, 4) {
                    for col in 0..<min(1 << level, 4) { _ = try? cache.tile(level: level, row: row, col: col) }
                }
            }
        },
        seeds: { try packageSeeds() }),
    // A Mapbox Vector Tile as a VectorTileServer or another writer's file gives it: decoded, and
    // what decodes encoded again.
    FuzzTarget(
        name: "mvt",
        run: { data in
            guard let tile = try? VectorTile(decoding: [UInt8](data)) else { return }
            _ = tile.encoded()
        },
        seeds: { mvtSeeds() }),
    // A PMTiles archive as a file: header, directories (varints, run lengths, leaf pointers),
    // metadata and every tile read.
    FuzzTarget(
        name: "pmtiles",
        run: { data in
            guard (try? data.write(to: pmtilesScratch)) != nil, let reader = try? PMTilesReader(url: pmtilesScratch) else { return }
            _ = try? reader.metadata()
            var n = 0
            try? reader.forEachTile { _, _ in
                n += 1
                if n > 10_000 { throw CancellationError() }
            }
        },
        seeds: { try pmtilesSeeds() }),
    // A Mapbox GL style (a served package's, or another server's) drawing a small tile: layers,
    // zoom functions, colours and filters read as the renderer reads them.
    FuzzTarget(
        name: "vector-style",
        run: { data in
            guard let style = try? JSONValue.parse(data) else { return }
            drawWithStyle(style)
        },
        seeds: { styleSeeds() }),
])
