import ArgumentParser
import Foundation
import OutpostCore
import OutpostDigest
import OutpostLocator
import OutpostPostgres
import OutpostRouting
import OutpostServer
import OutpostSyncService

#if canImport(Glibc)
    import Glibc
#endif

/// `outpost site`: the files every host of a site serves from its site directory, registered in
/// the site's database (docs/postgres.md, "A site").
struct SiteCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "site",
        abstract: "Publish locators and street networks to every outpost serve --postgres host of a site.",
        discussion: """
            A published file is copied into the site directory (services/<name>.locator or \
            .network, written beside its final name and renamed into place) and registered in the \
            site's database. Every outpost serve --postgres --site-directory host serves it as a \
            GeocodeServer or NAServer within seconds, hosts started later too; a withdrawn one is \
            no longer served within seconds.
            """,
        subcommands: [Publish.self, List.self, Withdraw.self])

    /// The site's database.
    struct Database: ParsableArguments {
        @Option(help: "The site's PostgreSQL database (postgres://user@host[:port]/db).") var postgres: String

        /// Runs `body` with the site's registry.
        func withRegistry<T: Sendable>(_ body: (PostgresSiteFiles) async throws -> T) async throws -> T {
            try await withSiteDatabase(postgres) { try await body($0.siteFiles()) }
        }
    }

    struct Publish: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Publish a .locator or .network file to every host of the site.")
        @Argument(help: "The .locator or .network file.") var file: String
        @Option(help: "The service's name (default: the file's name without its extension).") var name: String?
        @Option(help: "The site directory every host mounts (outpost serve --site-directory).") var siteDirectory: String
        @OptionGroup var database: Database

        func run() async throws {
            let source = URL(fileURLWithPath: file)
            guard let kind = SiteFile.Kind(fileExtension: source.pathExtension) else {
                throw CLIFailure(message: "\(source.lastPathComponent) is neither a .locator nor a .network file")
            }
            let name = self.name ?? source.deletingPathExtension().lastPathComponent
            guard name.range(of: "^[A-Za-z0-9_-]{1,100}$", options: .regularExpression) != nil else {
                throw CLIFailure(message: "the name \"\(name.prefix(40))\" must be 1–100 letters, digits, _ or -")
            }
            // Refused before anything is copied or registered: a file hosts could not open.
            try SiteFile.check(source, as: kind)
            let relative = "services/\(name).\(kind.fileExtension)"
            let site = URL(fileURLWithPath: siteDirectory).standardizedFileURL
            let target = site.appendingPathComponent(relative)
            try await database.withRegistry { registry in
                if try await registry.files().contains(where: { $0.kind == kind && $0.name.lowercased() == name.lowercased() }) {
                    throw CLIFailure(message: "a \(kind.rawValue) named \(name) is published already; withdraw it first")
                }
                let (bytes, sha256) = try SiteFile.copy(source, to: target)
                let entry = SiteFile(kind: kind, name: name, path: relative, bytes: bytes, sha256: sha256, publishedAt: ServiceClock.system.milliseconds())
                guard try await registry.publish(entry) else {
                    throw CLIFailure(message: "a \(kind.rawValue) named \(name) was published meanwhile; withdraw it first")
                }
                print("published \(kind.rawValue) \(name): \(relative) (\(bytes) bytes, sha256 \(sha256))")
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the site's published files.")
        @Flag(help: "Write JSON.") var json = false
        @OptionGroup var database: Database

        func run() async throws {
            let files = try await database.withRegistry { try await $0.files() }
            if json {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
                let data = try encoder.encode(files)
                print(String(decoding: data, as: UTF8.self))
                return
            }
            for f in files { print("\(f.kind.rawValue)\t\(f.name)\t\(f.path)\t\(f.bytes)\t\(f.sha256)") }
        }
    }

    struct Withdraw: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Withdraw a published file: the hosts stop serving it, and its file is removed.")
        @Argument(help: "locator or network.") var kind: String
        @Argument(help: "The service's name.") var name: String
        @Option(help: "The site directory every host mounts.") var siteDirectory: String
        @OptionGroup var database: Database

        func run() async throws {
            guard let kind = SiteFile.Kind(rawValue: kind) else { throw CLIFailure(message: "the kind is locator or network, not \(kind.prefix(40))") }
            guard let entry = try await database.withRegistry({ try await $0.withdraw(kind, name: name) }) else {
                throw CLIFailure(message: "no \(kind.rawValue) named \(name) is published")
            }
            // Hosts that still have it open keep reading it until they drop it (a removed file's
            // data stays while it is open).
            try? FileManager.default.removeItem(at: URL(fileURLWithPath: siteDirectory).appendingPathComponent(entry.path))
            print("withdrew \(kind.rawValue) \(entry.name)")
        }
    }
}

