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
        subcommands: [Export.self, Inspect.self])

    struct Export: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Make vector tiles of a geodatabase's layers.",
            discussion: """
                Every spatial layer with all its fields goes in unless --definition names the layers, \
                fields and zooms (docs/tiles.md, "Vector tiles"). Tiles are Mapbox Vector Tile 2.1, \
                gzipped, 4096 units across with a buffer; points thin out below the last zoom and a tile \
                over 500 KB sheds its least visible features. The output is MBTiles (format pbf, with \
                vector_layers), PMTiles v3 (clustered, identical tiles once) or a vector tile package \
                (.vtpk: Compact Cache V2 bundles, root.json, tile map and a style of the layers, as \
                ArcGIS reads it), written beside and renamed into place when complete.
                """)
        @Argument(help: "The geodatabase (.gpkg).") var source: String
        @Option(help: "The file to write: file.mbtiles, file.pmtiles or file.vtpk.") var out: String
        @Option(parsing: .unconditional, help: "Area: xmin,ymin,xmax,ymax in longitude/latitude (default: all the layers).") var area: String?
        @Option(help: "The first zoom (default 0, or the definition's).") var minZoom: Int?
        @Option(help: "The last zoom (default 14, or the definition's).") var maxZoom: Int?
        @Option(help: "A tile definition (JSON): layers, fields, zooms, limits.") var definition: String?
        @Flag(help: "Print the result as JSON.") var json = false

        func run() async throws {
            let output = URL(fileURLWithPath: out)
            let format = output.pathExtension.lowercased()
            guard ["mbtiles", "pmtiles", "vtpk"].contains(format) else {
                throw ValidationError("--out must end in .mbtiles, .pmtiles or .vtpk")
            }
            let gdb = try Geodatabase.open(at: URL(fileURLWithPath: source), readOnly: true)
            defer { try? gdb.close() }
            var d = try definition.map { try VectorTileDefinition.read(URL(fileURLWithPath: $0)) } ?? .whole(gdb.schema)
            if let minZoom { d.minZoom = minZoom }
            if let maxZoom { d.maxZoom = maxZoom }
            let generator = try VectorTileGenerator(geodatabase: gdb, definition: d)
            let envelope = try area.map { try WebMercator.convert(try parseExtent($0), from: .wgs84, to: .webMercator) }
            let started = Date()
            let summary: VectorTileGenerator.Summary
            switch format {
            case "pmtiles": summary = try await VectorTilePMTiles.export(generator, area: envelope, to: output)
            case "vtpk": summary = try await VectorTilePackage.export(generator, area: envelope, to: output)
            default: summary = try await VectorTileMBTiles.export(generator, area: envelope, to: output)
            }
            let seconds = Date().timeIntervalSince(started)
            let size = (try? FileManager.default.attributesOfItem(atPath: output.path)[.size] as? Int) ?? summary.bytes
            if json {
                printJSON([
                    "file": .string(output.path), "tiles": .integer(Int64(summary.tiles)), "bytes": .integer(Int64(size)),
                    "features": .integer(Int64(summary.features)), "droppedForSize": .integer(Int64(summary.droppedForSize)),
                    "unreadable": .array(summary.unreadable.map { ["layer": .string($0.layer), "objectid": $0.objectID.map { .integer($0) } ?? .null, "reason": .string($0.reason)] }),
                    "levels": .array(summary.levels.keys.sorted().map { ["level": .integer(Int64($0)), "tiles": .integer(Int64(summary.levels[$0]!.tiles))] }),
                    "seconds": .number(seconds),
                ])
            } else {
                print("wrote \(out): \(summary.tiles) tiles, zooms \(d.minZoom)–\(d.maxZoom), \(ProgressDisplay.count(Int64(size), "bytes")) in \(String(format: "%.1f", seconds)) s")
                if summary.droppedForSize > 0 { print("\(summary.droppedForSize) features left out of tiles over \(d.maxTileBytes) bytes") }
                if let first = summary.unreadable.first {
                    print("\(summary.unreadable.count) features left out: their geometry cannot be read (first: \(first.layer) \(first.objectID.map { "objectid \($0)" } ?? ""): \(first.reason))")
                }
            }
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
