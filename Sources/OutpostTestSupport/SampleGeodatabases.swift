import Foundation
import OutpostCore
import OutpostStorage

/// Geodatabases built from the repository's sample data, in a test's temporary directory.
public enum SampleGeodatabases {
    /// The field-inspection service with its sample features.
    public static func fieldInspection(in directory: TemporaryDirectory, name: String = "field.gpkg") throws -> Geodatabase {
        try ServiceDirectoryImport.createGeodatabase(
            from: Repository.sampleData("field_inspection"), at: directory.file(name)
        ).0
    }

    /// The field-inspection schema with no features.
    public static func emptyFieldInspection(in directory: TemporaryDirectory, name: String = "empty.gpkg") throws -> Geodatabase {
        try Geodatabase.create(
            at: directory.file(name), schema: try ServiceSchema.load(from: Repository.sampleData("field_inspection/service.json")))
    }

    /// The field-inspection service with some values stored as other writers store them (REAL in
    /// an integer column, numbers as text, dates as epoch milliseconds or in another ISO
    /// spelling, -0.0, non-ASCII text) and every kind of geometry cell (a big-endian body, a
    /// multipoint, a line, an empty point, NULL, a point with Z), in features 1 to 9: for
    /// readers that must give what decoding each feature gives, however it was stored.
    public static func fieldInspectionInOtherWritersForms(in directory: TemporaryDirectory) async throws -> Geodatabase {
        let gdb = try fieldInspection(in: directory)
        let bigEndian = GeoPackageBinary.encode(.point(try Point(x: -122.6, y: 45.5)), srsID: 4326, littleEndian: false)
        let multi = GeoPackageBinary.encode(
            .multiPoint(try MultiPoint([try Point(x: -122.6, y: 45.5), try Point(x: -122.61, y: 45.51)])), srsID: 4326)
        let line = GeoPackageBinary.encode(.lineString(try LineString([Position(x: -122.6, y: 45.5), Position(x: -122.5, y: 45.6)])), srsID: 4326)
        let empty = GeoPackageBinary.encode(.point(Point(empty: .xy)), srsID: 4326)
        let pointZ = GeoPackageBinary.encode(.point(try Point(x: -122.6, y: 45.5, z: 12)), srsID: 4326, envelope: .xyz)
        try await gdb.write { conn in
            try conn.execute("UPDATE inspection_points SET condition = 3.0, depth_m = 2 WHERE objectid = 1")
            try conn.execute("UPDATE inspection_points SET condition = '4', depth_m = '2.75', inspected_at = 1700000000123 WHERE objectid = 2")
            try conn.execute("UPDATE inspection_points SET inspected_at = '2024-05-01T10:20:30Z', depth_m = -0.0, notes = 'naïve ✓' WHERE objectid = 3")
            try conn.execute("UPDATE inspection_points SET geom = ?, notes = NULL WHERE objectid = 4", arguments: [.blob(bigEndian)])
            try conn.execute("UPDATE inspection_points SET geom = ? WHERE objectid = 5", arguments: [.blob(multi)])
            try conn.execute("UPDATE inspection_points SET geom = ? WHERE objectid = 6", arguments: [.blob(empty)])
            try conn.execute("UPDATE inspection_points SET geom = NULL WHERE objectid = 7")
            try conn.execute("UPDATE inspection_points SET geom = ? WHERE objectid = 8", arguments: [.blob(pointZ)])
            try conn.execute("UPDATE inspection_points SET geom = ? WHERE objectid = 9", arguments: [.blob(line)])
        }
        return gdb
    }

    /// Every row of every layer and table, for "nothing changed" assertions.
    public static func contents(of gdb: Geodatabase) async throws -> [String: [Feature]] {
        var out: [String: [Feature]] = [:]
        for table in gdb.tables {
            out[table.name] = try await table.features()
        }
        return out
    }
}
