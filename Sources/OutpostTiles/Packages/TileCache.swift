import Foundation
import OutpostCore

/// A tile cache on disk, read offline: a `.tpkx` tile package (bundles read in place inside the
/// stored ZIP), an exploded Compact Cache V2 folder (`conf.xml`) or an MBTiles file. Loadable: `load()` reads the
/// metadata; tiles are then read by random access, any number of threads at once.
public final class TileCache: Loadable, Sendable {
    /// The cache's file or folder.
    public let fileURL: URL
    private let loader: LoadableSupport
    private let state = Locked<State>(State())

    private struct State {
        var info: TileCacheInfo?
        var layout: Layout?
        /// Open bundles by path (at most `maxOpenBundles`; each keeps its 128 KB index).
        var bundles: [String: BundleReader] = [:]
    }

    private enum Layout: Sendable {
        /// A stored ZIP with its bundles under a folder (`tile/`; `p12/tile/` in a `.vtpk`).
        case package(StoredZipReader, tileFolder: String)
        case exploded(URL)
        case mbtiles(MBTilesReader)
    }

    private static let maxOpenBundles = 64

    /// A cache at `fileURL`, not read until loaded.
    public init(fileURL: URL) {
        self.fileURL = fileURL
        let box = StateBox()
        loader = LoadableSupport { try box.cache?.open() }
        box.cache = self
    }

    /// Lets the loader reach the cache without a retain cycle.
    private final class StateBox: @unchecked Sendable {
        weak var cache: TileCache?
    }

    // MARK: Loadable

    public var loadStatus: LoadStatus { loader.loadStatus }
    public var loadStatusUpdates: AsyncStream<LoadStatus> { loader.loadStatusUpdates }
    public var loadError: (any Error)? { loader.loadError }
    public func load() async throws { try await loader.load() }
    public func retryLoad() async throws { try await loader.retryLoad() }
    public func cancelLoad() { loader.cancelLoad() }

    /// The cache's metadata (nil until loaded).
    public var info: TileCacheInfo? { state.withLock { $0.info } }

