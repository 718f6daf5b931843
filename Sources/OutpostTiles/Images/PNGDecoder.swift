import CZlib
import Foundation

/// PNG reading over the system zlib: 8-bit grey, grey+alpha, RGB, RGBA and palette images, not
/// interlaced (what tile servers send), expanded to RGBA. Every chunk's CRC is checked; sizes
/// are bounded before anything is allocated.
public enum PNGDecoder {
    public struct Image: Hashable, Sendable {
        public var width: Int
        public var height: Int
        /// Row-major RGBA.
        public var pixels: [UInt8]
    }

    public struct Error: Swift.Error, CustomStringConvertible {
        public var description: String
    }

    static let maxPixels = 1 << 26

    public static func decode(_ bytes: [UInt8]) throws -> Image {
        guard bytes.count >= 8, Array(bytes[0..<8]) == PNGEncoder.signature else { throw Error(description: "not a PNG (no signature)") }
        var at = 8
        var width = 0, height = 0, colorType = -1
        var palette: [UInt8] = [], transparency: [UInt8] = []
        var compressed: [UInt8] = []
        func u32(_ i: Int) -> Int { Int(bytes[i]) << 24 | Int(bytes[i + 1]) << 16 | Int(bytes[i + 2]) << 8 | Int(bytes[i + 3]) }
        while true {
            guard at + 12 <= bytes.count else { throw Error(description: "truncated PNG (no IEND)") }
            let length = u32(at)
            guard length <= bytes.count - at - 12 else { throw Error(description: "a chunk runs past the end of the PNG") }
            let type = String(decoding: bytes[(at + 4)..<(at + 8)], as: UTF8.self)
            let data = (at + 8)..<(at + 8 + length)
            var crc = ZlibCRC()
            bytes.withUnsafeBytes { crc.update(UnsafeRawBufferPointer(rebasing: $0[(at + 4)..<(at + 8 + length)])) }
            guard crc.value == UInt32(u32(at + 8 + length)) else { throw Error(description: "bad CRC in the \(type) chunk") }
            switch type {
            case "IHDR":
                guard length == 13 else { throw Error(description: "a malformed IHDR") }
                width = u32(data.lowerBound)
                height = u32(data.lowerBound + 4)
                let depth = bytes[data.lowerBound + 8]
                colorType = Int(bytes[data.lowerBound + 9])
                guard width > 0, height > 0, width * height <= maxPixels else { throw Error(description: "an image of \(width)×\(height) is out of range") }
                guard depth == 8, [0, 2, 3, 4, 6].contains(colorType) else {
                    throw Error(description: "bit depth \(depth) with colour type \(colorType) is not read (8-bit only)")
                }
                guard bytes[data.lowerBound + 12] == 0 else { throw Error(description: "interlaced PNGs are not read") }
            case "PLTE": palette = Array(bytes[data])
            case "tRNS": transparency = Array(bytes[data])
            case "IDAT": compressed += bytes[data]
            case "IEND":
                guard colorType >= 0 else { throw Error(description: "no IHDR") }
                return try expand(compressed, width: width, height: height, colorType: colorType, palette: palette, transparency: transparency)
            default: break
            }
            at += length + 12
        }
    }

    static func expand(_ compressed: [UInt8], width: Int, height: Int, colorType: Int, palette: [UInt8], transparency: [UInt8]) throws -> Image {
        let channels = [0: 1, 2: 3, 3: 1, 4: 2, 6: 4][colorType]!
        let stride = width * channels
        var raw = [UInt8](repeating: 0, count: height * (stride + 1))
        var size = uLong(raw.count)
        let rc = compressed.withUnsafeBufferPointer { src in
            raw.withUnsafeMutableBufferPointer { dst in uncompress(dst.baseAddress, &size, src.baseAddress, uLong(compressed.count)) }
        }
        guard rc == Z_OK, Int(size) == raw.count else { throw Error(description: "the image data does not inflate to \(width)×\(height) (zlib \(rc))") }
        // Undo the filters, row by row, in place.
        var rows = [UInt8](repeating: 0, count: height * stride)
        for y in 0..<height {
            let filter = raw[y * (stride + 1)]
            let src = y * (stride + 1) + 1, dst = y * stride
            for i in 0..<stride {
                let x = raw[src + i]
                let a: UInt8 = i >= channels ? rows[dst + i - channels] : 0
                let b: UInt8 = y > 0 ? rows[dst - stride + i] : 0
                let c: UInt8 = (i >= channels && y > 0) ? rows[dst - stride + i - channels] : 0
                switch filter {
                case 0: rows[dst + i] = x
                case 1: rows[dst + i] = x &+ a
                case 2: rows[dst + i] = x &+ b
                case 3: rows[dst + i] = x &+ UInt8((Int(a) + Int(b)) / 2)
                case 4: rows[dst + i] = x &+ PNGEncoder.paeth(a, b, c)
                default: throw Error(description: "row \(y) has filter type \(filter)")
                }
            }
        }
        var rgba = [UInt8](repeating: 255, count: width * height * 4)
        for p in 0..<(width * height) {
            let s = p * channels, d = p * 4
            switch colorType {
            case 0: rgba[d] = rows[s]; rgba[d + 1] = rows[s]; rgba[d + 2] = rows[s]
            case 2: rgba[d] = rows[s]; rgba[d + 1] = rows[s + 1]; rgba[d + 2] = rows[s + 2]
            case 4: rgba[d] = rows[s]; rgba[d + 1] = rows[s]; rgba[d + 2] = rows[s]; rgba[d + 3] = rows[s + 1]
            case 6: rgba[d] = rows[s]; rgba[d + 1] = rows[s + 1]; rgba[d + 2] = rows[s + 2]; rgba[d + 3] = rows[s + 3]
            default:
                let index = Int(rows[s])
                guard index * 3 + 2 < palette.count else { throw Error(description: "palette index \(index) out of range") }
                rgba[d] = palette[index * 3]; rgba[d + 1] = palette[index * 3 + 1]; rgba[d + 2] = palette[index * 3 + 2]
                if index < transparency.count { rgba[d + 3] = transparency[index] }
            }
        }
        return Image(width: width, height: height, pixels: rgba)
    }

    /// The tile losslessly re-encoded at zlib `level` when that is smaller: as a palette image when
    /// it has at most 256 distinct colours, else RGB when fully opaque, else RGBA (adaptive
    /// filters). The same bytes otherwise, and for anything that is not a PNG this decoder reads
    /// (JPEG tiles are kept as they are).
    public static func optimized(_ tile: [UInt8], level: Int32 = 9) -> [UInt8] {
        guard let image = try? decode(tile) else { return tile }
        let encoded = try? PNGEncoder.encodeTile(rgba: image.pixels, width: image.width, height: image.height, level: level)
        guard let smaller = encoded, smaller.count < tile.count else { return tile }
        return smaller
    }
}
