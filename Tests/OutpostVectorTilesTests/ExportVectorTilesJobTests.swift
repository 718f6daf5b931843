import Foundation
import OutpostCore
import OutpostServer
import OutpostStorage
import OutpostTestSupport
import OutpostTiles
import Testing

@testable import OutpostVectorTiles

/// `ExportVectorTilesTask` and its job: default parameters by scale, an export equal to the
/// direct one in each format, paused after a checkpoint and rebuilt from its JSON (as after a
/// kill) making only the tiles it lacked, cancelled leaving nothing, a bad area refused, an
/// empty layer exporting an empty but readable file.
@Suite("ExportVectorTilesTask")
struct ExportVectorTilesJobTests {
    /// Invalid source polygons repaired with GEOS, as `outpost` and the server do.
    init() { GEOSPolygonRepair.install() }

    /// Every tile of a file, unzipped, by key.
    static func tiles(_ url: URL) async throws -> [TileKey: [UInt8]] {
        var out: [TileKey: [UInt8]] = [:]
        func keep(_ key: TileKey, _ bytes: [UInt8]) throws { out[key] = try VectorTileCompression.plain(bytes) }
        switch VectorTileFormat(url: url) {
        case .vtpk?: try await VectorTilePackageReader(url: url).forEachTile(keep)
        case .pmtiles?: try PMTilesReader(url: url).forEachTile(keep)
        default: try VectorTileMBTilesReader(url: url).forEachTile(keep)
        }
        return out
    }

    static func leftovers(_ url: URL) -> [String] {
        [url.path + ".partial", url.path + ".tiles", url.path + ".tiles-index"].filter { FileManager.default.fileExists(atPath: $0) }
    }

