/// The image formats tiles come in, told apart by their first bytes.
public enum TileImageFormat: String, Sendable, Hashable, CaseIterable {
    case png, jpeg, webp

    public init?(sniffing bytes: [UInt8]) {
        if bytes.starts(with: PNGEncoder.signature) {
            self = .png
        } else if JPEGCodec.isJPEG(bytes) {
            self = .jpeg
        } else if WebPCodec.isWebP(bytes) {
            self = .webp
        } else {
            return nil
        }
    }

    /// Any tile's pixels, as RGBA.
    public static func decode(_ bytes: [UInt8]) throws -> PNGDecoder.Image {
        switch TileImageFormat(sniffing: bytes) {
        case .png: return try PNGDecoder.decode(bytes)
        case .jpeg: return try JPEGCodec.decode(bytes)
        case .webp: return try WebPCodec.decode(bytes)
        case nil: throw PNGDecoder.Error(description: "not a PNG, JPEG or WebP image")
        }
    }
}

/// How an export re-encodes the tiles it fetches (ArcGIS `compressionQuality` and
/// `optimizeTilesForSize`). A tile that cannot be decoded is kept as the source sent it.
public enum TileRecoding: Sendable, Hashable {
    /// PNG tiles re-encoded losslessly at a zlib level, kept only when smaller.
    case optimizePNG(level: Int32)
    /// ArcGIS "MIXED": opaque tiles become JPEG at `quality` (unless the tile as fetched is
    /// already smaller), tiles with transparency stay PNG (re-encoded losslessly at `pngLevel`
    /// when that is smaller).
    case mixed(quality: Int, pngLevel: Int32)
    /// Every tile WebP at `quality`, with an alpha plane where a tile has transparency.
    case webp(quality: Int)

    public func recode(_ tile: [UInt8]) -> [UInt8] {
        switch self {
        case .optimizePNG(let level):
            return PNGDecoder.optimized(tile, level: level)
        case .mixed(let quality, let pngLevel):
            guard let image = try? TileImageFormat.decode(tile) else { return tile }
            guard Palette.isOpaque(image.pixels) else { return PNGDecoder.optimized(tile, level: pngLevel) }
            guard let jpeg = try? JPEGCodec.encode(rgba: image.pixels, width: image.width, height: image.height, quality: quality) else { return tile }
            return jpeg.count < tile.count ? jpeg : tile
        case .webp(let quality):
            guard let image = try? TileImageFormat.decode(tile),
                let webp = try? WebPCodec.encode(rgba: image.pixels, width: image.width, height: image.height, quality: quality)
            else { return tile }
            return webp
        }
    }

    /// The cache's `CacheTileFormat` after recoding tiles of a cache in `source` format.
    public func format(from source: String) -> String {
        switch self {
        case .optimizePNG: return source
        case .mixed: return source.uppercased().hasPrefix("JP") ? "JPEG" : "MIXED"
        case .webp: return "WEBP"
        }
    }

    /// What `tileImageInfo.compressionQuality` says: the JPEG or WebP quality, 0 for lossless.
    public var quality: Int {
        switch self {
        case .optimizePNG: return 0
        case .mixed(let quality, _), .webp(let quality): return quality
        }
    }
}
