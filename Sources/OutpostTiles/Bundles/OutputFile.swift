import CZlib
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A file written mostly by appending (through a 1 MB buffer), with positioned writes for the
/// headers and indexes fixed up at the end.
final class OutputFile {
    let url: URL
    private let fd: Int32
    private var buffer: [UInt8] = []
    /// Bytes already in the file (the buffer goes after them).
    private var flushed: Int64
    private static let bufferSize = 1 << 20

    /// Opens `url` for writing; `truncateAt` keeps that many bytes of an existing file (resume),
    /// nil starts an empty file.
    init(url: URL, truncateAt: Int64? = nil) throws {
        self.url = url
        let fd = open(url.path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw TileCacheError(.io, "cannot open for writing: \(String(cString: strerror(errno)))", file: url.path) }
        self.fd = fd
        let keep = truncateAt ?? 0
        guard ftruncate(fd, off_t(keep)) == 0 else {
            close(fd)
            throw TileCacheError(.io, "cannot truncate: \(String(cString: strerror(errno)))", file: url.path)
        }
        flushed = keep
        buffer.reserveCapacity(Self.bufferSize)
    }

    deinit { close(fd) }

    /// The offset the next appended byte gets.
    var position: Int64 { flushed + Int64(buffer.count) }

    func append(_ bytes: UnsafeRawBufferPointer) throws {
        if buffer.count + bytes.count > Self.bufferSize { try flush() }
        if bytes.count >= Self.bufferSize {
            try write(bytes, at: flushed)
            flushed += Int64(bytes.count)
        } else {
            buffer.append(contentsOf: bytes)
        }
    }

    func append(_ bytes: [UInt8]) throws { try bytes.withUnsafeBytes { try append($0) } }

    /// Writes at an offset already written (flushing what is buffered first).
    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws {
        if offset + Int64(bytes.count) > flushed { try flush() }
        var done = 0
        while done < bytes.count {
            let n = pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done))
            guard n > 0 else { throw TileCacheError(.io, "write failed: \(String(cString: strerror(errno)))", file: url.path) }
            done += n
        }
    }

    func write(_ bytes: [UInt8], at offset: Int64) throws { try bytes.withUnsafeBytes { try write($0, at: offset) } }

    func flush() throws {
        guard !buffer.isEmpty else { return }
        let start = flushed
        flushed += Int64(buffer.count)
        try buffer.withUnsafeBytes { try write($0, at: start) }
        buffer.removeAll(keepingCapacity: true)
    }

    /// Flushes and makes the bytes durable.
    func sync() throws {
        try flush()
        guard fsync(fd) == 0 else { throw TileCacheError(.io, "fsync failed: \(String(cString: strerror(errno)))", file: url.path) }
    }
}

/// zlib's CRC-32 (the ZIP and PNG checksum), incremental and combinable.
struct ZlibCRC {
    private(set) var value: UInt32 = 0

    mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        value = UInt32(crc32_z(UInt(value), base.assumingMemoryBound(to: UInt8.self), bytes.count))
    }

    /// The CRC of `a` followed by `b`, from their CRCs and `b`'s length.
    static func combine(_ a: UInt32, _ b: UInt32, lengthOfB: Int64) -> UInt32 {
        UInt32(crc32_combine(UInt(a), UInt(b), Int(lengthOfB)))
    }
}
