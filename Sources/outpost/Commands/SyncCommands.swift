import ArgumentParser
import Foundation
import OutpostCore
import OutpostProtocol
import OutpostStorage
import OutpostSync

/// `--token`, else `OUTPOST_TOKEN`.
func serviceToken(_ option: String?) -> String? {
    option ?? ProcessInfo.processInfo.environment["OUTPOST_TOKEN"]
}

/// Opens a replica geodatabase and reads its state; one-line errors otherwise.
func openReplica(_ path: String) async throws -> (Geodatabase, ReplicaState) {
    guard FileManager.default.fileExists(atPath: path) else { throw CLIFailure(message: "\(path) does not exist") }
    let gdb = try Geodatabase.open(at: URL(fileURLWithPath: path))
    guard let state = try await gdb.read({ try $0.replicaState() }) else {
        try? gdb.close()
        throw CLIFailure(message: "\(path) is not a replica of a feature service (make one with: outpost replica create)")
    }
    return (gdb, state)
}

func pendingJSON(_ p: PendingChanges) -> JSONValue {
    ["inserts": .integer(Int64(p.inserts)), "updates": .integer(Int64(p.updates)), "deletes": .integer(Int64(p.deletes))]
}

func isoDate(_ date: Date?) -> JSONValue {
    guard let date else { return .null }
    return .string(ISO8601DateFormatter().string(from: date))
}

