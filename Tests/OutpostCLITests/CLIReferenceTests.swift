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
        // The section ends at the first line that is not indented (a group with a default
        // subcommand goes on with that subcommand's help).
        return help[start.upperBound...].split(separator: "\n").prefix { $0.hasPrefix(" ") }.compactMap { line in
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

    @Test(.scaledTimeLimit(minutes: 2))
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

    /// A group with a default subcommand shows that subcommand's usage and flags in its own help
    /// (`outpost sync --help` is where a user looks for `--policy`), as `outpost help sync` does;
    /// the subcommand's own help is unchanged, and a group without a default shows its list alone.
    @Test func aGroupsHelpShowsItsDefaultSubcommandsFlags() async throws {
        for arguments in [["sync", "--help"], ["help", "sync"], ["sync", "-h"]] {
            let help = try await outpost(arguments)
            #expect(help.succeeded, "\(help.stderr)")
            for flag in ["--policy", "--direction", "--no-rollback", "--token", "--json"] {
                #expect(help.stdout.contains(flag), "outpost \(arguments.joined(separator: " ")) does not show \(flag)")
            }
            #expect(help.stdout.contains("SUBCOMMANDS:") && help.stdout.contains("export") && help.stdout.contains("USAGE: outpost sync run"))
            #expect(Self.subcommands(help.stdout) == ["run", "export", "import"], "\(Self.subcommands(help.stdout))")
        }
        let conflicts = try await outpost(["conflicts", "--help"])
        #expect(conflicts.stdout.contains("--open") && conflicts.stdout.contains("resolve"), "\(conflicts.stdout)")
        let run = try await outpost(["sync", "run", "--help"])
        #expect(run.stdout.contains("--policy") && !run.stdout.contains("SUBCOMMANDS:"))
        let tiles = try await outpost(["tiles", "--help"])
        #expect(tiles.succeeded && !tiles.stdout.contains("default subcommand"))
    }
}
