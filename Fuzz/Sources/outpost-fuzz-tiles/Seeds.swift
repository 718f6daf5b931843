import Foundation
import OutpostTiles

/// Where the tile-package target writes each input (one per process).
let packageScratch = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-fuzz-\(getpid()).tpkx")

func pngSeeds() throws -> [Data] {
    var rgba: [UInt8] = []
    var rgb: [UInt8] = []
    for i in 0..<64 {
        let pixel: [UInt8] = [UInt8(i * 4), UInt8(255 - i * 4), 128]
        rgb += pixel
        rgba += pixel + [i % 2 == 0 ? 255 : 100]
    }
    let flat = [UInt8](repeating: 200, count: 4 * 4 * 4)
    return [
        Data(try PNGEncoder.encode(pixels: rgba, width: 8, height: 8)),
        Data(try PNGEncoder.encode(pixels: rgb, width: 8, height: 8, channels: 3)),
        Data(try PNGEncoder.encodeTile(rgba: flat, width: 4, height: 4)),
    ]
}

func packageSeeds() throws -> [Data] {
    let file = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-fuzz-seed-\(getpid()).tpkx")
    defer { try? FileManager.default.removeItem(at: file) }
    try? FileManager.default.removeItem(at: file)
    let info = TileCacheInfo(name: "seed", scheme: .webMercator, minLevel: 0, maxLevel: 1, format: "PNG", fullExtent: nil)
    let writer = try TileCacheWriter(format: .tilePackage, at: file, info: info)
    let tile = try pngSeeds()[2]
    for key in [TileKey(level: 0, row: 0, col: 0), TileKey(level: 1, row: 0, col: 1), TileKey(level: 1, row: 1, col: 0)] {
        try writer.add(key, data: [UInt8](tile))
    }
    try writer.finish()
    return [try Data(contentsOf: file)]
}
