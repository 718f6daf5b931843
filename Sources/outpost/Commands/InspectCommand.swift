import ArgumentParser
import Foundation
import OutpostCore
import OutpostStorage

struct InspectCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "inspect",
        abstract: "List the layers of a geodatabase with counts, extents and pending edits.")

    @Argument(help: "A GeoPackage file.")
    var file: String

    @Flag(help: "Print JSON: {\"layers\":[{\"name\",\"geometryType\",\"count\",\"extent\",\"pending\"}]}.")
    var json = false

    struct LayerSummary: Sendable {
        var name: String
        var geometryType: String?
        var count: Int
        var extent: Envelope?
        var pending: PendingChanges
        var srid: Int?
    }

    func run() async throws {
        let gdb = try Geodatabase.open(at: URL(fileURLWithPath: file), readOnly: true)
        defer { try? gdb.close() }
        let summaries = try await gdb.read { conn in
            try gdb.tables.map { table in
                LayerSummary(
                    name: table.name,
                    geometryType: table.definition.geometryType.map { $0.acceptsAny ? "Geometry" : $0.type.geoJSONName },
                    count: try table.count(matching: .all, in: conn),
                    extent: try table.extent(in: conn),
                    pending: try table.pendingChanges(in: conn),
                    srid: table.spatialReference?.wkid)
            }
        }
        if json {
            printJSON([
                "layers": .array(
                    summaries.map { s in
                        [
                            "name": .string(s.name),
                            "geometryType": s.geometryType.map(JSONValue.string) ?? .null,
                            "count": .integer(Int64(s.count)),
                            "extent": s.extent.map { .array([.number($0.xmin), .number($0.ymin), .number($0.xmax), .number($0.ymax)]) } ?? .null,
                            "srid": s.srid.map { .integer(Int64($0)) } ?? .null,
                            "pending": [
                                "inserts": .integer(Int64(s.pending.inserts)), "updates": .integer(Int64(s.pending.updates)),
                                "deletes": .integer(Int64(s.pending.deletes)),
                            ],
                        ]
                    })
            ])
            return
        }
        print("\(URL(fileURLWithPath: file).lastPathComponent): \(gdb.isManaged ? "Outpost geodatabase" : "GeoPackage") \"\(gdb.schema.name)\"")
        for s in summaries {
            var line = "  \(s.name) (\(s.geometryType ?? "table")\(s.srid.map { ", EPSG:\($0)" } ?? "")): \(s.count) features"
            if let e = s.extent {
                line += String(format: ", extent %.6f %.6f %.6f %.6f", e.xmin, e.ymin, e.xmax, e.ymax)
            }
            if s.pending.total > 0 {
                line += ", pending \(s.pending.inserts) inserts / \(s.pending.updates) updates / \(s.pending.deletes) deletes"
            }
            print(line)
        }
    }
}
