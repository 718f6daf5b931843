import CZlib
import Foundation

/// PNG writing over zlib (and the faster DEFLATE installed in ``TileCodecs``): 8-bit RGBA (colour type 6), RGB (2) or
/// indexed (3), each RGB(A) row filtered with the filter whose output has the smallest sum of
/// absolute values (the libpng heuristic), IDAT deflated at a chosen level (6 by default; 9 is
/// three to four times slower for a few per cent).
public enum PNGEncoder {
    /// Why a PNG could not be encoded.
    public enum Error: Swift.Error, CustomStringConvertible {
        /// The pixel buffer does not match the width and height.
        case invalidSize(String)
        /// zlib failed, with its status.
        case zlib(Int32)

        public var description: String {
            switch self {
            case .invalidSize(let message): "cannot encode PNG: \(message)"
            case .zlib(let code): "zlib failed (\(code))"
            }
        }
    }

    static let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]

    /// Encodes `pixels` (row-major, `channels` bytes per pixel: 4 = RGBA, 3 = RGB).
    public static func encode(pixels: [UInt8], width: Int, height: Int, channels: Int = 4, level: Int32 = 6, strategy: Strategy = .default) throws -> [UInt8] {
        guard width > 0, height > 0, width <= 1 << 24, height <= 1 << 24, channels == 3 || channels == 4 else {
            throw Error.invalidSize("\(width)×\(height) with \(channels) channels")
        }
        guard pixels.count == width * height * channels else {
            throw Error.invalidSize("\(pixels.count) bytes for \(width)×\(height)×\(channels)")
        }
        let filtered = filter(pixels, width: width, height: height, bpp: channels)
        let compressed = try deflateRows(filtered, level: level, strategy: strategy)
        var out = signature
        var ihdr = ByteOut()
        ihdr.bytes.append(contentsOf: bigEndian(UInt32(width)))
        ihdr.bytes.append(contentsOf: bigEndian(UInt32(height)))
        ihdr.bytes.append(contentsOf: [8, channels == 4 ? 6 : 2, 0, 0, 0])
        chunk("IHDR", ihdr.bytes, to: &out)
        chunk("IDAT", compressed, to: &out)
        chunk("IEND", [], to: &out)
        return out
    }

    /// Encodes an indexed image (colour type 3, 8 bits per index): `palette` holds RGBA entries,
    /// written as PLTE and, when any entry is not opaque, a tRNS chunk trimmed after the last
    /// translucent entry. Rows are filtered with "none", as palette images compress best that way.
    public static func encode(indices: [UInt8], palette: [UInt32], width: Int, height: Int, level: Int32 = 6, strategy: Strategy = .default) throws -> [UInt8] {
        guard width > 0, height > 0, width <= 1 << 24, height <= 1 << 24, (1...256).contains(palette.count) else {
            throw Error.invalidSize("\(width)×\(height) with \(palette.count) palette entries")
        }
        guard indices.count == width * height else {
            throw Error.invalidSize("\(indices.count) indices for \(width)×\(height)")
        }
        guard indices.allSatisfy({ Int($0) < palette.count }) else { throw Error.invalidSize("an index past the palette") }
        var rows = [UInt8](repeating: 0, count: height * (width + 1))
        for y in 0..<height {
            rows.replaceSubrange(y * (width + 1) + 1 ..< (y + 1) * (width + 1), with: indices[y * width ..< (y + 1) * width])
        }
        var out = signature
        chunk("IHDR", bigEndian(UInt32(width)) + bigEndian(UInt32(height)) + [8, 3, 0, 0, 0], to: &out)
        chunk("PLTE", palette.flatMap { [UInt8($0 >> 24), UInt8($0 >> 16 & 0xFF), UInt8($0 >> 8 & 0xFF)] }, to: &out)
        let alphas = palette.map { UInt8($0 & 0xFF) }
        if let last = alphas.lastIndex(where: { $0 != 255 }) { chunk("tRNS", Array(alphas[...last]), to: &out) }
        chunk("IDAT", try deflate(rows, level: level, strategy: strategy), to: &out)
        chunk("IEND", [], to: &out)
        return out
    }

    /// A tile's RGBA pixels as the smallest of the lossless forms map tiles take: indexed (colour
    /// type 3) when there are at most 256 distinct colours, as rendered maps usually have, else RGB
    /// when every pixel is opaque, else RGBA. `outpost-bench png` measures the choices: indexed
    /// tiles are about half the size of RGBA ones and encode several times faster; run-length
    /// matching (`indexedStrategy: .rle`) is faster still but gives up much of the size.
    public static func encodeTile(rgba pixels: [UInt8], width: Int, height: Int, level: Int32 = 6, indexedStrategy: Strategy = .default) throws -> [UInt8] {
        guard pixels.count == width * height * 4 else { throw Error.invalidSize("\(pixels.count) bytes for \(width)×\(height) RGBA") }
        if let (indices, palette) = Palette.index(pixels) {
            return try encode(indices: indices, palette: palette, width: width, height: height, level: level, strategy: indexedStrategy)
        }
        if Palette.isOpaque(pixels) {
            return try encode(pixels: Palette.rgb(pixels), width: width, height: height, channels: 3, level: level)
        }
        return try encode(pixels: pixels, width: width, height: height, channels: 4, level: level)
    }

    static func bigEndian(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }

    static func chunk(_ type: String, _ data: [UInt8], to out: inout [UInt8]) {
        out.append(contentsOf: bigEndian(UInt32(data.count)))
        let start = out.count
        out.append(contentsOf: Array(type.utf8))
        out.append(contentsOf: data)
        var crc = ZlibCRC()
        out.withUnsafeBytes { crc.update(UnsafeRawBufferPointer(rebasing: $0[start...])) }
        out.append(contentsOf: bigEndian(crc.value))
    }

    /// Each row prefixed by its filter type, filtered with the cheapest of the five filters.
    /// One pass over a row sums the cost of all five (the libpng heuristic: the sum of absolute
    /// values of the filtered bytes); a second writes the row with the cheapest.
    static func filter(_ pixels: [UInt8], width: Int, height: Int, bpp: Int) -> [UInt8] {
        let stride = width * bpp
        var out = [UInt8](repeating: 0, count: height * (stride + 1))
        pixels.withUnsafeBufferPointer { px in
            out.withUnsafeMutableBufferPointer { dst in
                let zero = [UInt8](repeating: 0, count: stride)
                zero.withUnsafeBufferPointer { zeros in
                    for y in 0..<height {
                        let row = UnsafeBufferPointer(rebasing: px[y * stride ..< (y + 1) * stride])
                        let up = y > 0 ? UnsafeBufferPointer(rebasing: px[(y - 1) * stride ..< y * stride]) : zeros
                        let best = cheapestFilter(row, up, bpp: bpp)
                        let base = y * (stride + 1)
                        dst[base] = best
                        apply(best, row, up, bpp: bpp, to: UnsafeMutableBufferPointer(rebasing: dst[base + 1 ..< base + 1 + stride]))
                    }
                }
            }
        }
        return out
    }

    @inline(__always) static func cost(_ v: UInt8) -> Int { Int(Int8(bitPattern: v).magnitude) }

    /// The filter type (0–4) whose output has the smallest sum of absolute values, its five
    /// costs summed by `FilterCosts` (16 bytes at a time in optimised builds).
    static func cheapestFilter(_ row: UnsafeBufferPointer<UInt8>, _ up: UnsafeBufferPointer<UInt8>, bpp: Int) -> UInt8 {
        var costs = FilterCosts()
        costs.add(row, up, bpp: bpp)
        return costs.cheapest
    }

    /// Writes `row` filtered with `type` into `out`.
    static func apply(_ type: UInt8, _ row: UnsafeBufferPointer<UInt8>, _ up: UnsafeBufferPointer<UInt8>, bpp: Int, to out: UnsafeMutableBufferPointer<UInt8>) {
        let n = row.count
        switch type {
        case 0:
            for i in 0..<n { out[i] = row[i] }
        case 1:
            for i in 0..<n { out[i] = i >= bpp ? row[i] &- row[i - bpp] : row[i] }
        case 2:
            for i in 0..<n { out[i] = row[i] &- up[i] }
        case 3:
            for i in 0..<n {
                let a = i >= bpp ? UInt16(row[i - bpp]) : 0
                out[i] = row[i] &- UInt8((a + UInt16(up[i])) >> 1)
            }
        default:
            for i in 0..<n {
                let a = i >= bpp ? row[i - bpp] : 0, c = i >= bpp ? up[i - bpp] : 0
                out[i] = row[i] &- paeth(a, up[i], c)
            }
        }
    }

    /// The Paeth predictor, without branches: pa = |b − c|, pb = |a − c|, pc = |a + b − 2c|
    /// (`magnitude`, not the generic `abs`, which a debug build calls unspecialised).
    @inline(__always) static func paeth(_ a: UInt8, _ b: UInt8, _ c: UInt8) -> UInt8 {
        let ia = Int16(a), ib = Int16(b), ic = Int16(c)
        let pa = (ib - ic).magnitude, pb = (ia - ic).magnitude, pc = (ia + ib - 2 * ic).magnitude
        let bOrC = pb <= pc ? b : c
        return pa <= pb && pa <= pc ? a : bOrC
    }

    /// zlib's strategies for PNG data: `filtered` suits filtered RGB(A) rows, `rle` (matches of
    /// distance one only) is several times faster and suits flat map tiles.
    public enum Strategy: Sendable {
        /// zlib's default strategy, filtered, or run-length only.
        case `default`, filtered, rle

        var zlib: Int32 {
            switch self {
            case .default: Z_DEFAULT_STRATEGY
            case .filtered: Z_FILTERED
            case .rle: Z_RLE
            }
        }
    }

    /// Filtered RGB(A) rows through the installed DEFLATE (libdeflate: one call over the whole
    /// buffer), else zlib. zlib stays for indexed rows, where libdeflate's output was larger and
    /// no faster, and for the other strategies.
    static func deflateRows(_ data: [UInt8], level: Int32, strategy: Strategy) throws -> [UInt8] {
        guard strategy == .default, let fast = TileCodecs.installed.deflate, let out = fast.zlibCompress(data, level) else {
            return try deflate(data, level: level, strategy: strategy)
        }
        return out
    }

    static func deflate(_ data: [UInt8], level: Int32, strategy: Strategy = .default) throws -> [UInt8] {
        var stream = z_stream()
        var rc = deflateInit2_(&stream, level, Z_DEFLATED, MAX_WBITS, 8, strategy.zlib, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size))
        guard rc == Z_OK else { throw Error.zlib(rc) }
        defer { deflateEnd(&stream) }
        var out = [UInt8](repeating: 0, count: Int(deflateBound(&stream, uLong(data.count))))
        let produced: Int = try data.withUnsafeBufferPointer { src in
            try out.withUnsafeMutableBufferPointer { dst in
                stream.next_in = UnsafeMutablePointer(mutating: src.baseAddress)
                stream.avail_in = uInt(src.count)
                stream.next_out = dst.baseAddress
                stream.avail_out = uInt(dst.count)
                rc = CZlib.deflate(&stream, Z_FINISH)
                guard rc == Z_STREAM_END else { throw Error.zlib(rc) }
                return Int(stream.total_out)
            }
        }
        out.removeSubrange(produced...)
        return out
    }
}