struct ReplicaCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replica",
        abstract: "Take a feature service offline as a replica geodatabase, inspect or unregister it.",
        subcommands: [Create.self, Info.self, Unregister.self])

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Generate a replica GeoPackage of a feature service.",
            discussion: """
                outpost replica create --url http://127.0.0.1:8080/arcgis/rest/services/field_inspection/FeatureServer \\
                    --extent -122.68,45.50,-122.62,45.54 --layers 0,3 --out crew1.gpkg
                """)

        @Option(help: "The FeatureServer URL.") var url: String
        @Option(parsing: .unconditional, help: "Area: xmin,ymin,xmax,ymax (longitude/latitude unless --extent-sr; negative values need no =).") var extent: String?
        @Option(help: "The spatial reference of --extent (4326 or 3857).") var extentSr = 4326
        @Option(help: "Area: a GeoJSON file with a polygon (only features touching it).") var aoi: String?
        @Option(help: "Layer ids, comma-separated (default: all).") var layers: String?
        @Option(help: "A where clause for every layer taken.") var `where`: String?
        @Option(help: "geodatabase (one generation) or layer (a generation per layer).") var syncModel = "geodatabase"
        @Flag(help: "Take attachments too.") var attachments = false
        @Option(help: "How attachments sync: none, upload or bidirectional (default: bidirectional with --attachments, else none).")
        var attachmentSync: String?
        @Option(help: "Service token (default: $OUTPOST_TOKEN).") var token: String?
        @Option(help: "The replica GeoPackage to write.") var out: String
        @Flag(help: "Print the result as JSON.") var json = false

        func validate() throws {
            guard extent == nil || aoi == nil else { throw ValidationError("give --extent or --aoi, not both") }
            guard ["geodatabase", "layer"].contains(syncModel) else { throw ValidationError("--sync-model is geodatabase or layer") }
            guard out.lowercased().hasSuffix(".gpkg") else { throw ValidationError("--out must name a .gpkg file") }
        }

        func area() throws -> Geometry? { try commandArea(extent: extent, aoi: aoi) }

        func run() async throws {
            guard let serviceURL = URL(string: url) else { throw CLIFailure(message: "\(url) is not a URL") }
            let task = try GeodatabaseSyncTask(url: serviceURL, token: serviceToken(token))
            var parameters = try await task.makeDefaultGenerateGeodatabaseParameters(extent: nil)
            parameters.extent = try area()
            parameters.spatialReference = aoi != nil ? .wgs84 : SpatialReference(wkid: extentSr)
            if let layers {
                let ids = layers.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }
                guard !ids.isEmpty else { throw CLIFailure(message: "--layers must list layer ids, like 0,1") }
                parameters.layerOptions = ids.map { .init(layerID: $0) }
            }
            if let clause = self.where {
                for i in parameters.layerOptions.indices { parameters.layerOptions[i].whereClause = clause }
            }
            parameters.syncModel = syncModel == "layer" ? .layer : .geodatabase
            parameters.returnAttachments = attachments
            let direction = attachmentSync ?? (attachments ? "bidirectional" : "none")
            guard let sync = GenerateGeodatabaseParameters.AttachmentSyncDirection(rawValue: direction) else {
                throw CLIFailure(message: "--attachment-sync is none, upload or bidirectional")
            }
            parameters.attachmentSyncDirection = sync
            let out = URL(fileURLWithPath: out)
            parameters.replicaName = out.deletingPathExtension().lastPathComponent
            try? FileManager.default.createDirectory(at: out.deletingLastPathComponent(), withIntermediateDirectories: true)
            let job = task.makeGenerateGeodatabaseJob(parameters: parameters, downloadFileURL: out, faults: processFaults)
            try job.start()
            let status = await runShowingProgress(job, label: "replica")
            guard status == .succeeded else {
                throw CLIFailure(message: "replica create failed: \(job.error?.message ?? status.rawValue)")
            }
            let gdb = try await job.output
            defer { try? gdb.close() }
            guard let state = try await gdb.read({ try $0.replicaState() }) else { throw CLIFailure(message: "the file is not a replica") }
            var counts: [JSONValue] = []
            for layer in state.layers {
                let count = try await gdb.table(named: layer.table).count()
                counts.append(["name": .string(layer.table), "count": .integer(Int64(count))])
            }
            if json {
                printJSON(["replicaId": .string(state.replicaID), "file": .string(out.path), "layers": .array(counts)])
            } else {
                let list = counts.map { "\($0["name"]?.stringValue ?? "") \($0["count"]?.integerValue ?? 0)" }.joined(separator: ", ")
                print("replica \(state.replicaID) written to \(out.path): \(list)")
            }
        }
    }

    struct Info: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show a replica's service, sync model, generations and layers.")
        @Argument(help: "The replica GeoPackage.") var geodatabase: String
        @Flag(help: "Print as JSON.") var json = false

        func run() async throws {
            let (gdb, state) = try await openReplica(geodatabase)
            defer { try? gdb.close() }
            let layers: [JSONValue] = state.layers.map {
                ["id": .integer(Int64($0.id)), "name": .string($0.table), "direction": .string($0.direction.rawValue), "generation": .integer(state.cursor(forLayer: $0.id))]
            }
            let info: JSONValue = [
                "replicaId": .string(state.replicaID), "replicaName": .string(state.replicaName), "serviceUrl": .string(state.serviceURL),
                "syncModel": .string(state.syncModel == .perLayer ? "layer" : "geodatabase"), "generation": .integer(state.cursor),
                "lastBatch": .integer(state.lastAckedSeq), "created": isoDate(state.createdAt), "lastSync": isoDate(state.lastSyncAt),
                "unregistered": .bool(state.unregistered), "layers": .array(layers),
            ]
            if json { return printJSON(info) }
            print("replica \(state.replicaID) (\(state.replicaName)) of \(state.serviceURL)")
            print("sync model \(info["syncModel"]!.stringValue!), generation \(state.cursor), last batch \(state.lastAckedSeq), last sync \(info["lastSync"]?.stringValue ?? "never")\(state.unregistered ? ", UNREGISTERED" : "")")
            for layer in state.layers { print("  \(layer.id) \(layer.table): \(layer.direction.rawValue), generation \(state.cursor(forLayer: layer.id))") }
        }
    }

    struct Unregister: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Unregister a replica on its service; the file keeps its data and pending edits.")
        @Argument(help: "The replica GeoPackage.") var geodatabase: String
        @Option(help: "Service token (default: $OUTPOST_TOKEN).") var token: String?

        func run() async throws {
            let (gdb, state) = try await openReplica(geodatabase)
            defer { try? gdb.close() }
            let task = try GeodatabaseSyncTask(url: URL(string: state.serviceURL)!, token: serviceToken(token))
            try await task.unregisterGeodatabase(gdb)
            print("replica \(state.replicaID) unregistered")
        }
    }
}

struct SyncCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Sync a replica with its feature service (over HTTP, or by delta files with no link).",
        subcommands: [SyncRunCommand.self, SyncExportCommand.self, SyncImportCommand.self],
        defaultSubcommand: SyncRunCommand.self)
}

