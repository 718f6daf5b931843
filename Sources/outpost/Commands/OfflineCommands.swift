import ArgumentParser
import Foundation
import OutpostCore
import OutpostOffline
import OutpostProtocol
import OutpostServer
import OutpostStorage
import OutpostSync
import OutpostTiles

struct OfflineCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "offline",
        abstract: "Take a whole map offline in one job, sync it in one job, show its state (docs/offline.md).",
        subcommands: [Create.self, Sync.self, Status.self, Prepare.self])

    static func environment(_ token: String?) -> OfflineJobEnvironment {
        OfflineJobEnvironment(token: serviceToken(token), faults: processFaults, tileCheckpointInterval: testCheckpointInterval)
    }

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Take a map offline: a replica per feature service, the basemap as a .tpkx, locator and network copies.",
            discussion: """
                outpost offline create --map http://127.0.0.1:8080/arcgis/rest/maps/field-crews.json \\
                    --extent -122.70,45.49,-122.64,45.53 --max-scale 70000 --out crew-map/

                The folder appears only when complete. The job checkpoints as it goes: Ctrl-C pauses it, \
                and the same command again (or `outpost job resume <job-dir>`) continues it, also after \
                a kill. A layer that cannot go offline is reported and the rest is kept (--strict fails instead).
                """)

        @Option(help: "The map definition: a URL (…/arcgis/rest/maps/<name>.json) or a file.") var map: String
        @Option(help: "The base of the map's relative service URLs, for a map file without servicesUrl.") var servicesUrl: String?
        @Option(parsing: .unconditional, help: "Area: xmin,ymin,xmax,ymax (longitude/latitude unless --extent-sr).") var extent: String?
        @Option(help: "The spatial reference of --extent.") var extentSr = 4326
        @Option(help: "A preplanned area of the map: its package when the server has prepared it, else its extent and scales.") var area: String?
        @Flag(help: "With --area: generate the area now even when the server has its package ready.") var onDemand = false
        @Option(help: "The basemap's coarsest scale (0: its coarsest level).") var minScale: Double?
        @Option(help: "The basemap's finest scale (0: its finest level).") var maxScale: Double?
        @Option(help: "Basemap levels instead of scales, like 0-12.") var levels: String?
        @Option(help: "Leave out a layer (its id in the map); repeatable.") var skip: [String] = []
        @Option(help: "A layer's filter, as id=clause; repeatable.") var `where`: [String] = []
        @Option(help: "Take a layer as an empty table (the crew only adds to it); repeatable.") var schemaOnly: [String] = []
        @Flag(help: "Leave attachments online.") var noAttachments = false
        @Flag(help: "Leave the basemap out.") var noBasemap = false
        @Flag(help: "Do not copy the map's locators and networks.") var noTasks = false
        @Flag(help: "Take layers of read-only services as snapshots that never sync (default: replicas that download).") var readOnlySnapshot = false
        @Flag(help: "Fail when any layer cannot go offline (default: report it and keep the rest).") var strict = false
        @Option(help: "Refuse a basemap export of more tiles.") var maxTiles = 100_000
        @Option(help: "Service token (default: $OUTPOST_TOKEN).") var token: String?
        @Option(help: "The offline map folder to write (must not exist, or be empty).") var out: String
        @Option(help: "Directory for the job's JSON (default: .outpost/jobs beside --out).") var jobDir: String?
        @Flag(help: "Print the result as JSON.") var json = false

        func validate() throws {
            guard (extent == nil) != (area == nil) else { throw ValidationError("give --extent or --area (a preplanned area)") }
            guard levels == nil || (minScale == nil && maxScale == nil) else { throw ValidationError("give --levels or the scales, not both") }
        }

        func run() async throws {
            let source = map.hasPrefix("http://") || map.hasPrefix("https://") ? URL(string: map) : URL(fileURLWithPath: map)
            guard let source else { throw CLIFailure(message: "\(map) is not a URL") }
            let task = OfflineMapTask(url: source, token: serviceToken(token), servicesURL: servicesUrl)
            let output = URL(fileURLWithPath: out.hasSuffix("/") ? String(out.dropLast()) : out).standardizedFileURL
            let directory = jobDir.map { URL(fileURLWithPath: $0) } ?? output.deletingLastPathComponent().appendingPathComponent(".outpost/jobs")
            let manager = try JobManager(directory: directory, registry: outpostJobRegistry())
            // A prepared package is downloaded rather than generated again.
            if let area, !onDemand, !source.isFileURL {
                let prepared = try await task.preplannedMapAreas().first { $0.id == area }
                if let prepared, prepared.isReady {
                    let definition = DownloadPreplannedOfflineMapJob(
                        areaURL: prepared.url, mapSource: task.source, downloadDirectory: output, environment: OfflineCommand.environment(token))
                    let job = try resumingOrAdding(definition, in: manager, target: out, madeOutput: output.appendingPathComponent(OfflineMap.mapFileName)) {
                        $0.parameters["downloadDirectory"]?.stringValue == output.path
                    }
                    let status = try await startShowingProgress(job, in: manager, label: "download \(area)")
                    guard status == .succeeded else { return try report(job, status: status, json: false) }
                    return try await OfflineCommand.describe(try OfflineMap(directory: output), json: json, check: false, token: token)
                }
                FileHandle.standardError.write(Data("area \(area) is not prepared on the server; generating it now\n".utf8))
            }
            var parameters: GenerateOfflineMapParameters
            do {
                if let area {
                    parameters = try await task.makeDefaultGenerateOfflineMapParameters(preplannedArea: area)
                } else {
                    parameters = try await task.makeDefaultGenerateOfflineMapParameters(
                        areaOfInterest: try parseExtent(extent!), spatialReference: SpatialReference(wkid: extentSr), minScale: minScale ?? 0,
                        maxScale: maxScale ?? 0)
                }
            } catch let error as OfflineMapError {
                throw CLIFailure(message: error.message)
            }
            try adjust(&parameters, map: task.map!)
            let definition = GenerateOfflineMapJob(
                map: task.map!, source: task.source, offlineParameters: parameters, downloadDirectory: output, environment: OfflineCommand.environment(token))
            let job = try resumingOrAdding(definition, in: manager, target: out, madeOutput: output.appendingPathComponent(OfflineMap.mapFileName)) {
                $0.parameters["downloadDirectory"]?.stringValue == output.path
            }
            if ProgressDisplay().enabled { FileHandle.standardError.write(Data("job \(job.id): \(manager.jsonURL(id: job.id).path)\n".utf8)) }
            let status = try await startShowingProgress(job, in: manager, label: "offline map")
            guard status == .succeeded else { return try report(job, status: status, json: false) }
            let offline = try OfflineMap(directory: output)
            try await OfflineCommand.describe(offline, json: json, check: false, token: token)
        }

        func adjust(_ parameters: inout GenerateOfflineMapParameters, map: MapDefinition) throws {
            let ids = Set(map.operationalLayers.map(\.id))
            func known(_ id: String, _ option: String) throws {
                guard ids.contains(id) else {
                    throw CLIFailure(message: "\(option) names \(id), which is not a layer of the map (its layers: \(map.operationalLayers.map(\.id).joined(separator: ", ")))")
                }
            }
            for id in skip {
                try known(id, "--skip")
                parameters.override(id) { $0.skip = true }
            }
            for entry in self.where {
                guard let eq = entry.firstIndex(of: "=") else { throw CLIFailure(message: "--where takes id=clause, not \(entry)") }
                let id = String(entry[..<eq])
                try known(id, "--where")
                parameters.override(id) { $0.where = String(entry[entry.index(after: eq)...]) }
            }
            for id in schemaOnly {
                try known(id, "--schema-only")
                parameters.override(id) { $0.schemaOnly = true }
            }
            if let levels {
                let bounds = levels.split(separator: "-").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }
                guard (1...2).contains(bounds.count), bounds.first! <= bounds.last!, bounds.first! >= 0 else {
                    throw CLIFailure(message: "--levels is a level or a range, like 0-12")
                }
                parameters.basemapLevels = Array(bounds.first!...bounds.last!)
            }
            parameters.includeAttachments = !noAttachments
            parameters.includeBasemap = parameters.includeBasemap && !noBasemap
            parameters.includeTasks = !noTasks
            parameters.readOnlyLayers = readOnlySnapshot ? .snapshot : .syncable
            parameters.continueOnErrors = !strict
            parameters.maxTileCount = maxTiles
        }
    }

    struct Sync: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Sync every replica of an offline map in one job (or apply a scheduled update package).",
            discussion: """
                Replicas sync side by side, each rolled back on its own failure; one that fails is \
                reported and the others still sync (exit 1). Edits the services rejected exit 2. \
                With --updates, a package made by `outpost service export-updates` is applied to the \
                replica of its service instead.
                """)
        @Argument(help: "The offline map folder.") var directory: String
        @Option(help: "bidirectional, upload or download (replicas of read-only services only download).") var direction = "bidirectional"
        @Flag(help: "Keep what a failed sync applied (default: a failed replica is left as it was).") var noRollback = false
        @Option(help: "Apply this scheduled update package instead of syncing.") var updates: String?
        @Option(help: "Service token (default: $OUTPOST_TOKEN).") var token: String?
        @Option(help: "Directory for the job's JSON (default: <map>/.outpost/jobs).") var jobDir: String?
        @Flag(help: "Print the result as JSON.") var json = false

        func run() async throws {
            let folder = URL(fileURLWithPath: directory).standardizedFileURL
            let offline = try OfflineCommand.open(folder)
            let task = OfflineMapSyncTask(offlineMap: offline, token: serviceToken(token))
            if let updates {
                let applied: (file: String, summary: DeltaSync.ImportSummary)
                do {
                    applied = try await task.applyScheduledUpdates(from: URL(fileURLWithPath: updates))
                } catch let error as OfflineMapError {
                    throw CLIFailure(message: error.message)
                } catch let error as DeltaError {
                    throw CLIFailure(message: error.message)
                }
                if json {
                    printJSON(["file": .string(applied.file), "changes": .integer(Int64(applied.summary.changes)), "generation": applied.summary.upto.map { .integer($0) } ?? .null])
                } else {
                    print("\(applied.file): \(applied.summary.changes) changes applied")
                }
                return
            }
            guard let direction = SyncGeodatabaseParameters.Direction(rawValue: direction) else {
                throw CLIFailure(message: "--direction is bidirectional, upload or download")
            }
            let manager = try JobManager(directory: jobDir.map { URL(fileURLWithPath: $0) } ?? folder.appendingPathComponent(".outpost/jobs"), registry: outpostJobRegistry())
            let definition = OfflineMapSyncJob(
                directory: folder, syncParameters: OfflineMapSyncParameters(direction: direction, rollbackOnFailure: !noRollback),
                environment: OfflineCommand.environment(token))
            let job = try resumingOrAdding(definition, in: manager, target: directory) { $0.parameters["directory"]?.stringValue == folder.path }
            try manager.start(job)
            let status = await runShowingProgress(job, label: "offline sync")
            guard status == .succeeded, let typed = job as? Job<OfflineMapSyncJob> else { return try report(job, status: status, json: false) }
            let result = try await typed.output
            var lines: [JSONValue] = []
            var failed = 0, rejected = 0
            for replica in result.replicas {
                var up = PendingChanges(), down = PendingChanges()
                for layer in replica.layers {
                    (up.inserts, up.updates, up.deletes) = (up.inserts + layer.uploaded.inserts, up.updates + layer.uploaded.updates, up.deletes + layer.uploaded.deletes)
                    (down.inserts, down.updates, down.deletes) = (
                        down.inserts + layer.downloaded.inserts, down.updates + layer.downloaded.updates, down.deletes + layer.downloaded.deletes
                    )
                }
                let edits = replica.layers.flatMap { layer in
                    layer.editResults.map { ["layer": .string(layer.tableName), "globalid": .string($0.globalId), "reason": .string($0.message)] as JSONValue }
                }
                failed += replica.error == nil ? 0 : 1
                rejected += edits.count
                lines.append([
                    "file": .string(replica.file), "uploaded": pendingJSON(up), "downloaded": pendingJSON(down), "rejected": .array(edits),
                    "error": replica.error.map(JSONValue.string) ?? .null,
                ])
                if !json {
                    if let error = replica.error {
                        print("\(replica.file): not synced: \(error)")
                    } else {
                        print("\(replica.file): uploaded \(SyncRunCommand.describe(up)); downloaded \(SyncRunCommand.describe(down))")
                    }
                    for e in edits { print("rejected: \(e["layer"]!.stringValue!) \(e["globalid"]!.stringValue!): \(e["reason"]!.stringValue!)") }
                }
            }
            if json {
                printJSON(["replicas": .array(lines)])
            } else if result.replicas.isEmpty {
                print("nothing to sync: the map holds no replicas (snapshots never sync)")
            }
            if failed > 0 { throw CLIFailure(message: "\(failed) of \(result.replicas.count) replicas did not sync (they are as they were)") }
            if rejected > 0 { throw CLIFailure(message: "\(rejected) edits were rejected and kept in their replicas (see outpost status)", exitCode: .partial) }
        }
    }

    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show an offline map's replicas (pending edits, last sync), basemap and layer errors.",
            discussion: "With --check, also ask each service whether it has changes for its replica.")
        @Argument(help: "The offline map folder.") var directory: String
        @Flag(help: "Ask the services whether updates wait (needs a link).") var check = false
        @Option(help: "Service token (default: $OUTPOST_TOKEN).") var token: String?
        @Flag(help: "Print as JSON.") var json = false

        func run() async throws {
            let offline = try OfflineCommand.open(URL(fileURLWithPath: directory).standardizedFileURL)
            try await OfflineCommand.describe(offline, json: json, check: check, token: token)
        }
    }

    struct Prepare: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Prepare a map's preplanned areas ahead, as packages the server hands to crews.",
            discussion: """
                outpost offline prepare --map http://127.0.0.1:8080/arcgis/rest/maps/field-crews.json \\
                    --out services/field-crews.preplanned

                Each area of the map's preplannedAreas becomes <out>/<area id>/, an offline map whose \
                replicas stay registered as the package's: a crew's download registers copies of them \
                (outpost offline create --area). Put --out beside the map definition as \
                <map name>.preplanned and outpost serve offers the packages. An area already prepared \
                is kept unless --refresh (which unregisters the old package's replicas).
                """)
        @Option(help: "The map definition: a URL (…/arcgis/rest/maps/<name>.json) or a file.") var map: String
        @Option(help: "The base of the map's relative service URLs, for a map file without servicesUrl.") var servicesUrl: String?
        @Option(help: "An area to prepare (repeatable; default: every area of the map).") var area: [String] = []
        @Option(help: "The packages folder, e.g. services/<map name>.preplanned.") var out: String
        @Flag(help: "Prepare areas again that are already prepared.") var refresh = false
        @Option(help: "Service token (default: $OUTPOST_TOKEN).") var token: String?
        @Flag(help: "Print the result as JSON.") var json = false

        func run() async throws {
            let source = map.hasPrefix("http://") || map.hasPrefix("https://") ? URL(string: map) : URL(fileURLWithPath: map)
            guard let source else { throw CLIFailure(message: "\(map) is not a URL") }
            let task = OfflineMapTask(url: source, token: serviceToken(token), servicesURL: servicesUrl)
            do { try await task.load() } catch let error as OfflineMapError { throw CLIFailure(message: error.message) }
            let known = task.preplannedAreas
            for id in area where !known.contains(where: { $0.id == id }) {
                throw CLIFailure(message: "the map has no preplanned area \(id) (it has \(known.map(\.id).joined(separator: ", ")))")
            }
            let chosen = known.filter { area.isEmpty || area.contains($0.id) }
            guard !chosen.isEmpty else { throw CLIFailure(message: "the map names no preplanned areas") }
            let packages = PreplannedPackages(folder: URL(fileURLWithPath: out), token: serviceToken(token))
            try FileManager.default.createDirectory(at: packages.folder, withIntermediateDirectories: true)
            let manager = try JobManager(directory: packages.folder.appendingPathComponent(".outpost/jobs"), registry: outpostJobRegistry())
            var prepared: [JSONValue] = []
            for preplanned in chosen {
                let folder = packages.package(preplanned.id)
                if packages.isPrepared(preplanned.id), !refresh {
                    prepared.append(["area": .string(preplanned.id), "prepared": false, "reason": "already prepared"])
                    if !json { print("\(preplanned.id): already prepared (--refresh prepares it again)") }
                    continue
                }
                let (definition, target): (GenerateOfflineMapJob, URL)
                do {
                    (definition, target) = try await packages.prepareJob(task: task, area: preplanned.id, environment: OfflineCommand.environment(token))
                } catch let error as OfflineMapError {
                    throw CLIFailure(message: error.message)
                }
                let job = try resumingOrAdding(definition, in: manager, target: target.path) { $0.parameters["downloadDirectory"]?.stringValue == target.path }
                try manager.start(job)
                let status = await runShowingProgress(job, label: "prepare \(preplanned.id)")
                guard status == .succeeded else { return try report(job, status: status, json: false) }
                let made = try await packages.install(area: preplanned.id, from: target)
                let size = OfflineCommand.bytes(in: folder)
                prepared.append(["area": .string(preplanned.id), "prepared": true, "bytes": .integer(size), "layerErrors": .integer(Int64(made.layerErrors.count))])
                if !json { print("\(preplanned.id): prepared in \(folder.path) (\(ProgressDisplay.count(size, "bytes")))" + (made.layerErrors.isEmpty ? "" : "; \(made.layerErrors.count) layers stay online")) }
            }
            if json { printJSON(["areas": .array(prepared)]) }
        }
    }

    /// `outpost serve --prepare-areas`: every preplanned area of the served maps without a
    /// package gets one, made through this server (`base`) as `outpost offline prepare` makes it;
    /// each outcome is a line on stderr.
    static func prepareMissingAreas(base: String, services: ServiceDirectory, token: String?) async {
        func say(_ text: String) { FileHandle.standardError.write(Data("outpost: \(text)\n".utf8)) }
        for name in services.mapNames {
            // A site's published maps bring their packages; nothing is written beside them.
            guard let map = services.map(named: name), !map.published, let url = URL(string: "\(base)/arcgis/rest/maps/\(name).json") else { continue }
            let packages = PreplannedPackages(folder: map.packages, token: token)
            let task = OfflineMapTask(url: url, token: token)
            do {
                try await task.load()
            } catch {
                say("cannot prepare the areas of map \(name): \(error)")
                continue
            }
            for area in task.preplannedAreas where !packages.isPrepared(area.id) {
                do {
                    let (definition, target) = try await packages.prepareJob(task: task, area: area.id, environment: OfflineJobEnvironment(token: token))
                    let job = Job(definition)
                    try job.start()
                    guard await job.waitUntilFinished() == .succeeded else {
                        say("area \(area.id) of map \(name) was not prepared: \(job.error?.message ?? "the job failed")")
                        continue
                    }
                    let made = try await packages.install(area: area.id, from: target)
                    say("prepared area \(area.id) of map \(name) (\(ProgressDisplay.count(bytes(in: made.directory), "bytes")))")
                } catch {
                    say("area \(area.id) of map \(name) was not prepared: \(error)")
                }
            }
        }
    }

    /// The bytes of the files below `folder`.
    static func bytes(in folder: URL) -> Int64 {
        var total: Int64 = 0
        let walker = FileManager.default.enumerator(at: folder, includingPropertiesForKeys: [.fileSizeKey])
        while let url = walker?.nextObject() as? URL { total += Int64((try? url.resourceValues(forKeys: [.fileSizeKey]).fileSize) ?? 0) }
        return total
    }

    static func open(_ folder: URL) throws -> OfflineMap {
        do {
            return try OfflineMap(directory: folder)
        } catch let error as OfflineMapError {
            throw CLIFailure(message: error.message)
        }
    }

    /// Prints what an offline map holds (and, with `check`, what waits on its services).
    static func describe(_ offline: OfflineMap, json: Bool, check: Bool, token: String?) async throws {
        var updates: [String: GeodatabaseUpdates] = [:]
        if check {
            do {
                for entry in try await OfflineMapSyncTask(offlineMap: offline, token: serviceToken(token)).checkForUpdates().replicas {
                    updates[entry.file] = entry.updates
                }
            } catch let error as SyncError {
                throw CLIFailure(message: "cannot check for updates: \(error.message)")
            }
        }
        var replicas: [JSONValue] = []
        for replica in offline.offline.replicas {
            let gdb = try Geodatabase.open(at: offline.url(replica.file), readOnly: true)
            defer { try? gdb.close() }
            let state = try await gdb.read { try $0.replicaState() }
            var pending = PendingChanges()
            var layers: [JSONValue] = []
            for layer in offline.definition.operationalLayers where layer.file == replica.file {
                guard let table = layer.table else { continue }
                let features = try gdb.table(named: table)
                let p = replica.snapshot ? PendingChanges() : try await features.pendingChanges()
                (pending.inserts, pending.updates, pending.deletes) = (pending.inserts + p.inserts, pending.updates + p.updates, pending.deletes + p.deletes)
                layers.append(["id": .string(layer.id), "table": .string(table), "features": .integer(Int64(try await features.count())), "pending": pendingJSON(p)])
            }
            var entry: [String: JSONValue] = [
                "file": .string(replica.file), "serviceUrl": .string(replica.serviceUrl), "snapshot": .bool(replica.snapshot), "readOnly": .bool(replica.readOnly),
                "replicaId": state.map { .string($0.replicaID) } ?? .null, "generation": state.map { .integer($0.cursor) } ?? .null,
                "lastSync": isoDate(state?.lastSyncAt), "pending": pendingJSON(pending), "layers": .array(layers),
            ]
            if let u = updates[replica.file] { entry["updatesAvailable"] = .bool(u.downloadAvailable) }
            replicas.append(.object(entry))
        }
        let errors = offline.layerErrors.map { ["layer": .string($0.layer), "message": .string($0.message)] as JSONValue }
        let basemap = offline.definition.basemap?.file
        if json {
            return printJSON([
                "directory": .string(offline.directory.path), "title": .string(offline.definition.title), "generatedAt": isoDate(offline.offline.generatedAt),
                "preplannedArea": offline.offline.preplannedArea.map(JSONValue.string) ?? .null, "replicas": .array(replicas),
                "basemap": basemap.map(JSONValue.string) ?? .null,
                "locators": .array((offline.definition.locators ?? []).compactMap(\.file).map(JSONValue.string)),
                "networks": .array((offline.definition.networks ?? []).compactMap(\.file).map(JSONValue.string)), "layerErrors": .array(errors),
            ])
        }
        print("\(offline.definition.title): offline map in \(offline.directory.path)")
        for r in replicas {
            let layers = (r["layers"]?.arrayValue ?? []).map { "\($0["table"]!.stringValue!) \($0["features"]!.integerValue!)" }.joined(separator: ", ")
            let pending = r["pending"].map { p in (p["inserts"]!.integerValue! + p["updates"]!.integerValue! + p["deletes"]!.integerValue!) } ?? 0
            var line = "  \(r["file"]!.stringValue!): \(layers)"
            line += r["snapshot"]!.boolValue! ? " (snapshot)" : "; \(pending) edits pending; last sync \(r["lastSync"]?.stringValue ?? "never")"
            if let available = r["updatesAvailable"]?.boolValue { line += available ? "; updates available" : "; up to date" }
            print(line)
        }
        if let basemap { print("  \(basemap): basemap") }
        for file in (offline.definition.locators ?? []).compactMap(\.file) + (offline.definition.networks ?? []).compactMap(\.file) { print("  \(file)") }
        for e in offline.layerErrors { print("  not offline: \(e.layer): \(e.message)") }
    }
}
