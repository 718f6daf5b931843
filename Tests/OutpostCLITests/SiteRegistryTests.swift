import Foundation
import OutpostCore
import OutpostServiceTestSupport
import OutpostTestSupport
import Testing

/// `outpost site`: a locator published to a site's database is served by every host, one that
/// was running and one started later, and is no longer served once withdrawn; bad files and
/// names are refused with nothing registered.
@Suite struct SiteRegistryTests {
    @Test(.timeLimit(.minutes(5)))
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
        #expect(FileManager.default.fileExists(atPath: site.appendingPathComponent("services/Addresses.locator").path))
        let again = try await outpost(["site", "publish", locator.path, "--name", "addresses", "--site-directory", site.path, "--postgres", database])
        #expect(!again.succeeded && again.stderr.contains("published already"), "one per name, whatever its case: \(again.stderr)")
        let listed = try JSONValue.parse(try await outpost(["site", "list", "--json", "--postgres", database]).stdout)
        #expect(listed.arrayValue?.count == 1 && listed[0]?["kind"] == "locator" && listed[0]?["path"] == "services/Addresses.locator", "\(listed)")
        #expect(listed[0]?["sha256"]?.stringValue?.count == 64)

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
        #expect(!FileManager.default.fileExists(atPath: site.appendingPathComponent("services/Addresses.locator").path))
        let none = try await outpost(["site", "withdraw", "locator", "addresses", "--site-directory", site.path, "--postgres", database])
        #expect(!none.succeeded && none.stderr.contains("no locator named addresses"), "\(none.stderr)")
        #expect(await a.stop() == 0)
        #expect(await b.stop() == 0)
    }
}
