import Foundation
import OutpostCore
import OutpostTestSupport

/// Runs the built `outpost` binary, as scripts do.
func outpost(_ arguments: [String], in directory: URL? = nil) throws -> CommandResult {
    try ExternalTools.run(Repository.outpostExecutable.path, arguments, currentDirectory: directory)
}