    /// Reads the cache's metadata and finds its layout: what `load()` does, on the caller's
    /// thread (internal for the tile-package fuzz target, whose input must not outlive it in a
    /// loadable's task).
    func open() throws {
        let name = fileURL.deletingPathExtension().lastPathComponent
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: fileURL.path, isDirectory: &isDirectory) else {
            throw TileCacheError(.io, "no such file or folder", file: fileURL.path)
        }
        if isDirectory.boolValue {
            let conf = fileURL.appendingPathComponent("conf.xml")
            guard let text = try? String(contentsOf: conf, encoding: .utf8) else {
                throw TileCacheError(.unsupported, "a folder without conf.xml is not an exploded tile cache", file: fileURL.path)
            }
            let cdi = try? String(contentsOf: fileURL.appendingPathComponent("conf.cdi"), encoding: .utf8)
            var info = try TileCacheInfo.fromConfXML(text, cdi: cdi, name: name, file: conf.path)
            // The levels actually present are the level folders.
            let folders = (try? FileManager.default.contentsOfDirectory(atPath: fileURL.appendingPathComponent("_alllayers").path)) ?? []
            let levels = folders.compactMap { $0.hasPrefix("L") ? Int($0.dropFirst()) : nil }.sorted()
            if let first = levels.first, let last = levels.last {
                info.minLevel = first
                info.maxLevel = last
            }
            let finished = info
            state.withLock {
                $0.info = finished
                $0.layout = .exploded(fileURL.appendingPathComponent("_alllayers"))
            }
            return
        }
        let file = try RandomAccessFile(url: fileURL)
        let magic = try file.read(at: 0, count: min(16, Int(file.size)))
        if magic == Array("SQLite format 3\0".utf8) {
            let reader = try MBTilesReader(url: fileURL)
            state.withLock {
                $0.info = reader.info
                $0.layout = .mbtiles(reader)
            }
            return
        }
        guard magic.prefix(4) == [0x50, 0x4B, 3, 4] else {
            throw TileCacheError(.unsupported, "not a tile package (.tpkx) or an exploded cache folder", file: fileURL.path)
        }
        let zip = try StoredZipReader(file: file)
        if try zip.dataRange(of: "root.json") == nil, let root = try zip.read("p12/root.json") {
            // A vector tile package: gzipped Mapbox Vector Tiles in the bundles.
            let info = try TileCacheInfo.fromRootJSON(root, name: name, file: fileURL.path)
            state.withLock {
                $0.info = info
                $0.layout = .package(zip, tileFolder: "p12/tile/")
            }
            return
        }
        guard let root = try zip.read("root.json") else {
            if zip.entries.keys.contains(where: { $0.hasSuffix("conf.xml") }) {
                throw TileCacheError(.unsupported, "a .tpk (Compact Cache V1 package); only .tpkx is read", file: fileURL.path)
            }
            throw TileCacheError(.corrupt, "the package has no root.json", file: fileURL.path)
        }
        let info = try TileCacheInfo.fromRootJSON(root, name: name, file: fileURL.path)
        state.withLock {
            $0.info = info
            $0.layout = .package(zip, tileFolder: "tile/")
        }
    }

    /// The tile's bytes (as the source encoded them), nil when the cache has no such tile.
    /// - Throws: ``TileCacheError`` naming the file and tile when a bundle is damaged.
    public func tile(level: Int, row: Int, col: Int) throws -> [UInt8]? {
        let key = TileKey(level: level, row: row, col: col)
        if case .mbtiles(let reader) = state.withLock({ $0.layout }) {
            guard level >= 0, level < 31, row >= 0, col >= 0, row < 1 << level else { return nil }
            return try reader.tile(key)
        }
        guard let bundle = try bundle(for: key) else { return nil }
        return try bundle.tile(row: row, col: col, key: key)
    }

    /// The tile at `key`, nil when the cache has none there.
    public func tile(_ key: TileKey) throws -> [UInt8]? { try tile(level: key.level, row: key.row, col: key.col) }

    /// A file inside a package (a `.tpkx` or `.vtpk`; `p12/resources/styles/root.json`, say), nil
    /// when it has none of that name or the cache is not a package.
    public func resource(named name: String) throws -> [UInt8]? {
        guard case .package(let zip, _) = state.withLock({ $0.layout }) else { return nil }
        return try zip.read(name)
    }

    /// Whether the cache is a vector tile package (gzipped Mapbox Vector Tiles under `p12/tile/`).
    public var isVectorTilePackage: Bool {
        if case .package(_, let folder) = state.withLock({ $0.layout }) { return folder == "p12/tile/" }
        return false
    }

    private func bundle(for key: TileKey) throws -> BundleReader? {
        guard let layout = state.withLock({ $0.layout }) else {
            throw TileCacheError(.io, "the tile cache is not loaded; call load() first", file: fileURL.path)
        }
        guard key.level >= 0, key.row >= 0, key.col >= 0 else { return nil }
        let path = "\(CompactBundle.levelFolder(key.level))/\(CompactBundle.fileName(row: key.row, col: key.col))"
        if let open = state.withLock({ $0.bundles[path] }) { return open }
        let origin = TileKey(level: key.level, row: key.row - key.row % CompactBundle.packetSize, col: key.col - key.col % CompactBundle.packetSize)
        let reader: BundleReader
        switch layout {
        case .package(let zip, let folder):
            guard let (offset, size) = try zip.dataRange(of: folder + path) else { return nil }
            reader = try BundleReader(source: zip.file, start: offset, length: size, name: "\(fileURL.lastPathComponent)/\(folder)\(path)", origin: origin)
        case .mbtiles:
            return nil
        case .exploded(let root):
            let url = root.appendingPathComponent(path)
            guard FileManager.default.fileExists(atPath: url.path) else { return nil }
            let file = try RandomAccessFile(url: url)
            reader = try BundleReader(source: file, start: 0, length: file.size, name: url.path, origin: origin)
        }
        state.withLock {
            if $0.bundles.count >= Self.maxOpenBundles { $0.bundles.removeAll() }
            $0.bundles[path] = reader
        }
        return reader
    }

    /// Per level: tiles present, distinct stored tiles, and bytes of bundles.
    public struct LevelSummary: Hashable, Sendable, Codable {
        /// The level.
        public var level: Int
        /// Tiles present.
        public var tiles: Int
        /// Distinct tile images stored (identical tiles are stored once).
        public var distinctTiles: Int
        /// Bundles of the level.
        public var bundles: Int
        /// Bytes the level's bundles take.
        public var bytes: Int64
    }

    /// A bundle with damaged tiles: which one, the first damaged tile's error, and how many are damaged.
    public struct BundleDamage: Sendable {
        /// The bundle's path (inside the package for a `.tpkx`).
        public var bundle: String
        /// The first damaged tile, with the bundle, the tile and what is wrong.
        public var error: TileCacheError
        /// How many of the bundle's tiles are damaged.
        public var damagedTiles: Int
    }

    /// What ``inspect(verifyingTiles:)`` finds: per level counts and the damaged bundles.
    public struct Inspection: Sendable {
        /// Counts per level.
        public var levels: [LevelSummary]
        /// The bundles with damaged tiles.
        public var damage: [BundleDamage]
    }

    /// Reads every bundle's index (not the tiles): what `outpost tiles inspect` prints.
    public func summary() throws -> [LevelSummary] { try inspect(verifyingTiles: false).levels }

    /// How many tiles the cache holds: an MBTiles file counts its rows without reading tiles.
    public func tileCount() throws -> Int {
        if case .mbtiles(let reader) = state.withLock({ $0.layout }) { return try reader.tileCount() }
        return try summary().reduce(0) { $0 + $1.tiles }
    }

    /// Reads every bundle's index and, when `verifyingTiles`, checks that each index entry lies
    /// inside its bundle and agrees with the size written before the tile's bytes (four bytes a
    /// stored tile; the tiles themselves are not read). An MBTiles file gets SQLite's
    /// `quick_check` instead.
    /// - Throws: ``TileCacheError`` when a bundle cannot be read at all (a damaged header or
    ///   package directory).
    public func inspect(verifyingTiles: Bool = true) throws -> Inspection {
        guard let layout = state.withLock({ $0.layout }) else {
            throw TileCacheError(.io, "the tile cache is not loaded; call load() first", file: fileURL.path)
        }
        var levels: [Int: LevelSummary] = [:]
        var damage: [BundleDamage] = []
        func add(level: Int, _ reader: BundleReader) throws {
            let (tiles, distinct) = reader.counts
            var s = levels[level] ?? LevelSummary(level: level, tiles: 0, distinctTiles: 0, bundles: 0, bytes: 0)
            s.tiles += tiles
            s.distinctTiles += distinct
            s.bundles += 1
            s.bytes += reader.length
            levels[level] = s
            if verifyingTiles, let (error, count) = try reader.damage() {
                damage.append(BundleDamage(bundle: reader.name, error: error, damagedTiles: count))
            }
        }
        switch layout {
        case .mbtiles(let reader):
            if verifyingTiles, let problem = try reader.integrityProblem() {
                damage.append(BundleDamage(bundle: fileURL.path, error: TileCacheError(.corrupt, problem, file: fileURL.path), damagedTiles: 0))
            }
            return Inspection(levels: try reader.summary(), damage: damage)
        case .package(let zip, let folder):
            for name in zip.entries.keys.sorted() where name.hasPrefix(folder + "L") && name.hasSuffix(".bundle") {
                let parts = name.dropFirst(folder.count).split(separator: "/")
                guard parts.count == 2, let level = Int(parts[0].dropFirst()), let (offset, size) = try zip.dataRange(of: name) else { continue }
                try add(
                    level: level,
                    try BundleReader(
                        source: zip.file, start: offset, length: size, name: "\(fileURL.lastPathComponent)/\(name)", origin: BundleReader.origin(ofPath: name)))
            }
        case .exploded(let root):
            let folders = (try? FileManager.default.contentsOfDirectory(atPath: root.path)) ?? []
            for folder in folders.sorted() {
                guard folder.hasPrefix("L"), let level = Int(folder.dropFirst()) else { continue }
                let files = (try? FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent(folder).path)) ?? []
                for name in files.sorted() where name.hasSuffix(".bundle") {
                    let file = try RandomAccessFile(url: root.appendingPathComponent(folder).appendingPathComponent(name))
                    try add(
                        level: level,
                        try BundleReader(source: file, start: 0, length: file.size, name: file.url.path, origin: BundleReader.origin(ofPath: "\(folder)/\(name)")))
                }
            }
        }
        return Inspection(levels: levels.values.sorted { $0.level < $1.level }, damage: damage)
    }
}
