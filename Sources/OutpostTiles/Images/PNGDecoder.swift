import CZlib
import Foundation

/// PNG reading over zlib (or the faster DEFLATE installed in ``TileCodecs``): 8-bit grey, grey+alpha, RGB, RGBA and palette images, not
/// interlaced (what tile servers send), expanded to RGBA. Every chunk's CRC is checked; sizes
/// are bounded before anything is allocated.
public enum PNGDecoder {
    /// A decoded image: RGBA pixels, row by row.
    public struct Image: Hashable, Sendable {
        /// Width in pixels.
        public var width: Int
        /// Height in pixels.
        public var height: Int
        /// Row-major RGBA.
        public var pixels: [UInt8]

        /// An image of these pixels (`width × height × 4` bytes).
        public init(width: Int, height: Int, pixels: [UInt8]) {
            self.width = width
            self.height = height
            self.pixels = pixels
        }
    }

    /// Why a PNG could not be decoded.
    public struct Error: Swift.Error, CustomStringConvertible {
        public var description: String
    }

    static let maxPixels = TileCodecs.maxPixels

    /// Decodes a PNG to RGBA pixels.
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
        // Not zero-filled: the inflate must write every byte (it is checked).
        var raw = [UInt8](unsafeUninitializedCapacity: height * (stride + 1)) { _, n in n = height * (stride + 1) }
        try inflate(compressed, into: &raw, width: width, height: height)
        // Undo the filters row by row, in place in `raw` (each row after its filter byte), then
        // widen to RGBA.
        try raw.withUnsafeMutableBufferPointer { buffer in
            let base = buffer.baseAddress!
            for y in 0..<height {
                let row = base + y * (stride + 1)
                let filter = row[0]
                guard filter <= 4 else { throw Error(description: "row \(y) has filter type \(filter)") }
                unfilter(filter, row + 1, up: y > 0 ? row - stride : nil, count: stride, bpp: channels)
            }
        }
        // Not filled: `widen` writes every byte.
        var rgba = [UInt8](unsafeUninitializedCapacity: width * height * 4) { _, n in n = width * height * 4 }
        let lastIndex = raw.withUnsafeBufferPointer { buffer -> Int in
            rgba.withUnsafeMutableBufferPointer { out in
                widen(buffer.baseAddress!, stride: stride, to: out.baseAddress!, width: width, height: height, colorType: colorType, palette: palette, transparency: transparency)
            }
        }
        guard lastIndex < 0 else { throw Error(description: "palette index \(lastIndex) out of range") }
        return Image(width: width, height: height, pixels: rgba)
    }

    /// Inflates the IDAT stream into `raw`, which it must fill exactly, with the installed
    /// DEFLATE (libdeflate: whole buffer, about twice zlib's streaming inflate on tiles), else
    /// zlib. The stream's Adler-32 is not computed (a raw inflate after the two-byte zlib
    /// header): every chunk's CRC-32 already covers the compressed bytes.
    static func inflate(_ compressed: [UInt8], into raw: inout [UInt8], width: Int, height: Int) throws {
        guard compressed.count > 2, compressed[0] & 0x0F == 8, (UInt16(compressed[0]) << 8 | UInt16(compressed[1])) % 31 == 0, compressed[1] & 0x20 == 0 else {
            throw Error(description: "the image data is not a zlib stream")
        }
        if let deflate = TileCodecs.installed.deflate {
            let produced = compressed.withUnsafeBytes { src in
                raw.withUnsafeMutableBytes { dst in deflate.inflate(UnsafeRawBufferPointer(rebasing: src.dropFirst(2)), dst) }
            }
            guard produced == raw.count else { throw Error(description: "the image data does not inflate to \(width)×\(height)") }
            return
        }
        try zlibInflate(compressed, into: &raw, width: width, height: height)
    }

    /// zlib's inflate of the IDAT stream after its two-byte header (the path without an installed
    /// DEFLATE).
    static func zlibInflate(_ compressed: [UInt8], into raw: inout [UInt8], width: Int, height: Int) throws {
        var stream = z_stream()
        guard inflateInit2_(&stream, -MAX_WBITS, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
            throw Error(description: "cannot start an inflater")
        }
        defer { inflateEnd(&stream) }
        let result: Int32 = compressed.withUnsafeBufferPointer { src in
            raw.withUnsafeMutableBufferPointer { dst in
                stream.next_in = UnsafeMutablePointer(mutating: src.baseAddress! + 2)
                stream.avail_in = uInt(src.count - 2)
                stream.next_out = dst.baseAddress
                stream.avail_out = uInt(dst.count)
                return CZlib.inflate(&stream, Z_FINISH)
            }
        }
        guard result == Z_STREAM_END, Int(stream.total_out) == raw.count else {
            throw Error(description: "the image data does not inflate to \(width)×\(height) (zlib \(result))")
        }
    }

    /// Reverses one row's filter in place; `up` is the previous row, already unfiltered.
    @inline(__always)
    static func unfilter(_ filter: UInt8, _ row: UnsafeMutablePointer<UInt8>, up: UnsafeMutablePointer<UInt8>?, count n: Int, bpp: Int) {
        switch filter {
        case 1:
            var i = bpp
            while i < n {
                row[i] = row[i] &+ row[i - bpp]
                i += 1
            }
        case 2:
            guard let up else { return }
            for i in 0..<n { row[i] = row[i] &+ up[i] }
        case 3:
            guard let up else {
                var i = bpp
                while i < n {
                    row[i] = row[i] &+ (row[i - bpp] >> 1)
                    i += 1
                }
                return
            }
            for i in 0..<min(bpp, n) { row[i] = row[i] &+ (up[i] >> 1) }
            var i = bpp
            while i < n {
                row[i] = row[i] &+ UInt8((UInt16(row[i - bpp]) + UInt16(up[i])) >> 1)
                i += 1
            }
        case 4:
            guard let up else {
                // With no row above, Paeth predicts the left neighbour (Sub).
                var i = bpp
                while i < n {
                    row[i] = row[i] &+ row[i - bpp]
                    i += 1
                }
                return
            }
            for i in 0..<min(bpp, n) { row[i] = row[i] &+ up[i] }
            if bpp == 3 || bpp == 4 {
                unpaethPixels(row, up: up, count: n, bpp: bpp)
                return
            }
            var i = bpp
            while i < n {
                row[i] = row[i] &+ PNGEncoder.paeth(row[i - bpp], up[i], up[i - bpp])
                i += 1
            }
        default:
            break
        }
    }

    /// Paeth reversed a pixel at a time (its channels side by side in 16-bit lanes, the
    /// comparisons as sign masks), so the dependency on the left neighbour is one step per pixel
    /// rather than per byte. The first pixel is done.
    @inline(__always)
    static func unpaethPixels(_ row: UnsafeMutablePointer<UInt8>, up: UnsafeMutablePointer<UInt8>, count n: Int, bpp: Int) {
        @inline(__always) func load(_ p: UnsafeMutablePointer<UInt8>) -> SIMD4<Int16> {
            SIMD4(Int16(p[0]), Int16(p[1]), Int16(p[2]), bpp == 4 ? Int16(p[3]) : 0)
        }
        @inline(__always) func magnitude(_ v: SIMD4<Int16>) -> SIMD4<Int16> {
            let sign = v &>> 15
            return (v ^ sign) &- sign
        }
        var a = load(row), c = load(up)
        var i = bpp
        while i + bpp <= n {
            let b = load(up + i), x = load(row + i)
            let pa = magnitude(b &- c), pb = magnitude(a &- c), pc = magnitude(a &+ b &- c &- c)
            let notA = ((pb &- pa) &>> 15) | ((pc &- pa) &>> 15)
            let useC = (pc &- pb) &>> 15
            let predicted = (a & ~notA) | (((b & ~useC) | (c & useC)) & notA)
            let value = (x &+ predicted) & 0xFF
            row[i] = UInt8(truncatingIfNeeded: value[0])
            row[i + 1] = UInt8(truncatingIfNeeded: value[1])
            row[i + 2] = UInt8(truncatingIfNeeded: value[2])
            if bpp == 4 { row[i + 3] = UInt8(truncatingIfNeeded: value[3]) }
            a = value
            c = b
            i += bpp
        }
    }

    /// Unfiltered rows (each after its filter byte) as RGBA; the first palette index out of
    /// range, or −1.
    static func widen(
        _ raw: UnsafePointer<UInt8>, stride: Int, to out: UnsafeMutablePointer<UInt8>, width: Int, height: Int, colorType: Int, palette: [UInt8],
        transparency: [UInt8]
    ) -> Int {
        // Palette images: a 256-entry RGBA table (entries past the palette flag a bad index).
        var table = [UInt32](repeating: 0, count: 256)
        var valid = [Bool](repeating: false, count: 256)
        if colorType == 3 {
            for index in 0..<min(256, palette.count / 3) {
                let alpha = index < transparency.count ? transparency[index] : 255
                let bytes = [palette[index * 3], palette[index * 3 + 1], palette[index * 3 + 2], alpha]
                table[index] = bytes.withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) }
                valid[index] = true
            }
        }
        return table.withUnsafeBufferPointer { table in
            valid.withUnsafeBufferPointer { valid in
                for y in 0..<height {
                    let src = raw + y * (stride + 1) + 1
                    let dst = out + y * width * 4
                    switch colorType {
                    case 0:
                        for x in 0..<width { dst[x * 4] = src[x]; dst[x * 4 + 1] = src[x]; dst[x * 4 + 2] = src[x]; dst[x * 4 + 3] = 255 }
                    case 2:
                        for x in 0..<width {
                            dst[x * 4] = src[x * 3]; dst[x * 4 + 1] = src[x * 3 + 1]; dst[x * 4 + 2] = src[x * 3 + 2]; dst[x * 4 + 3] = 255
                        }
                    case 4:
                        for x in 0..<width {
                            dst[x * 4] = src[x * 2]; dst[x * 4 + 1] = src[x * 2]; dst[x * 4 + 2] = src[x * 2]; dst[x * 4 + 3] = src[x * 2 + 1]
                        }
                    case 6:
                        dst.update(from: src, count: width * 4)
                    default:
                        let words = UnsafeMutableRawPointer(dst)
                        for x in 0..<width {
                            let index = Int(src[x])
                            guard valid[index] else { return index }
                            words.storeBytes(of: table[index], toByteOffset: x * 4, as: UInt32.self)
                        }
                    }
                }
                return -1
            }
        }
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
