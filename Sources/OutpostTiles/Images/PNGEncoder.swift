import CZlib
import Foundation

/// PNG writing over the system zlib: 8-bit RGBA (colour type 6) or RGB (2), each row filtered
/// with the filter whose output has the smallest sum of absolute values (the libpng heuristic),
/// IDAT deflated at a chosen level (6 by default; 9 is ten times slower for a few per cent).
public enum PNGEncoder {
    public enum Error: Swift.Error, CustomStringConvertible {
        case invalidSize(String)
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
    public static func encode(pixels: [UInt8], width: Int, height: Int, channels: Int = 4, level: Int32 = 6) throws -> [UInt8] {
        guard width > 0, height > 0, width <= 1 << 24, height <= 1 << 24, channels == 3 || channels == 4 else {
            throw Error.invalidSize("\(width)×\(height) with \(channels) channels")
        }
        guard pixels.count == width * height * channels else {
            throw Error.invalidSize("\(pixels.count) bytes for \(width)×\(height)×\(channels)")
        }
        let filtered = filter(pixels, width: width, height: height, bpp: channels)
        let compressed = try deflate(filtered, level: level)
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
    public static func encode(indices: [UInt8], palette: [UInt32], width: Int, height: Int, level: Int32 = 6) throws -> [UInt8] {
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
        chunk("IDAT", try deflate(rows, level: level), to: &out)
        chunk("IEND", [], to: &out)
        return out
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
    static func filter(_ pixels: [UInt8], width: Int, height: Int, bpp: Int) -> [UInt8] {
        let stride = width * bpp
        var out = [UInt8](repeating: 0, count: height * (stride + 1))
        var candidate = [UInt8](repeating: 0, count: stride)
        pixels.withUnsafeBufferPointer { px in
            out.withUnsafeMutableBufferPointer { dst in
                candidate.withUnsafeMutableBufferPointer { cand in
                    for y in 0..<height {
                        let row = y * stride
                        let prior = y > 0 ? row - stride : -1
                        var bestFilter: UInt8 = 0
                        var bestCost = Int.max
                        for f in UInt8(0)...4 {
                            var cost = 0
                            for i in 0..<stride {
                                let x = px[row + i]
                                let a = i >= bpp ? px[row + i - bpp] : 0
                                let b = prior >= 0 ? px[prior + i] : 0
                                let c = (i >= bpp && prior >= 0) ? px[prior + i - bpp] : 0
                                let v: UInt8
                                switch f {
                                case 0: v = x
                                case 1: v = x &- a
                                case 2: v = x &- b
                                case 3: v = x &- UInt8((Int(a) + Int(b)) / 2)
                                default: v = x &- paeth(a, b, c)
                                }
                                cand[i] = v
                                cost += v < 128 ? Int(v) : 256 - Int(v)
                                if cost >= bestCost { break }
                            }
                            if cost < bestCost {
                                bestCost = cost
                                bestFilter = f
                                let base = y * (stride + 1)
                                dst[base] = f
                                for i in 0..<stride { dst[base + 1 + i] = cand[i] }
                            }
                        }
                        _ = bestFilter
                    }
                }
            }
        }
        return out
    }

    @inline(__always) static func paeth(_ a: UInt8, _ b: UInt8, _ c: UInt8) -> UInt8 {
        let p = Int(a) + Int(b) - Int(c)
        let pa = abs(p - Int(a)), pb = abs(p - Int(b)), pc = abs(p - Int(c))
        if pa <= pb && pa <= pc { return a }
        return pb <= pc ? b : c
    }

    static func deflate(_ data: [UInt8], level: Int32) throws -> [UInt8] {
        var bound = compressBound(uLong(data.count))
        var out = [UInt8](repeating: 0, count: Int(bound))
        let rc = data.withUnsafeBufferPointer { src in
            out.withUnsafeMutableBufferPointer { dst in
                compress2(dst.baseAddress, &bound, src.baseAddress, uLong(data.count), level)
            }
        }
        guard rc == Z_OK else { throw Error.zlib(rc) }
        out.removeSubrange(Int(bound)...)
        return out
    }
}
