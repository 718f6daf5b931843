import ArgumentParser
import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import OutpostCore
import OutpostSQLiteService
import OutpostSampleData
import OutpostServer
import OutpostStorage
import OutpostSync
import OutpostTiles
import ServiceLifecycle

/// The main job, end to end on this machine: a field-inspection service on loopback, a crew's
/// replica of part of it, edits on both sides, a sync, and the proof that both sides match.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Serve the sample service, take a replica offline, edit both sides, sync, and check both sides match.",
        discussion: "Runs from any directory: the sample service travels with the executable (or pass --sample).")

    @Option(help: "Work directory (default: a new one under the system's temporary directory).") var workdir: String?
    @Option(help: "A service directory to use instead of the bundled field-inspection sample (service.json and data/).") var sample: String?
    @Flag(help: "Leave the server running at the end (stop it with Ctrl-C).") var keep = false

    func run() async throws {
        let sampleURL = try Self.sampleDirectory(sample)
        let work = URL(fileURLWithPath: workdir ?? NSTemporaryDirectory() + "outpost-demo-\(ProcessInfo.processInfo.processIdentifier)")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        say("work directory \(work.path)")

        // 1. The service.
        let serviceFile = work.appendingPathComponent("field_inspection.gpkg")
        let counts = try SQLiteServiceBackend.create(
            at: serviceFile, schema: try ServiceSchema.load(from: sampleURL.appendingPathComponent("service.json")),
            dataDirectory: sampleURL.appendingPathComponent("data"), overwrite: true)
        say("service created: " + counts.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
        let backend = try SQLiteServiceBackend(url: serviceFile)
        let services = ServiceDirectory([backend])
        let (listening, announce) = AsyncStream<String>.makeStream()
        let app = try OutpostApplication.make(
            services: services, configuration: ServerConfiguration(port: 0, outputDirectory: work.appendingPathComponent("server-files"))
        ) { url in
            announce.yield(url)
            announce.finish()
        }
        let group = ServiceGroup(configuration: .init(services: [app], gracefulShutdownSignals: [.sigterm, .sigint], logger: Logger(label: "outpost.demo")))
        let server = Task { try await group.run() }
        var base: String?
        for await url in listening { base = url }
        guard let base else { throw CLIFailure(message: "the server did not start") }
        let serviceURL = URL(string: "\(base)/arcgis/rest/services/field_inspection/FeatureServer")!
        say("serving \(serviceURL.absoluteString)")

        do {
            try await walkThrough(serviceURL: serviceURL, work: work)
        } catch {
            await group.triggerGracefulShutdown()
            _ = try? await server.value
            await services.closeAll()
            throw error
        }
        if keep {
            say("the server keeps running at \(serviceURL.absoluteString); Ctrl-C stops it")
            _ = try? await server.value
        } else {
            await group.triggerGracefulShutdown()
            _ = try? await server.value
        }
        await services.closeAll()
    }

    private func walkThrough(serviceURL: URL, work: URL) async throws {
        // 2. A crew takes the south-west part of the area offline.
        let task = try GeodatabaseSyncTask(url: serviceURL)
        let area = Envelope(xmin: -122.70, ymin: 45.49, xmax: -122.64, ymax: 45.53)
        var parameters = try await task.makeDefaultGenerateGeodatabaseParameters(extent: area)
        parameters.returnAttachments = true
        parameters.attachmentSyncDirection = .bidirectional
        let replicaURL = work.appendingPathComponent("crew.gpkg")
        let generate = task.makeGenerateGeodatabaseJob(parameters: parameters, downloadFileURL: replicaURL)
        try generate.start()
        let replica = try await generate.output
        defer { try? replica.close() }
        let points = try replica.table(named: "inspection_points")
        say("replica \(replicaURL.lastPathComponent): \(try await points.count()) inspection points of the area (GeoPackage; open it in QGIS or ogrinfo)")

        // 3. In the field (offline): a new inspection, two updates, a removed asset.
        let added = try await points.add([
            Feature(
                attributes: ["asset_id": .string("HYD-DEMO-1"), "asset_type": .string("hydrant"), "condition": .integer(2), "status": .string("open"),
                    "inspector": .string("crew 7"), "inspected_at": .date(Date())],
                geometry: .point(try Point(x: -122.66, y: 45.51)))
        ])[0]
        // A photo of the new hydrant (a generated picture stands in for the camera).
        let photo = try Self.photo()
        _ = try await points.addAttachment(toFeature: added.objectID!, name: "hydrant.png", contentType: "image/png", data: photo)
        var local = try await points.features(matching: FeatureQuery(orderBy: [.init("objectid")], limit: 3))
        for i in local.indices.prefix(2) { local[i].attributes = ["status": .string("in_progress"), "notes": .string("checked by crew 7")] }
        try await points.update(Array(local.prefix(2)))
        try await points.delete(objectIDs: [local[2].objectID!])
        let pendingBefore = try await points.pendingChanges()
        say("field edits pending: \(pendingBefore.inserts) insert (with a \(photo.count)-byte photo), \(pendingBefore.updates) updates, \(pendingBefore.deletes) delete")

        // 4. Meanwhile in the office, another user edits the service over HTTP.
        let office = try await officeEdits(serviceURL: serviceURL, area: area, sameFeature: local[0].globalID!)
        say("office edits on the server: \(office)")

        // 5. Sync both ways.
        let syncParameters = try await task.makeDefaultSyncGeodatabaseParameters(geodatabase: replica)
        let sync = task.makeSyncGeodatabaseJob(parameters: syncParameters, geodatabase: replica)
        try sync.start()
        let results = try await sync.output
        for r in results where r.uploaded.total + r.downloaded.total > 0 {
            let photos = r.attachmentsUploaded > 0 ? " and \(r.attachmentsUploaded) photo" : ""
            say("  \(r.tableName): uploaded \(SyncRunCommand.describe(r.uploaded))\(photos); downloaded \(SyncRunCommand.describe(r.downloaded))")
        }
        for c in try await replica.read({ try $0.conflicts() }) {
            let record = try JSONValue.parse(Data(c.record.utf8))
            let columns = record["columns"]?.arrayValue?.compactMap(\.stringValue).joined(separator: ", ") ?? ""
            say("  conflict on \(c.table) \(c.globalID) (\(columns)): the crew's value won (\(record["policy"]?.stringValue ?? "")); the office's \(record["theirs"]?.jsonString ?? "") is kept in the conflict record")
        }

        // 6. Both sides equal: the sync's checksums, then feature by feature.
        guard results.allSatisfy({ $0.checksumMatches == true }) else { throw CLIFailure(message: "checksums differ after the sync") }
        let serverCount = try await count(serviceURL: serviceURL, area: area)
        let localCount = try await points.count()
        guard serverCount == localCount else { throw CLIFailure(message: "the server has \(serverCount) points in the area, the replica \(localCount)") }
        guard let uploaded = try await points.feature(globalID: added.globalID!), uploaded.globalID == added.globalID else {
            throw CLIFailure(message: "the new inspection is missing")
        }
        // The photo arrived whole: the service serves the same bytes.
        let onServer = try await json(serviceURL.appendingPathComponent("0/query"), [("where", "asset_id = 'HYD-DEMO-1'"), ("returnIdsOnly", "true")])
        guard let serverID = onServer["objectIds"]?[0]?.integerValue,
            let info = try await json(serviceURL.appendingPathComponent("0/\(serverID)/attachments"), [])["attachmentInfos"]?[0],
            let attachmentID = info["id"]?.integerValue,
            try await bytes(serviceURL.appendingPathComponent("0/\(serverID)/attachments/\(attachmentID)")) == photo
        else { throw CLIFailure(message: "the photo did not reach the service intact") }
        say("both sides match: \(localCount) inspection points in the area, per-layer checksums equal, the photo byte for byte, nothing pending")

        // 7. An offline basemap of the area, drawn from the synced replica, as a tile package.
        let tiles = ExportTileCacheTask(source: .geodatabase(replicaURL))
        let basemapURL = work.appendingPathComponent("basemap.tpkx")
        let export = tiles.makeExportTileCacheJob(
            parameters: ExportTileCacheParameters(areaOfInterest: .envelope(area, .wgs84), levelIDs: Array(12...15)), downloadFileURL: basemapURL)
        try export.start()
        let basemap = try await export.output
        let levels = try basemap.summary()
        say("basemap \(basemapURL.lastPathComponent): \(levels.reduce(0) { $0 + $1.tiles }) tiles at levels 12–15 (Compact Cache V2 bundles; gdalinfo ≥ 3.8 and ArcGIS open it)")
        say("done; files are in \(work.path)")
    }

    /// Edits by "the office": closes two inspections and adds one, through applyEdits.
    private func officeEdits(serviceURL: URL, area: Envelope, sameFeature: String) async throws -> String {
        let ids = try await json(serviceURL.appendingPathComponent("0/query"), [
            ("where", "status = 'open'"), ("geometry", "\(area.xmin),\(area.ymin),\(area.xmax),\(area.ymax)"), ("returnIdsOnly", "true"), ("inSR", "4326"),
        ])["objectIds"]?.arrayValue?.compactMap(\.integerValue).suffix(2) ?? []
        let updates = JSONValue.array(ids.map { ["attributes": ["objectid": .integer($0), "status": "closed", "notes": "closed by the office"]] })
        let adds: JSONValue = [[
            "attributes": ["asset_id": "VLV-OFFICE-1", "asset_type": "valve", "condition": 3, "status": "open", "inspector": "office"],
            "geometry": ["x": -122.65, "y": 45.52, "spatialReference": ["wkid": 4326]],
        ]]
        let answer = try await json(serviceURL.appendingPathComponent("0/applyEdits"), [("adds", adds.jsonString), ("updates", updates.jsonString)])
        let ok = (answer["addResults"]?.arrayValue ?? []) + (answer["updateResults"]?.arrayValue ?? [])
        guard ok.allSatisfy({ $0["success"]?.boolValue == true }) else { throw CLIFailure(message: "the office edits failed: \(answer.jsonString)") }
        // The office also annotates a feature the crew annotated offline: a conflict.
        let same: JSONValue = [["attributes": ["globalid": .string(sameFeature), "notes": "office: replace the cap"]]]
        let conflict = try await json(serviceURL.appendingPathComponent("0/applyEdits"), [("updates", same.jsonString), ("useGlobalIds", "true")])
        guard conflict["updateResults"]?.arrayValue?.first?["success"]?.boolValue == true else {
            throw CLIFailure(message: "the office edit failed: \(conflict.jsonString)")
        }
        return "\(ids.count) inspections closed, 1 valve added, notes changed on a feature the crew also changed"
    }

    /// A 160×120 picture with a sky, ground and a red hydrant.
    static func photo() throws -> Data {
        var pixels = [UInt8](repeating: 0, count: 160 * 120 * 3)
        for y in 0..<120 {
            for x in 0..<160 {
                let i = (y * 160 + x) * 3
                let hydrant = (70..<90).contains(x) && (40..<100).contains(y)
                let rgb: (Int, Int) -> [UInt8] = { _, _ in hydrant ? [200, 30, 30] : y < 60 ? [140, 190, 235] : [90, UInt8(110 + (x + y) % 30), 60] }
                pixels.replaceSubrange(i..<(i + 3), with: rgb(x, y))
            }
        }
        return Data(try PNGEncoder.encode(pixels: pixels, width: 160, height: 120, channels: 3))
    }

    private func bytes(_ url: URL) async throws -> Data {
        let response = try await HTTPClient.shared.execute(HTTPClientRequest(url: url.absoluteString), timeout: .seconds(60))
        return Data(buffer: try await response.body.collect(upTo: 16 << 20))
    }

    private func count(serviceURL: URL, area: Envelope) async throws -> Int {
        Int(try await json(serviceURL.appendingPathComponent("0/query"), [
            ("where", "1=1"), ("geometry", "\(area.xmin),\(area.ymin),\(area.xmax),\(area.ymax)"), ("inSR", "4326"), ("returnCountOnly", "true"),
        ])["count"]?.integerValue ?? -1)
    }

    private func json(_ url: URL, _ form: [(String, String)]) async throws -> JSONValue {
        var request = HTTPClientRequest(url: url.absoluteString)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        let body = (form + [("f", "json")]).map { "\($0.0)=\($0.1.addingPercentEncoding(withAllowedCharacters: allowed)!)" }.joined(separator: "&")
        request.body = .bytes(ByteBuffer(string: body))
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(60))
        let buffer = try await response.body.collect(upTo: 16 << 20)
        return try JSONValue.parse(Data(buffer: buffer))
    }

    /// The service directory the demo serves: `--sample`, else the sample carried with the
    /// executable.
    static func sampleDirectory(_ explicit: String?) throws -> URL {
        if let explicit {
            let url = URL(fileURLWithPath: explicit)
            guard FileManager.default.fileExists(atPath: url.appendingPathComponent("service.json").path) else {
                throw CLIFailure(message: "\(explicit) is not a service directory: it has no service.json")
            }
            return url
        }
        guard let bundled = BundledSamples.fieldInspection else {
            let places = BundledSamples.candidates(for: "field_inspection").map(\.path).joined(separator: " or ")
            throw CLIFailure(message: "the field-inspection sample is not installed beside the executable (looked in \(places)); pass --sample <dir>")
        }
        return bundled
    }

    private func say(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }
}
