import Foundation
import OutpostCore

/// Esri Compact Cache V2 bundles: a 64-byte header, an index of 128 × 128 little-endian u64
/// entries (`offset | size << 40`, row-major), then the tiles, each after a u32 copy of its size.
/// Tile bytes are stored as the source encoded them.
public enum CompactBundle {
    /// Rows and columns of tiles in a bundle (128).
    public static let packetSize = 128
    /// Bytes of the bundle header (64).
    public static let headerSize = 64
    /// Bytes of the tile index: 8 for each of the bundle's 128 × 128 tiles.
    public static let indexSize = packetSize * packetSize * 8
    /// Header and index: where the first tile's size prefix goes.
    public static let fixedSize = headerSize + indexSize
    static let maxTileSize = (1 << 24) - 1

    /// `R<rrrr>C<cccc>.bundle`: the bundle's top-left tile, lower-case hex, at least 4 digits.
    public static func fileName(row: Int, col: Int) -> String {
        let r0 = row - row % packetSize, c0 = col - col % packetSize
        return "R\(hex4(r0))C\(hex4(c0)).bundle"
    }

    /// `L<nn>`: the level, two decimal digits.
    public static func levelFolder(_ level: Int) -> String { level < 10 ? "L0\(level)" : "L\(level)" }

    private static func hex4(_ v: Int) -> String {
        let s = String(v, radix: 16)
        return s.count >= 4 ? s : String(repeating: "0", count: 4 - s.count) + s
    }

    /// The header as the white paper writes it (what Vundler and MapProxy write too).
    static func header(maxTileSize: Int, fileSize: Int64) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(headerSize)
        func u32(_ v: Int) { withUnsafeBytes(of: UInt32(truncatingIfNeeded: v).littleEndian) { out.append(contentsOf: $0) } }
        func u64(_ v: Int64) { withUnsafeBytes(of: UInt64(bitPattern: v).littleEndian) { out.append(contentsOf: $0) } }
        u32(3)  // version
        u32(packetSize * packetSize)  // record count
        u32(maxTileSize)
        u32(5)  // offset byte count
        u64(0)  // slack space
        u64(fileSize)
        u64(40)  // user header offset
        u32(20 + indexSize)  // user header size
        u32(3)
        u32(16)
        u32(packetSize * packetSize)
        u32(5)  // the legacy V1 index header
        u32(indexSize)
        return out
    }
}

/// Writes one bundle into an ``OutputFile`` from its current position: a file of its own, or an
/// entry of a stored ZIP. Tiles are appended in any order; identical tiles are stored once and
/// their index entries share the offset. Only the index and one hash per distinct tile are held.
///
/// With a journal, every tile's index entry and hashes are also appended there (32 bytes), so a
/// writer killed mid-bundle can be rebuilt from the bytes that reached the disk
/// (``init(resuming:start:journal:records:)``) instead of fetching the bundle's tiles again.
final class BundleWriter {
    let file: OutputFile
    /// Where the bundle starts in the file.
    let start: Int64
    private let journal: OutputFile?
    private var index = [UInt64](repeating: 0, count: CompactBundle.packetSize * CompactBundle.packetSize)
    private var maxTileSize = 0
    /// Distinct tiles by content: two independent 64-bit hashes and the size.
    private var stored: [TileFingerprint: Int64] = [:]
    private var tileCRC = ZlibCRC()
    private(set) var tileCount = 0
    private(set) var sharedTiles = 0

    struct TileFingerprint: Hashable {
        var a: UInt64
        var b: UInt64
        var size: Int

        init(a: UInt64, b: UInt64, size: Int) {
            self.a = a
            self.b = b
            self.size = size
        }

        init(_ data: UnsafeRawBufferPointer) {
            self.init(a: FastHash.hash64(data), b: FastHash.hash64(data, seed: 0x1357_9BDF_2468_ACE0), size: data.count)
        }
    }

    static let journalRecordSize = 32

    init(file: OutputFile, journal: OutputFile? = nil) throws {
        self.file = file
        self.journal = journal
        self.start = file.position
        try file.append([UInt8](repeating: 0, count: CompactBundle.fixedSize))
    }

