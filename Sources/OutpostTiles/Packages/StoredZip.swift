import Foundation

/// ZIP archives whose entries are STORED (not deflated), as tile packages must be: readers seek
/// straight into a bundle inside the package.
///
/// Written here rather than through ZIPFoundation because a bundle's header and index are only
/// known once its last tile is in: the writer appends an entry's bytes, then patches them and the
/// local header in place (CRC-32 combined from the parts with zlib's `crc32_combine`), so each
/// tile is written once; and the reader needs an entry's data offset for random access, which
/// ZIPFoundation keeps internal. ZIP64 records are written when offsets pass 4 GiB.
final class StoredZipWriter {
    struct Entry {
        var name: String
        var headerOffset: Int64
        var size: Int64
        var crc: UInt32
        var isDirectory: Bool
    }

    let file: OutputFile
    private(set) var entries: [Entry] = []
    private var open: (name: String, headerOffset: Int64, dataStart: Int64)?

    /// The entry being written, if any.
    var openEntry: (name: String, headerOffset: Int64, dataStart: Int64)? { open }

    /// Reopens an entry begun before a restart (its local header is at `headerOffset`).
    func resumeEntry(_ name: String, headerOffset: Int64, dataStart: Int64) {
        precondition(open == nil, "an entry is already open")
        open = (name, headerOffset, dataStart)
    }

    init(file: OutputFile) { self.file = file }

    /// Continues an archive whose complete entries are `entries` (a resumed export); the file must
    /// have been truncated after the last of them.
    init(file: OutputFile, resuming entries: [Entry]) {
        self.file = file
        self.entries = entries
    }

    /// Starts an entry; its bytes are then appended to ``file``. Returns where its data starts.
    @discardableResult
    func beginEntry(_ name: String) throws -> Int64 {
        precondition(open == nil, "an entry is already open")
        let headerOffset = file.position
        try file.append(Self.localHeader(name: name, crc: 0, size: 0))
        open = (name, headerOffset, file.position)
        return file.position
    }

    /// Ends the open entry with the CRC-32 of its bytes.
    func endEntry(crc: UInt32) throws {
        guard let current = open else { preconditionFailure("no entry is open") }
        let size = file.position - current.dataStart
        guard size <= 0xFFFF_FFFE else {
            throw TileCacheError(.io, "\(current.name) is \(size) bytes; a package entry must stay under 4 GiB", file: file.url.path)
        }
        try file.write(Self.localHeader(name: current.name, crc: crc, size: size), at: current.headerOffset)
        entries.append(Entry(name: current.name, headerOffset: current.headerOffset, size: size, crc: crc, isDirectory: false))
        open = nil
    }

    func addEntry(_ name: String, bytes: [UInt8]) throws {
        try beginEntry(name)
        try file.append(bytes)
        var crc = ZlibCRC()
        bytes.withUnsafeBytes { crc.update($0) }
        try endEntry(crc: crc.value)
    }

    func addDirectory(_ name: String) throws {
        let path = name.hasSuffix("/") ? name : name + "/"
        let offset = file.position
        try file.append(Self.localHeader(name: path, crc: 0, size: 0))
        entries.append(Entry(name: path, headerOffset: offset, size: 0, crc: 0, isDirectory: true))
    }

