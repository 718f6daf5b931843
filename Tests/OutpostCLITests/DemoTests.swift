import Foundation
import OutpostCore
import OutpostStorage
import OutpostTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `outpost demo` as a newcomer runs it, from a directory that is not the repository: each step's
/// result checked on the files and the server it leaves, by Outpost's own reads and by others'.
@Suite("outpost demo")
struct DemoTests {
    @Test(.scaledTimeLimit(minutes: 4))
    func theDemoTellsTheWholeOfflineStory() async throws {
        let dir = TemporaryDirectory()
        let elsewhere = TemporaryDirectory("outpost-elsewhere")
        let work = dir.file("work")
        let demo = try await ServeProcess.launch(["demo", "--workdir", work.path, "--keep"], currentDirectory: elsewhere.url, what: "outpost demo", timeout: 400) { lines in
            guard let last = lines.last else { return .more }
            guard let range = last.range(of: "the server keeps running: open ") else { return .more }
            return URL(string: String(last[range.upperBound...].prefix { $0 != " " })).map { .found($0) } ?? .failed
        }
        let out = demo.transcript
        let lines = out.split(separator: "\n").map(String.init)
        func line(_ prefix: String) -> String { lines.first { $0.hasPrefix(prefix) } ?? "" }

        // 1. Served: three feature services, the basemap, locator, network and GP service, which
        // the Services Directory lists (--keep leaves it up).
        #expect(line("1. serving at ").contains("street_inspections (73 inspections)") && line("1. ").contains("the planning GP service"), "\(out)")
        let catalog = try JSONValue.parse(Data(try await ExternalTools.run("curl", ["-s", "\(demo.url.absoluteString)?f=json"]).stdout.utf8))
        let listed = Set((catalog["services"]?.arrayValue ?? []).compactMap { s in s["name"]?.stringValue.flatMap { n in s["type"]?.stringValue.map { "\(n) \($0)" } } })
        #expect(
            listed.isSuperset(of: [
                "street_inspections FeatureServer", "planning FeatureServer", "helsinki FeatureServer", "helsinki GeocodeServer", "helsinki NAServer",
                "planning GPServer",
            ]), "\(listed)")
        let page = try await ExternalTools.run("curl", ["-s", demo.url.absoluteString])
        #expect(page.stdout.contains("street_inspections"), "the Services Directory's page")
        let basemap = try JSONValue.parse(Data(try await ExternalTools.run("curl", ["-s", "\(demo.url.absoluteString)/helsinki/MapServer?f=json"]).stdout.utf8))
        #expect(basemap["tileInfo"] != nil, "the basemap drawn from the Helsinki streets: \(basemap)")

        // 2. The map offline: both replicas, the basemap, the locator and the network.
        let map = work.appendingPathComponent("crew-map")
        #expect(line("2. map ").contains("replicas data/street_inspections.gpkg (73 inspections), data/planning.gpkg (128 parcels, 120 spot_heights)"), "\(out)")
        let status = try await outpost(["offline", "status", map.path, "--json"])
        #expect(status.succeeded, "\(status.stderr)")
        for file in ["basemap.tpkx", "locators/helsinki.locator", "networks/helsinki.network", "data/planning.gpkg"] {
            #expect(FileManager.default.fileExists(atPath: map.appendingPathComponent(file).path), "\(file)")
        }
        let tiles = try await outpost(["tiles", "inspect", map.appendingPathComponent("basemap.tpkx").path])
        #expect(tiles.succeeded && tiles.stdout.contains("level 16"), "\(tiles.stdout)\(tiles.stderr)")

        // 3. Offline: the typo found its address, the route reaches it, the model listed the
        // owners it printed, and the inspection was recorded (checked after the sync below).
        #expect(line("3. link cut").contains("cannot reach"), "\(out)")
        #expect(out.contains("offline: Unioninkatu 12, Helsinki (score"), "\(out)")
        #expect(out.contains("Turn right onto Unioninkatu") && out.contains("Finish at Unioninkatu 12, Helsinki"), "\(out)")
        let owners = try #require(out.range(of: #"(\d+) owners within 100 m"#, options: .regularExpression).map { Int(out[$0].prefix { $0.isNumber }) })
        let csv = try String(contentsOf: work.appendingPathComponent("mailing-list/mailing-list.csv"), encoding: .utf8)
        #expect(owners != nil && csv.split(whereSeparator: \.isNewline).count - 1 == owners, "\(csv)")

