/// The image formats tiles come in, told apart by their first bytes.
public enum TileImageFormat: String, Sendable, Hashable, CaseIterable {
    /// PNG; JPEG; WebP.
    case png, jpeg, webp

    /// The format of a tile, by its first bytes; nil when it is none of them.
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

    /// The format of a tile in memory (its first bytes are looked at).
    public init?(sniffing bytes: UnsafeRawBufferPointer) {
        self.init(sniffing: [UInt8](bytes.prefix(16)))
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
    /// ArcGIS "MIXED": opaque tiles become JPEG at `quality`, tiles with transparency PNG
    /// (lossless, at `pngLevel`); a PNG or JPEG tile as fetched stays when it is already the
    /// smaller. Other sources (WebP) are always re-encoded, as Compact Cache holds PNG and JPEG.
    case mixed(quality: Int, pngLevel: Int32)
    /// Every tile WebP at `quality`, with an alpha plane where a tile has transparency.
    case webp(quality: Int)

    /// The tile re-encoded as this recoding asks, or as fetched when that is smaller or it cannot be decoded.
    public func recode(_ tile: [UInt8]) -> [UInt8] {
        switch self {
        case .optimizePNG(let level):
            return PNGDecoder.optimized(tile, level: level)
        case .mixed(let quality, let pngLevel):
            let source = TileImageFormat(sniffing: tile)
            guard let image = try? TileImageFormat.decode(tile) else { return tile }
            // The tile as fetched may stay only when it is already a format the cache holds.
            let keepable = source == .png || (source == .jpeg && Palette.isOpaque(image.pixels))
            let recoded: [UInt8]?
            // Without a JPEG codec installed (OutpostTileCodecs), every tile is written as PNG.
            if Palette.isOpaque(image.pixels), JPEGCodec.isAvailable {
                recoded = try? JPEGCodec.encode(rgba: image.pixels, width: image.width, height: image.height, quality: quality)
            } else {
                recoded = try? PNGEncoder.encodeTile(rgba: image.pixels, width: image.width, height: image.height, level: pngLevel)
            }
            guard let recoded else { return tile }
            return keepable && tile.count <= recoded.count ? tile : recoded
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
