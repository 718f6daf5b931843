import Foundation
import OutpostCore
import OutpostServer
import OutpostServiceTestSupport
import OutpostStorage
import OutpostTestSupport
import Testing

/// Service files made by earlier versions are brought up to date when a server opens them.
@Suite("Service file upgrades")
struct ServiceFileUpgradeTests {
    /// Files made before 2026-11-26 kept per-feature column generations that nothing read; the
    /// server drops the table and its extension row, and the file stays a valid GeoPackage.
    @Test func theUnreadFeatureVersionsTableIsDropped() async throws {
        let service = try await TestService.fieldInspection(.sqlite)
        try await service.backend.close()
        let old = try Geodatabase.open(at: service.file)
        try await old.write { conn in
            try conn.execute(
                "CREATE TABLE outpost_feature_versions (layer_id INTEGER NOT NULL, globalid TEXT NOT NULL, generation INTEGER NOT NULL, column_generations TEXT NOT NULL, PRIMARY KEY (layer_id, globalid))")
            try conn.execute("INSERT INTO outpost_feature_versions VALUES (0, '{00000000-0000-4000-8000-000000000001}', 1, '{}')")
            try conn.execute(
                "INSERT INTO gpkg_extensions (table_name, column_name, extension_name, definition, scope) VALUES ('outpost_feature_versions', NULL, 'outpost_sync', 'docs/geopackage-extension.md', 'write-only')")
        }
        try old.close()

        let backend = try await service.reopened()
        try await backend.close()
        let reopened = try Geodatabase.open(at: service.file)
        let left = try await reopened.read { conn in
            (
                try conn.query("SELECT count(*) FROM sqlite_master WHERE name = 'outpost_feature_versions'").first?[0].integerValue,
                try conn.query("SELECT count(*) FROM gpkg_extensions WHERE table_name = 'outpost_feature_versions'").first?[0].integerValue
            )
        }
        try reopened.close()
        #expect(left.0 == 0 && left.1 == 0)
        let check = try await ExternalTools.run("/usr/bin/python3", [try #require(ExternalTools.validateGPKG), "-k", service.file.path])
        #expect(check.succeeded, "\(check.stdout)\(check.stderr)")
    }
}