    /// Rebuilds a writer from its journal records and the tile bytes already in `file` (which
    /// must end where the last journaled tile ends).
    init(resuming file: OutputFile, start: Int64, journal: OutputFile, records: [UInt8], source: RandomAccessFile) throws {
        self.file = file
        self.journal = journal
        self.start = start
        var at = 0
        while at + Self.journalRecordSize <= records.count {
            let r = records.withUnsafeBytes { raw in
                (slot: Int(UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: at, as: UInt32.self))),
                 size: Int(UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: at + 4, as: UInt32.self))),
                 offset: Int64(UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: at + 8, as: UInt64.self))),
                 a: UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: at + 16, as: UInt64.self)),
                 b: UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: at + 24, as: UInt64.self)))
            }
            at += Self.journalRecordSize
            guard r.slot < index.count else { throw TileCacheError(.corrupt, "a damaged export journal", file: journal.url.path) }
            if index[r.slot] == 0 { tileCount += 1 }
            let print = TileFingerprint(a: r.a, b: r.b, size: r.size)
            if stored[print] == nil { stored[print] = r.offset } else { sharedTiles += 1 }
            index[r.slot] = UInt64(r.offset) | UInt64(r.size) << 40
            maxTileSize = max(maxTileSize, r.size)
        }
        // The CRC of the tile bytes written so far, read back in 1 MB pieces.
        var position = start + Int64(CompactBundle.fixedSize)
        let end = file.position
        while position < end {
            let chunk = try source.read(at: position, count: Int(min(1 << 20, end - position)))
            chunk.withUnsafeBytes { tileCRC.update($0) }
            position += Int64(chunk.count)
        }
    }

    /// Adds a tile at its (row, col) inside the bundle (the key's row and col modulo 128).
    func add(row: Int, col: Int, data: UnsafeRawBufferPointer, key: TileKey? = nil) throws {
        guard data.count > 0 else { return }
        guard data.count <= CompactBundle.maxTileSize else {
            throw TileCacheError(.source, "a tile of \(data.count) bytes is larger than a bundle entry holds (16 MB)", file: file.url.lastPathComponent, tile: key)
        }
        let slot = (row % CompactBundle.packetSize) * CompactBundle.packetSize + col % CompactBundle.packetSize
        let print = TileFingerprint(data)
        if index[slot] == 0 { tileCount += 1 }
        let offset: Int64
        if let existing = stored[print] {
            offset = existing
            sharedTiles += 1
        } else {
            var prefix = UInt32(data.count).littleEndian
            let before = file.position
            try withUnsafeBytes(of: &prefix) { p in
                try file.append(p)
                tileCRC.update(p)
            }
            try file.append(data)
            tileCRC.update(data)
            offset = before + 4 - start
            stored[print] = offset
            maxTileSize = max(maxTileSize, data.count)
        }
        index[slot] = UInt64(offset) | UInt64(data.count) << 40
        if let journal {
            var record = ByteOut()
            record.u32(UInt32(slot))
            record.u32(UInt32(data.count))
            record.u64(UInt64(offset))
            record.u64(print.a)
            record.u64(print.b)
            try journal.append(record.bytes)
        }
    }

    /// Writes the header and index; returns the bundle's size and CRC-32 (for a ZIP entry).
    func finish() throws -> (size: Int64, crc: UInt32) {
        let size = file.position - start
        var head = CompactBundle.header(maxTileSize: maxTileSize, fileSize: size)
        head.reserveCapacity(CompactBundle.fixedSize)
        for entry in index { withUnsafeBytes(of: entry.littleEndian) { head.append(contentsOf: $0) } }
        try file.write(head, at: start)
        var headCRC = ZlibCRC()
        head.withUnsafeBytes { headCRC.update($0) }
        let crc = ZlibCRC.combine(headCRC.value, tileCRC.value, lengthOfB: size - Int64(CompactBundle.fixedSize))
        return (size, crc)
    }
}

