import ArgumentParser
import Foundation
import OutpostCore
import OutpostGeoprocessing
import OutpostLocator
import OutpostOffline
import OutpostProtocol
import OutpostREST
import OutpostRouting
import OutpostSampleData
import OutpostServer
import OutpostStorage
import OutpostSync
import OutpostTileCodecs
import OutpostTiles

/// The offline-first story end to end on this machine: the samples served on loopback, a map
/// taken offline in one job, a crew working with no link (an address found with a typo, a route
/// with directions, a model run on the device, an inspection with a photo), the office editing
/// meanwhile, one sync job with a conflict resolved, and a second round by delta file.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Serve the samples, take a map offline, work with no link (geocode, route, a model, an inspection with a photo), sync, then sync by delta file.",
        discussion: """
            Runs from any directory: the samples travel with the executable (or pass --samples). \
            README's quick start gives the same steps as commands to type.
            """)

    @Option(help: "Work directory (default: a new one under the system's temporary directory).") var workdir: String?
    @Option(help: "A samples folder laid out as the repository's SampleData (street_inspections, helsinki, planning, maps).") var samples: String?
    @Flag(help: "Leave the server running at the end (stop it with Ctrl-C).") var keep = false

    /// What the crew does, fixed so the output and the tests can be checked.
    enum Story {
        /// Central Helsinki and Kallio: the inspections, the streets and the planning parcels.
        static let area = Envelope(xmin: 24.935, ymin: 60.164, xmax: 24.963, ymax: 60.186)
        /// The basemap's finest scale (level 16 of Web Mercator).
        static let maxScale = 10_000.0
        /// The crew's van at Helsinki's railway station square.
        static let crew = Position(x: 24.9414, y: 60.1712)
        /// "Unioninkatu 12" typed with a letter missing.
        static let typedAddress = "Unionikatu 12, Helsinki"
        /// The open inspection at that address: the crew closes it, the office changes it too.
        static let inspection = "INS-0062"
        /// The parcel whose neighbours the planners want told about the works.
        static let parcel = "091-011-0011-0003"
        /// The open inspection the crew closes the next day, with no link at all.
        static let nextDay = "INS-0068"
        /// The inspection the office closes meanwhile.
        static let officeCloses = "INS-0002"
    }

    func run() async throws {
        let started = Date()
        let samples = try Self.samplesDirectory(samples)
        let work = URL(fileURLWithPath: workdir ?? NSTemporaryDirectory() + "outpost-demo-\(ProcessInfo.processInfo.processIdentifier)").standardizedFileURL
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        say("work directory \(work.path)")

        // 1. The office's server.
        let services = try await DemoServices.make(from: samples, in: work)
        var server = try await DemoServer.start(services.directory, in: work)
        say("1. serving at \(server.base)/arcgis/rest/services: \(services.summary)")
        do {
            server = try await walkThrough(services: services, server: server, work: work)
        } catch {
            await server.stop()
            await services.directory.closeAll()
            throw error
        }
        say(String(format: "done in %.1f s", Date().timeIntervalSince(started)))
        if keep {
            say("the server keeps running: open \(server.base)/arcgis/rest/services in a browser (the Services Directory); Ctrl-C stops it")
            await server.wait()
        } else {
            await server.stop()
        }
        await services.directory.closeAll()
    }

    /// Steps 2 to 7; returns the server as it runs at the end (started again after the cut).
    private func walkThrough(services: DemoServices, server first: DemoServer, work: URL) async throws -> DemoServer {
        var server = first
        let rest = RESTClient(retries: .none)
        let inspections = URL(string: "\(server.base)/arcgis/rest/services/street_inspections/FeatureServer/0")!

        // 2. The map taken offline in one job.
        let folder = work.appendingPathComponent("crew-map")
        let offline = try await takeOffline(mapURL: URL(string: "\(server.base)/arcgis/rest/maps/helsinki-crews.json")!, into: folder)

        // 3. The link cut: the crew works from the offline map alone.
        await server.stop()
        let sync = OfflineMapSyncTask(offlineMap: offline)
        do {
            _ = try await sync.checkForUpdates()
            throw CLIFailure(message: "the server still answered after it was stopped")
        } catch let error as CLIFailure {
            throw error
        } catch {
            // The first words of the message ("cannot reach 127.0.0.1:…"), not the socket's detail.
            let reason = String(describing: error).prefix { $0 != "(" }.trimmingCharacters(in: .whitespaces)
            say("3. link cut (the server stopped): checking for updates fails (\(reason)); the crew carries on offline")
        }
        let destination = try await findAddress(in: offline)
        try await route(in: offline, to: destination)
        try await mailingList(in: offline, work: work)
        let photo = try Self.photo()
        let replicaFile = offline.url("data/street_inspections.gpkg")
        let newFinding = try await recordInspection(in: replicaFile, at: destination, photo: photo)

        // 4. Meanwhile the office edits the service over HTTP (its server back on the same port;
        // the crew is still out of reach).
        server = try await DemoServer.start(services.directory, in: work, port: server.port, stopsOnSignals: keep)
        say("4. office edits on the server: " + (try await officeEdits(rest: rest, layer: inspections)))

        // 5. The link back: the whole map syncs in one job.
        let synced = try await syncMap(sync)
        try await checkBothSides(offline: offline, result: synced, rest: rest, base: server.base, photo: photo, newFinding: newFinding)

        // 6. Once more with no link at all: delta files.
        try await deltaRound(replicaFile: replicaFile, services: services, rest: rest, layer: inspections, work: work)

        // 7. Where everything is.
        say("7. files in \(work.path):")
        say("   crew-map/           the offline map: outpost offline status \(folder.path)")
        say("   crew-map/data/*.gpkg  GeoPackages: ogrinfo -so \(folder.path)/data/street_inspections.gpkg inspections, or open them in QGIS")
        say("   crew-map/basemap.tpkx the basemap (Compact Cache V2; GDAL ≥ 3.8 and ArcGIS read it): outpost tiles inspect \(folder.path)/basemap.tpkx")
        say("   services/           what the server serves: outpost serve --service \(services.folder.path)")
        say("   mailing-list/, edits.delta, reply.delta  the model's outputs and the delta files")
        if !keep { say("   run with --keep to leave the server up and browse its Services Directory") }
        return server
    }

    // MARK: - Step 2

    private func takeOffline(mapURL: URL, into folder: URL) async throws -> OfflineMap {
        let began = Date()
        let task = OfflineMapTask(url: mapURL)
        let parameters = try await task.makeDefaultGenerateOfflineMapParameters(areaOfInterest: Story.area, maxScale: Story.maxScale)
        let job = try await task.makeGenerateOfflineMapJob(parameters: parameters, downloadDirectory: folder)
        try job.start()
        let status = await runShowingProgress(job, label: "taking the map offline", pausesOnInterrupt: false)
        guard status == .succeeded else { throw CLIFailure(message: "taking the map offline: \(job.snapshot.error?.message ?? status.rawValue)") }
        let offline = try OfflineMap(directory: folder)
        guard offline.layerErrors.isEmpty else {
            throw CLIFailure(message: "parts of the map stayed online: " + offline.layerErrors.map { "\($0.layer): \($0.message)" }.joined(separator: "; "))
        }
        var replicas: [String] = []
        for replica in offline.syncingReplicas {
            let gdb = try Geodatabase.open(at: offline.url(replica.file), readOnly: true)
            defer { try? gdb.close() }
            var counts: [String] = []
            for layer in gdb.schema.layers { counts.append("\(try await gdb.table(named: layer.name).count()) \(layer.name)") }
            replicas.append("\(replica.file) (\(counts.joined(separator: ", ")))")
        }
        var tiles: [TileCache.LevelSummary] = []
        if let basemap = offline.basemapURL {
            let cache = TileCache(fileURL: basemap)
            try await cache.load()
            tiles = try cache.summary()
        }
        let levels = tiles.map(\.level)
        say("2. map \"\(offline.definition.title)\" offline in \(folder.lastPathComponent)/ (\(Self.size(OfflineCommand.bytes(in: folder))), "
            + String(format: "%.1f s", Date().timeIntervalSince(began)) + "): replicas \(replicas.joined(separator: ", ")); "
            + "basemap \(tiles.reduce(0) { $0 + $1.tiles }) tiles, levels \(levels.min() ?? 0)–\(levels.max() ?? 0); "
            + "locator \(offline.definition.locators?.compactMap(\.file).joined(separator: ", ") ?? "none"); "
            + "network \(offline.definition.networks?.compactMap(\.file).joined(separator: ", ") ?? "none")")
        return offline
    }

    // MARK: - Step 3, offline

    private func findAddress(in offline: OfflineMap) async throws -> GeocodeResult {
        guard let file = offline.definition.locators?.first?.file else { throw CLIFailure(message: "the offline map has no locator") }
        let locator = LocatorTask(url: offline.url(file))
        var parameters = GeocodeParameters()
        parameters.preferredSearchLocation = Story.crew
        guard let best = try await locator.geocode(searchText: Story.typedAddress, parameters: parameters).first else {
            throw CLIFailure(message: "the offline locator found nothing for \"\(Story.typedAddress)\"")
        }
        say(String(format: "   geocode \"%@\" offline: %@ (score %.0f) at %.5f, %.5f", Story.typedAddress, best.label, best.score, best.location.x, best.location.y))
        return best
    }

    private func route(in offline: OfflineMap, to destination: GeocodeResult) async throws {
        guard let file = offline.definition.networks?.first?.file else { throw CLIFailure(message: "the offline map has no network") }
        let task = RouteTask(url: offline.url(file))
        var parameters = try await task.makeDefaultParameters()
        parameters.stops = [RouteStop(Story.crew, name: "the crew"), RouteStop(destination.location, name: destination.label)]
        guard let route = try await task.solveRoute(parameters: parameters).routes.first else { throw CLIFailure(message: "no route to \(destination.label)") }
        say("   route from the crew (\(String(format: "%.4f, %.4f", Story.crew.x, Story.crew.y))) by car: "
            + "\(RouteCommand.metres(route.totalLength)), \(RouteCommand.duration(route.totalTime)), \(route.directionManeuvers.count) directions:")
        for (i, d) in route.directionManeuvers.enumerated() {
            say("     \(i + 1). \(d.text)" + (d.type == .stop ? "" : " (\(RouteCommand.metres(d.length)))"))
        }
    }

    /// The planning service's MailingList model, carried as a model file, run on this device
    /// over the replica's parcels.
    private func mailingList(in offline: OfflineMap, work: URL) async throws {
        let modelFile = work.appendingPathComponent("MailingList.model.json")
        let service = try JSONValue.parse(Data(contentsOf: work.appendingPathComponent("services/planning.gp.json")))
        guard let model = service["tasks"]?.arrayValue?.first(where: { $0["model"]?["name"]?.stringValue == "MailingList" })?["model"] else {
            throw CLIFailure(message: "planning.gp.json has no MailingList model")
        }
        try model.jsonData.write(to: modelFile)
        guard let replica = offline.definition.operationalLayers.first(where: { $0.id == "parcels" })?.file else {
            throw CLIFailure(message: "the parcels did not go offline")
        }
        let planning = try Geodatabase.open(at: offline.url(replica), readOnly: true)
        defer { try? planning.close() }
        let parcels = try planning.table(named: "parcels")
        let task = GeoprocessingTask(url: modelFile)
        var parameters = try await task.makeDefaultParameters()
        parameters.inputs["Parcel_ID"] = .string(Story.parcel)
        parameters.inputs["Parcels"] = .featureSet(
            GPFeatureSet(
                layer: parcels.definition, spatialReference: parcels.spatialReference ?? .wgs84, features: try await parcels.features(), geometry: true))
        // Distances in metres: the model runs in ETRS-TM35FIN, as the service runs it.
        parameters.processSpatialReference = SpatialReference(wkid: 3067)
        parameters.outputSpatialReference = .wgs84
        parameters.outputDirectory = work.appendingPathComponent("mailing-list")
        let job = task.makeJob(parameters: parameters)
        try job.start()
        let result = try await job.output
        guard case .dataFile(let report)? = result.outputs["Report"], let csv = report.url.flatMap(URL.init(string:)),
            case .recordSet(let owners)? = result.outputs["Owners"]
        else {
            throw CLIFailure(message: "the model gave no report")
        }
        say("   model MailingList run on the device from the replica's \(try await parcels.count()) parcels: "
            + "\(owners.features.count) owners within 100 m of parcel \(Story.parcel) → mailing-list/\(csv.lastPathComponent)")
    }

    /// Closes the open inspection at the destination with a photo, and adds a new finding beside
    /// it. Returns the new finding's global id.
    private func recordInspection(in replicaFile: URL, at destination: GeocodeResult, photo: Data) async throws -> String {
        let replica = try Geodatabase.open(at: replicaFile)
        defer { try? replica.close() }
        let table = try replica.table(named: "inspections")
        guard var task = try await table.features(matching: FeatureQuery(where: "inspection_id = '\(Story.inspection)'")).first else {
            throw CLIFailure(message: "\(Story.inspection) is not in the replica")
        }
        task.attributes = [
            "status": .string("done"), "inspector": .string("crew 7"), "inspected_at": .date(Date()),
            "notes": .string("kerb stone reset; crossing safe"),
        ]
        try await table.update([task])
        _ = try await table.addAttachment(toFeature: task.objectID!, name: "unioninkatu-12.jpg", contentType: "image/jpeg", data: photo)
        let added = try await table.add([
            Feature(
                attributes: [
                    "inspection_id": .string("INS-CREW-1"), "address": .string(destination.label), "kind": .string("bench"), "priority": .integer(2),
                    "status": .string("open"), "inspector": .string("crew 7"), "notes": .string("broken slat, found on the way"),
                ],
                geometry: .point(try Point(x: destination.location.x + 0.0002, y: destination.location.y)))
        ])[0]
        let pending = try await table.pendingChanges()
        say("   inspection \(Story.inspection) at \(destination.label) closed with a \(Self.size(Int64(photo.count))) photo, and a new finding (a bench) beside it: "
            + "\(pending.inserts) insert and \(pending.updates) update pending")
        return added.globalID!
    }

    // MARK: - Step 4

    /// Closes an inspection, adds one, and changes the one the crew closed (a conflict).
    private func officeEdits(rest: RESTClient, layer: URL) async throws -> String {
        let closing = try await objectID(of: Story.officeCloses, rest: rest, layer: layer)
        let crews = try await objectID(of: Story.inspection, rest: rest, layer: layer)
        let updates: JSONValue = [
            ["attributes": ["objectid": .integer(closing), "status": "done", "inspector": "office", "notes": "fixed by the contractor"]],
            ["attributes": ["objectid": .integer(crews), "priority": 1, "notes": "a resident reports a trip hazard"]],
        ]
        let adds: JSONValue = [[
            "attributes": ["inspection_id": "INS-OFFICE-1", "address": "Kaivokatu 8", "kind": "sign", "priority": 3, "status": "open", "notes": "reported by phone"],
            "geometry": ["x": 24.9417, "y": 60.1700, "spatialReference": ["wkid": 4326]],
        ]]
        let answer = try await rest.post(layer.appendingPathComponent("applyEdits"), form: [("adds", adds.jsonString), ("updates", updates.jsonString)])
        let results = (answer["addResults"]?.arrayValue ?? []) + (answer["updateResults"]?.arrayValue ?? [])
        guard results.count == 3, results.allSatisfy({ $0["success"]?.boolValue == true }) else {
            throw CLIFailure(message: "the office edits failed: \(answer.jsonString)")
        }
        return "\(Story.officeCloses) closed, INS-OFFICE-1 added, and \(Story.inspection) (which the crew closed) given priority 1 and other notes"
    }

    /// How many features of the service's `layer` match `clause` (within the story's area).
    private func count(_ layer: URL, where clause: String, inArea: Bool = false, rest: RESTClient) async throws -> Int {
        var form = [("where", clause), ("returnCountOnly", "true")]
        if inArea { form += [("geometry", "\(Story.area.xmin),\(Story.area.ymin),\(Story.area.xmax),\(Story.area.ymax)"), ("inSR", "4326")] }
        guard let count = try await rest.post(layer.appendingPathComponent("query"), form: form)["count"]?.integerValue else {
            throw CLIFailure(message: "\(layer.absoluteString) gave no count")
        }
        return Int(count)
    }

    private func objectID(of inspection: String, rest: RESTClient, layer: URL) async throws -> Int64 {
        let answer = try await rest.post(layer.appendingPathComponent("query"), form: [("where", "inspection_id = '\(inspection)'"), ("returnIdsOnly", "true")])
        guard let id = answer["objectIds"]?[0]?.integerValue else { throw CLIFailure(message: "the service has no \(inspection)") }
        return id
    }

    // MARK: - Step 5

    private func syncMap(_ sync: OfflineMapSyncTask) async throws -> OfflineMapSyncResult {
        let job = sync.makeOfflineMapSyncJob(parameters: sync.makeDefaultOfflineMapSyncParameters())
        try job.start()
        let status = await runShowingProgress(job, label: "syncing the map", pausesOnInterrupt: false)
        guard status == .succeeded else { throw CLIFailure(message: "the sync failed: \(job.snapshot.error?.message ?? status.rawValue)") }
        let result = try await job.output
        guard !result.hasErrors else {
            throw CLIFailure(message: "the sync had errors: " + result.replicas.compactMap(\.error).joined(separator: "; "))
        }
        say("5. link back: the map synced in one job")
        for replica in result.replicas {
            for r in replica.layers where r.uploaded.total + r.downloaded.total > 0 {
                let photos = r.attachmentsUploaded > 0 ? " and \(r.attachmentsUploaded) photo" : ""
                say("   \(replica.file) \(r.tableName): uploaded \(SyncRunCommand.describe(r.uploaded))\(photos); downloaded \(SyncRunCommand.describe(r.downloaded))")
            }
        }
        return result
    }

    private func checkBothSides(
        offline: OfflineMap, result: OfflineMapSyncResult, rest: RESTClient, base: String, photo: Data, newFinding: String
    ) async throws {
        let replicaFile = offline.url("data/street_inspections.gpkg")
        let replica = try Geodatabase.open(at: replicaFile, readOnly: true)
        defer { try? replica.close() }
        for conflict in try await replica.read({ try $0.conflicts() }) {
            let record = try JSONValue.parse(Data(conflict.record.utf8))
            let columns = record["columns"]?.arrayValue?.compactMap(\.stringValue).joined(separator: ", ") ?? ""
            say("   conflict on \(conflict.table) \(Story.inspection) (\(columns)): the crew's value won (\(record["policy"]?.stringValue ?? "")); "
                + "the office's \(record["theirs"]?.jsonString ?? "") is kept in the conflict record")
        }
        let layers = result.replicas.flatMap(\.layers)
        guard !layers.isEmpty, layers.allSatisfy({ $0.checksumMatches == true }) else { throw CLIFailure(message: "checksums differ after the sync") }
        // Counts, layer by layer, of every replica, against the service's over the same area.
        var counted: [String] = []
        for layer in offline.definition.operationalLayers {
            guard let file = layer.file, let name = layer.table else { continue }
            let gdb = try Geodatabase.open(at: offline.url(file), readOnly: true)
            defer { try? gdb.close() }
            let local = try await gdb.table(named: name).count()
            let remote = try await count(URL(string: layer.url)!, where: "1=1", inArea: true, rest: rest)
            guard remote == local else { throw CLIFailure(message: "\(name): the server has \(remote) in the area, the replica \(local)") }
            counted.append("\(local) \(name)")
        }
        // The photo, byte for byte, from the service; the new finding there too.
        let layer = URL(string: "\(base)/arcgis/rest/services/street_inspections/FeatureServer/0")!
        let id = try await objectID(of: Story.inspection, rest: rest, layer: layer)
        let infos = try await rest.get(layer.appendingPathComponent("\(id)/attachments"))
        guard let attachment = infos["attachmentInfos"]?[0]?["id"]?.integerValue else { throw CLIFailure(message: "the photo did not reach the service") }
        let downloaded = offline.directory.deletingLastPathComponent().appendingPathComponent("photo-from-the-service.jpg")
        defer { try? FileManager.default.removeItem(at: downloaded) }
        try await rest.download(layer.appendingPathComponent("\(id)/attachments/\(attachment)"), to: downloaded)
        guard try Data(contentsOf: downloaded) == photo else { throw CLIFailure(message: "the photo on the service differs from the crew's") }
        guard try await count(layer, where: "globalid = '\(newFinding)'", rest: rest) == 1 else { throw CLIFailure(message: "the crew's new finding is not on the service") }
        let pending = try await replica.table(named: "inspections").pendingChanges()
        guard pending.total == 0 else { throw CLIFailure(message: "edits still pending after the sync") }
        say("   both sides match: checksums of \(layers.count) layers equal; \(counted.joined(separator: ", ")) on each side; the photo byte for byte; nothing pending")
    }

    // MARK: - Step 6

    private func deltaRound(replicaFile: URL, services: DemoServices, rest: RESTClient, layer: URL, work: URL) async throws {
        guard let service = services.backends["street_inspections"] else { throw CLIFailure(message: "street_inspections is not served") }
        // The next day, in the field: another inspection closed. At the office: one more edit.
        let replica = try Geodatabase.open(at: replicaFile)
        defer { try? replica.close() }
        let table = try replica.table(named: "inspections")
        guard var next = try await table.features(matching: FeatureQuery(where: "inspection_id = '\(Story.nextDay)'")).first else {
            throw CLIFailure(message: "\(Story.nextDay) is not in the replica")
        }
        next.attributes = ["status": .string("done"), "inspector": .string("crew 7"), "notes": .string("bench repainted")]
        try await table.update([next])
        let reopened = try await objectID(of: "INS-OFFICE-1", rest: rest, layer: layer)
        let office = try await rest.post(
            layer.appendingPathComponent("applyEdits"),
            form: [("updates", (([["attributes": ["objectid": .integer(reopened), "status": "in_progress"]]]) as JSONValue).jsonString)])
        guard office["updateResults"]?[0]?["success"]?.boolValue == true else { throw CLIFailure(message: "the office edit failed: \(office.jsonString)") }

        let edits = work.appendingPathComponent("edits.delta"), reply = work.appendingPathComponent("reply.delta")
        try? FileManager.default.removeItem(at: edits)
        try? FileManager.default.removeItem(at: reply)
        let exported = try await outputOf(
            GeodatabaseSyncTask.makeExportDeltaJob(geodatabase: replica, deltaFileURL: edits, parameters: SyncGeodatabaseParameters()))
        let imported = try await DeltaImport.importEdits(edits, into: service, service: "street_inspections", reply: reply)
        let answered = try await outputOf(GeodatabaseSyncTask.makeImportDeltaJob(geodatabase: replica, deltaFileURL: reply))
        // The crew's edit on the service, the office's in the replica.
        let onService = try await count(layer, where: "inspection_id = '\(Story.nextDay)' AND status = 'done'", rest: rest)
        let inReplica = try await table.count(matching: FeatureQuery(where: "inspection_id = 'INS-OFFICE-1' AND status = 'in_progress'"))
        guard answered.acknowledged, onService == 1, inReplica == 1, try await table.pendingChanges().total == 0 else {
            throw CLIFailure(message: "the delta round did not bring both sides together")
        }
        say("6. no link at all: edits.delta (\(exported.edits) edit, \(Self.size(Self.bytes(edits)))) imported on the service, "
            + "reply.delta (\(imported.changes) change from the office, \(Self.size(Self.bytes(reply)))) imported by the crew; both sides hold both edits")
    }

    // MARK: - Helpers

    /// A 640×480 JPEG standing in for the crew's camera: sky, a textured pavement and the reset
    /// kerb stone (the same bytes every run).
    static func photo() throws -> Data {
        SystemTileCodecs.install()
        let width = 640, height = 480
        var pixels = [UInt8](repeating: 255, count: width * height * 4)
        var noise: UInt32 = 2_463_534_242
        for y in 0..<height {
            for x in 0..<width {
                noise ^= noise << 13
                noise ^= noise >> 17
                noise ^= noise << 5
                let grain = Int(noise % 23)
                let i = (y * width + x) * 4
                let stone = (200..<440).contains(x) && (300..<360).contains(y)
                let rgb = stone ? [150 + grain, 148 + grain, 140 + grain] : y < 200 ? [140 + y / 8, 190, 235] : [70 + grain, 72 + grain, 78 + grain]
                for c in 0..<3 { pixels[i + c] = UInt8(min(255, rgb[c])) }
            }
        }
        return Data(try JPEGCodec.encode(rgba: pixels, width: width, height: height, quality: 85))
    }

    static func size(_ bytes: Int64) -> String { ProgressDisplay.count(bytes, "bytes") }

    static func bytes(_ file: URL) -> Int64 { ((try? FileManager.default.attributesOfItem(atPath: file.path)[.size]) as? NSNumber)?.int64Value ?? 0 }

    /// The samples folder: `--samples`, else the samples carried with the executable.
    static func samplesDirectory(_ explicit: String?) throws -> URL {
        if let explicit {
            let url = URL(fileURLWithPath: explicit)
            guard let missing = BundledSamples.missing(in: url) else { return url }
            throw CLIFailure(message: "\(explicit) is not a samples folder: it has no \(missing)")
        }
        guard let bundled = BundledSamples.directory else {
            let places = BundledSamples.candidates.map(\.path).joined(separator: " or ")
            throw CLIFailure(message: "the samples are not installed beside the executable (looked in \(places)); pass --samples <dir>")
        }
        return bundled
    }

    private func say(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }
}
