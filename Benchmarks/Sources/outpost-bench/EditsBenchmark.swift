import Foundation
import GRDB
import GRDBSQLite
import OutpostCore
import OutpostStorage

/// Benchmark 2 of the foundation issue: transactional edits (updates that move the point and
/// change an attribute, and inserts) in batches of 1,000, with the R-tree maintained by its
/// triggers, with and without change capture.
enum EditsBenchmark {
    /// Builds a base geodatabase of `base` points once per run.
    static func prepareBase(_ base: Int, at url: URL) throws {
        _ = try ImportBenchmark.runOutpost(count: base, output: url)
    }

    /// Raw SQL edits on a copy of the base file: the same statements whatever triggers exist.
    /// With `dropCapture` the capture triggers are removed first: that is the floor (SQLite plus
    /// the GeoPackage R-tree triggers).
    static func runRawSQL(base: URL, copy: URL, edits: Int, dropCapture: Bool) throws -> Double {
        Geodatabase.removeFiles(at: copy)
        try FileManager.default.copyItem(at: base, to: copy)
        let gdb = try Geodatabase.open(at: copy)
        let baseCount = try gdb.read { conn in try gdb.tables[0].count(matching: .all, in: conn) }
        if dropCapture {
            try gdb.write { conn in
                for name in ["insert", "update", "delete", "globalid_immutable"] {
                    try conn.execute("DROP TRIGGER outpost_points_\(name)")
                }
            }
        }
        var random = FastRandomGenerator(seed: 2)
        let started = Date()
        var done = 0
        while done < edits {
            try gdb.write { conn in
                let update = try conn.statement("UPDATE points SET value = ?, geom = ? WHERE objectid = ?")
                let insert = try conn.statement("INSERT INTO points (geom, globalid, id_int, value, label, observed, ref) VALUES (?, ?, ?, ?, ?, ?, ?)")
                do {
                    for k in 0..<1000 {
                        let i = done + k
                        let (x, y) = ImportBenchmark.coordinates(i * 31 + 7)
                        let blob = GeoPackageBinary.encode(.point(try Point(x: x, y: y)), srsID: 4326)
                        if k % 2 == 0 {
                            try update.execute([.double(Double(i)), .blob(blob), .integer(Int64(1 + (i * 7) % baseCount))])
                        } else {
                            try insert.execute([
                                .blob(blob), .text(GlobalID.make(using: &random)), .integer(Int64(i)), .double(0.5),
                                .text(ImportBenchmark.label(i)), .text(GeoPackageDate.format(ImportBenchmark.epoch)),
                                .text(GlobalID.make(using: &random)),
                            ])
                        }
                    }
                }
            }
            done += 1000
        }
        let seconds = Date().timeIntervalSince(started)
        try gdb.close()
        return seconds
    }

    /// The same edits through the public API (schema validation, then the same triggers).
    static func runAPI(base: URL, copy: URL, edits: Int) async throws -> Double {
        Geodatabase.removeFiles(at: copy)
        try FileManager.default.copyItem(at: base, to: copy)
        let gdb = try Geodatabase.open(at: copy)
        let table = try gdb.table(named: "points")
        let baseCount = try await table.count()
        var random = FastRandomGenerator(seed: 2)
        let started = Date()
        var done = 0
        while done < edits {
            var updates: [Feature] = []
            var adds: [Feature] = []
            for k in 0..<1000 {
                let i = done + k
                let (x, y) = ImportBenchmark.coordinates(i * 31 + 7)
                let point = Geometry.point(try Point(x: x, y: y))
                if k % 2 == 0 {
                    updates.append(Feature(objectID: Int64(1 + (i * 7) % baseCount), attributes: ["value": .double(Double(i))], geometry: point))
                } else {
                    adds.append(
                        Feature(
                            attributes: [
                                "id_int": .integer(Int64(i)), "value": .double(0.5), "label": .string(ImportBenchmark.label(i)),
                                "observed": .date(ImportBenchmark.epoch), "ref": .string(GlobalID.make(using: &random)),
                            ], geometry: point))
                }
            }
            let (u, a) = (updates, adds)
            try await gdb.write { conn in
                try table.update(u, in: conn)
                _ = try table.add(a, in: conn)
            }
            done += 1000
        }
        let seconds = Date().timeIntervalSince(started)
        let pending = try await table.pendingChanges()
        guard pending.total > 0 else { throw BenchError("no edits were captured") }
        try gdb.close()
        return seconds
    }

    static func run(base: Int, edits: Int, executable: String, workDirectory: URL) throws {
        let baseFile = workDirectory.appendingPathComponent("edits-base.gpkg")
        try prepareBase(base, at: baseFile)
        var rows: [[String]] = []
        let floor = try bestOf(3, [executable, "worker-edits", "floor", baseFile.path, String(edits)])
        let capture = try bestOf(3, [executable, "worker-edits", "capture", baseFile.path, String(edits)])
        let api = try bestOf(3, [executable, "worker-edits", "api", baseFile.path, String(edits)])
        let (f, c, a) = (floor.seconds, capture.seconds, api.seconds)
        rows.append(["raw SQL, R-tree triggers, no capture (floor)", format(Double(edits) / f), format(floor.peakMemoryMB, 1), "-"])
        rows.append(["raw SQL, R-tree triggers + change capture", format(Double(edits) / c), format(capture.peakMemoryMB, 1), format((c / f - 1) * 100, 1) + "%"])
        rows.append(["Outpost API (validated) + capture", format(Double(edits) / a), format(api.peakMemoryMB, 1), format((a / f - 1) * 100, 1) + "%"])
        printTable(
            "Edits on a \(base)-point geodatabase in batches of 1,000 (half updates moving the point, half inserts): \(edits) edits, best of 3",
            ["path", "edits/s", "peak MB", "cost over floor"], rows)
        Geodatabase.removeFiles(at: baseFile)
    }
}
