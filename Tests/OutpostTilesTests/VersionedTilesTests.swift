import Foundation
import OutpostTestSupport
import OutpostTiles
import Testing

@Suite struct VersionedTilesTests {
    @Test func aVersionsFirstTileRemovesTheOlderVersionsAndNothingElse() throws {
        let dir = TemporaryDirectory("outpost-versioned-tiles")
        let cache = VersionedTiles(directory: dir.url, prefix: "g", fileExtension: "png")
        let a = TileKey(level: 3, row: 2, col: 5), b = TileKey(level: 4, row: 0, col: 9)
        #expect(cache.kept(a, version: 1) == nil)
        cache.keep([1, 2, 3], for: a, version: 1)
        cache.keep([], for: b, version: 1)
        #expect(cache.kept(a, version: 1) == [1, 2, 3] && cache.kept(b, version: 1) == [])
        #expect(cache.kept(a, version: 2) == nil)
        // Something else in the directory (another cache's folder, a file named like a version).
        try FileManager.default.createDirectory(at: dir.file("vector/v1"), withIntermediateDirectories: true)
        try Data([9]).write(to: dir.file("gallery"))

        cache.keep([4], for: b, version: 2)
        #expect(cache.versions() == [2])
        #expect(cache.kept(a, version: 1) == nil && cache.kept(b, version: 2) == [4])
        #expect(FileManager.default.fileExists(atPath: dir.file("vector/v1").path) && FileManager.default.fileExists(atPath: dir.file("gallery").path))
        // Written beside and renamed: nothing partial is left.
        let left = FileManager.default.enumerator(atPath: dir.url.path)?.compactMap { $0 as? String }.filter { $0.hasSuffix(".partial") } ?? []
        #expect(left.isEmpty, "\(left)")
    }

    @Test func aCacheThatCannotBeWrittenStillAnswers() {
        // The directory is a file: nothing is kept, nothing is thrown.
        let dir = TemporaryDirectory("outpost-versioned-tiles")
        #expect(FileManager.default.createFile(atPath: dir.file("blocked").path, contents: Data([0])))
        let cache = VersionedTiles(directory: dir.file("blocked"), prefix: "v", fileExtension: "pbf.gz")
        cache.keep([1], for: TileKey(level: 0, row: 0, col: 0), version: 7)
        #expect(cache.kept(TileKey(level: 0, row: 0, col: 0), version: 7) == nil && cache.versions().isEmpty)
    }
}