        // 4–5. The office's edits and the crew's met in one sync: the conflict recorded, both
        // sides the same row for row (read by Python's sqlite3), the photo the same bytes.
        #expect(line("4. office edits").contains("INS-0062"), "\(out)")
        #expect(out.contains("conflict on inspections INS-0062 (notes)") && out.contains("both sides match"), "\(out)")
        let service = work.appendingPathComponent("services/street_inspections.gpkg")
        let replica = map.appendingPathComponent("data/street_inspections.gpkg")
        let rows = try await inspectionsOnBothSides(service: service, replica: replica)
        #expect(rows.succeeded && rows.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "75", "\(rows.stdout)\(rows.stderr)")
        let gdb = try Geodatabase.open(at: replica, readOnly: true)
        let table = try gdb.table(named: "inspections")
        let closed = try #require(try await table.features(matching: FeatureQuery(where: "inspection_id = 'INS-0062'")).first)
        let attached = try #require(try await table.attachments(forFeature: closed.objectID!).first)
        let photo = try await table.attachmentData(id: attached.id)
        let conflicts = try await gdb.read({ try $0.conflicts() })
        try gdb.close()
        #expect(conflicts.count == 1 && conflicts.first?.globalID == closed.globalID)
        let layer = "\(demo.url.absoluteString)/street_inspections/FeatureServer/0"
        let ids = try JSONValue.parse(
            Data(
                try await ExternalTools.run("curl", ["-s", "--data-urlencode", "where=inspection_id = 'INS-0062'", "-d", "returnIdsOnly=true", "-d", "f=json", "\(layer)/query"])
                    .stdout.utf8))
        let id = try #require(ids["objectIds"]?[0]?.integerValue)
        let infos = try JSONValue.parse(Data(try await ExternalTools.run("curl", ["-s", "\(layer)/\(id)/attachments?f=json"]).stdout.utf8))
        let attachment = try #require(infos["attachmentInfos"]?[0]?["id"]?.integerValue)
        let served = dir.file("served.jpg")
        #expect(try await ExternalTools.run("curl", ["-s", "-o", served.path, "\(layer)/\(id)/attachments/\(attachment)"]).succeeded)
        #expect(try Data(contentsOf: served) == photo && photo.starts(with: [0xFF, 0xD8, 0xFF]) && attached.contentType == "image/jpeg", "the photo is the same JPEG on both sides")

        // 6. The delta files did the second round: the crew's edit on the service, the office's
        // in the replica (both already in the row comparison above), and the files are there.
        #expect(line("6. no link at all").contains("imported by the crew"), "\(out)")
        for file in ["edits.delta", "reply.delta"] { #expect(FileManager.default.fileExists(atPath: work.appendingPathComponent(file).path)) }
        let nextDay = try await ExternalTools.python(
            """
            import sys, sqlite3
            for path, inspection, status in ((sys.argv[1], "INS-0068", "done"), (sys.argv[2], "INS-OFFICE-1", "in_progress")):
                db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
                assert db.execute("SELECT status FROM inspections WHERE inspection_id = ?", (inspection,)).fetchone() == (status,), (path, inspection)
            """, [service.path, replica.path])
        #expect(nextDay.succeeded, "\(nextDay.stderr)")

        // 7. Where the files are; the replica is a valid GeoPackage that GDAL reads.
        #expect(line("7. files in ").contains(work.path) && out.contains("ogrinfo ") && out.contains("outpost serve --service "), "\(out)")
        let check = try await ExternalTools.run("/usr/bin/python3", [try #require(ExternalTools.validateGPKG), "-k", "--extra", "--warning-as-error", replica.path])
        #expect(check.succeeded, "the crew's replica is a valid GeoPackage: \(check.stdout)\(check.stderr)")
        let ogr = try await ExternalTools.run("ogrinfo", ["-so", "-ro", replica.path, "inspections"])
        #expect(ogr.succeeded && ogr.stdout.contains("Feature Count: 75"), "\(ogr.stdout)\(ogr.stderr)")

        // Ctrl-C ends it cleanly; it wrote nothing outside its work directory.
        #expect(await demo.stop(signal: SIGINT) == 0)
        #expect(try FileManager.default.contentsOfDirectory(atPath: elsewhere.url.path).isEmpty, "the demo writes only into its work directory")

        let notSamples = try await outpost(["demo", "--samples", elsewhere.url.path, "--workdir", dir.file("again").path], in: elsewhere.url)
        #expect(notSamples.status == 1 && notSamples.stderr.contains("is not a samples folder"), "\(notSamples.stderr)")
    }
}

/// The street inspections of a service and a replica read by Python's sqlite3: the same rows on
/// both sides, INS-0062 carrying the crew's close and the office's priority (the conflict the
/// demo and the quick start make), and `alsoAssert` (Python over `service` and `replica`, lists
/// of (globalid, inspection_id, status, priority, notes, inspector)). Prints the row count.
func inspectionsOnBothSides(service: URL, replica: URL, alsoAssert: String = "") async throws -> CommandResult {
    try await ExternalTools.python(
        """
        import sys, sqlite3
        def rows(path):
            db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            return sorted(db.execute("SELECT globalid, inspection_id, status, priority, notes, inspector FROM inspections"))
        service, replica = rows(sys.argv[1]), rows(sys.argv[2])
        assert service == replica, [r for r in service if r not in replica] + ["|"] + [r for r in replica if r not in service]
        merged = [r for r in service if r[1] == "INS-0062"][0]
        assert merged[2:] == ("done", 1, "kerb stone reset; crossing safe", "crew 7"), merged
        \(alsoAssert)
        print(len(service))
        """, [service.path, replica.path])
}
