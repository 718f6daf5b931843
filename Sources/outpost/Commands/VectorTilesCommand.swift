import ArgumentParser
import Foundation
import OutpostCore
import OutpostStorage
import OutpostTiles
import OutpostVectorTiles

struct VectorTilesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "vtiles",
        abstract: "Vector basemaps: Mapbox Vector Tiles made from a geodatabase's layers, and a look inside them.",
        subcommands: [Estimate.self, Export.self, Inspect.self])

    struct Export: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Make vector tiles of a geodatabase's layers, or take a VectorTileServer's offline.",
            discussion: """
                Every spatial layer with all its fields goes in unless --definition names the layers, \
                fields and zooms (docs/tiles.md, "Vector tiles"). Tiles are Mapbox Vector Tile 2.1, \
                gzipped, 4096 units across with a buffer; points thin out below the last zoom and a tile \
                over 500 KB sheds its least visible features. The output is MBTiles (format pbf, with \
                vector_layers), PMTiles v3 (clustered, identical tiles once) or a vector tile package \
                (.vtpk: Compact Cache V2 bundles, root.json, tile map and a style of the layers, as \
                ArcGIS reads it), written beside and renamed into place when complete. The export is \
                a job that checkpoints as it goes: Ctrl-C pauses it, and the same command again (or \
                `outpost job resume <job-dir>`) continues without making the tiles it has.
                """)
        @OptionGroup var selection: VectorTileSelection
        @Option(help: "The file to write: file.mbtiles, file.pmtiles or file.vtpk.") var out: String
        @Flag(help: "Print the result as JSON.") var json = false

        @Option(help: "Directory for the job's JSON (default: .outpost/jobs beside --out).") var jobDir: String?

        func run() async throws {
            let output = URL(fileURLWithPath: out).standardizedFileURL
            guard VectorTileFormat(url: output) != nil else {
                throw ValidationError("--out must end in .mbtiles, .pmtiles or .vtpk")
            }
            let (from, parameters, zooms, maxTileBytes) = try await selection.resolve()
            let started = Date()
            let directory = jobDir.map { URL(fileURLWithPath: $0) } ?? output.deletingLastPathComponent().appendingPathComponent(".outpost/jobs")
            let manager = try JobManager(directory: directory, registry: outpostJobRegistry())
            let export = ExportVectorTilesJob(source: from, parameters: parameters, downloadFileURL: output, environment: vectorTileJobEnvironment)
            // The same command again continues an unfinished export of the same output.
            let job = try resumingOrAdding(export, in: manager, target: out, madeOutput: output) { $0.parameters["downloadFile"]?.stringValue == output.path }
            let status = try await startShowingProgress(job, in: manager, label: "vector tiles")
            guard status == .succeeded else { return try report(job, status: status, json: false) }
            let results = job.snapshot.results
            let seconds = Date().timeIntervalSince(started)
            let tiles = results["tiles"]?.integerValue ?? 0
            let size = (try? FileManager.default.attributesOfItem(atPath: output.path)[.size] as? Int) ?? 0
            let unreadable = results["unreadable"]?.arrayValue ?? []
            let dropped = results["droppedForSize"]?.integerValue ?? 0
            if json {
                let levels = (results["levels"]?.objectValue ?? [:]).compactMap { k, v in Int(k).map { ($0, v) } }.sorted { $0.0 < $1.0 }
                printJSON([
                    "file": .string(output.path), "tiles": .integer(tiles), "bytes": .integer(Int64(size)), "features": results["features"] ?? 0,
                    "droppedForSize": .integer(dropped), "unreadable": .array(unreadable), "job": .string(job.id),
                    "levels": .array(levels.map { ["level": .integer(Int64($0.0)), "tiles": $0.1] }), "seconds": .number(seconds),
                ])
            } else {
                print("wrote \(out): \(tiles) tiles, zooms \(zooms.0)–\(zooms.1), \(ProgressDisplay.count(Int64(size), "bytes")) in \(String(format: "%.1f", seconds)) s")
                if dropped > 0 { print("\(dropped) features left out of tiles over \(maxTileBytes) bytes") }
                if let first = unreadable.first {
                    let id = first["objectid"]?.integerValue.map { "objectid \($0)" } ?? ""
                    print("\(unreadable.count) features left out: their geometry cannot be read (first: \(first["layer"]?.stringValue ?? "") \(id): \(first["reason"]?.stringValue ?? ""))")
                }
            }
        }
    }

    struct Estimate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Tell how many tiles an export would write and how large its file would be, writing nothing.",
            discussion: """
                At most --sample-size tiles of each zoom are made (or fetched from a VectorTileServer), \
                following the export's own walk from each zoom to the next; a zoom with no more tiles \
                than that is counted exactly. A VectorTileServer's tile map counts its tiles exactly.
                """)
        @OptionGroup var selection: VectorTileSelection
        @Option(help: "Tiles made or fetched per zoom at most.") var sampleSize = 64
        @Flag(help: "Print the result as JSON.") var json = false

        func run() async throws {
            guard sampleSize > 0 else { throw ValidationError("--sample-size must be at least 1") }
            let (from, parameters, _, _) = try await selection.resolve()
            let job = Job(EstimateVectorTilesSizeJob(source: from, parameters: parameters, sampleSize: sampleSize, environment: vectorTileJobEnvironment))
            try job.start()
            let status = await runShowingProgress(job, label: "estimate")
            guard status == .succeeded else { throw CLIFailure(message: job.error?.message ?? "the estimate failed") }
            let estimate = try await job.output
            if json { return printJSON(estimate.json) }
            print("\(estimate.exact ? "" : "about ")\(estimate.tileCount) tiles, \(ProgressDisplay.count(estimate.tileBytes, "bytes")) of tiles (\(estimate.sampled) made\(estimate.exact ? ": every tile" : ""))")
            for (z, l) in estimate.levels.sorted(by: { $0.key < $1.key }) { print("  zoom \(z): \(l.tiles) tiles, \(ProgressDisplay.count(l.bytes, "bytes"))") }
            print("file: " + VectorTileFormat.allCases.map { "\($0.rawValue) \(ProgressDisplay.count(estimate.fileSize($0), "bytes"))" }.joined(separator: ", "))
        }
    }

    struct Inspect: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Zooms, tiles, sizes, the largest tiles and the layers of a vector tile file.",
            discussion: "Every tile is decoded; one that does not decode is named and the command exits 1.")
        @Argument(help: "An MBTiles file, PMTiles archive or vector tile package (.vtpk).") var file: String
        @Flag(help: "Print the result as JSON.") var json = false

        func run() async throws {
            let url = URL(fileURLWithPath: file)
            let format = ["pmtiles", "vtpk"].contains(url.pathExtension.lowercased()) ? url.pathExtension.lowercased() : "mbtiles"
            let inspection: VectorTileInspection
            switch format {
            case "pmtiles":
                let reader = try PMTilesReader(url: url)
                guard reader.tileType == .mvt else { throw CLIFailure(message: "\(file) holds \(reader.tileType) tiles, not vector tiles") }
                inspection = try VectorTileInspection.inspect { body in try reader.forEachTile(body) }
            case "vtpk":
                let reader = try await VectorTilePackageReader(url: url)
                inspection = try VectorTileInspection.inspect { body in try reader.forEachTile(body) }
            default:
                let reader = try VectorTileMBTilesReader(url: url)
                inspection = try VectorTileInspection.inspect { body in try reader.forEachTile(body) }
            }
            func key(_ k: TileKey) -> JSONValue { ["z": .integer(Int64(k.level)), "x": .integer(Int64(k.col)), "y": .integer(Int64(k.row))] }
            if json {
                printJSON([
                    "format": .string(format), "tiles": .integer(Int64(inspection.tiles)), "bytes": .integer(Int64(inspection.bytes)),
                    "levels": .array(inspection.levels.map { ["level": .integer(Int64($0.level)), "tiles": .integer(Int64($0.tiles)), "bytes": .integer(Int64($0.bytes))] }),
                    "largest": .array(inspection.largest.map { ["tile": key($0.key), "bytes": .integer(Int64($0.bytes))] }),
                    "layers": .array(inspection.layers.map { l in
                        [
                            "name": .string(l.name), "features": .integer(Int64(l.features)), "tiles": .integer(Int64(l.tiles)),
                            "geometry": .array(l.geometryKinds.map { .string($0) }), "fields": .array(l.fields.map { .string($0) }),
                            "minZoom": .integer(Int64(l.minZoom)), "maxZoom": .integer(Int64(l.maxZoom)),
                        ]
                    }),
                    "damaged": .array(inspection.damaged.map { ["tile": key($0.key), "reason": .string($0.reason)] }),
                ])
            } else {
                print("\(file): vector tiles (\(["pmtiles": "PMTiles", "vtpk": "vector tile package"][format] ?? "MBTiles")), \(inspection.tiles) tiles, \(ProgressDisplay.count(Int64(inspection.bytes), "bytes")) of tiles")
                for l in inspection.levels { print("  zoom \(l.level): \(l.tiles) tiles, \(ProgressDisplay.count(Int64(l.bytes), "bytes"))") }
                print("largest: " + inspection.largest.map { "\($0.key.level)/\($0.key.col)/\($0.key.row) (\(ProgressDisplay.count(Int64($0.bytes), "bytes")))" }.joined(separator: ", "))
                for l in inspection.layers {
                    print("layer \(l.name): \(l.geometryKinds.joined(separator: "+")), zooms \(l.minZoom)–\(l.maxZoom), \(l.features) features in \(l.tiles) tiles; fields \(l.fields.joined(separator: ", "))")
                }
            }
            if let first = inspection.damaged.first {
                throw CLIFailure(message: "tile \(first.key.level)/\(first.key.col)/\(first.key.row) does not decode: \(first.reason)")
            }
        }
    }
}

