import CDeflate
import OutpostTiles

/// PNG's DEFLATE through libdeflate (whole buffers): inflate measured at about twice zlib's
/// streaming inflate on tiles.
enum Libdeflate {
    static let codec = TileCodecs.Deflate(inflate: inflate, zlibCompress: zlibCompress)

    static func inflate(_ source: UnsafeRawBufferPointer, into destination: UnsafeMutableRawBufferPointer) -> Int? {
        guard let decompressor = libdeflate_alloc_decompressor() else { return nil }
        defer { libdeflate_free_decompressor(decompressor) }
        var produced = 0
        let result = libdeflate_deflate_decompress(decompressor, source.baseAddress, source.count, destination.baseAddress, destination.count, &produced)
        return result == LIBDEFLATE_SUCCESS ? produced : nil
    }

    /// The libdeflate level that stands for zlib `level`: one up in the middle range, where
    /// libdeflate's level n leaves filtered rows larger than zlib's. Measured by
    /// `outpost-bench png` at zlib 6: libdeflate 6 was 1.06–1.23× the speed of zlib alone on the
    /// raw pixels but 5–11% larger than zlib's PNG; libdeflate 7 is 0.91× and 1–2% smaller on
    /// map tiles (4% larger on noisy imagery); 8 is half the speed for nothing more.
    static func libdeflateLevel(_ level: Int32) -> Int32 { level < 6 ? level : min(level + 1, 9) }

    static func zlibCompress(_ data: [UInt8], level: Int32) -> [UInt8]? {
        guard (1...12).contains(level), let compressor = libdeflate_alloc_compressor(libdeflateLevel(level)) else { return nil }
        defer { libdeflate_free_compressor(compressor) }
        let bound = libdeflate_zlib_compress_bound(compressor, data.count)
        let out = [UInt8](unsafeUninitializedCapacity: bound) { buffer, n in
            n = data.withUnsafeBufferPointer { libdeflate_zlib_compress(compressor, $0.baseAddress, $0.count, buffer.baseAddress, bound) }
        }
        return out.isEmpty ? nil : out
    }
}
