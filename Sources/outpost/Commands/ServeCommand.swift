import ArgumentParser
import Foundation
import Logging
import OutpostPostgres
import OutpostCore
import OutpostProtocol
import OutpostLocator
import OutpostOffline
import OutpostRouting
import OutpostSQLiteService
import OutpostServer
import OutpostSyncService
import OutpostTiles
import OutpostStorage
import ServiceLifecycle

struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serve feature services over HTTP (ArcGIS-REST-shaped FeatureServer endpoints).",
        discussion: """
            Prints "listening on http://HOST:PORT" once ready (with --port 0, the port picked). \
            SIGINT or SIGTERM drains it: syncs that had begun finish (within --drain-seconds), other new \
            requests get 503 with Retry-After, then it stops; requests in flight finish, databases close.
            """)

    @Option(help: "A service GeoPackage, or a directory of them (made with `outpost service create`).") var service: String?
    @Option(
        help: """
            Serve every service of this PostgreSQL/PostGIS database (postgres://user[:password]@host[:port]/db; \
            $OUTPOST_POSTGRES when neither this nor --service is given). Several processes may serve one database.
            """)
    var postgres: String?
    @Option(help: "Seconds a request waits for PostgreSQL before it is answered 503.") var databaseTimeout = 30
    @Option(
        help: """
            With --postgres: seconds a job stays with a process that stopped renewing its lease (it died) before another \
            process serving the database takes it over: a geoprocessing job, an async createReplica or a tile export is run \
            again there from its start; an async synchronizeReplica is failed with the reason (its client submits it again).
            """) var jobLease = 30.0
    @Option(
        help: """
            On SIGTERM or SIGINT, the most seconds syncs that had begun may take to finish (other new requests get 503 \
            meanwhile); the server exits as soon as none is left.
            """)
    var drainSeconds = 30
    @Option(help: "The service name in URLs (single service only; default: the file name).") var name: String?
    @Option(help: "Address to listen on.") var host = "127.0.0.1"
    @Option(help: "Port (0 picks a free one).") var port = 8080
    @Option(help: "A token every request but /health must carry (token= or Authorization: Bearer).") var token: String?
    @Option(help: "A file of tokens, one per line: \"<token> [read|edit]\".") var tokens: String?
    @Option(
        help: """
            A users file (outpost users add): users sign in with POST /arcgis/tokens/generateToken. With --postgres, a site \
            keeps its users in the database instead (outpost users add --postgres), and every host reads them there.
            """)
    var users: String?
    @Option(help: "Largest request body in MB.") var maxBodyMb = 64
    @Option(
        help: """
            Where replica files, synchronizeReplica answers and tile packages are written for download \
            (default: a new temporary directory). Processes serving one database should share one.
            """)
    var outputDirectory: String?
    @Option(
        help: """
            A directory every host of a site mounts (with --postgres): replica files, synchronizeReplica answers and tile \
            packages go to results/ in it, geoprocessing uploads and job outputs to geoprocessing/<service>/; /ready answers \
            503 while a file cannot be written there; the locators and networks published with outpost site publish are \
            served from services/ in it. Instead of --output-directory.
            """)
    var siteDirectory: String?
    @Option(
        help: """
            The address clients reach this server at, e.g. https://gis.example.org/prefix, when a reverse proxy in front of it \
            does not send Forwarded or X-Forwarded-Host/-Proto/-Prefix headers: every URL the server writes starts with it.
            """)
    var publicUrl: String?
    @Option(help: "Serve HTTPS (HTTP/2 and HTTP/1.1) with this PEM certificate chain; needs --tls-key.") var tlsCert: String?
    @Option(help: "The PEM private key of --tls-cert.") var tlsKey: String?
    @Flag(
        help: """
            Let generateToken take the name and password in the URL (a GET, as geopy and other ArcGIS Online clients \
            send it), over HTTPS only. Off by default: a URL can end up in a proxy's or browser's history.
            """)
    var allowTokenRequestsInUrl = false
    @Flag(
        help: """
            With --token, --tokens or --users, let /metrics answer without a token (a Prometheus scraper on a \
            private network); otherwise it needs an admin's token.
            """)
    var publicMetrics = false
    @Flag(
        help: """
            Once listening, prepare every preplanned area of the served maps that has no package yet \
            (as outpost offline prepare does), in the background. With --tokens or --users, prepare \
            them with outpost offline prepare instead.
            """)
    var prepareAreas = false
    @Flag(
        help: """
            Refuse to start when any service file (a .gpkg, tile cache, .gp.json, .locator, .network or .map.json) \
            cannot be opened; by default the others are served and the broken one is reported and answered with 503.
            """)
    var strict = false

    /// The database to serve from, if any.
    var database: String? {
        postgres ?? (service == nil ? ProcessInfo.processInfo.environment["OUTPOST_POSTGRES"] : nil)
    }

    func validate() throws {
        guard service != nil || database != nil else { throw ValidationError("give --service or --postgres (or set OUTPOST_POSTGRES)") }
        guard name == nil || service != nil else { throw ValidationError("--name renames a --service file; PostgreSQL services keep their names") }
        guard databaseTimeout > 0 else { throw ValidationError("--database-timeout must be positive") }
        guard jobLease >= 0.3, jobLease.isFinite else { throw ValidationError("--job-lease must be at least 0.3 seconds") }
        guard drainSeconds >= 0 else { throw ValidationError("--drain-seconds must not be negative") }
        guard token == nil || tokens == nil else { throw ValidationError("give --token or --tokens, not both") }
        guard siteDirectory == nil || outputDirectory == nil else { throw ValidationError("--site-directory holds the output directory (results/): drop --output-directory") }
        guard (0...65535).contains(port) else { throw ValidationError("--port must be 0…65535") }
        guard maxBodyMb > 0 else { throw ValidationError("--max-body-mb must be positive") }
        guard (tlsCert == nil) == (tlsKey == nil) else { throw ValidationError("give --tls-cert and --tls-key together") }
        guard !prepareAreas || (tokens == nil && users == nil) else {
            throw ValidationError("--prepare-areas works with no token or --token; with --tokens or --users run outpost offline prepare --token …")
        }
        if let publicUrl {
            guard let url = URL(string: publicUrl), ["http", "https"].contains(url.scheme?.lowercased() ?? ""), url.host != nil, url.query == nil else {
                throw ValidationError("--public-url must be an http or https URL without a query, like https://gis.example.org/prefix")
            }
        }
    }

    func run() async throws {
        var configuration = ServerConfiguration(
            host: host, port: port, maxBodyBytes: maxBodyMb << 20, outputDirectory: outputDirectory.map { URL(fileURLWithPath: $0) })
        let site = siteDirectory.map { URL(fileURLWithPath: $0).standardizedFileURL }
        if let site {
            try FileManager.default.createDirectory(at: site, withIntermediateDirectories: true)
            configuration.siteDirectory = site
            configuration.outputDirectory = site.appendingPathComponent("results")
        }
        configuration.publicURL = publicUrl.flatMap(URL.init(string:))
        if let level = ProcessInfo.processInfo.environment["LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) { configuration.logLevel = level }
        if let tlsCert, let tlsKey {
            configuration.tls = TLSFiles(certificateChain: URL(fileURLWithPath: tlsCert), privateKey: URL(fileURLWithPath: tlsKey))
        }
        if let token { configuration.tokens = TokenPolicy(token: token) }
        if let tokens { configuration.tokens = try TokenPolicy(contentsOf: URL(fileURLWithPath: tokens)) }
        configuration.tokenRequestsInURL = allowTokenRequestsInUrl
        configuration.publicMetrics = publicMetrics
        if let users {
            let url = URL(fileURLWithPath: users)
            _ = try UserFile.load(from: url)  // a missing or damaged file stops here, not at the first sign-in
            configuration.usersFile = url
        }
        let services: ServiceDirectory
        // A site's published locators and networks (outpost site publish), with --postgres and
        // --site-directory.
        var registry: PostgresSiteFiles?
        do {
            var files = ServiceFiles()
            // Job records in the database: any process answers a job's status, and with
            // geoprocessing jobs passes a cancel on and takes over a stopped host's jobs.
            var geoprocessingJobs: (@Sendable (String) -> any GPJobRecordStore)?
            let lease = Duration.milliseconds(Int64(jobLease * 1000))
            if let database {
                let jobs = try await PostgresJobStore(location: try PostgresLocation(url: database))
                configuration.jobStore = jobs
                if site != nil { registry = jobs.siteFiles() }
                configuration.jobLease = lease
                geoprocessingJobs = { jobs.geoprocessingJobs(service: $0) }
                // A site whose users are in its database (outpost users --postgres): every host
                // signs in from there, accepts the others' tokens and throttles failures with them.
                let security = jobs.security()
                if try await security.securityVersion() != nil {
                    guard users == nil else {
                        throw CLIFailure(message: "\(try PostgresLocation(url: database)) holds the site's users (outpost users --postgres); drop --users")
                    }
                    guard !prepareAreas else {
                        throw CLIFailure(message: "--prepare-areas works with no token or --token; this site has users: run outpost offline prepare --token …")
                    }
                    configuration.securityRecords = security
                }
            }
            if let service {
                // A site's geoprocessing uploads and outputs in its site directory.
                var geoprocessingDirectory: (@Sendable (String) -> URL)?
                if let site { geoprocessingDirectory = { site.appendingPathComponent("geoprocessing").appendingPathComponent($0) } }
                files = try await ServiceDirectory.open(
                    at: URL(fileURLWithPath: service), name: name, faults: processFaults, strict: strict,
                    geoprocessingJobs: geoprocessingJobs, geoprocessingLease: lease, geoprocessingDirectory: geoprocessingDirectory)
                // One damaged file does not stop the others: it is named here, listed as
                // unavailable, and its requests get 503.
                for broken in files.unavailable {
                    FileHandle.standardError.write(Data("outpost serve: \(broken.logLine); serving the others (--strict refuses to start)\n".utf8))
                }
            }
            if let database {
                let location = try PostgresLocation(url: database)
                let stored = try await PostgresServiceBackend.openAll(at: location, timeout: .seconds(databaseTimeout), faults: processFaults)
                guard !stored.isEmpty || service != nil else { throw CLIFailure(message: "\(location) has no services; load one with: outpost service create --postgres") }
                files.backends += stored
            }
            let opened = files.backends.count + files.tileCaches.count + files.geoprocessing.count + files.locators.count + files.networks.count
            guard opened > 0 else {
                throw CLIFailure(message: "no service could be opened: \(files.unavailable.map(\.logLine).joined(separator: "; "))")
            }
            services = try ServiceDirectory(checking: files)
        } catch let error as ServiceError {
            throw CLIFailure(message: error.message)
        } catch let error as SyncServiceError {
            throw CLIFailure(message: error.description)
        }
        // Served from the first request on (a host started after a publication has it), then
        // followed while the server runs.
        var following: Task<Void, Never>?
        if let registry, let site {
            let follower = SiteRegistryFollower(registry: registry, site: site, services: services)
            try? await follower.follow()
            following = follower.start()
        }
        defer { following?.cancel() }
        do {
            let drain = ServerDrain(period: .seconds(drainSeconds))
            let prepare = prepareAreas, token = self.token
            let app = try OutpostApplication.make(services: services, configuration: configuration, drain: drain) { url in
                // Written straight to the file descriptor: scripts wait for this line, and stdout
                // may be a pipe that would otherwise hold it in a buffer.
                FileHandle.standardOutput.write(Data("listening on \(url)\n".utf8))
                if prepare { Task { await OfflineCommand.prepareMissingAreas(base: url, services: services, token: token) } }
            }
            // SIGTERM/SIGINT: the drain first (syncs that had begun finish, other new requests
            // get 503), then the server stops listening and lets the requests in flight finish.
            let group = ServiceGroup(
                configuration: .init(services: [app, drain], gracefulShutdownSignals: [.sigterm, .sigint], logger: Logger(label: "outpost.serve")))
            try await group.run()
        } catch let error as ServiceError {
            await services.closeAll()
            throw CLIFailure(message: error.message)
        } catch let error as SyncServiceError {
            await services.closeAll()
            throw CLIFailure(message: error.description)
        } catch {
            await services.closeAll()
            throw CLIFailure(message: "cannot serve on \(host):\(port): \(error)")
        }
        await services.closeAll()
    }
}

