import Foundation
import OutpostCore
import OutpostPostgres
import OutpostStorage
import OutpostTestSupport
import Testing

/// The PostgreSQL/PostGIS store against the throwaway server `scripts/test` starts
/// (`OUTPOST_TEST_POSTGRES`); without it the suite is skipped, and says so.
@Suite("PostgreSQL service store", .enabled(if: ProcessInfo.processInfo.environment["OUTPOST_TEST_POSTGRES"] != nil, "run ./scripts/test: it starts PostgreSQL"))
struct PostgresServiceTests {
    static var url: String { ProcessInfo.processInfo.environment["OUTPOST_TEST_POSTGRES"] ?? "" }

    /// psql's answer to one query, as text rows.
    static func psql(_ sql: String) async throws -> [String] {
        let run = try await ExternalTools.run("psql", [url, "-XAtq", "-v", "ON_ERROR_STOP=1", "-c", sql])
        #expect(run.succeeded, "\(run.stderr)")
        return run.stdout.split(separator: "\n").map(String.init)
    }

    @Test(.scaledTimeLimit(minutes: 2))
    func theSampleServiceLoadsIntoPostGIS() async throws {
        let name = "fi_\(UInt32.random(in: 0...UInt32.max))"
        let made = try await ExternalTools.run(
            Repository.outpostExecutable.path, ["service", "create", Repository.sampleData("field_inspection").path, "--postgres", Self.url, "--out", name])
        #expect(made.succeeded, "\(made.stderr)")
        #expect(made.stdout.contains("inspection_points: 300 features"), "\(made.stdout)")
        // Counts, SRIDs and geometry types as PostGIS sees them; the indexes docs/postgres.md describes.
        #expect(try await Self.psql("SELECT count(*) FROM \(name).inspection_points") == ["300"])
        #expect(try await Self.psql("SELECT count(*) FROM \(name).pipelines") == ["80"])
        #expect(try await Self.psql("SELECT DISTINCT ST_SRID(geom) || ' ' || GeometryType(geom) FROM \(name).inspection_points") == ["4326 POINT"])
        let areas = try await Self.psql("SELECT srid, type FROM geometry_columns WHERE f_table_schema = '\(name)' AND f_table_name = 'service_areas'")
        #expect(areas == ["4326|MULTIPOLYGON"] || areas == ["4326|POLYGON"], "\(areas)")
        let indexes = try await Self.psql("SELECT indexdef FROM pg_indexes WHERE schemaname = '\(name)' AND tablename = 'inspection_points'")
        #expect(indexes.contains { $0.contains("USING gist (geom)") })
        #expect(indexes.contains { $0.hasPrefix("CREATE UNIQUE INDEX") && $0.contains("(globalid)") })
        #expect(try await Self.psql("SELECT max(version) FROM outpost_migrations") == ["11"])
        #expect(try await Self.psql("SELECT count(*) FROM pg_tables WHERE tablename IN ('outpost_security', 'outpost_failed_sign_ins')") == ["2"], "migration 8: a site's users")
        #expect(try await Self.psql("SELECT count(*) FROM information_schema.columns WHERE table_name = 'outpost_jobs' AND column_name IN ('host', 'lease_until')") == ["2"], "migration 9: job leases")
        #expect(try await Self.psql("SELECT count(*) FROM pg_tables WHERE tablename IN ('outpost_gp_jobs', 'outpost_gp_messages')") == ["2"], "migration 7: GP jobs")
        #expect(try await Self.psql("SELECT count(*) FROM pg_tables WHERE tablename = 'outpost_feature_versions'") == ["0"], "migration 6 dropped the unread table")
        #expect(try await Self.psql("SELECT schema_version FROM outpost_services WHERE name = '\(name)'") == ["1"])
        // The same values as the GeoPackage service made from the same data.
        let local = TemporaryDirectory()
        let gdb = try await Self.sampleGeoPackage(local)
        let sample = try #require(try await gdb.table(named: "inspection_points").feature(objectID: 17))
        try gdb.close()
        let row = try await Self.psql("SELECT globalid, asset_id, ST_X(geom), ST_Y(geom) FROM \(name).inspection_points WHERE objectid = 17")
        let expected = "\(sample.globalID!)|\(sample.attributes["asset_id"]?.stringValue ?? "")"
        #expect(row.first?.hasPrefix(expected) == true, "\(row) vs \(expected)")
        // GDAL's PostgreSQL driver reads the layers.
        let ogr = try await ExternalTools.run("ogrinfo", ["-ro", "-so", "PG:\(Self.libpq(Self.url)) schemas=\(name)", "inspection_points"])
        #expect(ogr.succeeded && ogr.stdout.contains("Feature Count: 300"), "\(ogr.stdout)\(ogr.stderr)")

        // The name is taken: refused in one line unless --overwrite.
        let again = try await ExternalTools.run(
            Repository.outpostExecutable.path, ["service", "create", Repository.sampleData("field_inspection").path, "--postgres", Self.url, "--out", name])
        #expect(again.status == 1 && again.stderr.contains("already") && again.stderr.split(separator: "\n").count == 1, "\(again.stderr)")
        _ = try await Self.psql("DROP SCHEMA \(name) CASCADE; DELETE FROM outpost_services WHERE name = '\(name)'")
    }

    /// A database that is not there is a clear one-line error.
    @Test func anUnreachableDatabaseIsAClearError() async throws {
        let made = try await ExternalTools.run(
            Repository.outpostExecutable.path,
            ["service", "create", Repository.sampleData("field_inspection").path, "--postgres", "postgres://nobody@127.0.0.1:1/none", "--out", "x"])
        #expect(made.status == 1 && made.stderr.hasPrefix("outpost: ") && made.stderr.split(separator: "\n").count == 1, "\(made.stderr)")
    }

    static func sampleGeoPackage(_ dir: TemporaryDirectory) async throws -> Geodatabase {
        try SampleGeodatabases.fieldInspection(in: dir)
    }

    /// `postgres://user@host:port/db` as a libpq connection string for GDAL.
    static func libpq(_ url: String) -> String {
        guard let c = URLComponents(string: url) else { return url }
        return "host=\(c.host ?? "") port=\(c.port ?? 5432) user=\(c.user ?? "") dbname=\(c.path.dropFirst())"
    }
}
