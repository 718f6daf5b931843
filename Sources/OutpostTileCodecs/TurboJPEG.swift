import CTurboJPEG
import OutpostTiles

/// JPEG through libjpeg-turbo's TurboJPEG API: decoded to RGBA, encoded from RGBA (alpha
/// ignored: JPEG has none) with 4:2:0 chroma subsampling, as tile servers and Pillow write them.
enum TurboJPEG {
    static let codec = TileCodecs.Raster(
        decode: { try decode($0) }, encode: { try encode(rgba: $0, width: $1, height: $2, quality: $3 ?? 75) })

    static func decode(_ bytes: [UInt8]) throws -> PNGDecoder.Image {
        guard let handle = tjInitDecompress() else { throw JPEGCodec.Error("cannot start a JPEG decoder") }
        defer { tjDestroy(handle) }
        var width: Int32 = 0, height: Int32 = 0, subsampling: Int32 = 0, colorspace: Int32 = 0
        let header = bytes.withUnsafeBufferPointer {
            tjDecompressHeader3(handle, $0.baseAddress, UInt(bytes.count), &width, &height, &subsampling, &colorspace)
        }
        guard header == 0 else { throw JPEGCodec.Error("not a readable JPEG: \(message(handle))") }
        guard width > 0, height > 0, Int(width) * Int(height) <= TileCodecs.maxPixels else {
            throw JPEGCodec.Error("a JPEG of \(width)×\(height) is too large")
        }
        var pixels = [UInt8](repeating: 0, count: Int(width) * Int(height) * 4)
        let rc = bytes.withUnsafeBufferPointer { src in
            pixels.withUnsafeMutableBufferPointer { dst in
                tjDecompress2(handle, src.baseAddress, UInt(bytes.count), dst.baseAddress, width, 0, height, Int32(TJPF_RGBA.rawValue), 0)
            }
        }
        // A warning (a truncated but decodable file) still gives pixels; an error does not.
        guard rc == 0 || tjGetErrorCode(handle) == Int32(TJERR_WARNING.rawValue) else {
            throw JPEGCodec.Error("the JPEG cannot be decoded: \(message(handle))")
        }
        return PNGDecoder.Image(width: Int(width), height: Int(height), pixels: pixels)
    }

    /// Encodes RGBA pixels at `quality` (1–100).
    static func encode(rgba pixels: [UInt8], width: Int, height: Int, quality: Int) throws -> [UInt8] {
        guard width > 0, height > 0, pixels.count == width * height * 4 else {
            throw JPEGCodec.Error("\(pixels.count) bytes are not \(width)×\(height) RGBA pixels")
        }
        guard let handle = tjInitCompress() else { throw JPEGCodec.Error("cannot start a JPEG encoder") }
        defer { tjDestroy(handle) }
        var output: UnsafeMutablePointer<UInt8>?
        var size: UInt = 0
        let rc = pixels.withUnsafeBufferPointer { src in
            tjCompress2(
                handle, src.baseAddress, Int32(width), 0, Int32(height), Int32(TJPF_RGBA.rawValue), &output, &size, Int32(TJSAMP_420.rawValue),
                Int32(min(100, max(1, quality))), 0)
        }
        defer { tjFree(output) }
        guard rc == 0, let output else { throw JPEGCodec.Error("the JPEG encoder failed: \(message(handle))") }
        return Array(UnsafeBufferPointer(start: output, count: Int(size)))
    }

    private static func message(_ handle: tjhandle) -> String { String(cString: tjGetErrorStr2(handle)) }
}
