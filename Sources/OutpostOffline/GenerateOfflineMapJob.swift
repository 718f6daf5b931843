import Foundation
import OutpostVectorTiles
import OutpostCore
import OutpostProtocol
import OutpostStorage
import OutpostSync
import OutpostTiles

/// Takes a map offline into a folder (docs/offline.md): `map.json` pointing at local files,
/// `data/<service>.gpkg` (a replica per feature service), `basemap.tpkx`, and copies of locator
/// and network files.
///
/// Steps: `plan` (each service's description read and each layer's filter tried, so one bad
/// layer is reported alone), `take offline` (the parts run together as jobs of their own,
/// persisted in the folder being built: combined progress, pause, resume and cancel as one; a
/// kill resumes each part where it stopped), `finish` (`map.json` written, then the folder moved
/// into place: it appears only when complete). A part that fails is reported in the offline
/// map's `layerErrors` and the rest is kept (unless ``GenerateOfflineMapParameters/continueOnErrors``
/// is false). A cancelled or failed job removes what it built and unregisters the replicas it made.
public struct GenerateOfflineMapJob: JobDefinition {
    public static let jobType = "outpost.generateOfflineMap"

    /// The map definition taken offline.
    public var map: MapDefinition
    /// The map definition's URL or path, kept in the offline map.
    public var source: String?
    /// What to take offline: area, scales, layers.
    public var offlineParameters: GenerateOfflineMapParameters
    /// Where the offline map is written (it must not exist or be empty).
    public var downloadDirectory: URL
    let environment: OfflineJobEnvironment

    /// A job that takes `map` offline into `downloadDirectory`.
    public init(
        map: MapDefinition, source: String? = nil, offlineParameters: GenerateOfflineMapParameters, downloadDirectory: URL,
        environment: OfflineJobEnvironment = OfflineJobEnvironment()
    ) {
        self.map = map
        self.source = source
        self.offlineParameters = offlineParameters
        self.downloadDirectory = downloadDirectory.standardizedFileURL
        self.environment = environment
    }

    public var parameters: JSONValue {
        var p: [String: JSONValue] = [
            "map": (try? JSONValue.parse(map.encoded())) ?? .null, "generate": (try? JSONValueEncoder().encode(offlineParameters)) ?? .null,
            "downloadDirectory": .string(downloadDirectory.path),
        ]
        if let source { p["source"] = .string(source) }
        return .object(p)
    }

    public init(parameters: JSONValue, environment: JobEnvironment) throws {
        guard let map = parameters["map"], !map.isNull, let generate = parameters["generate"], !generate.isNull,
            let directory = parameters["downloadDirectory"]?.stringValue
        else { throw JobError(.invalidJSON, "an offline map job needs map, generate and downloadDirectory") }
        self.init(
            map: try MapDefinition.decode(map.jsonData), source: parameters["source"]?.stringValue,
            offlineParameters: try JSONValueDecoder().decode(GenerateOfflineMapParameters.self, from: generate),
            downloadDirectory: URL(fileURLWithPath: directory), environment: environment[OfflineJobEnvironment.self] ?? OfflineJobEnvironment())
    }

    public var stepNames: [String] { ["plan", "take offline", "finish"] }

    /// The folder being built, beside the destination.
    var stagingURL: URL { downloadDirectory.deletingLastPathComponent().appendingPathComponent(downloadDirectory.lastPathComponent + ".partial") }
    /// Where the parts keep their JSON while the folder is built.
    var partsURL: URL { stagingURL.appendingPathComponent(".jobs") }

    public func run(step: Int, context: JobContext) async throws {
        switch step {
        case 0: try await plan(context)
        case 1: try await takeOffline(context)
        default: try await finish(context)
        }
    }

    public func output(context: JobContext) async throws -> OfflineMap {
        try OfflineMap(directory: downloadDirectory)
    }

    // MARK: - Plan

