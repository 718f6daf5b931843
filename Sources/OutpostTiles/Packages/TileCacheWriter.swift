import Foundation
import OutpostCore

/// Writes a tile cache, streaming: tiles arrive in bundle order (the order
/// ``TileRange/inBundleOrder(packetSize:)`` gives) and each bundle is finished before the next
/// begins, so memory holds one bundle's index and tile hashes, never a level.
///
/// - `.tilePackage`: a `.tpkx` (stored ZIP with `iteminfo.json`, `root.json`, `tile/Lnn/*.bundle`);
/// - `.exploded`: a folder with `conf.xml`, `conf.cdi` and `_alllayers/Lnn/*.bundle`;
/// - `.mbtiles`: an MBTiles file (TMS rows, identical tiles stored once).
///
/// With a journal folder, ``checkpoint()`` makes everything written so far durable and returns a
/// small JSON state from which ``init(resuming:format:at:info:journal:tileFolder:)`` continues after a kill:
/// tiles already on disk are neither fetched nor written again.
public final class TileCacheWriter {
    /// What the writer makes.
    public enum Format: String, Sendable, Codable {
        /// A `.tpkx` tile package; an exploded Compact Cache folder; an MBTiles file.
        case tilePackage, exploded, mbtiles

        /// The format an output path asks for: `.tpkx`, `.mbtiles`, anything else a folder.
        public init(path: String) {
            let lower = path.lowercased()
            self = lower.hasSuffix(".tpkx") ? .tilePackage : lower.hasSuffix(".mbtiles") ? .mbtiles : .exploded
        }
    }

    /// What is written.
    public let format: Format
    /// Where it is written.
    public let url: URL
    /// The tiling scheme and levels written.
    public let info: TileCacheInfo
    let journalURL: URL?
    /// The folder of the package's bundles inside its ZIP (`tile/` in a `.tpkx`).
    public let tileFolder: String
    private var zip: StoredZipWriter?
    private var mbtiles: MBTilesWriter?
    private var current: Current?
    private var finishedBundles = Set<String>()
    private var levelFolders = Set<Int>()
    /// Tiles written so far.
    public private(set) var tilesWritten = 0
    /// Tiles that reused identical bytes stored already.
    public private(set) var sharedTiles = 0
    /// Bundles finished so far.
    public private(set) var bundlesWritten = 0

    private struct Current {
        var level: Int
        var row0: Int
        var col0: Int
        var writer: BundleWriter
        var file: OutputFile
        var journal: OutputFile?
        var sharedBefore: Int
    }

    /// Starts a new cache of `format` at `url`, with a journal folder when it is to be resumable.
    public init(format: Format, at url: URL, info: TileCacheInfo, journal: URL? = nil) throws {
        self.format = format
        self.url = url
        self.info = info
        self.journalURL = journal
        self.tileFolder = "tile/"
        switch format {
        case .tilePackage:
            let zip = StoredZipWriter(file: try OutputFile(url: url))
            try zip.addEntry("iteminfo.json", bytes: info.itemInfoJSON(id: info.derivedItemID))
            try zip.addEntry("root.json", bytes: info.rootJSON())
            try zip.addDirectory("tile/")
            self.zip = zip
        case .exploded:
            try? FileManager.default.removeItem(at: url)
            try FileManager.default.createDirectory(at: url.appendingPathComponent("_alllayers"), withIntermediateDirectories: true)
            try Data(info.confXML()).write(to: url.appendingPathComponent("conf.xml"))
            try Data(info.confCDI()).write(to: url.appendingPathComponent("conf.cdi"))
        case .mbtiles:
            mbtiles = try MBTilesWriter(at: url, info: info)
        }
    }

    /// Starts a package of another kind that keeps Compact Cache V2 bundles in a stored ZIP (a
    /// vector tile package keeps them under `p12/tile/`): `entries` first, in order, then the
    /// bundles under `tileFolder` (ending in `/`); ``finish(appending:)`` can add entries known
    /// only at the end.
    public init(packageAt url: URL, info: TileCacheInfo, tileFolder: String, entries: [(name: String, bytes: [UInt8])], journal: URL? = nil) throws {
        self.format = .tilePackage
        self.url = url
        self.info = info
        self.journalURL = journal
        self.tileFolder = tileFolder.hasSuffix("/") ? tileFolder : tileFolder + "/"
        let zip = StoredZipWriter(file: try OutputFile(url: url))
        for entry in entries {
            if entry.name.hasSuffix("/") { try zip.addDirectory(entry.name) } else { try zip.addEntry(entry.name, bytes: entry.bytes) }
        }
        try zip.addDirectory(self.tileFolder)
        self.zip = zip
    }

