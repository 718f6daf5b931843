import Foundation
import FuzzDriver
import OutpostTiles

// The tile readers: kept apart from outpost-fuzz because OutpostTiles brings SwiftNIO into the
// instrumented build (several minutes more), so the test command's short run leaves them out
// (scripts/fuzz tiles).
try runFuzzer(targets: [
    FuzzTarget(name: "png", run: { _ = try? PNGDecoder.decode([UInt8]($0)) }, seeds: { try pngSeeds() }),
    FuzzTarget(
        name: "tile-package",
        run: { data in
            // A .tpkx (a stored ZIP of Compact Cache V2 bundles and root.json) as a file: loaded,
            // then the tiles of its first levels asked for.
            guard (try? data.write(to: packageScratch)) != nil else { return }
            let cache = TileCache(fileURL: packageScratch)
            let loaded = DispatchSemaphore(value: 0)
            Task {
                try? await cache.load()
                loaded.signal()
            }
            loaded.wait()
            guard let info = cache.info else { return }
            for level in info.minLevel...min(info.maxLevel, info.minLevel + 2) where level >= 0 && level < 31 {
                for row in 0..<min(1 << level, 4) {
                    for col in 0..<min(1 << level, 4) { _ = try? cache.tile(level: level, row: row, col: col) }
                }
            }
        },
        seeds: { try packageSeeds() }),
])