/// Reads tiles from one bundle, wherever it sits (a file, or a stored ZIP entry at an offset).
/// The header is checked as GDAL checks it, so both header variants seen in real ArcGIS bundles
/// read; index entries of size 0 are absent tiles (whatever their offset); dead space between
/// tiles is ignored. A tile is read only when its index entry lies inside the bundle and the size
/// written before its bytes agrees with the index: a truncated or zero-filled copy (a copy to a
/// memory card that was interrupted) is a ``TileCacheError/Code/corrupt`` error naming the tile.
struct BundleReader: Sendable {
    let source: RandomAccessFile
    /// Where the bundle starts in the file, and its length.
    let start: Int64
    let length: Int64
    let name: String
    /// The level and the top-left tile of the bundle, when known: errors then name the tile.
    let origin: TileKey?
    private let index: [UInt64]

    init(source: RandomAccessFile, start: Int64, length: Int64, name: String, origin: TileKey? = nil) throws {
        self.source = source
        self.start = start
        self.length = length
        self.name = name
        self.origin = origin
        guard length >= Int64(CompactBundle.fixedSize) else {
            throw TileCacheError(.corrupt, "a bundle of \(length) bytes is shorter than its header and index (131,136 bytes)", file: name)
        }
        let head = try source.read(at: start, count: CompactBundle.fixedSize, name: name)
        func u32(_ at: Int) -> UInt32 { head.withUnsafeBytes { UInt32(littleEndian: $0.loadUnaligned(fromByteOffset: at, as: UInt32.self)) } }
        guard u32(0) == 3, u32(12) == 5, u32(32) == 40, u32(36) == 0, u32(60) == UInt32(CompactBundle.indexSize) else {
            if u32(0) == 3 && u32(4) == 16384 && u32(32) == 40 && u32(36) == 16 {
                throw TileCacheError(.unsupported, "a Compact Cache V1 bundle (index in a .bundlx file); only V2 is read", file: name)
            }
            throw TileCacheError(.corrupt, "not a Compact Cache V2 bundle (header version \(u32(0)), index size \(u32(60)))", file: name)
        }
        index = head.withUnsafeBytes { raw in
            (0..<(CompactBundle.packetSize * CompactBundle.packetSize)).map {
                UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: CompactBundle.headerSize + 8 * $0, as: UInt64.self))
            }
        }
    }

    /// The bundle's top-left tile from its path (`…/L05/R0080C0100.bundle`), nil for other names.
    static func origin(ofPath path: String) -> TileKey? {
        let parts = path.split(separator: "/")
        guard parts.count >= 2, let level = Int(parts[parts.count - 2].dropFirst()), parts[parts.count - 2].first == "L" else { return nil }
        let file = parts[parts.count - 1]
        guard file.hasPrefix("R"), file.hasSuffix(".bundle"), let c = file.firstIndex(of: "C") else { return nil }
        guard let row = Int(file[file.index(after: file.startIndex)..<c], radix: 16),
            let col = Int(file[file.index(after: c)..<file.index(file.endIndex, offsetBy: -7)], radix: 16)
        else { return nil }
        return TileKey(level: level, row: row, col: col)
    }

    /// The (offset, size) an index slot names, nil for an absent tile.
    func entry(row: Int, col: Int) -> (offset: Int64, size: Int)? {
        entry(slot: (row % CompactBundle.packetSize) * CompactBundle.packetSize + col % CompactBundle.packetSize)
    }

    private func entry(slot: Int) -> (offset: Int64, size: Int)? {
        let v = index[slot]
        let size = Int(v >> 40)
        guard size > 0 else { return nil }
        return (Int64(v & 0xFF_FFFF_FFFF), size)
    }

    private func key(slot: Int) -> TileKey? {
        origin.map { TileKey(level: $0.level, row: $0.row + slot / CompactBundle.packetSize, col: $0.col + slot % CompactBundle.packetSize) }
    }

    /// Reads a tile's size prefix and bytes, checking them against its index entry.
    private func read(offset: Int64, size: Int, key: TileKey?, bytes: Bool) throws -> [UInt8] {
        func damaged(_ why: String) -> TileCacheError { TileCacheError(.corrupt, "damaged tile: \(why)", file: name, tile: key) }
        guard offset >= Int64(CompactBundle.fixedSize + 4), offset + Int64(size) <= length else {
            throw damaged("the index points at bytes \(offset)..<\(offset + Int64(size)) of a \(length)-byte bundle (truncated?)")
        }
        guard start + offset + Int64(size) <= source.size else {
            throw damaged("the bundle's bytes end at \(source.size - start) of its \(length) (truncated?)")
        }
        let read = try source.read(at: start + offset - 4, count: bytes ? size + 4 : 4, name: name)
        let prefix = Int(read[0]) | Int(read[1]) << 8 | Int(read[2]) << 16 | Int(read[3]) << 24
        guard prefix == size else {
            throw damaged("the size before the tile's bytes is \(prefix), the index says \(size) (overwritten or zero-filled)")
        }
        return bytes ? Array(read[4...]) : []
    }

    /// The tile's bytes, nil when absent.
    /// - Throws: ``TileCacheError/Code/corrupt`` naming the bundle and tile when it is damaged.
    func tile(row: Int, col: Int, key: TileKey? = nil) throws -> [UInt8]? {
        guard let (offset, size) = entry(row: row, col: col) else { return nil }
        return try read(offset: offset, size: size, key: key, bytes: true)
    }

    /// Checks every stored tile's index entry and size prefix (not its bytes): the first damaged
    /// tile's error and how many tiles are damaged, nil when the bundle is whole.
    func damage() throws -> (first: TileCacheError, tiles: Int)? {
        var first: TileCacheError?
        var damaged = 0
        var checked: [Int64: Bool] = [:]
        for slot in index.indices {
            guard let (offset, size) = entry(slot: slot) else { continue }
            // Shared tiles point at one stored copy: checked once.
            let whole: Bool
            if let known = checked[offset] {
                whole = known
            } else {
                do {
                    _ = try read(offset: offset, size: size, key: key(slot: slot), bytes: false)
                    whole = true
                } catch let error as TileCacheError where error.code == .corrupt {
                    first = first ?? error
                    whole = false
                }
                checked[offset] = whole
            }
            if !whole { damaged += 1 }
        }
        return first.map { ($0, damaged) }
    }

    /// Present tiles (index slots with a size), and how many distinct stored blobs they use.
    var counts: (tiles: Int, distinct: Int) {
        var offsets = Set<UInt64>()
        var tiles = 0
        for v in index where v >> 40 > 0 {
            tiles += 1
            offsets.insert(v & 0xFF_FFFF_FFFF)
        }
        return (tiles, offsets.count)
    }
}

