import ArgumentParser
import Foundation
import OutpostPostgres
import OutpostServer
import OutpostSyncService
import OutpostCore

#if canImport(Glibc)
    import Glibc
#endif

/// The users file `outpost serve --users` reads: who may sign in, with which role and per-service
/// permissions. Changes reach a running server within a second.
struct UsersCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "users",
        abstract: "Manage the users who sign in to outpost serve (--users) with generateToken.",
        discussion: """
            Roles: viewer (query), editor (query, edit, sync), admin (all). --service NAME=query,edit \
            replaces the role's permissions for one service. Passwords are stored as salted \
            PBKDF2-HMAC-SHA256 hashes; the file (mode 0600) also holds the key that signs tokens.
            """,
        subcommands: [Add.self, List.self, Remove.self])

    /// Where the users are: a users file (one server process), or a site's database.
    struct FileOption: ParsableArguments {
        @Option(help: "The users file (default: $OUTPOST_USERS or users.json).") var users: String?
        @Option(
            help: """
                The users of a site, in its PostgreSQL database (postgres://user@host[:port]/db), read by every \
                outpost serve --postgres host of it instead of a users file.
                """)
        var postgres: String?

        func validate() throws {
            guard users == nil || postgres == nil else { throw ValidationError("give --users or --postgres, not both") }
        }

        var url: URL { URL(fileURLWithPath: users ?? ProcessInfo.processInfo.environment["OUTPOST_USERS"] ?? "users.json") }

        /// Where the users are, as messages name it.
        var place: String { postgres.flatMap { try? PostgresLocation(url: $0).description } ?? url.path }

        /// The users as they are now (none when nothing was written yet).
        func read() async throws -> UserFile? {
            guard let postgres else {
                return FileManager.default.fileExists(atPath: url.path) ? try UserFile.load(from: url) : nil
            }
            let source = "the users in \(place)"
            return try await Self.withRecords(postgres) { records in
                try await records.securityDocument().map { try UserFile.decode(Data($0.text.utf8), source: source) }
            }
        }

        /// Changes the users in one step: a users file is replaced whole; in a database, writers
        /// take turns, so two administrators' changes both land.
        func change(_ edit: @escaping @Sendable (inout UserFile) throws -> Void) async throws {
            guard let postgres else {
                var users = FileManager.default.fileExists(atPath: url.path) ? try UserFile.load(from: url) : UserFile()
                try edit(&users)
                return try users.save(to: url)
            }
            let source = "the users in \(place)"
            try await Self.withRecords(postgres) { records in
                try await records.changeSecurityDocument { text in
                    var users = try text.map { try UserFile.decode(Data($0.utf8), source: source) } ?? UserFile()
                    try edit(&users)
                    return try users.encoded()
                }
            }
        }

        @discardableResult
        static func withRecords<T: Sendable>(_ url: String, _ body: (PostgresSecurityStore) async throws -> T) async throws -> T {
            try await withSiteDatabase(url) { try await body($0.security()) }
        }
    }

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Add a user, or give an existing one a new password, role and permissions.")
        @Argument(help: "The user name.") var name: String
        @Option(help: "viewer, editor or admin.") var role: String
        @Option(help: "Permissions on one service, replacing the role's there: NAME=query,edit,sync,admin (repeatable).") var service: [String] = []
        @Flag(help: "Read the password from the first line of standard input instead of asking.") var passwordStdin = false
        @OptionGroup var file: FileOption

        func validate() throws {
            guard Role(rawValue: role) != nil else { throw ValidationError("--role is viewer, editor or admin") }
            _ = try permissions()
        }

        func permissions() throws -> [String: [Permission]]? {
            guard !service.isEmpty else { return nil }
            var out: [String: [Permission]] = [:]
            for entry in service {
                let parts = entry.split(separator: "=", maxSplits: 1).map(String.init)
                guard parts.count == 2, !parts[0].isEmpty else { throw ValidationError("--service is NAME=permission,… (\(entry))") }
                let list = try parts[1].split(separator: ",").map { text -> Permission in
                    guard let p = Permission(rawValue: text.trimmingCharacters(in: .whitespaces)) else {
                        throw ValidationError("\(text) is not a permission: query, edit, sync or admin")
                    }
                    return p
                }
                out[parts[0]] = Array(Set(list)).sorted()
            }
            return out
        }

        func run() async throws {
            let password = try readPassword(fromStdin: passwordStdin, prompt: "password for \(name): ")
            let (name, role, services) = (name, Role(rawValue: role)!, try permissions())
            let existed = Locked(false)
            try await file.change { users in
                existed.withLock { $0 = users.user(named: name) != nil }
                try users.setUser(name, role: role, password: password, services: services)
            }
            print("\(existed.withLock { $0 } ? "updated" : "added") \(name) (\(role.rawValue)) in \(file.place)")
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the users, their roles and per-service permissions.")
        @OptionGroup var file: FileOption
        @Flag(help: "Print JSON: [{\"name\", \"role\", \"services\"}].") var json = false

        func run() async throws {
            guard let users = try await file.read()?.users else { throw CLIFailure(message: "no users in \(file.place)") }
            if json {
                return printJSON(.array(users.map { u in
                    ["name": .string(u.name), "role": .string(u.role.rawValue),
                     "services": .object((u.services ?? [:]).mapValues { .array($0.map { .string($0.rawValue) }) })]
                }))
            }
            if users.isEmpty { print("no users in \(file.place)") }
            for u in users {
                let extra = (u.services ?? [:]).sorted { $0.key < $1.key }.map { "\($0.key): \($0.value.map(\.rawValue).joined(separator: ","))" }
                print("\(u.name)  \(u.role.rawValue)" + (extra.isEmpty ? "" : "  (\(extra.joined(separator: "; ")))"))
            }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove a user; their tokens stop working at once.")
        @Argument(help: "The user name.") var name: String
        @OptionGroup var file: FileOption

        func run() async throws {
            let name = name, place = file.place
            try await file.change { users in
                guard users.user(named: name) != nil else { throw CLIFailure(message: "\(place) has no user \(name)") }
                users.users.removeAll { $0.name.lowercased() == name.lowercased() }
            }
            print("removed \(name)")
        }
    }
}

/// A password from standard input's first line, or asked for on the terminal without echo.
func readPassword(fromStdin: Bool, prompt: String) throws -> String {
    if fromStdin || isatty(STDIN_FILENO) == 0 {
        guard let line = readLine(strippingNewline: true), !line.isEmpty else { throw CLIFailure(message: "no password on standard input") }
        return line
    }
    guard let entered = getpass(prompt) else { throw CLIFailure(message: "no password entered") }
    let first = String(cString: entered)
    guard let again = getpass("again: "), String(cString: again) == first else { throw CLIFailure(message: "the passwords differ") }
    return first
}
