import Foundation
import OutpostTiles

/// Tiles that arrive in the generator's order, kept in a file beside the output until a package
/// writes them in its own order (PMTiles by tile id, a `.vtpk` bundle by bundle). Identical tiles
/// are stored once; memory holds 24 bytes a tile.
///
/// A durable spool (an export job's) also keeps an index file of its tiles and survives the
/// process: ``makeDurable()`` flushes both files and says how far they are whole, and
/// ``init(resuming:size:count:)`` reopens them there after a pause or a kill.
final class TileSpool {
    /// A tile's place in the spool.
    struct Entry {
        var offset: UInt64
        var length: UInt32
        var row: UInt32
        var col: UInt32
        var level: UInt8

        var key: TileKey { TileKey(level: Int(level), row: Int(row), col: Int(col)) }

        static let size = 24

        func append(to out: inout [UInt8]) {
            withUnsafeBytes(of: offset.littleEndian) { out += $0 }
            withUnsafeBytes(of: length.littleEndian) { out += $0 }
            withUnsafeBytes(of: row.littleEndian) { out += $0 }
            withUnsafeBytes(of: col.littleEndian) { out += $0 }
            out += [level, 0, 0, 0]
        }

        init(offset: UInt64, length: UInt32, row: UInt32, col: UInt32, level: UInt8) {
            (self.offset, self.length, self.row, self.col, self.level) = (offset, length, row, col, level)
        }

        init(_ bytes: ArraySlice<UInt8>) {
            func u(_ at: Int, _ n: Int) -> UInt64 { (0..<n).reduce(0) { $0 | UInt64(bytes[bytes.startIndex + at + $1]) << (8 * UInt64($1)) } }
            self.init(offset: u(0, 8), length: UInt32(u(8, 4)), row: UInt32(u(12, 4)), col: UInt32(u(16, 4)), level: UInt8(u(20, 1)))
        }
    }

    let url: URL
    /// The index file of a durable spool.
    let indexURL: URL?
    private let handle: FileHandle
    private let index: FileHandle?
    private var size: UInt64 = 0
    private var contents: [ContentPrint: (offset: UInt64, length: UInt32)] = [:]
    /// The tiles added, in the order they came.
    private(set) var entries: [Entry] = []
    /// Entries written to the index file so far.
    private var indexed = 0
    /// Distinct contents stored.
    var distinctTiles: Int { contents.count }
    /// Bytes of the stored contents.
    var storedBytes: UInt64 { size }

    static func spoolURL(beside output: URL) -> URL { output.deletingLastPathComponent().appendingPathComponent(output.lastPathComponent + ".tiles") }
    static func indexURL(beside output: URL) -> URL { output.deletingLastPathComponent().appendingPathComponent(output.lastPathComponent + ".tiles-index") }

    /// A new spool named after `output` (with `.tiles` added) in its folder; `durable` also keeps
    /// an index (`.tiles-index`) and leaves both files when dropped.
    /// - Throws: ``VectorTileError`` `io` when the files cannot be made.
    init(beside output: URL, durable: Bool = false) throws {
        url = Self.spoolURL(beside: output)
        handle = try Self.create(url)
        if durable {
            let indexURL = Self.indexURL(beside: output)
            self.indexURL = indexURL
            index = try Self.create(indexURL)
        } else {
            indexURL = nil
            index = nil
        }
    }

