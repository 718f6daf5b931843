import OutpostCore

/// Image codecs through C libraries other than zlib. OutpostTiles links none of them, so that the
/// sync stack builds on libsqlite3 and zlib alone (for iOS): it reads and writes PNG through zlib
/// and recognises JPEG and WebP tiles. `OutpostTileCodecs` installs libjpeg-turbo, libwebp and
/// libdeflate ones (`SystemTileCodecs.install()`); the server and the command line do so as they
/// start, and an app may install its own (ImageIO's, say).
public enum TileCodecs {
    /// A raster format's decoder (to RGBA) and encoder (from RGBA, at a quality; nil: lossless
    /// where the format has it).
    public struct Raster: Sendable {
        /// Decodes the format to RGBA.
        public var decode: @Sendable (_ bytes: [UInt8]) throws -> PNGDecoder.Image
        /// Encodes RGBA pixels, at a quality (nil: lossless where the format has it).
        public var encode: @Sendable (_ rgba: [UInt8], _ width: Int, _ height: Int, _ quality: Int?) throws -> [UInt8]

        /// A codec of these functions.
        public init(
            decode: @escaping @Sendable (_ bytes: [UInt8]) throws -> PNGDecoder.Image,
            encode: @escaping @Sendable (_ rgba: [UInt8], _ width: Int, _ height: Int, _ quality: Int?) throws -> [UInt8]
        ) {
            self.decode = decode
            self.encode = encode
        }
    }

    /// A faster DEFLATE for PNG data than zlib's streaming one.
    public struct Deflate: Sendable {
        /// Inflates a raw DEFLATE stream into the destination; the bytes produced, nil when the
        /// stream is damaged or does not fit.
        public var inflate: @Sendable (_ source: UnsafeRawBufferPointer, _ destination: UnsafeMutableRawBufferPointer) -> Int?
        /// A zlib stream (header, DEFLATE, Adler-32) of the bytes at a zlib compression level,
        /// nil when it cannot make one (zlib is used then).
        public var zlibCompress: @Sendable (_ bytes: [UInt8], _ level: Int32) -> [UInt8]?

        /// A DEFLATE codec of these functions.
        public init(
            inflate: @escaping @Sendable (_ source: UnsafeRawBufferPointer, _ destination: UnsafeMutableRawBufferPointer) -> Int?,
            zlibCompress: @escaping @Sendable (_ bytes: [UInt8], _ level: Int32) -> [UInt8]?
        ) {
            self.inflate = inflate
            self.zlibCompress = zlibCompress
        }
    }

    /// What is installed: nil where a format has no codec (PNG falls back on zlib).
    public struct Installed: Sendable {
        /// The JPEG codec.
        public var jpeg: Raster?
        /// The WebP codec.
        public var webp: Raster?
        /// The faster DEFLATE.
        public var deflate: Deflate?
    }

    private static let state = Locked(Installed())

    /// Installs the codecs given (a nil leaves that format as it was). Process-wide; cheap.
    public static func install(jpeg: Raster? = nil, webp: Raster? = nil, deflate: Deflate? = nil) {
        state.withLock {
            if let jpeg { $0.jpeg = jpeg }
            if let webp { $0.webp = webp }
            if let deflate { $0.deflate = deflate }
        }
    }

    /// The codecs installed now.
    public static var installed: Installed { state.withLock { $0 } }

    /// The largest image any decoder expands (64 Mpixels: 256 MB of RGBA).
    public static let maxPixels = 1 << 26
}
