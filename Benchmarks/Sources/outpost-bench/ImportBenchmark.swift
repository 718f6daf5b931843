import Foundation
import GRDB
import GRDBSQLite
import OutpostCore
import OutpostStorage

/// Benchmark 1 of the foundation issue: N points with 5 attributes (int, double, 20-char text,
/// date, uuid) into a new geodatabase with its spatial index; next to GDAL (pyogrio) writing the
/// same shape of data and raw SQLite inserts into a plain table (the floor).
enum ImportBenchmark {
    static let schema = ServiceSchema(
        name: "bench",
        layers: [
            LayerDefinition(
                id: 0, name: "points", geometryType: .point,
                fields: [
                    FieldDefinition(name: "id_int", type: .integer), FieldDefinition(name: "value", type: .double),
                    FieldDefinition(name: "label", type: .string, length: 20), FieldDefinition(name: "observed", type: .date),
                    FieldDefinition(name: "ref", type: .guid),
                ])
        ])

    static func coordinates(_ i: Int) -> (Double, Double) {
        (-180 + Double((i &* 7919) % 360_000) / 1000, -85 + Double((i &* 104_729) % 170_000) / 1000)
    }

    static func label(_ i: Int) -> String {
        let digits = String(i)
        return "feature-" + String(repeating: "0", count: max(0, 12 - digits.count)) + digits
    }

    static let epoch = Date(timeIntervalSince1970: 1_704_067_200)

    /// The measured section: create the file with its initial import, close.
    static func runOutpost(count: Int, output: URL) throws -> Double {
        Geodatabase.removeFiles(at: output)
        let started = Date()
        var random = FastRandomGenerator(seed: 1)
        let gdb = try Geodatabase.create(at: output, schema: schema) { conn in
            let table = try conn.geodatabase.table(named: "points")
            try table.importFeatures(in: conn) { importer in
                var values = [FieldValue](repeating: .null, count: 5)
                for i in 0..<count {
                    let (x, y) = coordinates(i)
                    values[0] = .integer(Int64(i))
                    values[1] = .double(Double(i) * 0.5)
                    values[2] = .string(label(i))
                    values[3] = .date(epoch.addingTimeInterval(Double(i)))
                    values[4] = .string(GlobalID.make(using: &random))
                    try importer.add(values: values, geometry: .point(try Point(x: x, y: y)))
                }
            }
        }
        try gdb.close()
        return Date().timeIntervalSince(started)
    }

    /// The floor: the same rows (GeoPackage point blobs included) inserted with one prepared
    /// statement into a plain table with no index and no triggers, in one transaction.
    static func runFloor(count: Int, output: URL) throws -> Double {
        Geodatabase.removeFiles(at: output)
        let started = Date()
        let queue = try DatabaseQueue(path: output.path)
        var random = FastRandomGenerator(seed: 1)
        try queue.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA journal_mode = WAL")
            try db.execute(sql: "CREATE TABLE points (fid INTEGER PRIMARY KEY, geom BLOB, id_int INTEGER, value REAL, label TEXT, observed TEXT, ref TEXT)")
            try db.inTransaction {
                var stmt: OpaquePointer?
                sqlite3_prepare_v2(db.sqliteConnection, "INSERT INTO points (geom, id_int, value, label, observed, ref) VALUES (?, ?, ?, ?, ?, ?)", -1, &stmt, nil)
                defer { sqlite3_finalize(stmt) }
                let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
                for i in 0..<count {
                    let (x, y) = coordinates(i)
                    let blob = GeoPackageBinary.encode(.point(try Point(x: x, y: y)), srsID: 4326)
                    blob.withUnsafeBytes { _ = sqlite3_bind_blob(stmt, 1, $0.baseAddress, Int32($0.count), transient) }
                    sqlite3_bind_int64(stmt, 2, Int64(i))
                    sqlite3_bind_double(stmt, 3, Double(i) * 0.5)
                    sqlite3_bind_text(stmt, 4, label(i), -1, transient)
                    sqlite3_bind_text(stmt, 5, GeoPackageDate.format(epoch.addingTimeInterval(Double(i))), -1, transient)
                    sqlite3_bind_text(stmt, 6, GlobalID.make(using: &random), -1, transient)
                    guard sqlite3_step(stmt) == SQLITE_DONE else { throw BenchError("insert failed") }
                    sqlite3_reset(stmt)
                }
                return .commit
            }
        }
        try queue.close()
        return Date().timeIntervalSince(started)
    }

    static func run(counts: [Int], repeats: Int = 3, executable: String, workDirectory: URL) throws {
        let python = ProcessInfo.processInfo.environment["OUTPOST_PYTHON"] ?? "python3"
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("scripts/gdal_write.py").path
        var rows: [[String]] = []
        for count in counts {
            let outpostFile = workDirectory.appendingPathComponent("outpost-\(count).gpkg")
            let gdalFile = workDirectory.appendingPathComponent("gdal-\(count).gpkg")
            let floorFile = workDirectory.appendingPathComponent("floor-\(count).sqlite")
            let ours = try bestOf(repeats, [executable, "worker-import", String(count), outpostFile.path])
            let gdal = try bestOf(repeats, [python, script, String(count), gdalFile.path]) {
                try? FileManager.default.removeItem(at: gdalFile)
            }
            let floor = try bestOf(repeats, [executable, "worker-floor", String(count), floorFile.path])
            let (o, g, f) = (ours.seconds, gdal.seconds, floor.seconds)
            rows.append(["Outpost import (R-tree bulk-loaded)", String(count), format(Double(count) / o), format(ours.peakMemoryMB, 1), format(g / o, 2) + "x"])
            rows.append(["GDAL via pyogrio.raw.write (spatial index)", String(count), format(Double(count) / g), format(gdal.peakMemoryMB, 1), "1.00x"])
            rows.append(["raw SQLite, plain table, no index (floor)", String(count), format(Double(count) / f), format(floor.peakMemoryMB, 1), format(g / f, 2) + "x"])
            for file in [outpostFile, gdalFile, floorFile] { Geodatabase.removeFiles(at: file) }
        }
        printTable(
            "Import of points with 5 attributes into a new file (features/s, best of \(repeats) runs; peak RSS of the writing process)",
            ["writer", "features", "features/s", "peak MB", "vs GDAL"], rows)
        print("GDAL's peak memory includes the numpy arrays it writes from; Outpost streams rows from a generator.")
    }
}