/// `outpost sync export`: the replica's pending edits into a delta file.
struct SyncExportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Write a replica's pending edits to a delta file for its service (sync with no link).",
        discussion: """
            The edits are sealed as the next batch (the one an HTTP sync would send) and stay \
            pending until the service's reply is imported with `outpost sync import`; exporting \
            again before then writes the same batch. With nothing pending the file asks only for \
            the service's changes.
            """)
    @Argument(help: "The replica GeoPackage.") var geodatabase: String
    @Option(help: "The delta file to write.") var out: String
    @Flag(help: "Apply the valid edits even when some are rejected (default: reject the whole batch).") var noRollback = false
    @Option(help: "Most edits one file carries; the rest go in the next round (default 100000).") var maxEdits = 100_000
    @Flag(help: "Print the header as JSON.") var json = false

    func run() async throws {
        let (gdb, _) = try await openReplica(geodatabase)
        defer { try? gdb.close() }
        let summary = try await outputOf(
            GeodatabaseSyncTask.makeExportDeltaJob(
                geodatabase: gdb, deltaFileURL: URL(fileURLWithPath: out),
                parameters: SyncGeodatabaseParameters(shouldRollbackOnFailure: !noRollback, maxChangesPerBatch: max(1, maxEdits))))
        let size = (try? FileManager.default.attributesOfItem(atPath: out)[.size] as? Int) ?? 0
        if json {
            printJSON(try JSONValue.parse(JSONEncoder().encode(summary.header)))
        } else if let seq = summary.header.seq {
            print("batch \(seq): \(summary.edits) edits, \(size) bytes in \(out)")
        } else {
            print("nothing to upload; \(out) (\(size) bytes) asks for the service's changes")
        }
    }
}

/// Runs a short job here and returns its output; its failure is the command's one-line error.
func outputOf<D: JobDefinition>(_ job: Job<D>) async throws -> D.Output {
    try job.start()
    do {
        return try await job.output
    } catch let error as JobError {
        throw CLIFailure(message: error.message)
    }
}

/// `outpost sync import`: a service's reply into the replica.
struct SyncImportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Apply a service's reply delta file to a replica: acknowledge its batch and apply the changes.",
        discussion: """
            Checked whole before anything is applied; the acknowledgement, the changes and the \
            cursor advance are one transaction. Importing a reply twice changes nothing; a reply to \
            another replica, or one that does not start at the replica's generation, is refused.
            """)
    @Argument(help: "The replica GeoPackage.") var geodatabase: String
    @Argument(help: "The reply delta file.") var reply: String
    @Flag(help: "Print the result as JSON.") var json = false

    func run() async throws {
        let (gdb, _) = try await openReplica(geodatabase)
        defer { try? gdb.close() }
        let summary = try await outputOf(GeodatabaseSyncTask.makeImportDeltaJob(geodatabase: gdb, deltaFileURL: URL(fileURLWithPath: reply)))
        if json {
            printJSON([
                "acknowledged": .bool(summary.acknowledged), "rejected": .bool(summary.rejected), "rejectedEdits": .integer(Int64(summary.rejectedEdits)),
                "conflicts": .integer(Int64(summary.conflicts)), "changes": .integer(Int64(summary.changes)), "upto": summary.upto.map { .integer($0) } ?? .null,
            ])
        } else {
            var parts: [String] = []
            if summary.acknowledged { parts.append("batch acknowledged") }
            if summary.rejected { parts.append("batch rolled back by the service: \(summary.rejectedEdits) edits invalid, all still pending (see outpost status)") }
            if summary.conflicts > 0 { parts.append("\(summary.conflicts) conflicts recorded") }
            parts.append(summary.upto.map { "\(summary.changes) server changes applied up to generation \($0)" } ?? "no new server changes")
            print(parts.joined(separator: "; "))
        }
        if summary.rejected { throw CLIFailure(message: "the service rolled the batch back", exitCode: .partial) }
    }
}

