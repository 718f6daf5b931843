import Foundation
import OutpostCore

/// Writes a tile cache as Compact Cache V2 bundles, streaming: tiles arrive in bundle order (the
/// order ``TileRange/inBundleOrder(packetSize:)`` gives) and each bundle is finished before the
/// next begins, so memory holds one bundle's index and tile hashes, never a level.
///
/// - `.tilePackage`: a `.tpkx` (stored ZIP with `iteminfo.json`, `root.json`, `tile/Lnn/*.bundle`);
/// - `.exploded`: a folder with `conf.xml`, `conf.cdi` and `_alllayers/Lnn/*.bundle`;
/// - `.mbtiles`: an MBTiles file (TMS rows, identical tiles stored once).
public final class TileCacheWriter {
    public enum Format: String, Sendable, Codable {
        case tilePackage, exploded, mbtiles

        /// The format an output path asks for: `.tpkx`, `.mbtiles`, anything else a folder.
        public init(path: String) {
            let lower = path.lowercased()
            self = lower.hasSuffix(".tpkx") ? .tilePackage : lower.hasSuffix(".mbtiles") ? .mbtiles : .exploded
        }
    }

    public let format: Format
    public let url: URL
    public let info: TileCacheInfo
    private var zip: StoredZipWriter?
    private var mbtiles: MBTilesWriter?
    private var current: (level: Int, row0: Int, col0: Int, writer: BundleWriter, file: OutputFile)?
    private var finishedBundles = Set<String>()
    private var levelFolders = Set<Int>()
    public private(set) var tilesWritten = 0
    public private(set) var sharedTiles = 0
    public private(set) var bundlesWritten = 0

    public init(format: Format, at url: URL, info: TileCacheInfo) throws {
        self.format = format
        self.url = url
        self.info = info
        switch format {
        case .tilePackage:
            let zip = StoredZipWriter(file: try OutputFile(url: url))
            try zip.addEntry("iteminfo.json", bytes: info.itemInfoJSON(id: UUID().uuidString))
            try zip.addEntry("root.json", bytes: info.rootJSON())
            try zip.addDirectory("tile/")
            self.zip = zip
        case .exploded:
            try FileManager.default.createDirectory(at: url.appendingPathComponent("_alllayers"), withIntermediateDirectories: true)
            try Data(info.confXML()).write(to: url.appendingPathComponent("conf.xml"))
            try Data(info.confCDI()).write(to: url.appendingPathComponent("conf.cdi"))
        case .mbtiles:
            mbtiles = try MBTilesWriter(at: url, info: info)
        }
    }

    /// Adds a tile; tiles of one bundle must come together.
    public func add(_ key: TileKey, data: [UInt8]) throws {
        try data.withUnsafeBytes { try add(key, bytes: $0) }
    }

    public func add(_ key: TileKey, bytes: UnsafeRawBufferPointer) throws {
        guard info.levels.contains(key.level) else {
            throw TileCacheError(.invalidArea, "level \(key.level) is outside the cache's levels \(info.minLevel)–\(info.maxLevel)", tile: key)
        }
        if let mbtiles {
            try mbtiles.add(key, data: [UInt8](bytes))
            tilesWritten = mbtiles.tilesWritten
            return
        }
        let p = CompactBundle.packetSize
        let row0 = key.row - key.row % p, col0 = key.col - key.col % p
        if let c = current, c.level != key.level || c.row0 != row0 || c.col0 != col0 { try finishBundle() }
        if current == nil { try beginBundle(level: key.level, row0: row0, col0: col0) }
        let writer = current!.writer
        let sharedBefore = writer.sharedTiles
        try writer.add(row: key.row, col: key.col, data: bytes, key: key)
        tilesWritten += 1
        sharedTiles += writer.sharedTiles - sharedBefore
    }

    private func bundlePath(level: Int, row0: Int, col0: Int) -> String {
        "\(CompactBundle.levelFolder(level))/\(CompactBundle.fileName(row: row0, col: col0))"
    }

    private func beginBundle(level: Int, row0: Int, col0: Int) throws {
        let path = bundlePath(level: level, row0: row0, col0: col0)
        guard !finishedBundles.contains(path) else {
            throw TileCacheError(.io, "tiles of bundle \(path) arrived after it was finished; write tiles in bundle order", tile: TileKey(level: level, row: row0, col: col0))
        }
        switch format {
        case .tilePackage:
            let zip = zip!
            if levelFolders.insert(level).inserted { try zip.addDirectory("tile/\(CompactBundle.levelFolder(level))/") }
            try zip.beginEntry("tile/\(path)")
            current = (level, row0, col0, try BundleWriter(file: zip.file), zip.file)
        case .exploded, .mbtiles:
            let folder = url.appendingPathComponent("_alllayers").appendingPathComponent(CompactBundle.levelFolder(level))
            if levelFolders.insert(level).inserted { try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true) }
            let file = try OutputFile(url: folder.appendingPathComponent(CompactBundle.fileName(row: row0, col: col0)))
            current = (level, row0, col0, try BundleWriter(file: file), file)
        }
    }

    private func finishBundle() throws {
        guard let c = current else { return }
        let (_, crc) = try c.writer.finish()
        switch format {
        case .tilePackage: try zip!.endEntry(crc: crc)
        case .exploded, .mbtiles: try c.file.sync()
        }
        finishedBundles.insert(bundlePath(level: c.level, row0: c.row0, col0: c.col0))
        bundlesWritten += 1
        current = nil
    }

    /// Finishes the last bundle and the package, and makes everything durable.
    public func finish() throws {
        if let mbtiles {
            try mbtiles.finish()
            sharedTiles = mbtiles.sharedTiles
            return
        }
        try finishBundle()
        if let zip {
            try zip.finish()
            try zip.file.sync()
        }
    }
}