    @Test(.scaledTimeLimit(minutes: 3)) func defaultsByScaleAndAnExportEqualToTheDirectOneInEachFormat() async throws {
        let dir = TemporaryDirectory("outpost-vt-job")
        let gdb = try VectorTileExportTests.service("helsinki", in: dir)
        try gdb.close()
        let definition = VectorTileDefinition(layers: [.init(source: "streets"), .init(source: "addresses", minZoom: 14)], maxZoom: 14)
        let task = ExportVectorTilesTask(geodatabaseURL: dir.file("helsinki.gpkg"), definition: definition)
        #expect(try await task.makeDefaultExportVectorTilesParameters(areaOfInterest: nil, maxScale: 0).maxZoom == 14)
        #expect(try await task.makeDefaultExportVectorTilesParameters(areaOfInterest: nil, maxScale: 10_000).maxZoom == 15)
        #expect(task.extent != nil && task.tileLayerNames == ["streets", "addresses"])
        await #expect(throws: VectorTileError.self) {
            _ = try await task.makeDefaultExportVectorTilesParameters(areaOfInterest: .envelope(Envelope(xmin: 5, ymin: 5, xmax: 5, ymax: 5), .wgs84), maxScale: 0)
        }
        let parameters = try await task.makeDefaultExportVectorTilesParameters(
            areaOfInterest: .envelope(Envelope(xmin: 24.93, ymin: 60.16, xmax: 24.96, ymax: 60.18), .wgs84), maxScale: 20_000)
        let reference = try Geodatabase.open(at: dir.file("helsinki.gpkg"), readOnly: true)
        let generator = try VectorTileGenerator(geodatabase: reference, definition: parameters.resolvedDefinition(reference.schema))
        let direct = dir.file("direct.mbtiles")
        try await VectorTileMBTiles.export(generator, area: try parameters.area(), to: direct)
        try reference.close()
        let want = try await Self.tiles(direct)
        #expect(want.count > 10)
        for format in VectorTileFormat.allCases {
            let out = dir.file("job.\(format.rawValue)")
            let result = try await task.makeExportVectorTilesJob(parameters: parameters, downloadFileURL: out).run()
            #expect(result.tiles == want.count && result.fileURL == out)
            #expect(try await Self.tiles(out) == want, "\(format)")
            #expect(Self.leftovers(out).isEmpty)
        }
    }

    @Test(.scaledTimeLimit(minutes: 3)) func pausedThenRebuiltFromItsJSONItMakesOnlyWhatItLacked() async throws {
        let dir = TemporaryDirectory("outpost-vt-job-pause")
        let gdb = try VectorTileExportTests.service("natural_earth", in: dir)
        try gdb.close()
        let environment = VectorTileJobEnvironment(checkpointInterval: .zero, concurrency: 1)
        let definition = VectorTileDefinition(layers: [.init(source: "countries")], maxZoom: 6)
        let task = ExportVectorTilesTask(geodatabaseURL: dir.file("natural_earth.gpkg"), definition: definition, environment: environment)
        let parameters = try await task.makeDefaultExportVectorTilesParameters(areaOfInterest: nil, maxScale: 0)
        let out = dir.file("world.vtpk")
        let job = task.makeExportVectorTilesJob(parameters: parameters, downloadFileURL: out)
        let paused = Task { for await status in job.statusUpdates where status == .paused { return } }
        try job.start()
        // Paused at the first checkpoint that holds tiles: a pause asked for near the end of the
        // tiles takes effect in the next step instead (on a loaded machine the checkpoints,
        // 50 ms apart, can first see 200 tiles just before the last is made).
        while (job.progress.phases.first { $0.name == "tiles" }?.done ?? 0) < 1 && job.status == .started { try await Task.sleep(for: .milliseconds(5)) }
        try job.pause()
        await paused.value
        let before = try #require(job.snapshot.checkpoint?["count"]?.integerValue)
        #expect(before > 0 && !FileManager.default.fileExists(atPath: out.path))
        var registry = JobRegistry()
        ExportVectorTilesJob.register(in: &registry, environment: environment)
        let rebuilt = try registry.makeJob(from: try JobSnapshot.decode(try job.toJSON()))
        try rebuilt.start()
        #expect(await rebuilt.waitUntilFinished() == .succeeded)
        #expect(rebuilt.snapshot.messages.contains { $0.text.hasPrefix("resuming after \(before) tiles") }, "\(rebuilt.snapshot.messages.map(\.text))")
        let direct = dir.file("direct.vtpk")
        let reference = try Geodatabase.open(at: dir.file("natural_earth.gpkg"), readOnly: true)
        try await VectorTilePackage.export(try VectorTileGenerator(geodatabase: reference, definition: definition), to: direct)
        try reference.close()
        let (got, want) = (try await Self.tiles(out), try await Self.tiles(direct))
        #expect(got.count == want.count && got == want, "\(got.count) tiles, \(want.count) wanted")
        #expect(Self.leftovers(out).isEmpty)
    }

    @Test(.scaledTimeLimit(minutes: 2)) func cancelledItLeavesNothingAndAnEmptyLayerMakesAReadableEmptyFile() async throws {
        let dir = TemporaryDirectory("outpost-vt-job-cancel")
        let gdb = try VectorTileExportTests.service("natural_earth", in: dir)
        try gdb.close()
        let environment = VectorTileJobEnvironment(checkpointInterval: .zero, concurrency: 1)
        let task = ExportVectorTilesTask(
            geodatabaseURL: dir.file("natural_earth.gpkg"), definition: VectorTileDefinition(layers: [.init(source: "countries")], maxZoom: 6), environment: environment)
        let out = dir.file("world.pmtiles")
        let job = task.makeExportVectorTilesJob(parameters: try await task.makeDefaultExportVectorTilesParameters(areaOfInterest: nil, maxScale: 0), downloadFileURL: out)
        try job.start()
        while (job.progress.phases.first { $0.name == "tiles" }?.done ?? 0) < 100 && job.status == .started { try await Task.sleep(for: .milliseconds(5)) }
        job.cancel()
        #expect(await job.waitUntilFinished() == .failed)
        #expect(!FileManager.default.fileExists(atPath: out.path) && Self.leftovers(out).isEmpty)

        // A layer with no rows (all deleted through GDAL): nothing to tile, an empty package.
        let emptied = try await ExternalTools.run("ogrinfo", [dir.file("natural_earth.gpkg").path, "-sql", "DELETE FROM populated_places"])
        #expect(emptied.succeeded, "\(emptied.stderr)")
        let places = ExportVectorTilesTask(
            geodatabaseURL: dir.file("natural_earth.gpkg"), definition: VectorTileDefinition(layers: [.init(source: "populated_places")], maxZoom: 4))
        let none = dir.file("places.vtpk")
        #expect(try await places.makeExportVectorTilesJob(parameters: .init(), downloadFileURL: none).run().tiles == 0)
        #expect(try await Self.tiles(none).isEmpty)
        let cache = TileCache(fileURL: none)
        try await cache.load()
        #expect(cache.isVectorTilePackage)
    }

    /// The estimate against the export it tells of: a small export is made whole (exact, every
    /// figure the export's own); a larger one from a sample, close enough to plan a download by.
    @Test(.scaledTimeLimit(minutes: 3)) func anEstimateTellsTheExportsTilesAndSize() async throws {
        let dir = TemporaryDirectory("outpost-vt-estimate")
        try VectorTileExportTests.service("helsinki", in: dir).close()
        let streets = ExportVectorTilesTask(
            geodatabaseURL: dir.file("helsinki.gpkg"), definition: VectorTileDefinition(layers: [.init(source: "streets"), .init(source: "addresses", minZoom: 13)], maxZoom: 15))
        let small = try await streets.makeEstimateVectorTilesSizeJob(parameters: .init()).run()
        #expect(small.exact && small.sampled >= small.tileCount)
        for format in VectorTileFormat.allCases {
            let out = dir.file("streets.\(format.rawValue)")
            let made = try await streets.makeExportVectorTilesJob(parameters: .init(), downloadFileURL: out).run()
            let levels = Dictionary(grouping: try await Self.tiles(out).keys, by: \.level).mapValues(\.count)
            #expect(small.tileCount == made.tiles && small.levels.mapValues(\.tiles) == levels, "\(format)")
            let size = Double(try #require(try FileManager.default.attributesOfItem(atPath: out.path)[.size] as? Int))
            #expect(abs(Double(small.fileSize(format)) / size - 1) < 0.2, "\(format): \(small.fileSize(format)) estimated, \(size) written")
        }

        try VectorTileExportTests.service("natural_earth", in: dir).close()
        let world = ExportVectorTilesTask(geodatabaseURL: dir.file("natural_earth.gpkg"), definition: VectorTileDefinition(layers: [.init(source: "countries")], maxZoom: 6))
        let sampled = try await world.makeEstimateVectorTilesSizeJob(parameters: .init(), sampleSize: 16).run()
        let out = dir.file("world.pmtiles")
        let made = try await world.makeExportVectorTilesJob(parameters: .init(), downloadFileURL: out).run()
        var bytes = 0
        try PMTilesReader(url: out).forEachTile { _, tile in bytes += tile.count }
        #expect(!sampled.exact && sampled.sampled < made.tiles / 4, "\(sampled.sampled) made of \(made.tiles)")
        #expect(abs(Double(sampled.tileCount) / Double(made.tiles) - 1) < 0.2, "\(sampled.tileCount) estimated, \(made.tiles) made")
        #expect(abs(Double(sampled.tileBytes) / Double(bytes) - 1) < 0.3, "\(sampled.tileBytes) estimated, \(bytes) made")

        // Refused as the export is: an area outside the world, a file that is not a geodatabase.
        let outside = await #expect(throws: JobError.self) {
            _ = try await world.makeEstimateVectorTilesSizeJob(parameters: .init(areaOfInterest: .envelope(Envelope(xmin: 200, ymin: 0, xmax: 210, ymax: 10), .wgs84))).run()
        }
        #expect(outside?.message.contains("outside the Web Mercator world") == true, "\(String(describing: outside))")
        try Data("not a geodatabase".utf8).write(to: dir.file("junk.gpkg"))
        let junk = await #expect(throws: JobError.self) {
            _ = try await ExportVectorTilesTask(geodatabaseURL: dir.file("junk.gpkg")).makeEstimateVectorTilesSizeJob(parameters: .init()).run()
        }
        #expect(junk?.message.contains("not an SQLite database") == true, "\(String(describing: junk))")
    }
}
