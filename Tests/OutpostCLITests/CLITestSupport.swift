import Foundation
import OutpostCore
import OutpostTestSupport

/// Runs the built `outpost` binary, as scripts do.
func outpost(_ arguments: [String], in directory: URL? = nil) async throws -> CommandResult {
    try await ExternalTools.run(Repository.outpostExecutable.path, arguments, currentDirectory: directory)
}
