import Foundation
import OutpostCore
import OutpostTestSupport
import Testing

@testable import OutpostTiles

/// Caches written once and checked in (`SampleData/golden-tiles`): the writers must reproduce
/// them byte for byte and the readers must keep reading them. Tile bytes are plain text so the
/// files do not depend on the zlib version. Set `OUTPOST_UPDATE_GOLDEN=1` to rewrite them after
/// a deliberate format change (and say why in the commit).
@Suite("Golden tile caches")
struct GoldenTileCacheTests {
    static let folder = Repository.sampleData("golden-tiles")
    static let updating = ProcessInfo.processInfo.environment["OUTPOST_UPDATE_GOLDEN"] == "1"

    /// Text tiles of varied lengths; odd columns share one tile (stored once per bundle).
    static func tile(_ key: TileKey) -> [UInt8] {
        if key.col % 2 == 1 { return Array("outpost golden shared tile\n".utf8) }
        let line = "outpost golden tile level \(key.level) row \(key.row) col \(key.col)\n"
        return Array(String(repeating: line, count: 1 + (key.row * 7 + key.col * 13) % 5).utf8)
    }

    static func write(_ format: TileCacheWriter.Format, to url: URL) throws -> [TileKey] {
        let extent = Envelope(xmin: -20_037_508.342789244, ymin: -20_037_508.342789244, xmax: 20_037_508.342789244, ymax: 20_037_508.342789244)
        let info = TileCacheInfo(name: "golden", scheme: .webMercator, minLevel: 0, maxLevel: 2, format: "PNG", fullExtent: extent)
        let writer = try TileCacheWriter(format: format, at: url, info: info)
        var keys: [TileKey] = []
        for range in TilePackageTests.ranges {
            for key in range.inBundleOrder() {
                try writer.add(key, data: tile(key))
                keys.append(key)
            }
        }
        try writer.finish()
        return keys
    }

    /// Every regular file under `root` (or `root` itself), by relative path.
    static func files(_ root: URL) throws -> [String: Data] {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: root.path, isDirectory: &isDirectory) else { return [:] }
        guard isDirectory.boolValue else { return ["": try Data(contentsOf: root)] }
        var out: [String: Data] = [:]
        for case let path as String in FileManager.default.enumerator(atPath: root.path) ?? .init() {
            let url = root.appendingPathComponent(path)
            var dir: ObjCBool = false
            if FileManager.default.fileExists(atPath: url.path, isDirectory: &dir), !dir.boolValue { out[path] = try Data(contentsOf: url) }
        }
        return out
    }

    static func compare(_ written: URL, golden name: String) throws {
        let golden = folder.appendingPathComponent(name)
        if updating {
            try? FileManager.default.removeItem(at: golden)
            try FileManager.default.copyItem(at: written, to: golden)
        }
        let expected = try files(golden), actual = try files(written)
        #expect(!expected.isEmpty, "the golden \(name) is missing")
        #expect(actual.keys.sorted() == expected.keys.sorted())
        for (path, bytes) in expected {
            #expect(actual[path] == bytes, "\(name)/\(path) differs from the golden file (\(actual[path]?.count ?? 0) vs \(bytes.count) bytes)")
        }
    }

    @Test(arguments: [("golden.tpkx", TileCacheWriter.Format.tilePackage), ("golden-exploded", .exploded)])
    func writersReproduceTheGoldenFiles(_ name: String, _ format: TileCacheWriter.Format) throws {
        let dir = TemporaryDirectory()
        let url = dir.file(name)
        _ = try Self.write(format, to: url)
        try Self.compare(url, golden: name)
    }

    /// MBTiles files hold SQLite's page layout, which depends on its version: compare the rows.
    @Test func mbtilesRowsMatchTheGoldenDump() async throws {
        let dir = TemporaryDirectory()
        let url = dir.file("golden.mbtiles")
        _ = try Self.write(.mbtiles, to: url)
        let dump = try await ExternalTools.run(ExternalTools.python, ["-c", """
            import sys, sqlite3
            db = sqlite3.connect(sys.argv[1])
            for name, value in db.execute("select name, value from metadata order by name"):
                print("metadata", name, value, sep="\\t")
            for z, x, y, data in db.execute("select zoom_level, tile_column, tile_row, tile_data from tiles order by 1, 2, 3"):
                print("tile", z, x, y, data.decode(), sep="\\t", end="")
            """, url.path])
        #expect(dump.succeeded, "\(dump.stderr)")
        let dumpFile = dir.file("golden-mbtiles.tsv")
        try Data(dump.stdout.utf8).write(to: dumpFile)
        try Self.compare(dumpFile, golden: "golden-mbtiles.tsv")
    }

    @Test(arguments: ["golden.tpkx", "golden-exploded"])
    func readersReadTheGoldenFiles(_ name: String) async throws {
        let cache = TileCache(fileURL: Self.folder.appendingPathComponent(name))
        try await cache.load()
        #expect(cache.info?.levels == 0...2 && cache.info?.format == "PNG")
        for range in TilePackageTests.ranges {
            for key in range.inBundleOrder() { #expect(try cache.tile(key) == Self.tile(key)) }
        }
        #expect(try cache.summary().map(\.distinctTiles) == [1, 3, 9])
    }
}
