import ArgumentParser
import Foundation
import OutpostCore
import OutpostDigest
import OutpostLocator
import OutpostProtocol
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
        abstract: "Publish locators, street networks and maps to every outpost serve --postgres host of a site.",
        discussion: """
            A published file is copied into the site directory (services/<name>-<hash>.locator, \
            .network or .map.json with its preplanned areas' packages, written beside its final \
            name and renamed into place) and registered in the site's database. Every outpost \
            serve --postgres --site-directory host serves it as a GeocodeServer, an NAServer or a \
            map within seconds, hosts started later too; a withdrawn one is no longer served \
            within seconds.
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
        static let configuration = CommandConfiguration(
            abstract: "Publish a .locator, .network or .map.json file to every host of the site.",
            discussion: """
                A map definition (<name>.map.json) brings the packages of its preplanned areas \
                from <name>.preplanned/ beside it (outpost offline prepare --out), each of them \
                finished and named after an area of the map.
                """)
        @Argument(help: "The .locator, .network or .map.json file.") var file: String
        @Option(help: "The service's name (default: the file's name without its extension).") var name: String?
        @Option(help: "The site directory every host mounts (outpost serve --site-directory).") var siteDirectory: String
        @OptionGroup var database: Database

        func run() async throws {
            let source = URL(fileURLWithPath: file)
            guard let kind = SiteFile.Kind(fileName: source.lastPathComponent) else {
                throw CLIFailure(message: "\(source.lastPathComponent) is neither a .locator, a .network nor a .map.json file")
            }
            let name = self.name ?? String(source.lastPathComponent.dropLast(kind.fileExtension.count + 1))
            guard name.range(of: "^[A-Za-z0-9_-]{1,100}$", options: .regularExpression) != nil else {
                throw CLIFailure(message: "the name \"\(name.prefix(40))\" must be 1–100 letters, digits, _ or -")
            }
            // Refused before anything is copied or registered: a file hosts could not open, a
            // package crews could not download.
            let packages = try SiteFile.check(source, as: kind)
            let site = URL(fileURLWithPath: siteDirectory).standardizedFileURL
            try await database.withRegistry { registry in
                func published() async throws -> SiteFile? {
                    try await registry.files().first { $0.kind == kind && $0.name.lowercased() == name.lowercased() }
                }
                if try await published() != nil {
                    throw CLIFailure(message: "a \(kind.rawValue) named \(name) is published already; withdraw it first")
                }
                try processFaults.check("site.beforeCopy")
                // Named after its content: two publications of one name at once never write the
                // same file, so the file registered is the one its entry describes.
                let copy = try SiteCopy.make(source, packages: packages, kind: kind, name: name, in: site)
                let entry = SiteFile(
                    kind: kind, name: name, path: copy.path, bytes: copy.bytes, sha256: copy.sha256, publishedAt: ServiceClock.system.milliseconds())
                guard try await registry.publish(entry) else {
                    if try await published()?.path != copy.path { SiteCopy.remove(copy.path, kind: kind, in: site) }
                    throw CLIFailure(message: "a \(kind.rawValue) named \(name) was published meanwhile; withdraw it first")
                }
                let areas = packages.map { " with \($0.count) area package\($0.count == 1 ? "" : "s")" } ?? ""
                print("published \(kind.rawValue) \(name): \(copy.path)\(areas) (\(copy.bytes) bytes, sha256 \(copy.sha256))")
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
        @Argument(help: "locator, network or map.") var kind: String
        @Argument(help: "The service's name.") var name: String
        @Option(help: "The site directory every host mounts.") var siteDirectory: String
        @OptionGroup var database: Database

        func run() async throws {
            guard let kind = SiteFile.Kind(rawValue: kind) else { throw CLIFailure(message: "the kind is locator, network or map, not \(kind.prefix(40))") }
            guard let entry = try await database.withRegistry({ try await $0.withdraw(kind, name: name) }) else {
                throw CLIFailure(message: "no \(kind.rawValue) named \(name) is published")
            }
            // Hosts that still have it open keep reading it until they drop it (a removed file's
            // data stays while it is open).
            SiteCopy.remove(entry.path, kind: kind, in: URL(fileURLWithPath: siteDirectory))
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
    /// The kind of a file called `fileName`, by its extension.
    init?(fileName: String) {
        let lower = fileName.lowercased()
        guard let kind = Self.allCases.first(where: { lower.hasSuffix(".\($0.fileExtension)") && lower.count > $0.fileExtension.count + 1 }) else {
            return nil
        }
        self = kind
    }

    var fileExtension: String { self == .map ? "map.json" : rawValue }
}

extension SiteFile {
    /// Throws unless `url` opens as a file of `kind`. For a map, the finished packages of its
    /// areas in `<name>.preplanned/` beside it, by area id (empty when it has none).
    static func check(_ url: URL, as kind: Kind) throws -> [String: [PreplannedPackage.File]]? {
        let definition: MapDefinition
        do {
            switch kind {
            case .locator:
                _ = try LocalLocator(url: url, connections: 1)
                return nil
            case .network:
                _ = try RoadNetwork(url: url)
                return nil
            case .map: definition = try MapDefinition.decode(try Data(contentsOf: url))
            }
        } catch {
            throw CLIFailure(message: "\(url.lastPathComponent) does not open as a \(kind.rawValue): \(error)")
        }
        let folder = SiteCopy.packages(of: url)
        let areas = Set((definition.preplannedAreas ?? []).map(\.id))
        var packages: [String: [PreplannedPackage.File]] = [:]
        let listed = (try? FileManager.default.contentsOfDirectory(at: folder, includingPropertiesForKeys: [.isDirectoryKey], options: [.skipsHiddenFiles])) ?? []
        for entry in listed where (try? entry.resourceValues(forKeys: [.isDirectoryKey]))?.isDirectory == true {
            let id = entry.lastPathComponent
            guard areas.contains(id) else {
                throw CLIFailure(
                    message: "\(folder.lastPathComponent)/\(id) is the package of no preplanned area of the map (it has \(areas.sorted().joined(separator: ", ")))")
            }
            guard let files = PreplannedPackage.files(in: entry) else {
                throw CLIFailure(message: "\(folder.lastPathComponent)/\(id) is not a finished package (run outpost offline prepare again)")
            }
            packages[id] = files
        }
        return packages
    }
}

/// A published file's copy in the site directory, named after its content
/// (`services/<name>-<first 12 hex digits of its SHA-256>.<extension>`, a map's packages in the
/// `.preplanned` folder beside it), each part written beside its final name and renamed into place.
struct SiteCopy {
    /// Its path below the site directory.
    var path: String
    /// Its bytes (a map's with its packages').
    var bytes: Int64
    /// Its SHA-256: the file's, or for a map, of its definition and its packages' paths, sizes and
    /// bytes.
    var sha256: String

    static func make(_ source: URL, packages: [String: [PreplannedPackage.File]]?, kind: SiteFile.Kind, name: String, in site: URL) throws -> SiteCopy {
        let services = site.appendingPathComponent("services")
        try FileManager.default.createDirectory(at: services, withIntermediateDirectories: true)
        let scratch = services.appendingPathComponent(".\(name).\(UUID().uuidString.prefix(8)).partial")
        defer { try? FileManager.default.removeItem(at: scratch) }
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: false)
        var digest = SHA256()
        var bytes = try copy(source, to: scratch.appendingPathComponent("file"), digest: &digest)
        let from = Self.packages(of: source)
        for (area, files) in (packages ?? [:]).sorted(by: { $0.key < $1.key }) {
            for file in files {
                let path = "\(area)/\(file.path)"
                digest.update("\u{0}\(path)\u{0}\(file.size)\u{0}")
                let target = scratch.appendingPathComponent("packages/\(path)")
                try FileManager.default.createDirectory(at: target.deletingLastPathComponent(), withIntermediateDirectories: true)
                let copied = try copy(from.appendingPathComponent(path), to: target, digest: &digest)
                guard copied == file.size else { throw CLIFailure(message: "\(from.lastPathComponent)/\(path) changed while it was copied") }
                bytes += copied
            }
        }
        let sha256 = SHA256.hexString(digest.finalize())
        let base = "\(name)-\(sha256.prefix(12))"
        // The packages first: a host that finds the definition finds them complete. A copy of the
        // same content already in place (published meanwhile under this name) is that content.
        if kind == .map {
            let made = scratch.appendingPathComponent("packages")
            try FileManager.default.createDirectory(at: made, withIntermediateDirectories: true)
            try place(made, at: services.appendingPathComponent("\(base).preplanned"), directory: true)
        }
        try place(scratch.appendingPathComponent("file"), at: services.appendingPathComponent("\(base).\(kind.fileExtension)"), directory: false)
        return SiteCopy(path: "services/\(base).\(kind.fileExtension)", bytes: bytes, sha256: sha256)
    }

    /// Removes the copy at `path` below `site` (a map's packages with it).
    static func remove(_ path: String, kind: SiteFile.Kind, in site: URL) {
        let file = site.appendingPathComponent(path)
        try? FileManager.default.removeItem(at: file)
        if kind == .map { try? FileManager.default.removeItem(at: packages(of: file)) }
    }

    /// The packages folder beside a map definition's file: `<name>.preplanned` for `<name>.map.json`.
    static func packages(of file: URL) -> URL {
        file.deletingLastPathComponent().appendingPathComponent(String(file.lastPathComponent.dropLast(".map.json".count)) + ".preplanned")
    }

    private static func place(_ from: URL, at target: URL, directory: Bool) throws {
        if rename(from.path, target.path) == 0 { return }
        // A folder does not replace one that holds files: the same content is in place already.
        if directory, errno == ENOTEMPTY || errno == EEXIST { return }
        throw CLIFailure(message: "cannot move the copy into place at \(target.path): errno \(errno)")
    }

    /// Copies `source` to `target`, synced to disk; its size, its bytes added to `digest`.
    private static func copy(_ source: URL, to target: URL, digest: inout SHA256) throws -> Int64 {
        guard FileManager.default.createFile(atPath: target.path, contents: nil), let out = FileHandle(forWritingAtPath: target.path) else {
            throw CLIFailure(message: "cannot write \(target.path)")
        }
        defer { try? out.close() }
        let input = try FileHandle(forReadingFrom: source)
        defer { try? input.close() }
        var bytes: Int64 = 0
        while let chunk = try input.read(upToCount: 1 << 20), !chunk.isEmpty {
            digest.update(chunk)
            try out.write(contentsOf: chunk)
            bytes += Int64(chunk.count)
        }
        try out.synchronize()
        return bytes
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
                case .locator: added = services.add(locator: try LocalLocator(url: url, name: entry.name))
                case .network:
                    let network = try await runBlocking { _ in try RoadNetwork(url: url) }
                    added = services.add(network: network, name: entry.name)
                case .map:
                    _ = try MapDefinition.decode(try Data(contentsOf: url))
                    added = services.add(map: url, name: entry.name, packages: SiteCopy.packages(of: url))
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
                case .map: services.removeMap(named: name)
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
