/// WebP tiles, through the codec installed in ``TileCodecs`` (libwebp, from `OutpostTileCodecs`).
/// Without one, WebP tiles are still recognised but decoding and encoding throw (``isAvailable``
/// is false).
public enum WebPCodec {
    /// Why a WebP could not be decoded or encoded (or no codec is installed).
    public struct Error: Swift.Error, CustomStringConvertible {
        public var description: String
        /// An error saying `description`.
        public init(_ description: String) { self.description = description }
    }

    /// Whether `bytes` are a RIFF container of WebP.
    public static func isWebP(_ bytes: [UInt8]) -> Bool {
        bytes.count > 12 && bytes[0..<4].elementsEqual("RIFF".utf8) && bytes[8..<12].elementsEqual("WEBP".utf8)
    }

    /// Whether a WebP codec is installed.
    public static var isAvailable: Bool { TileCodecs.installed.webp != nil }

    /// Decodes a WebP to RGBA pixels.
    public static func decode(_ bytes: [UInt8]) throws -> PNGDecoder.Image {
        guard let codec = TileCodecs.installed.webp else { throw unavailable }
        return try codec.decode(bytes)
    }

    /// Encodes RGBA pixels: lossy at `quality` (0–100), or lossless when `quality` is nil.
    public static func encode(rgba pixels: [UInt8], width: Int, height: Int, quality: Int?) throws -> [UInt8] {
        guard let codec = TileCodecs.installed.webp else { throw unavailable }
        return try codec.encode(pixels, width, height, quality)
    }

    private static var unavailable: Error {
        Error("no WebP codec is installed (OutpostTileCodecs' SystemTileCodecs.install() adds libwebp's)")
    }
}
