import Foundation
import OutpostCore

/// An image of any area and size from a tile cache's tiles (a MapServer `export` of a cached
/// service): the tiles of the level whose resolution is the finest not finer than the image's,
/// resampled by nearest neighbour. Pixels with no tile stay transparent. PNG tiles only (the
/// decoder this module has); each tile is decoded once per image.
public enum TileMosaic {
    /// RGBA pixels of `envelope` (in the cache's spatial reference) at `width`×`height`.
    /// - Throws: ``TileCacheError`` `.unsupported` for a cache of JPEG tiles; `.corrupt` for a
    ///   damaged tile.
    public static func render(cache: TileCache, envelope: Envelope, width: Int, height: Int) throws -> [UInt8] {
        guard let info = cache.info else { throw TileCacheError(.io, "the tile cache is not loaded", file: cache.fileURL.path) }
        let scheme = info.scheme
        let wanted = (envelope.xmax - envelope.xmin) / Double(width)
        let lods = scheme.lods.filter { info.levels.contains($0.level) }.sorted { $0.level < $1.level }
        guard let lod = lods.last(where: { $0.resolution >= wanted * 0.999 }) ?? lods.first else {
            throw TileCacheError(.invalidArea, "the cache has no level", file: cache.fileURL.path)
        }
        var pixels = [UInt8](repeating: 0, count: width * height * 4)
        var tiles: [TileKey: PNGDecoder.Image?] = [:]
        let span = lod.resolution * Double(scheme.tileSize)
        let dx = (envelope.xmax - envelope.xmin) / Double(width), dy = (envelope.ymax - envelope.ymin) / Double(height)
        for py in 0..<height {
            let y = envelope.ymax - (Double(py) + 0.5) * dy
            let row = Int(((scheme.originY - y) / span).rounded(.down))
            let ty = Int(((scheme.originY - y) / lod.resolution).rounded(.down)) - row * scheme.tileSize
            for px in 0..<width {
                let x = envelope.xmin + (Double(px) + 0.5) * dx
                let col = Int(((x - scheme.originX) / span).rounded(.down))
                guard row >= 0, col >= 0 else { continue }
                let key = TileKey(level: lod.level, row: row, col: col)
                let image: PNGDecoder.Image?
                if let known = tiles[key] {
                    image = known
                } else {
                    image = try decode(cache.tile(key), info: info, key: key)
                    tiles[key] = image
                }
                guard let image else { continue }
                let tx = Int(((x - scheme.originX) / lod.resolution).rounded(.down)) - col * scheme.tileSize
                guard tx >= 0, ty >= 0, tx < image.width, ty < image.height else { continue }
                let from = (ty * image.width + tx) * 4, to = (py * width + px) * 4
                pixels[to] = image.pixels[from]
                pixels[to + 1] = image.pixels[from + 1]
                pixels[to + 2] = image.pixels[from + 2]
                pixels[to + 3] = image.pixels[from + 3]
            }
        }
        return pixels
    }

    private static func decode(_ bytes: [UInt8]?, info: TileCacheInfo, key: TileKey) throws -> PNGDecoder.Image? {
        guard let bytes else { return nil }
        do {
            return try TileImageFormat.decode(bytes)
        } catch {
            throw TileCacheError(.corrupt, "a tile does not decode: \(error)", tile: key)
        }
    }
}
