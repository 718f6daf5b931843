import Foundation

/// Tiles made on request and kept on disk per version of the data they were made from:
/// `<directory>/<prefix><version>/<z>/<y>/<x>.<ext>`. A tile is written beside its name and
/// renamed into place, so a reader never sees half of one; the first tile kept for a version
/// removes the folders of every other version, so the cache holds one version's tiles at most.
/// An empty file says "no tile here" (a vector tile with nothing in it).
///
/// ```swift
/// let cache = VersionedTiles(directory: dir, prefix: "g", fileExtension: "png")
/// if let kept = cache.kept(key, version: 7) { return kept }
/// cache.keep(drawn, for: key, version: 7)
/// ```
public struct VersionedTiles: Sendable {
    /// The folder that holds one folder per version.
    public let directory: URL
    /// What each version's folder name starts with (then the version's number).
    public let prefix: String
    /// The tile files' extension.
    public let fileExtension: String

    /// A cache in `directory`.
    public init(directory: URL, prefix: String, fileExtension: String) {
        self.directory = directory
        self.prefix = prefix
        self.fileExtension = fileExtension
    }

    /// The folder of `version`'s tiles.
    public func folder(_ version: Int64) -> URL { directory.appendingPathComponent("\(prefix)\(version)") }

    /// Where `key`'s tile of `version` is kept.
    public func file(_ key: TileKey, version: Int64) -> URL {
        folder(version).appendingPathComponent("\(key.level)/\(key.row)/\(key.col).\(fileExtension)")
    }

    /// The bytes kept for `key` at `version`, or nil when none are (an empty array: kept as no tile).
    public func kept(_ key: TileKey, version: Int64) -> [UInt8]? {
        FileManager.default.contents(atPath: file(key, version: version).path).map { [UInt8]($0) }
    }

    /// Keeps `bytes` as `key`'s tile of `version`. A cache that cannot be written is not an
    /// error: the tile was made and is answered; the next request makes it again.
    public func keep(_ bytes: [UInt8], for key: TileKey, version: Int64) {
        let fm = FileManager.default
        let folder = folder(version)
        if !fm.fileExists(atPath: folder.path) { removeVersions(except: version) }
        let target = file(key, version: version)
        try? fm.createDirectory(at: target.deletingLastPathComponent(), withIntermediateDirectories: true)
        let temporary = target.appendingPathExtension("\(UUID().uuidString.prefix(8)).partial")
        guard fm.createFile(atPath: temporary.path, contents: Data(bytes)) else { return }
        if rename(temporary.path, target.path) != 0 { try? fm.removeItem(at: temporary) }
    }

    /// The versions with a folder here.
    public func versions() -> [Int64] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return names.compactMap { $0.hasPrefix(prefix) ? Int64($0.dropFirst(prefix.count)) : nil }.sorted()
    }

    /// Removes every version's folder but `version`'s (only folders named prefix and number:
    /// anything else in the directory is left alone).
    public func removeVersions(except version: Int64) {
        for old in versions() where old != version { try? FileManager.default.removeItem(at: folder(old)) }
    }
}
