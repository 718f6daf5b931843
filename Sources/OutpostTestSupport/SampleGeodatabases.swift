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

    /// Every row of every layer and table, for "nothing changed" assertions.
    public static func contents(of gdb: Geodatabase) async throws -> [String: [Feature]] {
        var out: [String: [Feature]] = [:]
        for table in gdb.tables {
            out[table.name] = try await table.features()
        }
        return out
    }
}