struct SyncRunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Sync a replica with its feature service over HTTP: upload local edits, download the server's (the default).",
        discussion: """
            Exit codes: 0 all applied; 2 some edits rejected (with --no-rollback; they are kept, see \
            `outpost status`); 1 failed (with rollback, nothing changed on either side). A sync that \
            was interrupted is finished by the next one.
            """)

    @Argument(help: "The replica GeoPackage.") var geodatabase: String
    @Option(help: "bidirectional, upload or download.") var direction = "bidirectional"
    @Flag(help: "Apply the valid edits even when some are rejected (default: reject the whole upload).") var noRollback = false
    @Option(help: "For a column changed here and on the server: clientWins, serverWins, latestEditWins or manual (default: each layer's rule; the service's per-field rules still apply).")
    var policy: String?
    @Option(help: "Service token (default: $OUTPOST_TOKEN).") var token: String?
    @Flag(help: "Stage every download before applying it (default: a download of up to 50,000 changes is applied while it arrives).")
    var stageDownloads = false
    @Flag(help: "Compare every feature of each layer with the server (default: the features changed since the layer last matched).")
    var verifyAll = false
    @Flag(help: "Print the result as JSON.") var json = false

    func validate() throws {
        guard SyncGeodatabaseParameters.Direction(rawValue: direction) != nil else { throw ValidationError("--direction is bidirectional, upload or download") }
        if let policy, ConflictPolicy.Rule(rawValue: policy) == nil {
            throw ValidationError("--policy is one of \(ConflictPolicy.Rule.allCases.map(\.rawValue).joined(separator: ", "))")
        }
    }

    func run() async throws {
        let (gdb, state) = try await openReplica(geodatabase)
        defer { try? gdb.close() }
        let task = try GeodatabaseSyncTask(url: URL(string: state.serviceURL)!, token: serviceToken(token))
        let parameters = SyncGeodatabaseParameters(
            geodatabaseSyncDirection: SyncGeodatabaseParameters.Direction(rawValue: direction)!, shouldRollbackOnFailure: !noRollback,
            conflictPolicy: policy.flatMap(ConflictPolicy.Rule.init(rawValue:)), applyWhileDownloadingUpTo: stageDownloads ? 0 : nil,
            verifyWholeLayers: verifyAll ? true : nil)
        let job = task.makeSyncGeodatabaseJob(parameters: parameters, geodatabase: gdb, faults: processFaults)
        try job.start()
        let status = await runShowingProgress(job, label: "sync")
        guard status == .succeeded else {
            throw CLIFailure(message: "sync failed: \(job.error?.message ?? status.rawValue)")
        }
        let results = try await job.output
        var uploaded = PendingChanges(), downloaded = PendingChanges()
        var rejected: [JSONValue] = []
        for r in results {
            uploaded.inserts += r.uploaded.inserts
            uploaded.updates += r.uploaded.updates
            uploaded.deletes += r.uploaded.deletes
            downloaded.inserts += r.downloaded.inserts
            downloaded.updates += r.downloaded.updates
            downloaded.deletes += r.downloaded.deletes
            for e in r.editResults {
                rejected.append(["layer": .string(r.tableName), "globalid": .string(e.globalId), "operation": .string(e.operation), "reason": .string(e.message)])
            }
        }
        let conflicts = results.reduce(0) { $0 + $1.conflicts }, merged = results.reduce(0) { $0 + $1.merged }
        let open = try await gdb.read { try $0.conflicts().filter { $0.state == "open" }.count }
        let checked = results.compactMap(\.checksumMatches)
        let summary: JSONValue = [
            "uploaded": pendingJSON(uploaded), "downloaded": pendingJSON(downloaded), "conflicts": .integer(Int64(conflicts)),
            "merged": .integer(Int64(merged)), "openConflicts": .integer(Int64(open)),
            "attachments": [
                "uploaded": .integer(Int64(results.reduce(0) { $0 + $1.attachmentsUploaded })),
                "downloaded": .integer(Int64(results.reduce(0) { $0 + $1.attachmentsDownloaded })),
            ],
            "rejected": .array(rejected), "checksumsMatch": .bool(checked.allSatisfy { $0 }),
            "layers": .array(results.map { ["name": .string($0.tableName), "uploaded": pendingJSON($0.uploaded), "downloaded": pendingJSON($0.downloaded), "refetched": .bool($0.refetched)] }),
        ]
        if json {
            printJSON(summary)
        } else {
            var line = "uploaded \(Self.describe(uploaded)); downloaded \(Self.describe(downloaded))"
            if merged > 0 { line += "; \(merged) updates merged with the server's changes to other fields" }
            let attachmentsUp = results.reduce(0) { $0 + $1.attachmentsUploaded }, attachmentsDown = results.reduce(0) { $0 + $1.attachmentsDownloaded }
            if attachmentsUp + attachmentsDown > 0 { line += "; attachments: \(attachmentsUp) uploaded, \(attachmentsDown) downloaded" }
            if conflicts > 0 { line += "; \(conflicts) conflicts recorded (see outpost conflicts)" }
            print(line)
            if open > 0 { print("\(open) conflicts wait for a decision: outpost conflicts \(geodatabase)") }
            for r in results where r.refetched { print("\(r.tableName) differed from the server and was fetched again") }
            for e in rejected { print("rejected: \(e["layer"]!.stringValue!) \(e["globalid"]!.stringValue!): \(e["reason"]!.stringValue!)") }
        }
        if !rejected.isEmpty { throw CLIFailure(message: "\(rejected.count) edits were rejected and kept in the replica (see outpost status)", exitCode: .partial) }
    }

    static func describe(_ p: PendingChanges) -> String {
        p.total == 0 ? "nothing" : "\(p.inserts) inserts, \(p.updates) updates, \(p.deletes) deletes"
    }
}

struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status", abstract: "Show a replica's pending edits per layer, last sync, rejected edits and conflicts.")
    @Argument(help: "The replica GeoPackage.") var geodatabase: String
    @Flag(help: "Print as JSON.") var json = false

    func run() async throws {
        let (gdb, state) = try await openReplica(geodatabase)
        defer { try? gdb.close() }
        let rejected = try await gdb.read { try $0.rejectedEdits() }
        let conflicts = try await gdb.read { try $0.conflicts() }
        var layers: [JSONValue] = []
        for layer in state.layers {
            let pending = try await gdb.table(named: layer.table).pendingChanges()
            layers.append([
                "name": .string(layer.table), "pending": pendingJSON(pending),
                "rejected": .integer(Int64(rejected.filter { $0.layer == layer.table }.count)),
                "conflicts": .integer(Int64(conflicts.filter { $0.table == layer.table }.count)),
                "openConflicts": .integer(Int64(conflicts.filter { $0.table == layer.table && $0.state == "open" }.count)),
            ])
        }
        let status: JSONValue = [
            "replicaId": .string(state.replicaID), "serviceUrl": .string(state.serviceURL), "lastSync": isoDate(state.lastSyncAt),
            "unregistered": .bool(state.unregistered), "layers": .array(layers),
            "rejectedEdits": .array(rejected.map { ["layer": .string($0.layer), "globalid": .string($0.globalID), "operation": .string($0.operation), "reason": .string($0.reason), "pending": .bool($0.pending)] }),
        ]
        if json { return printJSON(status) }
        print("replica \(state.replicaID) of \(state.serviceURL); last sync \(status["lastSync"]?.stringValue ?? "never")\(state.unregistered ? " (unregistered)" : "")")
        for l in layers {
            let p = l["pending"]!
            print("  \(l["name"]!.stringValue!): pending \(p["inserts"]!.integerValue!) inserts, \(p["updates"]!.integerValue!) updates, \(p["deletes"]!.integerValue!) deletes; \(l["rejected"]!.integerValue!) rejected; \(l["conflicts"]!.integerValue!) conflicts")
        }
        for r in rejected { print("  rejected\(r.pending ? " (still pending)" : ""): \(r.layer) \(r.globalID) \(r.operation): \(r.reason)") }
    }
}

