/// JPEG tiles, through the codec installed in ``TileCodecs`` (libjpeg-turbo, from
/// `OutpostTileCodecs`). Without one, JPEG tiles are still recognised but decoding and encoding
/// throw (``isAvailable`` is false).
public enum JPEGCodec {
    /// Why a JPEG could not be decoded or encoded (or no codec is installed).
    public struct Error: Swift.Error, CustomStringConvertible {
        public var description: String
        /// An error saying `description`.
        public init(_ description: String) { self.description = description }
    }

    /// Whether `bytes` start like a JPEG (SOI then a marker).
    public static func isJPEG(_ bytes: [UInt8]) -> Bool { bytes.count > 3 && bytes[0] == 0xFF && bytes[1] == 0xD8 && bytes[2] == 0xFF }

    /// Whether a JPEG codec is installed.
    public static var isAvailable: Bool { TileCodecs.installed.jpeg != nil }

    /// Decodes a JPEG to RGBA pixels.
    public static func decode(_ bytes: [UInt8]) throws -> PNGDecoder.Image {
        guard let codec = TileCodecs.installed.jpeg else { throw unavailable }
        return try codec.decode(bytes)
    }

    /// Encodes RGBA pixels at `quality` (1–100).
    public static func encode(rgba pixels: [UInt8], width: Int, height: Int, quality: Int) throws -> [UInt8] {
        guard let codec = TileCodecs.installed.jpeg else { throw unavailable }
        return try codec.encode(pixels, width, height, quality)
    }

    private static var unavailable: Error {
        Error("no JPEG codec is installed (OutpostTileCodecs' SystemTileCodecs.install() adds libjpeg-turbo's)")
    }
}
