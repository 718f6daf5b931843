import Foundation
import OutpostCore
import OutpostDigest
import OutpostServiceTestSupport
import OutpostTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `outpost site`: a locator published to a site's database is served by every host, one that
/// was running and one started later, and is no longer served once withdrawn; bad files and
/// names are refused with nothing registered.
@Suite struct SiteRegistryTests {
    @Test(.scaledTimeLimit(minutes: 5))
    func aPublishedLocatorIsServedByEveryHostUntilWithdrawn() async throws {
        let directory = TemporaryDirectory("outpost-site-registry")
        let locator = try await LocatorCommandTests.locator(in: directory)
        let database = try await BackendKind.newPostgresDatabase()
        let site = directory.file("site")
        let arguments = ["--postgres", database, "--site-directory", site.path]
        let a = try await ServeProcess.start(service: directory.file("helsinki.gpkg"), arguments: arguments)
        func find(_ host: ServeProcess) async throws -> (status: String, body: String) {
            let r = try await ExternalTools.run(
                "curl", ["-s", "-w", "\n%{http_code}", host.url.absoluteString + "/arcgis/rest/services/Addresses/GeocodeServer/findAddressCandidates?SingleLine=Mannerheimintie%2012&f=json"])
            let lines = r.stdout.split(separator: "\n", omittingEmptySubsequences: false)
            return (String(lines.last ?? ""), lines.dropLast().joined(separator: "\n"))
        }
        #expect(try await find(a).status == "404", "nothing published yet")

        // Refused, nothing copied or registered: a file that is no locator, a bad name, no such kind.
        let damaged = directory.file("damaged.locator")
        try Data(repeating: 7, count: 4096).write(to: damaged)
        let refused = try await outpost(["site", "publish", damaged.path, "--site-directory", site.path, "--postgres", database])
        #expect(!refused.succeeded && refused.stderr.contains("does not open as a locator"), "\(refused.stderr)")
        let named = try await outpost(["site", "publish", locator.path, "--name", "../x", "--site-directory", site.path, "--postgres", database])
        #expect(!named.succeeded && named.stderr.contains("name"), "\(named.stderr)")
        #expect(try await outpost(["site", "list", "--postgres", database]).stdout.isEmpty)

        let published = try await outpost(["site", "publish", locator.path, "--name", "Addresses", "--site-directory", site.path, "--postgres", database])
        #expect(published.succeeded, "\(published.stderr)")
        let again = try await outpost(["site", "publish", locator.path, "--name", "addresses", "--site-directory", site.path, "--postgres", database])
        #expect(!again.succeeded && again.stderr.contains("published already"), "one per name, whatever its case: \(again.stderr)")
        let listed = try JSONValue.parse(try await outpost(["site", "list", "--json", "--postgres", database]).stdout)
        let sha256 = listed[0]?["sha256"]?.stringValue ?? ""
        let path = "services/Addresses-\(sha256.prefix(12)).locator"
        #expect(listed.arrayValue?.count == 1 && listed[0]?["kind"] == "locator" && listed[0]?["path"]?.stringValue == path, "\(listed)")
        let copied = try Data(contentsOf: site.appendingPathComponent(path))
        #expect(sha256.count == 64 && SHA256.hex(copied) == sha256, "the copy is the file registered")

        // The running host picks it up; a host started now has it from its first request.
        var seen = (status: "", body: "")
        for _ in 0..<100 where seen.status != "200" {
            seen = try await find(a)
            if seen.status != "200" { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(seen.status == "200" && seen.body.contains("Mannerheimintie 12"), "\(seen)")
        let b = try await ServeProcess.start(service: directory.file("helsinki.gpkg"), arguments: arguments)
        let fromB = try await find(b)
        #expect(fromB.status == "200" && fromB.body == seen.body, "\(fromB)")

        let withdrawn = try await outpost(["site", "withdraw", "locator", "addresses", "--site-directory", site.path, "--postgres", database])
        #expect(withdrawn.succeeded, "\(withdrawn.stderr)")
        for host in [a, b] {
            var gone = ""
            for _ in 0..<100 where gone != "404" {
                gone = try await find(host).status
                if gone != "404" { try await Task.sleep(for: .milliseconds(100)) }
            }
            #expect(gone == "404", "withdrawn from \(host.url)")
        }
        #expect(!FileManager.default.fileExists(atPath: site.appendingPathComponent(path).path))
        let none = try await outpost(["site", "withdraw", "locator", "addresses", "--site-directory", site.path, "--postgres", database])
        #expect(!none.succeeded && none.stderr.contains("no locator named addresses"), "\(none.stderr)")
        #expect(await a.stop() == 0)
        #expect(await b.stop() == 0)
    }

    /// Two publications of one name at once, of different files: the second is held after its
    /// check that the name is free while the first publishes; let go, it is refused, and the
    /// file in the site directory is the one the entry describes, with nothing else left.
    @Test(.scaledTimeLimit(minutes: 5))
    func publicationsOfOneNameAtOnceRegisterOneFileIntact() async throws {
        let directory = TemporaryDirectory("outpost-site-race")
        let first = try await LocatorCommandTests.locator(in: directory)
        let second = directory.file("second.locator")
        try FileManager.default.copyItem(at: first, to: second)
        #expect(try await SyncCommandTests.sqlite(second.path, "INSERT INTO locator_info (key, value) VALUES ('note', 'another file');").succeeded)
        let database = try await BackendKind.newPostgresDatabase()
        let site = directory.file("site")
        let errors = directory.file("held.stderr")
        let fd = open(errors.path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        #expect(fd >= 0)
        let held = try SpawnedProcess.spawn(
            Repository.outpostExecutable.path, ["site", "publish", second.path, "--name", "Addresses", "--site-directory", site.path, "--postgres", database],
            environment: ["OUTPOST_FAULT": "site.beforeCopy:stop"], stderr: .descriptor(fd))
        close(fd)
        var state = ""
        for _ in 0..<600 where state != "T" {
            let stat = (try? String(contentsOfFile: "/proc/\(held.pid)/stat", encoding: .utf8)) ?? ""
            state = stat.split(separator: ")").last?.split(separator: " ").first.map(String.init) ?? ""
            if state != "T" { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(state == "T", "the second publication stops after its check")
        let published = try await outpost(["site", "publish", first.path, "--name", "Addresses", "--site-directory", site.path, "--postgres", database])
        #expect(published.succeeded, "\(published.stderr)")
        kill(held.pid, SIGCONT)
        let status = await Task.detached { held.wait() }.value
        let message = (try? String(contentsOf: errors, encoding: .utf8)) ?? ""
        #expect(status != 0 && message.contains("was published meanwhile"), "\(status): \(message)")

        let listed = try JSONValue.parse(try await outpost(["site", "list", "--json", "--postgres", database]).stdout)
        let path = listed[0]?["path"]?.stringValue ?? ""
        #expect(listed.arrayValue?.count == 1 && listed[0]?["name"] == "Addresses", "\(listed)")
        let stored = site.appendingPathComponent(path)
        let bytes = try Data(contentsOf: stored)
        let original = try Data(contentsOf: first)
        #expect(SHA256.hex(bytes) == listed[0]?["sha256"]?.stringValue && bytes == original, "the registered file is intact")
        let left = try FileManager.default.contentsOfDirectory(atPath: site.appendingPathComponent("services").path)
        #expect(left == [stored.lastPathComponent], "only the registered file, no copy or partial left: \(left)")
    }

    /// A map published with its preplanned areas' packages: every host lists the map and its
    /// ready areas and serves the package's files (a crew takes the area offline through one);
    /// packages that are not finished or name no area are refused; withdrawn, it is gone.
    @Test(.scaledTimeLimit(minutes: 6))
    func aPublishedMapBringsItsAreaPackagesToEveryHost() async throws {
        let dir = TemporaryDirectory("outpost-site-map")
        let database = try await BackendKind.newPostgresDatabase()
        let site = dir.file("site")
        let arguments = ["--postgres", database, "--site-directory", site.path]
        let (a, _) = try await OfflineMapTests.served(in: dir, arguments: arguments)
        let office = dir.file("office")
        try FileManager.default.createDirectory(at: office, withIntermediateDirectories: true)
        let map = office.appendingPathComponent("crews.map.json")
        try FileManager.default.copyItem(at: Repository.schema("examples/field-crews.map.json"), to: map)

        // Refused, nothing registered: a package of no area of the map, one not finished.
        let packages = office.appendingPathComponent("crews.preplanned")
        try FileManager.default.createDirectory(at: packages.appendingPathComponent("north"), withIntermediateDirectories: true)
        let stray = try await outpost(["site", "publish", map.path, "--site-directory", site.path, "--postgres", database])
        #expect(!stray.succeeded && stray.stderr.contains("no preplanned area"), "\(stray.stderr)")
        try FileManager.default.moveItem(at: packages.appendingPathComponent("north"), to: packages.appendingPathComponent("south-west"))
        let unfinished = try await outpost(["site", "publish", map.path, "--site-directory", site.path, "--postgres", database])
        #expect(!unfinished.succeeded && unfinished.stderr.contains("not a finished package"), "\(unfinished.stderr)")
        try FileManager.default.removeItem(at: packages)
        #expect(try await outpost(["site", "list", "--postgres", database]).stdout.isEmpty)

        // The office prepares the area from its map file through host A, then publishes both.
        let prepared = try await outpost([
            "offline", "prepare", "--map", map.path, "--services-url", "\(a.url.absoluteString)/arcgis/rest/services/", "--out", packages.path,
        ])
        #expect(prepared.succeeded, "\(prepared.stderr)")
        let published = try await outpost(["site", "publish", map.path, "--site-directory", site.path, "--postgres", database])
        #expect(published.succeeded && published.stdout.contains("with 1 area package"), "\(published.stdout) \(published.stderr)")
        let listed = try JSONValue.parse(try await outpost(["site", "list", "--json", "--postgres", database]).stdout)
        #expect(listed[0]?["kind"] == "map" && listed[0]?["path"]?.stringValue?.hasPrefix("services/crews-") == true, "\(listed)")

        // Host A, running, picks it up; host B, started now, has it at once.
        let b = try await ServeProcess.start(service: dir.file("services/natural_earth.gpkg"), arguments: arguments)
        func area(_ host: ServeProcess) async throws -> JSONValue {
            let body = try await ExternalTools.run("curl", ["-s", "\(host.url.absoluteString)/arcgis/rest/maps/crews/areas/south-west"]).stdout
            return (try? JSONValue.parse(body)) ?? .null
        }
        var seen = JSONValue.null
        for _ in 0..<100 where seen["ready"] != true {
            seen = try await area(a)
            if seen["ready"] != true { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(seen["ready"] == true, "\(seen)")
        let fromB = try await area(b)
        #expect(fromB["ready"] == true && fromB["files"] == seen["files"], "\(fromB)")
        let tiles = try await ExternalTools.run("curl", ["-s", "-o", dir.file("b.tpkx").path, "-w", "%{http_code}", "\(b.url.absoluteString)/arcgis/rest/maps/crews/areas/south-west/files/basemap.tpkx"])
        #expect(tiles.stdout == "200")
        #expect(try Data(contentsOf: dir.file("b.tpkx")) == Data(contentsOf: packages.appendingPathComponent("south-west/basemap.tpkx")))

        // A crew takes the published area offline through host A.
        let crew = dir.file("crew")
        let taken = try await outpost([
            "offline", "create", "--map", "\(a.url.absoluteString)/arcgis/rest/maps/crews.json", "--area", "south-west", "--out", crew.path, "--job-dir", dir.file("jobs").path,
        ])
        #expect(taken.succeeded, "\(taken.stderr)")
        #expect(try Data(contentsOf: crew.appendingPathComponent("basemap.tpkx")) == Data(contentsOf: packages.appendingPathComponent("south-west/basemap.tpkx")))
        #expect(try await OfflineMapTests.status(crew)["preplannedArea"] == "south-west")

        let withdrawn = try await outpost(["site", "withdraw", "map", "crews", "--site-directory", site.path, "--postgres", database])
        #expect(withdrawn.succeeded, "\(withdrawn.stderr)")
        for host in [a, b] {
            var status = ""
            for _ in 0..<100 where status != "404" {
                status = try await ExternalTools.run("curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "\(host.url.absoluteString)/arcgis/rest/maps/crews.json"]).stdout
                if status != "404" { try await Task.sleep(for: .milliseconds(100)) }
            }
            #expect(status == "404", "withdrawn from \(host.url)")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: site.appendingPathComponent("services").path).isEmpty, "the definition and its packages removed")
        #expect(await a.stop() == 0)
        #expect(await b.stop() == 0)
    }
}
