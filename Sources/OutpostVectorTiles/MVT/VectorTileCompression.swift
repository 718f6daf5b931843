import CZlib

/// Gzip of tile bytes, as MBTiles (`format` `pbf`), `.vtpk` bundles and most servers store and
/// send vector tiles; through the system zlib.
public enum VectorTileCompression {
    /// Whether bytes start with the gzip magic.
    public static func isGzipped(_ bytes: [UInt8]) -> Bool { bytes.count >= 2 && bytes[0] == 0x1F && bytes[1] == 0x8B }

    /// `bytes` gzipped (zlib level 6 unless told).
    public static func gzip(_ bytes: [UInt8], level: Int32 = 6) -> [UInt8] {
        GzipCompressor(level: level).gzip(bytes)
    }

    /// Tile bytes as stored (gzipped or not) made plain, at most `limit` bytes out.
    /// - Throws: ``VectorTileError`` `corrupt` for damaged gzip or a tile past the limit.
    public static func plain(_ bytes: [UInt8], limit: Int = 64 << 20) throws -> [UInt8] {
        guard isGzipped(bytes) else { return bytes }
        var stream = z_stream()
        guard inflateInit2_(&stream, MAX_WBITS + 16, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
            throw VectorTileError(.corrupt, "zlib could not start")
        }
        defer { inflateEnd(&stream) }
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        var input = bytes
        try input.withUnsafeMutableBufferPointer { inp in
            stream.next_in = inp.baseAddress
            stream.avail_in = uInt(inp.count)
            while true {
                let (rc, produced) = chunk.withUnsafeMutableBufferPointer { c -> (Int32, Int) in
                    stream.next_out = c.baseAddress
                    stream.avail_out = uInt(c.count)
                    let rc = inflate(&stream, Z_NO_FLUSH)
                    return (rc, c.count - Int(stream.avail_out))
                }
                out.append(contentsOf: chunk[..<produced])
                guard out.count <= limit else { throw VectorTileError(.corrupt, "a tile inflates past \(limit) bytes") }
                if rc == Z_STREAM_END { return }
                guard rc == Z_OK, produced > 0 || stream.avail_in > 0 else { throw VectorTileError(.corrupt, "damaged gzip in a tile (zlib \(rc))") }
            }
        }
        return out
    }
}

/// A gzip compressor kept for many small inputs: zlib's state (some 260 KB) is set up once and
/// reset between tiles, which for tiles of a few hundred bytes costs more than compressing them.
/// Not for use from two threads at once.
final class GzipCompressor {
    private var stream = z_stream()

    init(level: Int32 = 6) {
        // 15 window bits + 16: a gzip wrapper.
        guard deflateInit2_(&stream, level, Z_DEFLATED, MAX_WBITS + 16, 8, Z_DEFAULT_STRATEGY, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
            preconditionFailure("zlib could not start (out of memory)")
        }
    }

    deinit { deflateEnd(&stream) }

    func gzip(_ bytes: [UInt8]) -> [UInt8] {
        deflateReset(&stream)
        var out = [UInt8](repeating: 0, count: Int(deflateBound(&stream, uLong(bytes.count))) + 32)
        var input = bytes
        let written = input.withUnsafeMutableBufferPointer { inp in
            out.withUnsafeMutableBufferPointer { outp -> Int in
                stream.next_in = inp.baseAddress
                stream.avail_in = uInt(inp.count)
                stream.next_out = outp.baseAddress
                stream.avail_out = uInt(outp.count)
                let rc = deflate(&stream, Z_FINISH)
                precondition(rc == Z_STREAM_END, "deflateBound was too small")
                return outp.count - Int(stream.avail_out)
            }
        }
        out.removeSubrange(written...)
        return out
    }
}
