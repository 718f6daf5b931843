import Foundation
import OutpostCore
import OutpostTestSupport
import OutpostServiceTestSupport
import Testing

@testable import OutpostServer

/// `outpost serve` as a process, read by third-party clients over real HTTP on 127.0.0.1.
@Suite("Live server and third-party clients")
struct LiveServerTests {
    @Test(.scaledTimeLimit(minutes: 3), arguments: BackendKind.available)
    func gdalAndEsridumpReadTheService(kind: BackendKind) async throws {
        let service = try await TestService.fieldInspection(kind)
        try await service.backend.close()
        let server = try await ServeProcess.start(service)
        let layer = server.featureServer("field_inspection").appendingPathComponent("0")

        // GDAL's ESRIJSON driver on a query URL (it follows exceededTransferLimit by itself).
        let query = layer.absoluteString + "/query?where=1%3D1&outFields=*&f=json"
        let ogr = try await ExternalTools.run("ogrinfo", ["-ro", "-al", "-so", query])
        #expect(ogr.succeeded, "\(ogr.stderr)")
        #expect(ogr.stdout.contains("Feature Count: 300"), "\(ogr.stdout)")
        #expect(ogr.stdout.contains("Geometry: Point"))
        #expect(!ogr.stderr.contains("ERROR"))
        let paged = try await ExternalTools.run("ogrinfo", ["-ro", "-al", "-so", layer.absoluteString + "/query?where=1%3D1&outFields=*&f=json&resultRecordCount=40"])
        #expect(paged.stdout.contains("Feature Count: 300"), "\(paged.stdout)")

        // esridump pages with resultOffset/resultRecordCount after reading the count.
        let dir = TemporaryDirectory()
        let script = """
            import json, sys
            from esridump.dumper import EsriDumper
            features = list(EsriDumper(sys.argv[1], max_page_size=70))
            ids = sorted(f["properties"]["objectid"] for f in features)
            assert ids == list(range(1, 301)), ids[:5]
            assert all(f["geometry"]["type"] == "Point" for f in features)
            lines = list(EsriDumper(sys.argv[2]))
            assert len(lines) == 80 and lines[0]["geometry"]["type"] in ("LineString", "MultiLineString")
            print(len(features))
            """
        let dump = try await ExternalTools.python(script, [layer.absoluteString, server.featureServer("field_inspection").appendingPathComponent("1").absoluteString])
        #expect(dump.succeeded, "\(dump.stderr)")
        #expect(dump.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "300")
        _ = dir

        #expect(await server.stop(signal: SIGTERM) == 0, "SIGTERM stops it cleanly")
        // The database was closed cleanly: no WAL left behind, file intact.
        let walSize = (try? FileManager.default.attributesOfItem(atPath: service.file.path + "-wal")[.size] as? NSNumber)?.intValue ?? 0
        #expect(walSize == 0, "the WAL was checkpointed at shutdown")
        let check = try await ExternalTools.run("sqlite3", [service.file.path, "PRAGMA integrity_check"])
        #expect(check.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "ok")
    }

    @Test(.scaledTimeLimit(minutes: 3), arguments: BackendKind.available)
    func concurrentReadersAndSerialisedWriters(kind: BackendKind) async throws {
        let service = try await TestService.fieldInspection(kind)
        try await service.backend.close()
        let server = try await ServeProcess.start(service, arguments: ["--token", "s3cret"])
        let base = server.featureServer("field_inspection")
        // 40 readers and 20 writers at once, through curl.
        try await withThrowingTaskGroup(of: (Bool, String).self) { group in
            for i in 0..<40 {
                group.addTask {
                    let r = try await ExternalTools.run("curl", ["-s", "-H", "Authorization: Bearer s3cret", base.absoluteString + "/0/query?where=condition%3E%3D\(i % 5 + 1)&returnCountOnly=true&f=json"])
                    return (r.stdout.contains("\"count\""), r.stdout)
                }
            }
            for i in 0..<20 {
                group.addTask {
                    let adds = #"[{"attributes":{"asset_id":"C-\#(i)","asset_type":"pole"},"geometry":{"x":-122.65,"y":45.52}}]"#
                    let r = try await ExternalTools.run("curl", ["-s", "--data-urlencode", "adds=\(adds)", "--data-urlencode", "token=s3cret", base.absoluteString + "/0/applyEdits"])
                    return (r.stdout.contains("\"success\":true"), r.stdout)
                }
            }
            for try await (ok, text) in group { #expect(ok, "\(text)") }
        }
        let count = try await ExternalTools.run("curl", ["-s", base.absoluteString + "/0/query?where=1%3D1&returnCountOnly=true&token=s3cret"])
        #expect(count.stdout.contains("\"count\":320"))
        let unauthorised = try await ExternalTools.run("curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", base.absoluteString + "?f=json"])
        #expect(unauthorised.stdout == "401")
        #expect(await server.stop() == 0)
        // Every writer got its own generation.
        let reopened = try await service.reopened()
        #expect(try await reopened.generation() == 21)
        try await reopened.close()
    }

    @Test func refusesFilesThatAreNotServices() async throws {
        let dir = TemporaryDirectory()
        try SampleGeodatabases.fieldInspection(in: dir).close()
        let result = try await ExternalTools.run(Repository.outpostExecutable.path, ["serve", "--service", dir.file("field.gpkg").path, "--port", "0"])
        #expect(result.status == 1)
        #expect(result.stderr.contains("not an Outpost service"), "\(result.stderr)")
    }
}
