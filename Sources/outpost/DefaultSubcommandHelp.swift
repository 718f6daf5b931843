import ArgumentParser

/// Help for a command group with a default subcommand (`outpost sync --help`): the group's own
/// help lists only its subcommands, while `outpost sync crew.gpkg` runs the default one, so its
/// usage and options follow the group's in the same screen.
enum DefaultSubcommandHelp {
    /// The help text to print for `arguments` (the command line after the executable's name),
    /// or nil when they do not ask for the help of a group with a default subcommand.
    static func text(for arguments: [String], root: ParsableCommand.Type = OutpostCommand.self, columns: Int? = nil) -> String? {
        var words = arguments[...]
        // `outpost help sync` asks the same as `outpost sync --help`.
        let helpCommand = words.first == "help"
        if helpCommand { words = words.dropFirst() }
        var command = root
        var asked = helpCommand
        for word in words {
            if ["--help", "-h", "-help"].contains(word) {
                asked = true
                break
            }
            guard let sub = command.configuration.subcommands.first(where: { $0._commandName == word }) else { return nil }
            command = sub
        }
        guard asked, ObjectIdentifier(command) != ObjectIdentifier(root), let fallback = command.configuration.defaultSubcommand else { return nil }
        let name = fallback._commandName
        return root.helpMessage(for: command, columns: columns)
            + "\n\n`\(name)` is the default subcommand: its usage and options, which the group takes as they are:\n\n"
            + root.helpMessage(for: fallback, columns: columns)
    }
}
