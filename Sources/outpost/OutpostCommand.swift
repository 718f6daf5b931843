import ArgumentParser
import Foundation
import OutpostPostgres
import OutpostCore
import OutpostOffline
import OutpostServer
import OutpostStorage
import OutpostSync
import OutpostSyncService
import OutpostTileCodecs
import OutpostTiles
import OutpostVectorTiles

@main
struct OutpostCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "outpost",
        abstract: "Offline-first geodatabases: GeoPackage storage, sync with feature services, offline tiles.",
        subcommands: [
            DemoCommand.self, ImportCommand.self, InspectCommand.self, ServiceCommand.self, ServeCommand.self, ReplicaCommand.self, SyncCommand.self,
            StatusCommand.self, ConflictsCommand.self, TilesCommand.self, RenderCommand.self, CopyCommand.self, JobCommand.self, UsersCommand.self, SiteCommand.self,
            GPCommand.self, LocatorCommand.self, GeocodeCommand.self, ReverseCommand.self, SuggestCommand.self, NetworkCommand.self, RouteCommand.self,
            OfflineCommand.self, VectorTilesCommand.self,
        ]
    )

    /// Errors become one line on stderr and exit code 1 (docs/cli.md, "Conventions"); usage errors keep
    /// ArgumentParser's help text.
    static func main() async {
        SystemTileCodecs.install()
        GEOSPolygonRepair.install()
        if let help = DefaultSubcommandHelp.text(for: Array(CommandLine.arguments.dropFirst())) {
            print(help)
            return
        }
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch let error as StorageError {
            fail(error.description)
        } catch let error as GeometryError {
            fail(error.description)
        } catch let error as CLIFailure {
            fail(error.message, code: error.exitCode)
        } catch let error as JobError {
            fail(error.message)
        } catch let error as ServiceError {
            fail(error.message)
        } catch let error as SyncServiceError {
            fail(error.description)
        } catch let error as SyncError {
            fail(error.message)
        } catch let error as TileCacheError {
            fail(error.description)
        } catch let error as VectorTileError {
            fail(error.description)
        } catch let error as OfflineMapError {
            fail(error.message)
        } catch let error as PostgresServiceError {
            fail(error.message)
        } catch {
            exit(withError: error)
        }
    }

    static func fail(_ message: String, code: OutpostExit = .failure) -> Never {
        FileHandle.standardError.write(Data("outpost: \(message)\n".utf8))
        Foundation.exit(code.rawValue)
    }
}

/// A failure reported as one line with an exit code.
struct CLIFailure: Error {
    var message: String
    var exitCode: OutpostExit = .failure
}

/// The command line's exit codes (docs/cli.md, "Conventions"), named here only. A usage error's
/// 64 is ArgumentParser's.
enum OutpostExit: Int32 {
    /// It failed: one line on stderr.
    case failure = 1
    /// A partial success: some edits were rejected and kept in the replica.
    case partial = 2
    /// Ctrl-C a second time while a job was pausing: quit at once (128 + SIGINT).
    case interrupted = 130
}

/// Writes JSON for `--json` output: stable key order, one document.
func printJSON(_ value: JSONValue) {
    print(value.jsonString)
}
