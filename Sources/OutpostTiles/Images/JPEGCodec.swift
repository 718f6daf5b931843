import CTurboJPEG

/// JPEG tiles through libjpeg-turbo's TurboJPEG API: decoded to RGBA, encoded from RGBA (alpha
/// ignored: JPEG has none) with 4:2:0 chroma subsampling, as tile servers and Pillow write them.
public enum JPEGCodec {
    public struct Error: Swift.Error, CustomStringConvertible {
        public var description: String
    }

    /// Whether `bytes` start like a JPEG (SOI then a marker).
    public static func isJPEG(_ bytes: [UInt8]) -> Bool { bytes.count > 3 && bytes[0] == 0xFF && bytes[1] == 0xD8 && bytes[2] == 0xFF }

    public static func decode(_ bytes: [UInt8]) throws -> PNGDecoder.Image {
        guard let handle = tjInitDecompress() else { throw Error(description: "cannot start a JPEG decoder") }
        defer { tjDestroy(handle) }
        var width: Int32 = 0, height: Int32 = 0, subsampling: Int32 = 0, colorspace: Int32 = 0
        let header = bytes.withUnsafeBufferPointer {
            tjDecompressHeader3(handle, $0.baseAddress, UInt(bytes.count), &width, &height, &subsampling, &colorspace)
        }
        guard header == 0 else { throw Error(description: "not a readable JPEG: \(message(handle))") }
        guard width > 0, height > 0, Int(width) * Int(height) <= PNGDecoder.maxPixels else {
            throw Error(description: "a JPEG of \(width)×\(height) is too large")
        }
        var pixels = [UInt8](repeating: 0, count: Int(width) * Int(height) * 4)
        let rc = bytes.withUnsafeBufferPointer { src in
            pixels.withUnsafeMutableBufferPointer { dst in
                tjDecompress2(handle, src.baseAddress, UInt(bytes.count), dst.baseAddress, width, 0, height, Int32(TJPF_RGBA.rawValue), 0)
            }
        }
        // A warning (a truncated but decodable file) still gives pixels; an error does not.
        guard rc == 0 || tjGetErrorCode(handle) == Int32(TJERR_WARNING.rawValue) else {
            throw Error(description: "the JPEG cannot be decoded: \(message(handle))")
        }
        return PNGDecoder.Image(width: Int(width), height: Int(height), pixels: pixels)
    }

    /// Encodes RGBA pixels at `quality` (1–100).
    public static func encode(rgba pixels: [UInt8], width: Int, height: Int, quality: Int) throws -> [UInt8] {
        guard width > 0, height > 0, pixels.count == width * height * 4 else {
            throw Error(description: "\(pixels.count) bytes are not \(width)×\(height) RGBA pixels")
        }
        guard let handle = tjInitCompress() else { throw Error(description: "cannot start a JPEG encoder") }
        defer { tjDestroy(handle) }
        var output: UnsafeMutablePointer<UInt8>?
        var size: UInt = 0
        let rc = pixels.withUnsafeBufferPointer { src in
            tjCompress2(
                handle, src.baseAddress, Int32(width), 0, Int32(height), Int32(TJPF_RGBA.rawValue), &output, &size, Int32(TJSAMP_420.rawValue),
                Int32(min(100, max(1, quality))), 0)
        }
        defer { tjFree(output) }
        guard rc == 0, let output else { throw Error(description: "the JPEG encoder failed: \(message(handle))") }
        return Array(UnsafeBufferPointer(start: output, count: Int(size)))
    }

    private static func message(_ handle: tjhandle) -> String { String(cString: tjGetErrorStr2(handle)) }
}