    /// Continues a writer from the state its ``checkpoint()`` returned; whatever reached the files
    /// after that checkpoint is cut off.
    public init(resuming state: JSONValue, format: Format, at url: URL, info: TileCacheInfo, journal: URL, tileFolder: String = "tile/") throws {
        self.format = format
        self.url = url
        self.info = info
        self.journalURL = journal
        self.tileFolder = tileFolder
        func int(_ key: String) -> Int64 { state[key]?.integerValue ?? 0 }
        tilesWritten = Int(int("tiles"))
        sharedTiles = Int(int("shared"))
        bundlesWritten = Int(int("bundles"))
        levelFolders = Set((state["levels"]?.arrayValue ?? []).compactMap { $0.integerValue.map(Int.init) })
        finishedBundles = Set((state["finished"]?.arrayValue ?? []).compactMap(\.stringValue))
        if format == .mbtiles {
            var formats: [TileImageFormat: Int] = [:]
            for (name, count) in state["formats"]?.objectValue ?? [:] {
                if let format = TileImageFormat(rawValue: name), let n = count.integerValue { formats[format] = Int(n) }
            }
            mbtiles = try MBTilesWriter(at: url, info: info, resuming: true, formats: formats)
            return
        }
        let fileLength = int("fileLength")
        var bundleFile: OutputFile?
        if format == .tilePackage {
            let entries = (state["entries"]?.arrayValue ?? []).compactMap { e -> StoredZipWriter.Entry? in
                guard let name = e[0]?.stringValue, let offset = e[1]?.integerValue, let size = e[2]?.integerValue, let crc = e[3]?.integerValue else { return nil }
                return StoredZipWriter.Entry(name: name, headerOffset: offset, size: size, crc: UInt32(crc), isDirectory: e[4]?.boolValue ?? false)
            }
            let file = try OutputFile(url: url, truncateAt: fileLength)
            zip = StoredZipWriter(file: file, resuming: entries)
            for e in entries where e.name.hasPrefix(tileFolder) && e.name.hasSuffix(".bundle") { finishedBundles.insert(String(e.name.dropFirst(tileFolder.count))) }
            bundleFile = file
        }
        guard let bundle = state["bundle"], !bundle.isNull, let level = bundle["level"]?.integerValue, let row0 = bundle["row0"]?.integerValue,
            let col0 = bundle["col0"]?.integerValue, let start = bundle["start"]?.integerValue
        else { return }
        let path = bundlePath(level: Int(level), row0: Int(row0), col0: Int(col0))
        if format == .tilePackage {
            guard let headerOffset = bundle["headerOffset"]?.integerValue else { throw TileCacheError(.corrupt, "the export state names no entry", file: url.path) }
            zip!.resumeEntry(tileFolder + path, headerOffset: headerOffset, dataStart: start)
        } else {
            bundleFile = try OutputFile(url: url.appendingPathComponent("_alllayers").appendingPathComponent(path), truncateAt: fileLength)
        }
        let journalURL = Self.journal(journal, level: Int(level), row0: Int(row0), col0: Int(col0))
        let journalFile = try OutputFile(url: journalURL, truncateAt: int("journalLength"))
        let records = try RandomAccessFile(url: journalURL).read(at: 0, count: Int(int("journalLength")))
        let source = try RandomAccessFile(url: bundleFile!.url)
        let writer = try BundleWriter(resuming: bundleFile!, start: start, journal: journalFile, records: records, source: source)
        current = Current(level: Int(level), row0: Int(row0), col0: Int(col0), writer: writer, file: bundleFile!, journal: journalFile, sharedBefore: writer.sharedTiles)
    }

    /// Adds a tile; tiles of one bundle must come together.
    public func add(_ key: TileKey, data: [UInt8]) throws {
        try data.withUnsafeBytes { try add(key, bytes: $0) }
    }

