import Foundation
import OutpostTestSupport
import Testing

/// The README's quick start as a user types it: its block of commands run by bash, as written
/// (only the port is a free one), from a folder beside the samples. Each step's result is
/// checked on what it prints and on the files it leaves.
@Suite("README quick start")
struct QuickStartTests {
    /// The shell block that follows "The same steps as commands" in the README.
    static func commands() throws -> String {
        let readme = try String(contentsOf: Repository.root.appendingPathComponent("README.md"), encoding: .utf8)
        let section = try #require(readme.range(of: "The same steps as commands"))
        let start = try #require(readme.range(of: "```sh\n", range: section.upperBound..<readme.endIndex))
        let end = try #require(readme.range(of: "\n```\n", range: start.upperBound..<readme.endIndex))
        return String(readme[start.upperBound..<end.lowerBound])
    }

    @Test(.scaledTimeLimit(minutes: 4))
    func theReadmeCommandsRunAsWritten() async throws {
        let block = try Self.commands()
        #expect(block.contains("--port 8080") && block.contains("kill $SERVER"))
        let port = try LoopbackPort.free()
        let dir = TemporaryDirectory("quick-start")
        let bin = dir.file("bin")
        try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(at: bin.appendingPathComponent("outpost"), withDestinationURL: Repository.outpostExecutable)
        try FileManager.default.createSymbolicLink(at: dir.file("SampleData"), withDestinationURL: Repository.root.appendingPathComponent("SampleData"))
        // Whatever the block leaves running is stopped when it ends, passing or not.
        let script = "set -e\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n" + block.replacingOccurrences(of: "127.0.0.1:8080", with: "127.0.0.1:\(port)")
            .replacingOccurrences(of: "--port 8080", with: "--port \(port)")
        var environment = ProcessInfo.processInfo.environment
        environment["PATH"] = bin.path + ":" + (environment["PATH"] ?? "/usr/bin:/bin")
        let run = try await ExternalTools.run("bash", ["-c", script], environment: environment, currentDirectory: dir.url)
        let out = run.stdout
        #expect(run.succeeded, "\(out)\n\(run.stderr)")

        // 1–2. Served and taken offline: both replicas, the basemap, the locator, the network.
        let map = dir.file("work/crew-map")
        for file in ["data/street_inspections.gpkg", "data/planning.gpkg", "basemap.tpkx", "locators/helsinki.locator", "networks/helsinki.network"] {
            #expect(FileManager.default.fileExists(atPath: map.appendingPathComponent(file).path), "\(file)")
        }
        // 3. Offline: the typo found, the route reaches it, the model wrote its list, the edit is pending.
        #expect(out.contains("Unioninkatu 12, Helsinki  (24.95"), "\(out)")
        #expect(out.contains("Turn right onto Unioninkatu") && out.contains("Finish at stop 2"), "\(out)")
        let csv = try String(contentsOf: dir.file("work/mailing-list/mailing-list.csv"), encoding: .utf8)
        #expect(csv.split(whereSeparator: \.isNewline).count > 1, "\(csv)")
        #expect(out.contains("inspections: pending 0 inserts, 1 updates, 0 deletes"), "\(out)")
        // 4–5. The office's change and the crew's met: a conflict the crew's value won, recorded.
        #expect(out.contains("\"updateResults\"") && out.contains("\"success\":true"), "\(out)")
        #expect(out.contains("\ndata/street_inspections.gpkg: uploaded 0 inserts, 1 updates, 0 deletes; downloaded 0 inserts, 1 updates"), "\(out)")
        #expect(out.contains("clientWins") && out.contains("a resident reports a trip hazard"), "\(out)")
        // 6. The delta round carried the next day's edit; then both sides hold the same rows.
        #expect(out.contains("batch 2: 1 edits applied"), "\(out)")
        let rows = try await inspectionsOnBothSides(
            service: dir.file("work/services/street_inspections.gpkg"), replica: map.appendingPathComponent("data/street_inspections.gpkg"),
            alsoAssert: #"assert [r for r in service if r[1] == "INS-0068"][0][2] == "done""#)
        #expect(rows.succeeded && rows.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "73", "\(rows.stdout)\(rows.stderr)")
        // 7. The files open, and nothing was left pending.
        #expect(out.contains("Feature Count: 73") && out.contains("0 edits pending"), "\(out)")
    }
}