/// Runs `body` with the job store of the site's database at `url` (its registry, its users),
/// its errors turned into one-line CLI failures.
func withSiteDatabase<T: Sendable>(_ url: String, _ body: (PostgresJobStore) async throws -> T) async throws -> T {
    do {
        return try await body(try await PostgresJobStore(location: try PostgresLocation(url: url)))
    } catch let error as PostgresServiceError {
        throw CLIFailure(message: error.message)
    } catch let error as SyncServiceError {
        throw CLIFailure(message: error.description)
    }
}

extension SiteFile.Kind {
    init?(fileExtension: String) {
        switch fileExtension.lowercased() {
        case "locator": self = .locator
        case "network": self = .network
        default: return nil
        }
    }

    var fileExtension: String { rawValue }
}

extension SiteFile {
    /// Throws unless `url` opens as a file of `kind`.
    static func check(_ url: URL, as kind: Kind) throws {
        do {
            switch kind {
            case .locator: _ = try LocalLocator(url: url, connections: 1)
            case .network: _ = try RoadNetwork(url: url)
            }
        } catch {
            throw CLIFailure(message: "\(url.lastPathComponent) does not open as a \(kind.rawValue): \(error)")
        }
    }

    /// Copies `source` to `target`, written beside it and renamed into place; its size and SHA-256.
    static func copy(_ source: URL, to target: URL) throws -> (bytes: Int64, sha256: String) {
        try FileManager.default.createDirectory(at: target.deletingLastPathComponent(), withIntermediateDirectories: true)
        let partial = target.deletingLastPathComponent().appendingPathComponent(".\(target.lastPathComponent).\(UUID().uuidString.prefix(8)).partial")
        guard FileManager.default.createFile(atPath: partial.path, contents: nil), let out = FileHandle(forWritingAtPath: partial.path) else {
            throw CLIFailure(message: "cannot write \(partial.path)")
        }
        defer { try? FileManager.default.removeItem(at: partial) }
        let input = try FileHandle(forReadingFrom: source)
        defer { try? input.close() }
        var digest = SHA256()
        var bytes: Int64 = 0
        while let chunk = try input.read(upToCount: 1 << 20), !chunk.isEmpty {
            digest.update(chunk)
            try out.write(contentsOf: chunk)
            bytes += Int64(chunk.count)
        }
        try out.synchronize()
        try out.close()
        guard rename(partial.path, target.path) == 0 else { throw CLIFailure(message: "cannot move the copy into place at \(target.path): errno \(errno)") }
        return (bytes, SHA256.hex(digest.finalize()))
    }
}

/// Keeps a host's locators and networks in step with its site's registry: every few seconds,
/// serves what was published (opened from the site directory) and stops serving what was
/// withdrawn. A file that does not open is named once on stderr and tried again when published
/// anew.
actor SiteRegistryFollower {
    let registry: PostgresSiteFiles
    let site: URL
    let services: ServiceDirectory
    /// What this host serves from the registry, by kind and lower-cased name: the entry's hash.
    private var serving: [SiteFile.Kind: [String: String]] = [:]
    /// Entries that would not open (or whose name another service holds), by kind, name and hash.
    private var refused: Set<String> = []

    init(registry: PostgresSiteFiles, site: URL, services: ServiceDirectory) {
        self.registry = registry
        self.site = site
        self.services = services
    }

    /// One look at the registry.
    func follow() async throws {
        let listed = try await registry.files()
        for entry in listed {
            let key = entry.name.lowercased()
            guard serving[entry.kind]?[key] == nil else { continue }
            let mark = "\(entry.kind.rawValue)/\(key)/\(entry.sha256)"
            guard !refused.contains(mark) else { continue }
            let url = site.appendingPathComponent(entry.path)
            do {
                let added: Bool
                switch entry.kind {
                case .locator: added = services.add(locator: try LocalLocator(url: url))
                case .network:
                    let network = try await runBlocking { _ in try RoadNetwork(url: url) }
                    added = services.add(network: network, name: entry.name)
                }
                guard added else { throw CLIFailure(message: "a service of that name is served from --service") }
                serving[entry.kind, default: [:]][key] = entry.sha256
            } catch {
                refused.insert(mark)
                FileHandle.standardError.write(Data("outpost serve: the site's \(entry.kind.rawValue) \(entry.name) (\(entry.path)) is not served: \(error)\n".utf8))
            }
        }
        for kind in SiteFile.Kind.allCases {
            let present = Set(listed.filter { $0.kind == kind }.map { $0.name.lowercased() })
            for name in (serving[kind] ?? [:]).keys where !present.contains(name) {
                switch kind {
                case .locator: services.removeLocator(named: name)
                case .network: services.removeNetwork(named: name)
                }
                serving[kind]?[name] = nil
            }
        }
    }

    /// Looks at the registry now and then every `period` for as long as the process runs; a
    /// database that does not answer is tried again at the next look.
    nonisolated func start(every period: Duration = .seconds(2)) -> Task<Void, Never> {
        Task {
            while !Task.isCancelled {
                try? await follow()
                try? await Task.sleep(for: period)
            }
        }
    }
}