    private func plan(_ context: JobContext) async throws {
        let files = FileManager.default
        try OfflineMap.requireEmpty(downloadDirectory)
        try? files.removeItem(at: stagingURL)
        try files.createDirectory(at: stagingURL.appendingPathComponent("data"), withIntermediateDirectories: true)
        var plan = OfflineMapPlan()
        try await planReplicas(&plan)
        try await planBasemap(&plan)
        planTasks(&plan)
        if !offlineParameters.continueOnErrors, let first = plan.layerErrors.first {
            throw OfflineMapError(.service, "\(first.layer): \(first.message)")
        }
        guard !plan.keys.isEmpty else {
            throw OfflineMapError(.nothingTakenOffline, "nothing of the map can be taken offline: " + plan.layerErrors.map { "\($0.layer): \($0.message)" }.joined(separator: "; "))
        }
        for error in plan.layerErrors { context.log("\(error.layer) stays online: \(error.message)", severity: .warning) }
        context.log("taking offline: " + plan.keys.joined(separator: ", "))
        context.record("plan", try JSONValueEncoder().encode(plan))
    }

    private func planReplicas(_ plan: inout OfflineMapPlan) async throws {
        let http = OfflineHTTP(token: environment.token)
        var services: [(url: URL, name: String, layers: [(MapDefinition.OperationalLayer, Int)])] = []
        for layer in map.operationalLayers where !offlineParameters.override(for: layer.id).skip {
            guard let url = try? map.resolve(layer.url), let parsed = OfflineMapPlan.featureLayer(url) else {
                plan.layerErrors.append(.init(layer: layer.id, message: "\(layer.url) is not a feature layer URL (…/FeatureServer/<layer id>)"))
                continue
            }
            if let i = services.firstIndex(where: { $0.url == parsed.service }) {
                services[i].layers.append((layer, parsed.layer))
            } else {
                services.append((parsed.service, parsed.name, [(layer, parsed.layer)]))
            }
        }
        let area = offlineParameters.areaOfInterest
        for service in services {
            let info: JSONValue
            do {
                info = try await http.json(service.url)
            } catch let error as OfflineMapError {
                for (layer, _) in service.layers { plan.layerErrors.append(.init(layer: layer.id, message: "service \(service.name): \(error.message)")) }
                continue
            }
            guard info["syncEnabled"]?.boolValue == true else {
                for (layer, _) in service.layers { plan.layerErrors.append(.init(layer: layer.id, message: "service \(service.name) is not sync-enabled")) }
                continue
            }
            let capabilities = (info["capabilities"]?.stringValue ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            let editable = capabilities.contains { ["Create", "Update", "Delete", "Editing"].contains($0) }
            var known: [Int: (name: String, isTable: Bool)] = [:]
            for (key, isTable) in [("layers", false), ("tables", true)] {
                for entry in info[key]?.arrayValue ?? [] {
                    if let id = entry["id"]?.integerValue { known[Int(id)] = (entry["name"]?.stringValue ?? "layer\(id)", isTable) }
                }
            }
            var layers: [OfflineMapPlan.Layer] = []
            var attachments = false
            for (layer, id) in service.layers {
                guard let table = known[id] else {
                    plan.layerErrors.append(.init(layer: layer.id, message: "service \(service.name) has no layer \(id)"))
                    continue
                }
                let override = offlineParameters.override(for: layer.id)
                let whereClause = override.where ?? layer.where ?? ""
                let schemaOnly = override.schemaOnly || (editable && offlineParameters.returnSchemaOnlyForEditableLayers)
                // The filter is tried now: a clause the service refuses keeps this layer online
                // instead of failing its whole replica.
                var query: [(String, String)] = [("where", whereClause.isEmpty ? "1=1" : whereClause), ("returnCountOnly", "true")]
                if !table.isTable {
                    query += [
                        ("geometry", "\(area.xmin),\(area.ymin),\(area.xmax),\(area.ymax)"), ("geometryType", "esriGeometryEnvelope"),
                        ("inSR", String(area.wkid.wkid)), ("spatialRel", "esriSpatialRelIntersects"),
                    ]
                }
                do {
                    _ = try await http.json(service.url.appendingPathComponent(String(id)).appendingPathComponent("query"), query: query)
                } catch let error as OfflineMapError {
                    plan.layerErrors.append(.init(layer: layer.id, message: error.message))
                    continue
                }
                layers.append(.init(mapLayer: layer.id, layerID: id, table: table.name, isTable: table.isTable, where: whereClause, schemaOnly: schemaOnly))
                attachments = attachments || (override.includeAttachments ?? offlineParameters.includeAttachments)
            }
            guard !layers.isEmpty else { continue }
            var name = service.name
            var n = 2
            while plan.replicas.contains(where: { $0.serviceName == name }) {
                name = "\(service.name)-\(n)"
                n += 1
            }
            plan.replicas.append(
                .init(
                    key: "replica-\(name)", serviceURL: service.url.absoluteString, serviceName: name, file: "data/\(name).gpkg", layers: layers,
                    snapshot: !editable && offlineParameters.readOnlyLayers == .snapshot, readOnly: !editable, attachments: attachments))
        }
    }

    private func planBasemap(_ plan: inout OfflineMapPlan) async throws {
        guard offlineParameters.includeBasemap, let basemap = map.basemap else { return }
        let source: String
        do {
            source = try map.absolute(basemap.url)
        } catch {
            plan.layerErrors.append(.init(layer: "basemap", message: "\(error)"))
            return
        }
        var levels = offlineParameters.basemapLevels
        if Self.isVectorTileServer(source) {
            // A vector basemap: its tiles as a vector tile package, down to the finest scale asked.
            if levels.isEmpty {
                let area = offlineParameters.areaOfInterest
                do {
                    let task = ExportVectorTilesTask(url: URL(string: source)!, environment: environment.vectorTiles)
                    let parameters = try await task.makeDefaultExportVectorTilesParameters(
                        areaOfInterest: .envelope(area.envelope, area.wkid), maxScale: offlineParameters.maxScale)
                    levels = Array(0...(parameters.maxZoom ?? 0))
                } catch {
                    plan.layerErrors.append(.init(layer: "basemap", message: "\(basemap.title): \(error)"))
                    return
                }
            }
            plan.basemap = .init(key: "basemap", source: source, levels: levels, file: "basemap.vtpk")
            return
        }
        if levels.isEmpty {
            let area = offlineParameters.areaOfInterest
            do {
                levels = try await ExportTileCacheTask(source: TileSourceDescriptor(location: source), token: environment.token)
                    .makeDefaultExportTileCacheParameters(
                        areaOfInterest: .envelope(area.envelope, area.wkid), minScale: offlineParameters.minScale, maxScale: offlineParameters.maxScale
                    ).levelIDs
            } catch {
                plan.layerErrors.append(.init(layer: "basemap", message: "\(basemap.title): \(error)"))
                return
            }
        }
        plan.basemap = .init(key: "basemap", source: source, levels: levels, file: "basemap.tpkx")
    }

    /// Whether a basemap URL names a VectorTileServer (its tiles go offline as a `.vtpk`).
    static func isVectorTileServer(_ url: String) -> Bool {
        url.split(separator: "?").first.map { $0.hasSuffix("/VectorTileServer") || $0.hasSuffix("/VectorTileServer/") } ?? false
    }

    private func planTasks(_ plan: inout OfflineMapPlan) {
        guard offlineParameters.includeTasks else { return }
        for (kind, references) in [("locators", map.locators ?? []), ("networks", map.networks ?? [])] {
            for reference in references {
                guard let url = try? map.resolve(reference.url), let download = OfflineMapPlan.taskDownload(url) else {
                    plan.layerErrors.append(
                        .init(layer: reference.title, message: "\(reference.url) is not an Outpost GeocodeServer or NAServer URL; only those are copied offline"))
                    continue
                }
                let ext = kind == "locators" ? "locator" : "network"
                plan.tasks.append(
                    .init(
                        key: "\(kind)-\(download.name)", kind: kind, title: reference.title, url: url.absoluteString, download: download.download.absoluteString,
                        file: "\(kind)/\(download.name).\(ext)"))
            }
        }
    }

    func recordedPlan(_ context: JobContext) throws -> OfflineMapPlan {
        guard let json = context.recorded("plan") else { throw JobError(.invalidJSON, "the offline map job has no plan") }
        return try JSONValueDecoder().decode(OfflineMapPlan.self, from: json)
    }

    // MARK: - Take offline

    private func takeOffline(_ context: JobContext) async throws {
        let plan = try recordedPlan(context)
        let manager = try JobManager(directory: partsURL, registry: .withOfflineMapJobs(environment))
        func part<D: JobDefinition>(_ key: String, weight: Double, _ make: () throws -> D) throws -> ChildJobs.Part {
            // A part made before a kill continues from its own JSON.
            if FileManager.default.fileExists(atPath: manager.jsonURL(id: key).path) {
                return ChildJobs.Part(key: key, job: try manager.job(id: key), weight: weight)
            }
            return ChildJobs.Part(key: key, job: try manager.add(try make(), id: key), weight: weight)
        }
        let area = offlineParameters.areaOfInterest
        var parts: [ChildJobs.Part] = []
        for replica in plan.replicas {
            parts.append(
                try part(replica.key, weight: 1) {
                    GenerateGeodatabaseJob(
                        serviceURL: URL(string: replica.serviceURL)!, parameters: generateParameters(replica),
                        downloadFileURL: stagingURL.appendingPathComponent(replica.file),
                        environment: SyncJobEnvironment(token: environment.token, faults: environment.faults))
                })
        }
        if let basemap = plan.basemap, Self.isVectorTileServer(basemap.source) {
            parts.append(
                try part(basemap.key, weight: 2) {
                    ExportVectorTilesJob(
                        source: .service(URL(string: basemap.source)!),
                        parameters: ExportVectorTilesParameters(
                            areaOfInterest: .envelope(area.envelope, area.wkid), minZoom: basemap.levels.first, maxZoom: basemap.levels.last),
                        downloadFileURL: stagingURL.appendingPathComponent(basemap.file), environment: environment.vectorTiles)
                })
        } else if let basemap = plan.basemap {
            parts.append(
                try part(basemap.key, weight: 2) {
                    ExportTileCacheJob(
                        source: TileSourceDescriptor(location: basemap.source),
                        parameters: ExportTileCacheParameters(
                            areaOfInterest: .envelope(area.envelope, area.wkid), levelIDs: basemap.levels, maxTileCount: offlineParameters.maxTileCount),
                        downloadFileURL: stagingURL.appendingPathComponent(basemap.file),
                        environment: TileJobEnvironment(token: environment.token, faults: environment.faults, checkpointInterval: environment.tileCheckpointInterval))
                })
        }
        for task in plan.tasks {
            parts.append(
                try part(task.key, weight: 0.5) {
                    DownloadFileJob(url: URL(string: task.download)!, destination: stagingURL.appendingPathComponent(task.file), environment: environment)
                })
        }
        let finals = try await ChildJobs(parts: parts, start: { try manager.start($0) }).run(context, phase: "parts") {
            try environment.faults.check("offline.partsStarted")
        }
        var outcomes: [String: JSONValue] = [:]
        for (key, snapshot) in finals {
            if snapshot.status == .failed {
                let message = snapshot.error?.message ?? "failed"
                outcomes[key] = .string(message)
                context.log("\(key) failed: \(message)", severity: .warning)
            } else {
                outcomes[key] = .null
            }
        }
        context.record("outcomes", .object(outcomes))
        try environment.faults.check("offline.afterParts")
    }

    func generateParameters(_ replica: OfflineMapPlan.Replica) -> GenerateGeodatabaseParameters {
        let area = offlineParameters.areaOfInterest
        return GenerateGeodatabaseParameters(
            extent: .polygon(area.envelope.polygon), spatialReference: area.wkid,
            layerOptions: replica.layers.map {
                .init(layerID: $0.layerID, whereClause: $0.where, useGeometry: !$0.isTable, queryOption: $0.schemaOnly ? .none : .useFilter)
            },
            syncModel: replica.snapshot ? .none : .geodatabase, returnAttachments: replica.attachments,
            // Attachments follow their layers' direction: a read-only service's replica downloads
            // theirs (its layers upload nothing, so neither do their attachments).
            attachmentSyncDirection: replica.attachments && !replica.snapshot ? .bidirectional : .none,
            replicaName: "\(map.title) offline (\(replica.serviceName))")
    }

    // MARK: - Finish

    private func finish(_ context: JobContext) async throws {
        let files = FileManager.default
        // Moved into place just before a kill: nothing is left to do.
        if !files.fileExists(atPath: stagingURL.path), files.fileExists(atPath: downloadDirectory.appendingPathComponent(OfflineMap.mapFileName).path) {
            return
        }
        let plan = try recordedPlan(context)
        let outcomes = context.recorded("outcomes")?.objectValue ?? [:]
        func failure(_ key: String) -> String? { outcomes[key]?.stringValue }
        var errors = plan.layerErrors
        var replicas: [MapDefinition.Offline.Replica] = []
        var offlineLayers: [String: (file: String, table: String)] = [:]
        for replica in plan.replicas {
            if let message = failure(replica.key) {
                for layer in replica.layers { errors.append(.init(layer: layer.mapLayer, message: "service \(replica.serviceName): \(message)")) }
                continue
            }
            // Each replica must open before the map points at it.
            let gdb = try Geodatabase.open(at: stagingURL.appendingPathComponent(replica.file), readOnly: true)
            try? gdb.close()
            replicas.append(
                .init(file: replica.file, serviceUrl: replica.serviceURL, layers: replica.layers.map(\.layerID), snapshot: replica.snapshot, readOnly: replica.readOnly))
            for layer in replica.layers { offlineLayers[layer.mapLayer] = (replica.file, layer.table) }
        }
        var offline = map
        offline.operationalLayers = map.operationalLayers.compactMap { layer in
            guard let local = offlineLayers[layer.id] else { return nil }
            var l = layer
            l.url = (try? map.absolute(layer.url)) ?? layer.url
            l.file = local.file
            l.table = local.table
            return l
        }
        var basemapTaken = false
        if let basemap = plan.basemap {
            if let message = failure(basemap.key) {
                errors.append(.init(layer: "basemap", message: message))
            } else {
                offline.basemap?.url = basemap.source
                offline.basemap?.file = basemap.file
                basemapTaken = true
            }
        }
        var tasksTaken = 0
        for task in plan.tasks {
            if let message = failure(task.key) {
                errors.append(.init(layer: task.title, message: message))
                continue
            }
            tasksTaken += 1
            func local(_ references: [MapDefinition.TaskReference]?) -> [MapDefinition.TaskReference]? {
                references?.map { reference in
                    guard reference.title == task.title, (try? map.absolute(reference.url)) == task.url else { return reference }
                    return MapDefinition.TaskReference(title: reference.title, url: task.url, file: task.file)
                }
            }
            if task.kind == "locators" { offline.locators = local(offline.locators) } else { offline.networks = local(offline.networks) }
        }
        if !offlineParameters.continueOnErrors, errors.count > plan.layerErrors.count, let first = errors.last {
            throw OfflineMapError(.service, "\(first.layer): \(first.message)")
        }
        guard !replicas.isEmpty || basemapTaken || tasksTaken > 0 else {
            throw OfflineMapError(.nothingTakenOffline, "nothing of the map could be taken offline: " + errors.map { "\($0.layer): \($0.message)" }.joined(separator: "; "))
        }
        let area = offlineParameters.areaOfInterest
        offline.offline = MapDefinition.Offline(
            generatedAt: Date(), source: source, areaOfInterest: area, minScale: offlineParameters.minScale, maxScale: offlineParameters.maxScale,
            preplannedArea: offlineParameters.preplannedArea, replicas: replicas, layerErrors: errors)
        try offline.encoded().write(to: stagingURL.appendingPathComponent(OfflineMap.mapFileName), options: .atomic)
        try? files.removeItem(at: partsURL)
        try environment.faults.check("offline.beforeMove")
        if files.fileExists(atPath: downloadDirectory.path) { try files.removeItem(at: downloadDirectory) }
        try files.moveItem(at: stagingURL, to: downloadDirectory)
        context.record("moved", true)
        context.log("offline map written to \(downloadDirectory.path)" + (errors.isEmpty ? "" : " (\(errors.count) layer errors)"))
    }

    // MARK: - Rollback

    public func rollback(context: JobContext) async {
        guard context.recorded("moved") == nil else { return }
        await ChildJobs.cancelUnfinished(in: partsURL, environment: environment)
        // Replicas already made for a map that will not exist are unregistered, so the service
        // does not keep their change history for nobody.
        if let plan = try? recordedPlan(context) {
            for replica in plan.replicas where !replica.snapshot {
                let file = stagingURL.appendingPathComponent(replica.file)
                guard FileManager.default.fileExists(atPath: file.path), let url = URL(string: replica.serviceURL),
                    let gdb = try? Geodatabase.open(at: file), let task = try? GeodatabaseSyncTask(url: url, token: environment.token)
                else { continue }
                if (try? await task.unregisterGeodatabase(gdb)) != nil { context.log("unregistered the replica of \(replica.serviceName)") }
                try? gdb.close()
            }
        }
        try? FileManager.default.removeItem(at: stagingURL)
    }
}