    /// Adds a tile from bytes borrowed from elsewhere; keys must come in bundle order.
    public func add(_ key: TileKey, bytes: UnsafeRawBufferPointer) throws {
        guard info.levels.contains(key.level) else {
            throw TileCacheError(.invalidArea, "level \(key.level) is outside the cache's levels \(info.minLevel)–\(info.maxLevel)", tile: key)
        }
        if let mbtiles {
            try mbtiles.add(key, bytes: bytes)
            tilesWritten += 1
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

    /// A bundle's journal: one file per bundle in the journal folder, kept until the cache is
    /// finished, so a crash after a new bundle began still finds the one the last checkpoint names.
    static func journal(_ folder: URL, level: Int, row0: Int, col0: Int) -> URL {
        folder.appendingPathComponent("\(CompactBundle.levelFolder(level))-\(CompactBundle.fileName(row: row0, col: col0))")
    }

    private func bundlePath(level: Int, row0: Int, col0: Int) -> String {
        "\(CompactBundle.levelFolder(level))/\(CompactBundle.fileName(row: row0, col: col0))"
    }

    private func beginBundle(level: Int, row0: Int, col0: Int) throws {
        let path = bundlePath(level: level, row0: row0, col0: col0)
        guard !finishedBundles.contains(path) else {
            throw TileCacheError(.io, "tiles of bundle \(path) arrived after it was finished; write tiles in bundle order", tile: TileKey(level: level, row: row0, col: col0))
        }
        let journal = try journalURL.map { folder in
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            return try OutputFile(url: Self.journal(folder, level: level, row0: row0, col0: col0), truncateAt: 0)
        }
        switch format {
        case .tilePackage:
            let zip = zip!
            if levelFolders.insert(level).inserted { try zip.addDirectory("\(tileFolder)\(CompactBundle.levelFolder(level))/") }
            try zip.beginEntry(tileFolder + path)
            current = Current(level: level, row0: row0, col0: col0, writer: try BundleWriter(file: zip.file, journal: journal), file: zip.file, journal: journal, sharedBefore: 0)
        case .exploded, .mbtiles:
            let folder = url.appendingPathComponent("_alllayers").appendingPathComponent(CompactBundle.levelFolder(level))
            if levelFolders.insert(level).inserted { try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true) }
            let file = try OutputFile(url: folder.appendingPathComponent(CompactBundle.fileName(row: row0, col: col0)))
            current = Current(level: level, row0: row0, col0: col0, writer: try BundleWriter(file: file, journal: journal), file: file, journal: journal, sharedBefore: 0)
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

    /// Makes every tile added so far durable and returns the state to resume from.
    public func checkpoint() throws -> JSONValue {
        var state: [String: JSONValue] = [
            "tiles": .integer(Int64(tilesWritten)), "shared": .integer(Int64(sharedTiles)), "bundles": .integer(Int64(bundlesWritten)),
            "levels": .array(levelFolders.sorted().map { .integer(Int64($0)) }),
        ]
        if let mbtiles {
            try mbtiles.commit()
            // Shared tiles so far are counted in the state; the writer counts anew after a resume.
            state["shared"] = .integer(Int64(sharedTiles + mbtiles.sharedTiles))
            state["formats"] = .object(Dictionary(uniqueKeysWithValues: mbtiles.formats.map { ($0.key.rawValue, JSONValue.integer(Int64($0.value))) }))
            return .object(state)
        }
        if format == .exploded { state["finished"] = .array(finishedBundles.sorted().map { .string($0) }) }
        if let c = current {
            try c.file.sync()
            try c.journal?.sync()
            state["fileLength"] = .integer(c.file.position)
            state["journalLength"] = .integer(c.journal?.position ?? 0)
            var bundle: [String: JSONValue] = [
                "level": .integer(Int64(c.level)), "row0": .integer(Int64(c.row0)), "col0": .integer(Int64(c.col0)), "start": .integer(c.writer.start),
            ]
            if let open = zip?.openEntry { bundle["headerOffset"] = .integer(open.headerOffset) }
            state["bundle"] = .object(bundle)
        } else if let zip {
            try zip.file.sync()
            state["fileLength"] = .integer(zip.file.position)
        }
        if let zip {
            state["entries"] = .array(zip.entries.map {
                [.string($0.name), .integer($0.headerOffset), .integer($0.size), .integer(Int64($0.crc)), .bool($0.isDirectory)]
            })
        }
        return .object(state)
    }

    /// Finishes the last bundle and the package (`entries` after the bundles, a package's only),
    /// and makes everything durable.
    public func finish(appending entries: [(name: String, bytes: [UInt8])] = []) throws {
        if let mbtiles {
            try mbtiles.finish()
            sharedTiles += mbtiles.sharedTiles
            return
        }
        try finishBundle()
        if let zip {
            for entry in entries {
                if entry.name.hasSuffix("/") { try zip.addDirectory(entry.name) } else { try zip.addEntry(entry.name, bytes: entry.bytes) }
            }
            try zip.finish()
            try zip.file.sync()
        }
        if let journalURL { try? FileManager.default.removeItem(at: journalURL) }
    }
}
