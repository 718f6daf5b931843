import CWebP
import OutpostTiles

/// WebP through libwebp: decoded to RGBA; encoded lossy at a quality (with an alpha plane when a
/// tile has transparency) or lossless.
enum LibWebP {
    static let codec = TileCodecs.Raster(decode: { try decode($0) }, encode: { try encode(rgba: $0, width: $1, height: $2, quality: $3) })

    static func decode(_ bytes: [UInt8]) throws -> PNGDecoder.Image {
        var width: Int32 = 0, height: Int32 = 0
        let known = bytes.withUnsafeBufferPointer { WebPGetInfo($0.baseAddress, $0.count, &width, &height) }
        guard known != 0 else { throw WebPCodec.Error("not a readable WebP image") }
        guard width > 0, height > 0, Int(width) * Int(height) <= TileCodecs.maxPixels else {
            throw WebPCodec.Error("a WebP image of \(width)×\(height) is too large")
        }
        var pixels = [UInt8](repeating: 0, count: Int(width) * Int(height) * 4)
        let decoded = bytes.withUnsafeBufferPointer { src in
            pixels.withUnsafeMutableBufferPointer { dst in
                WebPDecodeRGBAInto(src.baseAddress, src.count, dst.baseAddress, dst.count, width * 4)
            }
        }
        guard decoded != nil else { throw WebPCodec.Error("the WebP image cannot be decoded") }
        return PNGDecoder.Image(width: Int(width), height: Int(height), pixels: pixels)
    }

    /// Encodes RGBA pixels: lossy at `quality` (0–100), or lossless when `quality` is nil.
    static func encode(rgba pixels: [UInt8], width: Int, height: Int, quality: Int?) throws -> [UInt8] {
        guard width > 0, height > 0, pixels.count == width * height * 4 else {
            throw WebPCodec.Error("\(pixels.count) bytes are not \(width)×\(height) RGBA pixels")
        }
        var output: UnsafeMutablePointer<UInt8>?
        let size = pixels.withUnsafeBufferPointer { src in
            if let quality {
                return WebPEncodeRGBA(src.baseAddress, Int32(width), Int32(height), Int32(width * 4), Float(min(100, max(0, quality))), &output)
            }
            return WebPEncodeLosslessRGBA(src.baseAddress, Int32(width), Int32(height), Int32(width * 4), &output)
        }
        defer { WebPFree(output) }
        guard size > 0, let output else { throw WebPCodec.Error("the WebP encoder failed") }
        return Array(UnsafeBufferPointer(start: output, count: size))
    }
}
