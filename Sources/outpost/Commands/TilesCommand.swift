import ArgumentParser
import Foundation
import OutpostCore
import OutpostStorage
import OutpostSync
import OutpostTiles

struct TilesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tiles",
        abstract: "Offline basemaps: estimate and export tile caches (.tpkx, MBTiles, exploded Compact Cache), inspect them.",
        subcommands: [Estimate.self, Export.self, Inspect.self])

    /// What `estimate` and `export` share: the source, the area and the levels.
    struct Selection: ParsableArguments {
        @Option(help: "A MapServer URL, a tile URL template ({z}/{x}/{y} or {level}/{row}/{col}), a tile cache file or folder, or a .gpkg to draw.") var url: String
        @Option(parsing: .unconditional, help: "Area: xmin,ymin,xmax,ymax (longitude/latitude unless --extent-sr).") var extent: String?
        @Option(help: "The spatial reference of --extent (4326 or 3857).") var extentSr = 4326
        @Option(help: "Area: a GeoJSON file with a polygon (only tiles touching it).") var aoi: String?
        @Option(help: "Levels: a range and/or list, e.g. 0-14 or 10,12-15.") var levels: String
        @Option(help: "Refuse an export of more tiles than this.") var maxTiles = 100_000
        @Option(help: "Tiles fetched at once.") var concurrency = 8
        @Option(help: "Service token (default: $OUTPOST_TOKEN).") var token: String?
        @Flag(help: "Re-encode PNG tiles losslessly at zlib level 9 when that makes them smaller.") var optimize = false
        @Option(help: "0–100: re-encode opaque tiles as JPEG at this quality, keeping PNG where a tile has transparency (a MIXED cache).")
        var compressionQuality: Double?
        @Flag(help: "Re-encode every tile as WebP (MBTiles output only), at --compression-quality (default 75).") var webp = false

        func validate() throws {
            guard extent == nil || aoi == nil else { throw ValidationError("give --extent or --aoi, not both") }
            guard maxTiles > 0, (1...64).contains(concurrency) else { throw ValidationError("--max-tiles must be positive and --concurrency 1–64") }
            if let compressionQuality, !(0...100).contains(compressionQuality) { throw ValidationError("--compression-quality must be 0–100") }
            _ = try levelIDs()
        }

        func levelIDs() throws -> [Int] {
            var out: [Int] = []
            for part in levels.split(separator: ",") {
                let bounds = part.split(separator: "-", maxSplits: 1).map { Int($0.trimmingCharacters(in: .whitespaces)) }
                guard let low = bounds.first ?? nil, let high = bounds.last ?? nil, low >= 0, high >= low, high <= 30 else {
                    throw ValidationError("--levels must look like 0-14 or 10,12-15")
                }
                out += Array(low...high)
            }
            guard !out.isEmpty else { throw ValidationError("--levels names no level") }
            return Array(Set(out)).sorted()
        }

        var source: TileSourceDescriptor { TileSourceDescriptor(location: url) }

        func parameters() throws -> ExportTileCacheParameters {
            var area: AreaOfInterest?
            if let extent { area = .envelope(try parseExtent(extent), SpatialReference(wkid: extentSr)) }
            if let g = try commandArea(extent: nil, aoi: aoi) { area = .polygon(g, .wgs84) }
            return ExportTileCacheParameters(
                areaOfInterest: area, levelIDs: try levelIDs(), maxTileCount: maxTiles, concurrency: concurrency, optimizeTilesForSize: optimize,
                compressionQuality: compressionQuality, webp: webp)
        }

        var environment: TileJobEnvironment { TileJobEnvironment(token: serviceToken(token), faults: processFaults, checkpointInterval: testCheckpointInterval) }
    }

    struct Estimate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Count the tiles of an export and estimate its size (from a sample of tiles).")
        @OptionGroup var selection: Selection
        @Flag(help: "Print the result as JSON.") var json = false

        func run() async throws {
            let job = Job(EstimateTileCacheSizeJob(source: selection.source, parameters: try selection.parameters(), environment: selection.environment))
            try job.start()
            let status = await runShowingProgress(job, label: "estimate")
            guard status == .succeeded else { throw CLIFailure(message: job.error?.message ?? "the estimate failed") }
            let result = try await job.output
            let limit = try selection.parameters().maxTileCount
            if json {
                printJSON([
                    "tileCount": .integer(Int64(result.tileCount)), "fileSize": .integer(result.fileSize),
                    "levels": .array(result.perLevel.keys.sorted().map { ["level": .integer(Int64($0)), "tiles": .integer(Int64(result.perLevel[$0]!))] }),
                    "withinLimit": .bool(result.tileCount <= limit),
                ])
            } else {
                print("\(result.tileCount) tiles, about \(ProgressDisplay.count(result.fileSize, "bytes"))")
                for level in result.perLevel.keys.sorted() { print("  level \(level): \(result.perLevel[level]!) tiles") }
                if result.tileCount > limit { print("more than the export limit of \(limit) (--max-tiles)") }
            }
        }
    }

    struct Export: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Export a tile cache for offline use.",
            discussion: """
                The output format follows --out: .tpkx (Compact Cache V2 bundles in a tile package), \
                .mbtiles, or a folder (an exploded Compact Cache that GDAL reads through conf.xml). \
                The export checkpoints as it goes: Ctrl-C pauses it, and running the same command \
                again (or `outpost job resume <job-dir>`) continues without fetching tiles it has. \
                The output appears only when complete.
                """)
        @OptionGroup var selection: Selection
        @Option(help: "The cache to write: file.tpkx, file.mbtiles or a folder.") var out: String
        @Option(help: "Directory for the job's JSON (default: .outpost/jobs beside --out).") var jobDir: String?
        @Flag(help: "Print the result as JSON.") var json = false

        func run() async throws {
            let output = URL(fileURLWithPath: out.hasSuffix("/") ? String(out.dropLast()) : out).standardizedFileURL
            let directory = jobDir.map { URL(fileURLWithPath: $0) } ?? output.deletingLastPathComponent().appendingPathComponent(".outpost/jobs")
            let manager = try JobManager(directory: directory, registry: outpostJobRegistry(tiles: selection.environment))
            let parameters = try selection.parameters()
            let definition = ExportTileCacheJob(source: selection.source, parameters: parameters, downloadFileURL: output, environment: selection.environment)
            // The same command again continues an unfinished export of the same output.
            let job = try resumingOrAdding(definition, in: manager, target: out, madeOutput: output) { $0.parameters["downloadFile"]?.stringValue == output.path }
            if ProgressDisplay().enabled {
                FileHandle.standardError.write(Data("job \(job.id): \(manager.jsonURL(id: job.id).path)\n".utf8))
            }
            let status = try await startShowingProgress(job, in: manager, label: "export")
            try report(job, status: status, json: json)
        }
    }

    struct Inspect: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Levels, tile counts, sizes and deduplication of a tile cache, and a check that it is whole.",
            discussion: """
                Every bundle's index entries are checked against the bundle (inside it, and agreeing \
                with the size stored before each tile), an MBTiles file gets SQLite's quick_check. \
                A damaged cache (say, a copy that was interrupted) exits 1 naming the bundle and tile.
                """)
        @Argument(help: "A .tpkx, an MBTiles file or an exploded cache folder.") var cache: String
        @Flag(help: "Print the result as JSON.") var json = false

        func run() async throws {
            let url = URL(fileURLWithPath: cache)
            let tileCache = TileCache(fileURL: url)
            do {
                try await tileCache.load()
            } catch let error as TileCacheError {
                throw CLIFailure(message: error.description)
            }
            let info = tileCache.info!
            let inspection: TileCache.Inspection
            do { inspection = try tileCache.inspect() } catch let error as TileCacheError { throw CLIFailure(message: error.description) }
            let levels = inspection.levels
            let format = cache.lowercased().hasSuffix(".tpkx") ? "tpkx" : cache.lowercased().hasSuffix(".mbtiles") ? "mbtiles" : "compactV2"
            let tiles = levels.reduce(0) { $0 + $1.tiles }, unique = levels.reduce(0) { $0 + $1.distinctTiles }
            let bytes = (try? FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int64) ?? levels.reduce(0) { $0 + $1.bytes }
            if json {
                printJSON([
                    "format": .string(format), "name": .string(info.name), "tileFormat": .string(info.format),
                    "levels": .array(levels.map { ["level": .integer(Int64($0.level)), "tiles": .integer(Int64($0.tiles)), "uniqueTiles": .integer(Int64($0.distinctTiles))] }),
                    "tiles": .integer(Int64(tiles)), "uniqueTiles": .integer(Int64(unique)), "bytes": .integer(bytes),
                    "damaged": .array(inspection.damage.map { d in
                        var entry: [String: JSONValue] = ["bundle": .string(d.bundle), "reason": .string(d.error.message), "damagedTiles": .integer(Int64(d.damagedTiles))]
                        if let t = d.error.tile { entry["tile"] = ["level": .integer(Int64(t.level)), "row": .integer(Int64(t.row)), "col": .integer(Int64(t.col))] }
                        return .object(entry)
                    }),
                ])
            } else {
                print("\(info.name): \(format), \(info.format) tiles, levels \(info.minLevel)–\(info.maxLevel), \(ProgressDisplay.count(bytes, "bytes"))")
                for level in levels { print("  level \(level.level): \(level.tiles) tiles (\(level.distinctTiles) distinct)") }
                let saved = tiles - unique
                print("\(tiles) tiles, \(unique) stored" + (saved > 0 ? "; \(saved) duplicates share storage" : ""))
                for d in inspection.damage { print("damaged: \(d.error.description)" + (d.damagedTiles > 1 ? "; \(d.damagedTiles) tiles of this bundle are damaged" : "")) }
            }
            if let first = inspection.damage.first {
                let more = inspection.damage.count > 1 ? " (and \(inspection.damage.count - 1) more damaged bundles)" : ""
                throw CLIFailure(message: "the cache is damaged: \(first.error.description)\(more)")
            }
        }
    }
}