struct ConflictsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "conflicts",
        abstract: "List the conflicts a replica's syncs met: what each side had, the rule, the winner.",
        discussion: "Conflicts with the manual rule stay open until resolved with `outpost conflicts resolve`.",
        subcommands: [List.self, Resolve.self], defaultSubcommand: List.self)

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the replica's conflict records (oldest first).")
        @Argument(help: "The replica GeoPackage.") var geodatabase: String
        @Flag(help: "Only conflicts waiting for a decision.") var open = false
        @Flag(help: "Print as JSON.") var json = false

        func run() async throws {
            let (gdb, _) = try await openReplica(geodatabase)
            defer { try? gdb.close() }
            let conflicts = try await gdb.read { try $0.conflicts() }.filter { !open || $0.state == "open" }
            let list: [JSONValue] = conflicts.map { c in
                let record = (try? JSONValue.parse(c.record)) ?? .null
                return [
                    "id": c.id.map { .integer($0) } ?? .null, "serverId": c.serverID.map { .integer($0) } ?? .null, "layer": .string(c.table),
                    "globalid": .string(c.globalID), "kind": .string(c.kind), "columns": record["columns"] ?? .array([]), "base": record["base"] ?? .null,
                    "ours": record["ours"] ?? .null, "theirs": record["theirs"] ?? .null, "policy": record["policy"] ?? .null, "winner": record["winner"] ?? .null,
                    "state": c.state.map { .string($0) } ?? .null, "resolution": c.resolution.map { .string($0) } ?? .null, "at": .string(c.at),
                ]
            }
            if json { return printJSON(["conflicts": .array(list)]) }
            if list.isEmpty { return print("no conflicts") }
            for c in list {
                let columns = (c["columns"]?.arrayValue ?? []).compactMap(\.stringValue).joined(separator: ", ")
                let state = c["state"]?.stringValue.map { " [\($0)\(c["resolution"]?.stringValue.map { ": kept \($0)" } ?? "")]" } ?? ""
                print("#\(c["id"]?.integerValue ?? 0) \(c["layer"]!.stringValue!) \(c["globalid"]!.stringValue!) \(c["kind"]!.stringValue!) (\(columns)): \(c["policy"]?.stringValue ?? "") → \(c["winner"]?.stringValue ?? "")\(state)")
                print("    ours:   \(c["ours"]?.jsonString ?? "null")")
                print("    theirs: \(c["theirs"]?.jsonString ?? "null")")
            }
        }
    }

    struct Resolve: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Resolve an open conflict with a normal edit that syncs (the server closes its record at the next sync).")
        @Argument(help: "The conflict's id (from outpost conflicts).") var id: Int64
        @Argument(help: "The replica GeoPackage (default: the only .gpkg in the current directory).") var geodatabase: String?
        @Option(help: "ours (this replica's values), theirs (the server's), or a JSON object of values by field.") var keep: String

        func run() async throws {
            let resolution: ConflictResolution
            switch keep {
            case "ours": resolution = .ours
            case "theirs": resolution = .theirs
            default:
                guard let values = (try? JSONValue.parse(keep))?.objectValue else {
                    throw CLIFailure(message: "--keep is ours, theirs, or a JSON object of values by field")
                }
                resolution = .values(values)
            }
            var path = geodatabase
            if path == nil {
                let here = (try? FileManager.default.contentsOfDirectory(atPath: ".")) ?? []
                let candidates = here.filter { $0.hasSuffix(".gpkg") }
                guard candidates.count == 1 else {
                    throw CLIFailure(message: "name the replica: outpost conflicts resolve \(id) <file.gpkg> --keep \(keep)")
                }
                path = candidates[0]
            }
            let (gdb, _) = try await openReplica(path!)
            defer { try? gdb.close() }
            let id = self.id
            try await gdb.write { try $0.resolveConflict(id: id, keep: resolution) }
            print("conflict \(id) resolved (\(resolution.name)); it reaches the server with the next sync")
        }
    }
}

/// The area of `--extent xmin,ymin,xmax,ymax` or `--aoi <GeoJSON polygon file>` (nil: neither).
func commandArea(extent: String?, aoi: String?) throws -> Geometry? {
    if let extent { return .polygon(try parseExtent(extent).polygon) }
    if let aoi {
        guard let data = FileManager.default.contents(atPath: aoi) else { throw CLIFailure(message: "cannot read \(aoi)") }
        var json = try JSONValue.parse(data)
        if json["type"]?.stringValue == "FeatureCollection" { json = json["features"]?.arrayValue?.first ?? .null }
        if json["type"]?.stringValue == "Feature" { json = json["geometry"] ?? .null }
        let g = try GeoJSON.decodeGeometry(json)
        guard g.type == .polygon || g.type == .multiPolygon else { throw CLIFailure(message: "\(aoi) holds no polygon") }
        return g
    }
    return nil
}

func parseExtent(_ extent: String) throws -> Envelope {
    let n = extent.split(separator: ",").compactMap { Double($0.trimmingCharacters(in: .whitespaces)) }
    let e = Envelope(xmin: n.count == 4 ? n[0] : 0, ymin: n.count == 4 ? n[1] : 0, xmax: n.count == 4 ? n[2] : -1, ymax: n.count == 4 ? n[3] : -1)
    guard n.count == 4, e.isValid else { throw CLIFailure(message: "--extent must be xmin,ymin,xmax,ymax with min ≤ max") }
    return e
}