    /// Reopens the durable spool of `output` as a ``makeDurable()`` left it: `size` bytes of
    /// contents and `count` tiles; whatever was written after is cut off.
    /// - Throws: ``VectorTileError`` `io` or `corrupt` when the files are missing or shorter.
    init(resuming output: URL, size: UInt64, count: Int) throws {
        url = Self.spoolURL(beside: output)
        let indexURL = Self.indexURL(beside: output)
        self.indexURL = indexURL
        guard let handle = FileHandle(forUpdatingAtPath: url.path), let index = FileHandle(forUpdatingAtPath: indexURL.path) else {
            throw VectorTileError(.io, "the export's spool \(url.lastPathComponent) or its index is gone; start the export again")
        }
        self.handle = handle
        self.index = index
        do {
            guard try handle.seekToEnd() >= size, try index.seekToEnd() >= UInt64(count * Entry.size) else {
                throw VectorTileError(.corrupt, "the export's spool \(url.lastPathComponent) is shorter than its checkpoint")
            }
            try handle.truncate(atOffset: size)
            try index.truncate(atOffset: UInt64(count * Entry.size))
            try index.seek(toOffset: 0)
            let bytes = [UInt8](try index.read(upToCount: count * Entry.size) ?? Data())
            guard bytes.count == count * Entry.size else { throw VectorTileError(.corrupt, "the export's spool index is short") }
            entries.reserveCapacity(count)
            for i in 0..<count { entries.append(Entry(bytes[(i * Entry.size)..<((i + 1) * Entry.size)])) }
            indexed = count
            self.size = size
            // Identical tiles still arriving are stored once: the stored contents, hashed again.
            var seen = Set<UInt64>()
            for e in entries where seen.insert(e.offset).inserted {
                guard e.offset + UInt64(e.length) <= size else { throw VectorTileError(.corrupt, "the export's spool index points past its contents") }
                let data = try read(offset: e.offset, length: e.length)
                contents[data.withUnsafeBytes { ContentPrint($0) }] = (e.offset, e.length)
            }
            try handle.seekToEnd()
        } catch let error as VectorTileError {
            throw error
        } catch {
            throw VectorTileError(.io, "cannot reopen \(url.lastPathComponent): \(error.localizedDescription)")
        }
    }

    private static func create(_ url: URL) throws -> FileHandle {
        guard FileManager.default.createFile(atPath: url.path, contents: nil), let handle = FileHandle(forUpdatingAtPath: url.path) else {
            throw VectorTileError(.io, "cannot create \(url.path)")
        }
        return handle
    }

    deinit {
        try? handle.close()
        try? index?.close()
        if indexURL == nil { try? FileManager.default.removeItem(at: url) }
    }

    /// Adds a tile; empty tiles are left out.
    func add(_ key: TileKey, data: [UInt8]) throws {
        guard !data.isEmpty, let length = UInt32(exactly: data.count), key.level >= 0, key.level < 32, key.row >= 0, key.col >= 0 else { return }
        let print = data.withUnsafeBytes { ContentPrint($0) }
        let offset: UInt64
        if let known = contents[print] {
            offset = known.offset
        } else {
            do {
                // A read may have moved the file's position.
                try handle.seek(toOffset: size)
                try handle.write(contentsOf: data)
            } catch {
                throw VectorTileError(.io, "cannot write \(url.lastPathComponent): \(error.localizedDescription)")
            }
            contents[print] = (size, length)
            offset = size
            size += UInt64(length)
        }
        entries.append(Entry(offset: offset, length: length, row: UInt32(key.row), col: UInt32(key.col), level: UInt8(key.level)))
    }

    /// Writes the index of the tiles added since the last call and flushes both files to disk;
    /// returns how far they are whole (for ``init(resuming:size:count:)``).
    func makeDurable() throws -> (size: UInt64, count: Int) {
        guard let index else { return (size, entries.count) }
        do {
            var bytes: [UInt8] = []
            bytes.reserveCapacity((entries.count - indexed) * Entry.size)
            for e in entries[indexed...] { e.append(to: &bytes) }
            try index.seekToEnd()
            try index.write(contentsOf: bytes)
            indexed = entries.count
            try handle.synchronize()
            try index.synchronize()
        } catch {
            throw VectorTileError(.io, "cannot make \(url.lastPathComponent) durable: \(error.localizedDescription)")
        }
        return (size, entries.count)
    }

    /// Removes the spool's files once its tiles are written (the entries stay).
    func discard() {
        try? handle.truncate(atOffset: 0)
        try? FileManager.default.removeItem(at: url)
        if let indexURL { try? FileManager.default.removeItem(at: indexURL) }
    }

    /// Puts the entries in `order`.
    func sort(by order: (Entry, Entry) -> Bool) { entries.sort(by: order) }

    /// The bytes of a stored content.
    func read(offset: UInt64, length: UInt32) throws -> Data {
        do {
            try handle.seek(toOffset: offset)
            guard let data = try handle.read(upToCount: Int(length)), data.count == Int(length) else {
                throw VectorTileError(.io, "the spool \(url.lastPathComponent) ended early")
            }
            return data
        } catch let error as VectorTileError {
            throw error
        } catch {
            throw VectorTileError(.io, "cannot read \(url.lastPathComponent): \(error.localizedDescription)")
        }
    }
}
