import Foundation
import OutpostServiceTestSupport
import OutpostTestSupport
import Testing

/// The documentation's code is compiled snippets (`Snippets/`, built with the package); these
/// keep the README's copy of one in step with it and run the field-app ones against a server.
@Suite("Snippets: the documentation's code")
struct SnippetTests {
    /// The lines a snippet shows in the documentation: without its `snippet.hide` parts and its
    /// markers, and without the leading comment that introduces the file.
    static func shown(_ name: String) throws -> String {
        let text = try String(contentsOf: Repository.root.appendingPathComponent("Snippets/\(name).swift"), encoding: .utf8)
        var lines: [String] = []
        var hidden = false
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed == "// snippet.hide" { hidden = true; continue }
            if trimmed == "// snippet.show" { hidden = false; continue }
            if trimmed.hasPrefix("// snippet.") { continue }
            if !hidden { lines.append(String(line)) }
        }
        while let first = lines.first, first.hasPrefix("//") || first.isEmpty { lines.removeFirst() }
        return lines.joined(separator: "\n").trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The README's "Using the library" example is the FieldAppFlow snippet as the docs show it.
    @Test func theReadmeExampleIsTheCompiledSnippet() throws {
        let readme = try String(contentsOf: Repository.root.appendingPathComponent("README.md"), encoding: .utf8)
        let section = try #require(readme.range(of: "## Using the library"))
        let start = try #require(readme.range(of: "```swift\n", range: section.upperBound..<readme.endIndex))
        let end = try #require(readme.range(of: "\n```\n", range: start.upperBound..<readme.endIndex))
        let example = String(readme[start.upperBound..<end.lowerBound]).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(example == (try Self.shown("FieldAppFlow")))
    }

    /// The README's flow and the tutorial's tool, run against `outpost serve`: each takes the
    /// service offline, adds its inspection, syncs after a cancel, and the service holds each
    /// inspection exactly once.
    @Test(.enabled(if: FieldToolBuild.binaries != nil), .scaledTimeLimit(minutes: 3))
    func theFieldAppSnippetsRunAgainstAServer() async throws {
        let service = try await TestService.fieldInspection(.sqlite)
        try await service.backend.close()
        let server = try await ServeProcess.start(service: service.file)
        let serviceURL = server.featureServer("field_inspection")
        let work = TemporaryDirectory("snippets")
        let before = try await FieldToolExampleTests.count(serviceURL)
        var runs: [String: CommandResult] = [:]
        for name in ["FieldAppFlow", "FieldDataTool"] {
            let binary = try #require(FieldToolBuild.binaries).appendingPathComponent(name).path
            runs[name] = try await ExternalTools.run(binary, [serviceURL.absoluteString, work.file("\(name).gpkg").path])
        }
        let after = try await FieldToolExampleTests.count(serviceURL)
        _ = await server.stop(signal: SIGTERM, timeout: 20)
        for (name, run) in runs { #expect(run.succeeded, "\(name): \(run.stdout)\n\(run.stderr.prefix(600))") }
        let tool = runs["FieldDataTool"]?.stdout ?? ""
        #expect(tool.contains("layers: [\"inspection_points\"") && tool.hasSuffix("waiting to sync: 0\n"), "\(tool)")
        #expect(after == before + 2, "one inspection from each, exactly once: \(before) + 2 ≠ \(after)")
        withExtendedLifetime(service) {}
    }
}