    /// Writes the central directory and the end records.
    func finish() throws {
        precondition(open == nil, "an entry is still open")
        let directoryStart = file.position
        for e in entries {
            var out = ByteOut()
            let zip64 = e.headerOffset >= 0xFFFF_FFFF
            out.u32(0x0201_4B50)
            out.u16(zip64 ? 0x032D : 0x0314)  // made by: Unix, spec 4.5 or 2.0
            out.u16(zip64 ? 45 : 20)
            out.u16(0x0800)  // UTF-8 names
            out.u16(0)  // stored
            out.u16(0)
            out.u16(0x21)  // 1980-01-01: fixed, so the same export gives the same bytes
            out.u32(e.crc)
            out.u32(UInt32(e.size))
            out.u32(UInt32(e.size))
            let name = Array(e.name.utf8)
            out.u16(UInt16(name.count))
            out.u16(zip64 ? 12 : 0)
            out.u16(0)
            out.u16(0)
            out.u16(0)
            out.u32(e.isDirectory ? (0o40755 << 16) | 0x10 : 0o100644 << 16)
            out.u32(zip64 ? 0xFFFF_FFFF : UInt32(e.headerOffset))
            out.bytes.append(contentsOf: name)
            if zip64 {
                out.u16(0x0001)
                out.u16(8)
                out.u64(UInt64(e.headerOffset))
            }
            try file.append(out.bytes)
        }
        let directoryEnd = file.position
        let directorySize = directoryEnd - directoryStart
        let needs64 = directoryStart >= 0xFFFF_FFFF || entries.count >= 0xFFFF || directorySize >= 0xFFFF_FFFF
        var end = ByteOut()
        if needs64 {
            end.u32(0x0606_4B50)
            end.u64(44)
            end.u16(0x032D)
            end.u16(45)
            end.u32(0)
            end.u32(0)
            end.u64(UInt64(entries.count))
            end.u64(UInt64(entries.count))
            end.u64(UInt64(directorySize))
            end.u64(UInt64(directoryStart))
            end.u32(0x0706_4B50)
            end.u32(0)
            end.u64(UInt64(directoryEnd))
            end.u32(1)
        }
        end.u32(0x0605_4B50)
        end.u16(0)
        end.u16(0)
        end.u16(UInt16(min(entries.count, 0xFFFF)))
        end.u16(UInt16(min(entries.count, 0xFFFF)))
        end.u32(UInt32(min(directorySize, 0xFFFF_FFFF)))
        end.u32(UInt32(min(directoryStart, 0xFFFF_FFFF)))
        end.u16(0)
        try file.append(end.bytes)
    }

    static func localHeader(name: String, crc: UInt32, size: Int64) -> [UInt8] {
        var out = ByteOut()
        out.u32(0x0403_4B50)
        out.u16(20)
        out.u16(0x0800)
        out.u16(0)
        out.u16(0)
        out.u16(0x21)
        out.u32(crc)
        out.u32(UInt32(size))
        out.u32(UInt32(size))
        let name = Array(name.utf8)
        out.u16(UInt16(name.count))
        out.u16(0)
        out.bytes.append(contentsOf: name)
        return out.bytes
    }
}

struct ByteOut {
    var bytes: [UInt8] = []
    mutating func u16(_ v: UInt16) { withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) } }
    mutating func u32(_ v: UInt32) { withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) } }
    mutating func u64(_ v: UInt64) { withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) } }
}

/// The entries of a ZIP archive, for reading stored ones at their offsets.
struct StoredZipReader: Sendable {
    struct Entry: Sendable {
        var name: String
        var method: UInt16
        var size: Int64
        var compressedSize: Int64
        var headerOffset: Int64
    }

    let file: RandomAccessFile
    let entries: [String: Entry]

