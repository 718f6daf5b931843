import Foundation
import OutpostTiles

/// Tiles that arrive in the generator's order, kept in a file beside the output until a package
/// writes them in its own order (PMTiles by tile id, a `.vtpk` bundle by bundle). Identical tiles
/// are stored once; memory holds 24 bytes a tile.
final class TileSpool {
    /// A tile's place in the spool.
    struct Entry {
        var offset: UInt64
        var length: UInt32
        var row: UInt32
        var col: UInt32
        var level: UInt8

        var key: TileKey { TileKey(level: Int(level), row: Int(row), col: Int(col)) }
    }

    let url: URL
    private let handle: FileHandle
    private var size: UInt64 = 0
    private var contents: [ContentPrint: (offset: UInt64, length: UInt32)] = [:]
    /// The tiles added, in the order they came.
    private(set) var entries: [Entry] = []
    /// Distinct contents stored.
    var distinctTiles: Int { contents.count }

    /// A spool named after `output` (with `.tiles` added) in its folder.
    /// - Throws: ``VectorTileError`` `io` when the file cannot be made.
    init(beside output: URL) throws {
        url = output.deletingLastPathComponent().appendingPathComponent(output.lastPathComponent + ".tiles")
        guard FileManager.default.createFile(atPath: url.path, contents: nil), let handle = FileHandle(forUpdatingAtPath: url.path) else {
            throw VectorTileError(.io, "cannot create \(url.path)")
        }
        self.handle = handle
    }

    deinit {
        try? handle.close()
        try? FileManager.default.removeItem(at: url)
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

    /// Removes the spool's file once its tiles are written (the entries stay).
    func discard() {
        try? handle.truncate(atOffset: 0)
        try? FileManager.default.removeItem(at: url)
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
