import Foundation
import OutpostTestSupport
import Testing

/// `docs/cli.md` is the command-line contract: every command and every flag the binary's `--help`
/// lists is documented there, so the reference cannot fall behind the code.
@Suite("CLI reference")
struct CLIReferenceTests {
    /// The subcommands a help text lists (the lines under SUBCOMMANDS).
    static func subcommands(_ help: String) -> [String] {
        guard let start = help.range(of: "SUBCOMMANDS:\n") else { return [] }
        return help[start.upperBound...].split(separator: "\n").compactMap { line in
            guard line.hasPrefix("  "), !line.hasPrefix("   "), !line.hasPrefix("  See "), let word = line.split(separator: " ").first else { return nil }
            return String(word)
        }
    }

    /// The flags a help text lists (an OPTIONS line that starts with a flag), without --help.
    static func flags(_ help: String) -> [String] {
        guard let start = help.range(of: "OPTIONS:\n") else { return [] }
        return help[start.upperBound...].split(separator: "\n").compactMap { line in
            // Option lines are indented two spaces; wrapped descriptions further.
            guard line.hasPrefix("  -") else { return nil }
            let text = line.trimmingCharacters(in: .whitespaces)
            // The option's spelling ends where two spaces start its description.
            let spec = text.components(separatedBy: "  ")[0]
            return spec.replacingOccurrences(of: ",", with: "").split(separator: " ").first { $0.hasPrefix("--") }.map(String.init)
        }.filter { $0 != "--help" }
    }

    @Test(.timeLimit(.minutes(2)))
    func everyCommandAndFlagIsDocumented() async throws {
        let reference = try String(contentsOf: Repository.root.appendingPathComponent("docs/cli.md"), encoding: .utf8)
        var queue: [[String]] = [[]]
        var visited = 0
        while let path = queue.popLast(), path.count <= 3 {
            let help = try await outpost(path + ["--help"])
            #expect(help.succeeded, "outpost \(path.joined(separator: " ")) --help: \(help.stderr)")
            visited += 1
            let children = Self.subcommands(help.stdout)
            queue += children.map { path + [$0] }
            guard !path.isEmpty else { continue }
            // A command's own heading; a group's subcommands are documented under it.
            let name = path.joined(separator: " ")
            let parent = path.dropLast().joined(separator: " ")
            #expect(
                reference.contains("`outpost \(name)") || reference.contains("`outpost \(parent) ") && reference.contains(path.last!),
                "docs/cli.md does not document `outpost \(name)`")
            for flag in Self.flags(help.stdout) {
                #expect(reference.contains("`\(flag)") || reference.contains(" \(flag) ") || reference.contains("[\(flag)"), "docs/cli.md does not document \(flag) of `outpost \(name)`")
            }
        }
        #expect(visited > 20)
    }
}
