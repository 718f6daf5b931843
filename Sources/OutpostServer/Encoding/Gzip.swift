import CDeflate
import NIOCore

/// Gzip of a whole answer held in memory (a feed page, a batch result, a query's JSON) through
/// libdeflate, at zlib's default level 6. A 325 KB page of 1,000 feed changes took zlib ~7.1 ms
/// (about a third of the server's work for the page) for 74.5 KB; libdeflate takes ~3.9 ms for
/// 70 KB (a field link pays for every byte, so the level stays); `outpost-bench codec`, on a
/// 1.7 MB batch: zlib 15.7 ms for 211 KB, libdeflate 7.5 ms for 191 KB. Streamed answers, whose
/// chunks are compressed as they are written, stay with zlib's streaming API.
enum Gzip {
    static let level: Int32 = 6
    /// For binary change pages: their values (global ids, doubles, geometry coordinates) leave
    /// little for the higher levels' longer searches. A page of 1,000 changes (190 KB) came to
    /// 76.0 KB in 0.84 ms at level 1 and to 77.9 KB in 1.81 ms at level 6; its JSON (330 KB),
    /// text that the longer searches do shorten, to 80.2 KB at 1 and 71.6 KB at 6.
    static let binaryLevel: Int32 = 1

    /// `buffer` gzipped; nil when libdeflate cannot (the caller sends it as it is).
    static func compress(_ buffer: ByteBuffer, level: Int32 = level) -> ByteBuffer? {
        guard let compressor = libdeflate_alloc_compressor(level) else { return nil }
        defer { libdeflate_free_compressor(compressor) }
        return buffer.withUnsafeReadableBytes { input -> ByteBuffer? in
            let bound = libdeflate_gzip_compress_bound(compressor, input.count)
            var out = ByteBufferAllocator().buffer(capacity: bound)
            let written = out.writeWithUnsafeMutableBytes(minimumWritableBytes: bound) { output in
                libdeflate_gzip_compress(compressor, input.baseAddress, input.count, output.baseAddress, output.count)
            }
            return written > 0 ? out : nil
        }
    }
}