/// A file read at offsets (pread), shared by readers on any thread.
final class RandomAccessFile: Sendable {
    let url: URL
    private let fd: Int32
    let size: Int64

    init(url: URL) throws {
        self.url = url
        let fd = open(url.path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw TileCacheError(.io, "cannot open: \(String(cString: strerror(errno)))", file: url.path) }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            close(fd)
            throw TileCacheError(.io, "cannot stat: \(String(cString: strerror(errno)))", file: url.path)
        }
        self.fd = fd
        self.size = Int64(info.st_size)
    }

    deinit { close(fd) }

    func read(at offset: Int64, count: Int, name: String? = nil) throws -> [UInt8] {
        guard offset >= 0, offset + Int64(count) <= size else {
            throw TileCacheError(.corrupt, "wants bytes \(offset)..<\(offset + Int64(count)) of a \(size)-byte file: truncated", file: name ?? url.lastPathComponent)
        }
        return try [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            var done = 0
            while done < count {
                let n = pread(fd, buffer.baseAddress! + done, count - done, off_t(offset) + off_t(done))
                guard n > 0 else {
                    initialized = done
                    throw TileCacheError(.io, "read failed: \(n == 0 ? "unexpected end of file" : String(cString: strerror(errno)))", file: name ?? url.lastPathComponent)
                }
                done += n
            }
            initialized = count
        }
    }
}