/// The source, area, zooms and definition of an export (or its estimate), checked against the
/// source before any job is made.
struct VectorTileSelection: ParsableArguments {
    @Argument(help: "The geodatabase (.gpkg), or a VectorTileServer URL whose tiles are taken.") var source: String
    @Option(parsing: .unconditional, help: "Area: xmin,ymin,xmax,ymax in longitude/latitude (default: all the layers).") var area: String?
    @Option(help: "The first zoom (default 0, or the definition's).") var minZoom: Int?
    @Option(help: "The last zoom (default 14, or the definition's).") var maxZoom: Int?
    @Option(help: "A tile definition (JSON): layers, fields, zooms, limits.") var definition: String?
    @Flag(help: "Give each tile feature its source row's object id as its id (off by default: ids hardly compress).") var featureIds = false

    /// The job's source and parameters, the zooms and the tile size limit (0 for a service's tiles).
    func resolve() async throws -> (VectorTileExportSource, ExportVectorTilesParameters, zooms: (Int, Int), maxTileBytes: Int) {
        var parameters = ExportVectorTilesParameters(
            areaOfInterest: try area.map { .envelope(try parseExtent($0), .wgs84) }, minZoom: minZoom, maxZoom: maxZoom,
            definition: try definition.map { try VectorTileDefinition.read(URL(fileURLWithPath: $0)) })
        _ = try parameters.area()
        if source.hasPrefix("http://") || source.hasPrefix("https://"), let url = URL(string: source) {
            guard definition == nil, !featureIds else {
                throw ValidationError("--definition and --feature-ids are for a geodatabase; a VectorTileServer's tiles are taken as they are")
            }
            let task = ExportVectorTilesTask(url: url, environment: vectorTileJobEnvironment)
            try await task.load()
            let p = try await task.makeDefaultExportVectorTilesParameters(areaOfInterest: parameters.areaOfInterest, maxScale: 0)
            return (.service(url), parameters, (minZoom ?? 0, min(maxZoom ?? p.maxZoom ?? 0, p.maxZoom ?? 0)), 0)
        }
        let gdbURL = URL(fileURLWithPath: source).standardizedFileURL
        let gdb = try Geodatabase.open(at: gdbURL, readOnly: true)
        defer { try? gdb.close() }
        if featureIds {
            var withIDs = parameters.definition ?? .whole(gdb.schema)
            withIDs.featureIDs = true
            parameters.definition = withIDs
        }
        let d = parameters.resolvedDefinition(gdb.schema)
        _ = try VectorTileGenerator(geodatabase: gdb, definition: d)
        return (.geodatabase(gdbURL), parameters, (d.minZoom, d.maxZoom), d.maxTileBytes)
    }
}
