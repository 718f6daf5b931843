import ArgumentParser
import Foundation
import OutpostCore
import OutpostStorage

struct ImportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Create a geodatabase (GeoPackage) from a service directory or a GeoJSON file.",
        discussion: """
            A service directory holds service.json (the schema) and data/<layer>.geojson files:
              outpost import SampleData/field_inspection --out demo.gpkg
            One GeoJSON file goes into one layer (the geodatabase is created from --schema if it
            does not exist yet, else the features are appended):
              outpost import points.geojson --schema service.json --layer inspection_points --out demo.gpkg
            """)

    @Argument(help: "A service directory (service.json + data/), or a GeoJSON FeatureCollection file.")
    var source: String

    @Option(help: "The geodatabase to write (.gpkg).")
    var out: String

    @Option(help: "A service schema JSON to use instead of <source>/service.json.")
    var schema: String?

    @Option(help: "The layer a single GeoJSON file goes into.")
    var layer: String?

    @Flag(help: "Replace --out if it exists (service directories only).")
    var overwrite = false

    @Flag(help: "Skip GeoJSON properties that are not fields of the layer instead of failing.")
    var ignoreUnknownProperties = false

    @Flag(help: "Print the result as JSON.")
    var json = false

    func validate() throws {
        guard out.lowercased().hasSuffix(".gpkg") else {
            throw ValidationError("--out must name a .gpkg file (GeoPackage requirement 3)")
        }
    }

    func run() async throws {
        let sourceURL = URL(fileURLWithPath: source)
        let outURL = URL(fileURLWithPath: out)
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: sourceURL.path, isDirectory: &isDirectory) else {
            throw CLIFailure(message: "\(source) does not exist")
        }
        let counts: [String: Int]
        let gdb: Geodatabase
        let started = Date()
        if isDirectory.boolValue {
            (gdb, counts) = try ServiceDirectoryImport.createGeodatabase(
                from: sourceURL, schema: schema.map { URL(fileURLWithPath: $0) }, at: outURL, overwrite: overwrite)
        } else {
            guard let layer else { throw CLIFailure(message: "importing one GeoJSON file needs --layer <name>") }
            if FileManager.default.fileExists(atPath: outURL.path) {
                gdb = try Geodatabase.open(at: outURL)
            } else {
                guard let schema else {
                    throw CLIFailure(message: "\(out) does not exist; give --schema to create it")
                }
                gdb = try Geodatabase.create(at: outURL, schema: try ServiceSchema.load(from: URL(fileURLWithPath: schema)))
            }
            let table = try gdb.table(named: layer)
            let ignore = ignoreUnknownProperties
            let n = try await gdb.write { conn in
                try GeoJSONImport.importFile(sourceURL, into: table, in: conn, ignoreUnknownProperties: ignore)
            }
            counts = [table.name: n]
        }
        let seconds = Date().timeIntervalSince(started)
        let order = gdb.tables.map(\.name).filter { counts[$0] != nil }
        try gdb.close()
        if json {
            printJSON([
                "output": .string(outURL.path),
                "layers": .array(order.map { ["name": .string($0), "imported": .integer(Int64(counts[$0]!))] }),
            ])
        } else {
            for name in order { print("\(name): \(counts[name]!) features") }
            print("wrote \(outURL.path) in \(String(format: "%.2f", seconds)) s")
        }
    }
}