struct ServiceCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "service",
        abstract: "Create feature services and evolve their schemas.",
        subcommands: [Create.self, Migrate.self, ImportDelta.self, ExportUpdates.self])

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create a service GeoPackage from a schema and GeoJSON data.",
            discussion: """
                outpost service create SampleData/field_inspection --out services/field_inspection.gpkg
                outpost service create --schema service.json --data data/ --out service.gpkg
                """)

        @Argument(help: "A service directory (service.json + data/), instead of --schema and --data.") var directory: String?
        @Option(help: "The service schema JSON.") var schema: String?
        @Option(help: "A directory of <layer>.geojson files.") var data: String?
        @Option(help: "The service GeoPackage to write (with --postgres: the service's name in the database).") var out: String
        @Option(help: "Load the service into this PostgreSQL/PostGIS database (postgres://user@host[:port]/db; default: $OUTPOST_POSTGRES when --postgres is given empty).")
        var postgres: String?
        @Flag(help: "Replace --out if it exists.") var overwrite = false

        func validate() throws {
            guard directory != nil || schema != nil else { throw ValidationError("give a service directory or --schema") }
            guard postgres != nil || out.lowercased().hasSuffix(".gpkg") else { throw ValidationError("--out must name a .gpkg file") }
        }

        func run() async throws {
            let base = directory.map { URL(fileURLWithPath: $0) }
            let schemaURL = schema.map { URL(fileURLWithPath: $0) } ?? base!.appendingPathComponent("service.json")
            let dataURL = data.map { URL(fileURLWithPath: $0) } ?? base?.appendingPathComponent("data")
            if let postgres {
                // Validated and imported through a GeoPackage first (the same checks as a file
                // service), then loaded into PostgreSQL.
                let url = postgres.isEmpty ? ProcessInfo.processInfo.environment["OUTPOST_POSTGRES"] ?? "" : postgres
                let location = try PostgresLocation(url: url)
                let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-\(UUID().uuidString).gpkg")
                defer { Geodatabase.removeFiles(at: scratch) }
                try SQLiteServiceBackend.create(at: scratch, schema: try ServiceSchema.load(from: schemaURL), dataDirectory: dataURL)
                let name = URL(fileURLWithPath: out).deletingPathExtension().lastPathComponent
                let source = try Geodatabase.open(at: scratch, readOnly: true)
                defer { try? source.close() }
                let counts = try await PostgresServiceStore.createService(named: name, from: source, at: location, replace: overwrite)
                for (layer, count) in counts.sorted(by: { $0.key < $1.key }) { print("\(layer): \(count) features") }
                return print("loaded service \(name) into \(location)")
            }
            let outURL = URL(fileURLWithPath: out)
            try? FileManager.default.createDirectory(at: outURL.deletingLastPathComponent(), withIntermediateDirectories: true)
            let counts = try SQLiteServiceBackend.create(
                at: outURL, schema: try ServiceSchema.load(from: schemaURL), dataDirectory: dataURL, overwrite: overwrite)
            for (layer, count) in counts.sorted(by: { $0.key < $1.key }) { print("\(layer): \(count) features") }
            print("wrote service \(outURL.deletingPathExtension().lastPathComponent) to \(outURL.path)")
        }
    }

    struct Migrate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Move a service to a new schema: add nullable or defaulted fields, layers, coded values (and drop fields with --allow-drop).",
            discussion: """
                The schema gets the next version; replicas migrate at their next sync and keep their \
                pending edits. Values uploaded later for a dropped field are kept in conflict records. \
                Run it on a GeoPackage service while it is not being served (outpost serve reads the \
                schema when it starts). A service in PostgreSQL may be migrated while served: every \
                server process reads the new schema at its next commit, replica read or schema request.
                """)
        @Argument(help: "The service GeoPackage (with --postgres: the service's name in the database).") var service: String
        @Option(help: "The new service schema JSON.") var schema: String
        @Option(help: "The service is in this PostgreSQL/PostGIS database (postgres://user@host[:port]/db).") var postgres: String?
        @Flag(help: "Allow dropping fields (their values stay in existing rows' history only).") var allowDrop = false
        @Flag(help: "Print the steps as JSON.") var json = false

        func run() async throws {
            let backend = try await ServiceCommand.openBackend(service, postgres: postgres)
            let target = try ServiceSchema.load(from: URL(fileURLWithPath: schema))
            let steps: [SchemaChange]
            do {
                steps = try await backend.migrate(to: target, allowDrop: allowDrop)
            } catch {
                try? await backend.close()
                throw error
            }
            let version = try await backend.schema().schemaVersion
            try await backend.close()
            if json {
                return printJSON(["schemaVersion": .integer(Int64(version)), "steps": .array(steps.map { .string($0.description) })])
            }
            if steps.isEmpty { return print("the schema is unchanged (version \(version))") }
            for step in steps { print(step.description) }
            print("service schema is now version \(version)")
        }
    }

    /// A service GeoPackage, or with `postgres` a service in that database.
    static func openBackend(_ service: String, postgres: String?) async throws -> any FeatureServiceBackend & SyncBackend {
        do {
            if let postgres { return try await PostgresServiceBackend.open(service: service, at: try PostgresLocation(url: postgres)) }
            return try SQLiteServiceBackend(url: URL(fileURLWithPath: service))
        } catch let error as PostgresServiceError {
            throw CLIFailure(message: error.message)
        } catch let error as ServiceError {
            throw CLIFailure(message: error.message)
        } catch let error as SyncServiceError {
            throw CLIFailure(message: error.description)
        }
    }

    /// Runs `body` on the opened service and closes it, failed or not; a delta file's error is
    /// the command's one line.
    static func withBackend<T: Sendable>(
        _ service: String, postgres: String?, _ body: (any FeatureServiceBackend & SyncBackend) async throws -> T
    ) async throws -> T {
        let backend = try await openBackend(service, postgres: postgres)
        do {
            let result = try await body(backend)
            try await backend.close()
            return result
        } catch let error as DeltaError {
            try? await backend.close()
            throw CLIFailure(message: error.message)
        } catch {
            try? await backend.close()
            throw error
        }
    }

    struct ImportDelta: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "import-delta",
            abstract: "Apply a replica's edits delta file to a service exactly once and write the reply delta file.",
            discussion: """
                The batch goes through the same ledger as an HTTP upload: importing the same file \
                again replays the stored answer; another batch under the same number, or a gap, \
                is refused. The reply carries the answer and the service's changes the replica \
                needs since the file was made, filtered to its area.
                """)
        @Argument(help: "The service GeoPackage (with --postgres: the service's name in the database).") var service: String
        @Argument(help: "The edits delta file.") var delta: String
        @Option(help: "The reply delta file to write.") var out: String
        @Option(help: "The service is in this PostgreSQL/PostGIS database (postgres://user@host[:port]/db).") var postgres: String?
        @Flag(help: "Print the result as JSON.") var json = false

        func run() async throws {
            let (delta, out) = (URL(fileURLWithPath: delta), URL(fileURLWithPath: out))
            let summary = try await ServiceCommand.withBackend(service, postgres: postgres) { backend in
                try await DeltaImport.importEdits(delta, into: backend, service: backend.name, reply: out)
            }
            if json {
                return printJSON([
                    "replicaId": .string(summary.replicaID), "seq": summary.seq.map { .integer($0) } ?? .null, "replayed": .bool(summary.replayed),
                    "rejected": .bool(summary.rejected), "edits": .integer(Int64(summary.edits)), "changes": .integer(Int64(summary.changes)),
                    "attachments": .integer(Int64(summary.attachments)), "upto": .integer(summary.upto),
                ])
            }
            var line = summary.seq.map { seq in
                summary.rejected ? "batch \(seq) rolled back (an edit is invalid; nothing applied)"
                    : summary.replayed ? "batch \(seq) had been applied before; its stored answer is replayed" : "batch \(seq): \(summary.edits) edits applied"
            } ?? "no edits"
            line += "; \(summary.changes) changes up to generation \(summary.upto) in \(out.path)"
            print(line)
        }
    }

    struct ExportUpdates: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "export-updates",
            abstract: "Write a scheduled update package: the service's changes since a generation, for read-only replicas to import.",
            discussion: """
                Every change after --since up to the generation now, of the layers asked for, within \
                --area; any read-only replica of that area at or after --since imports it with \
                `outpost sync import` (changes it already has are applied again, harmlessly).
                """)
        @Argument(help: "The service GeoPackage (with --postgres: the service's name in the database).") var service: String
        @Option(help: "The generation the changes start after (a replica's generation: `outpost replica info`).") var since: Int64
        @Option(parsing: .unconditional, help: "xmin,ymin,xmax,ymax in the service's spatial reference (default: everywhere).") var area: String?
        @Option(help: "Layer ids, comma-separated (default: every layer that syncs).") var layers: String?
        @Option(help: "A where clause for every layer.") var `where`: String?
        @Option(help: "The update package to write.") var out: String
        @Option(help: "The service is in this PostgreSQL/PostGIS database (postgres://user@host[:port]/db).") var postgres: String?
        @Flag(help: "Print the result as JSON.") var json = false

        func run() async throws {
            var envelope: Envelope?
            if let area {
                let v = area.split(separator: ",").compactMap { Double($0.trimmingCharacters(in: .whitespaces)) }
                guard v.count == 4, v[0] <= v[2], v[1] <= v[3] else { throw CLIFailure(message: "--area: expected xmin,ymin,xmax,ymax") }
                envelope = Envelope(xmin: v[0], ymin: v[1], xmax: v[2], ymax: v[3])
            }
            let (layers, since, clause, out) = (layers, since, `where`, out)
            let (ids, upto, count) = try await ServiceCommand.withBackend(service, postgres: postgres) { backend in
                let schema = try await backend.schema()
                let ids = try layers.map { text in
                    try text.split(separator: ",").map { part -> Int in
                        guard let id = Int(part.trimmingCharacters(in: .whitespaces)) else { throw CLIFailure(message: "--layers: \(part) is not a layer id") }
                        return id
                    }
                } ?? schema.layers.filter { $0.globalIDField != nil }.map(\.id)
                let upto = try await backend.generation()
                let count = try await DeltaImport.exportUpdates(
                    from: backend, service: backend.name, layers: ids, area: envelope, where: clause, since: since, upto: upto, to: URL(fileURLWithPath: out))
                return (ids, upto, count)
            }
            if json {
                return printJSON(["since": .integer(since), "upto": .integer(upto), "changes": .integer(Int64(count)), "layers": .array(ids.map { .integer(Int64($0)) })])
            }
            print("\(count) changes from generation \(since) to \(upto) in \(out)")
        }
    }
}