    init(file: RandomAccessFile) throws {
        self.file = file
        let name = file.url.lastPathComponent
        func corrupt(_ message: String) -> TileCacheError { TileCacheError(.corrupt, "not a readable ZIP archive: \(message)", file: name) }
        let tailLength = Int(min(file.size, 65_557))
        guard tailLength >= 22 else { throw corrupt("\(file.size) bytes is too short") }
        let tail = try file.read(at: file.size - Int64(tailLength), count: tailLength)
        func u16(_ b: [UInt8], _ at: Int) -> Int { Int(b[at]) | Int(b[at + 1]) << 8 }
        func u32(_ b: [UInt8], _ at: Int) -> Int64 { Int64(u16(b, at)) | Int64(u16(b, at + 2)) << 16 }
        func u64(_ b: [UInt8], _ at: Int) -> Int64 { u32(b, at) | u32(b, at + 4) << 32 }
        guard let eocd = stride(from: tailLength - 22, through: 0, by: -1).first(where: { u32(tail, $0) == 0x0605_4B50 }) else {
            throw corrupt("no end of central directory (truncated?)")
        }
        var count = Int64(u16(tail, eocd + 10)), directorySize = u32(tail, eocd + 12), directoryStart = u32(tail, eocd + 16)
        if directoryStart == 0xFFFF_FFFF || count == 0xFFFF || directorySize == 0xFFFF_FFFF {
            guard eocd >= 20, u32(tail, eocd - 20) == 0x0706_4B50 else { throw corrupt("a ZIP64 archive without its locator") }
            let record = try file.read(at: u64(tail, eocd - 12), count: 56)
            guard u32(record, 0) == 0x0606_4B50 else { throw corrupt("the ZIP64 end record is missing") }
            count = u64(record, 32)
            directorySize = u64(record, 40)
            directoryStart = u64(record, 48)
        }
        guard directoryStart >= 0, directorySize >= 0, directoryStart + directorySize <= file.size, directorySize <= 256 << 20 else {
            throw corrupt("the central directory (\(directorySize) bytes at \(directoryStart)) lies outside the file")
        }
        let directory = try file.read(at: directoryStart, count: Int(directorySize))
        var entries: [String: Entry] = [:]
        var at = 0
        for _ in 0..<count {
            guard at + 46 <= directory.count, u32(directory, at) == 0x0201_4B50 else { throw corrupt("a damaged central directory entry") }
            let nameLength = u16(directory, at + 28), extraLength = u16(directory, at + 30), commentLength = u16(directory, at + 32)
            guard at + 46 + nameLength + extraLength + commentLength <= directory.count else { throw corrupt("a central directory entry runs past its end") }
            var entry = Entry(
                name: String(decoding: directory[(at + 46)..<(at + 46 + nameLength)], as: UTF8.self), method: UInt16(u16(directory, at + 10)),
                size: u32(directory, at + 24), compressedSize: u32(directory, at + 20), headerOffset: u32(directory, at + 42))
            // ZIP64 extra field: the values that overflowed, in this order.
            var extra = at + 46 + nameLength
            let extraEnd = extra + extraLength
            while extra + 4 <= extraEnd {
                let id = u16(directory, extra), length = u16(directory, extra + 2)
                if id == 1 {
                    var field = extra + 4
                    if entry.size == 0xFFFF_FFFF, field + 8 <= extraEnd { entry.size = u64(directory, field); field += 8 }
                    if entry.compressedSize == 0xFFFF_FFFF, field + 8 <= extraEnd { entry.compressedSize = u64(directory, field); field += 8 }
                    if entry.headerOffset == 0xFFFF_FFFF, field + 8 <= extraEnd { entry.headerOffset = u64(directory, field) }
                }
                extra += 4 + length
            }
            entries[entry.name] = entry
            at += 46 + nameLength + extraLength + commentLength
        }
        self.entries = entries
    }

    /// Where a stored entry's bytes start, and how many there are.
    func dataRange(of name: String) throws -> (offset: Int64, size: Int64)? {
        guard let entry = entries[name] else { return nil }
        guard entry.method == 0 else {
            throw TileCacheError(
                .unsupported, "\(name) is compressed in the package (method \(entry.method)); tile packages must store entries uncompressed",
                file: file.url.lastPathComponent)
        }
        let header = try file.read(at: entry.headerOffset, count: 30, name: file.url.lastPathComponent)
        guard header[0] == 0x50, header[1] == 0x4B, header[2] == 3, header[3] == 4 else {
            throw TileCacheError(.corrupt, "the local header of \(name) is damaged", file: file.url.lastPathComponent)
        }
        let nameLength = Int64(header[26]) | Int64(header[27]) << 8, extraLength = Int64(header[28]) | Int64(header[29]) << 8
        let offset = entry.headerOffset + 30 + nameLength + extraLength
        guard offset + entry.size <= file.size else {
            throw TileCacheError(.corrupt, "\(name) runs past the end of the package (truncated)", file: file.url.lastPathComponent)
        }
        return (offset, entry.size)
    }

    func read(_ name: String) throws -> [UInt8]? {
        guard let (offset, size) = try dataRange(of: name) else { return nil }
        guard size <= 64 << 20 else { throw TileCacheError(.corrupt, "\(name) is \(size) bytes, too large to read whole", file: file.url.lastPathComponent) }
        return try file.read(at: offset, count: Int(size), name: file.url.lastPathComponent)
    }
}
