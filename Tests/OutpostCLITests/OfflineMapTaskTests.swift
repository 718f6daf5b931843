import Foundation
import OutpostCore
import OutpostOffline
import OutpostProtocol
import OutpostStorage
import OutpostTestSupport
import Testing

/// The library side of offline maps: OfflineMapTask loads its map, makes parameters, and its job
/// pauses, resumes, cancels and round-trips its JSON as one with its parts; OfflineMapSyncTask
/// syncs and checks for updates.
@Suite("OfflineMapTask and OfflineMapSyncTask")
struct OfflineMapTaskTests {
    @Test(.scaledTimeLimit(minutes: 4))
    func theJobPausesResumesCancelsAndRoundTripsAsOne() async throws {
        let dir = TemporaryDirectory()
        let (server, mapURL) = try await OfflineMapTests.served(in: dir)
        defer { Task { await server.stop() } }
        let fieldInspection = server.featureServer("field_inspection").absoluteString

        let task = OfflineMapTask(url: URL(string: mapURL)!)
        #expect(task.loadStatus == .notLoaded)
        try await task.load()
        #expect(task.loadStatus == .loaded && task.map?.title == "Field crews" && task.preplannedAreas.map(\.id) == ["south-west"])
        var parameters = try await task.makeDefaultGenerateOfflineMapParameters(
            areaOfInterest: Envelope(xmin: -122.70, ymin: 45.49, xmax: -122.64, ymax: 45.53), minScale: 0, maxScale: 70_000)
        #expect(parameters.basemapLevels.first == 0 && (parameters.basemapLevels.last ?? 0) >= 10, "\(parameters.basemapLevels)")
        parameters.override("places") { $0.skip = true }
        parameters.override("inspection_points") { $0.where = "status = 'open'" }
        let open = try await OfflineMapTests.serverCount(fieldInspection, layer: 0, where: "status = 'open'")

        // Paused while its parts run: nothing at the destination, the parts paused with it.
        let folder = dir.file("paused-map")
        let faults = FaultInjector()
        let job = try await task.makeGenerateOfflineMapJob(parameters: parameters, downloadDirectory: folder, faults: faults)
        faults.onReach("offline.partsStarted") { try? job.pause() }
        try job.start()
        for await status in job.statusUpdates where status == .paused || status.isFinished { break }
        #expect(job.status == .paused)
        #expect(!FileManager.default.fileExists(atPath: folder.path))
        let parts = try FileManager.default.contentsOfDirectory(at: URL(fileURLWithPath: folder.path + ".partial/.jobs"), includingPropertiesForKeys: nil)
            .filter { $0.pathExtension == "json" }.map { try JobSnapshot.decode(Data(contentsOf: $0)) }
        #expect(parts.count == 5 && parts.allSatisfy { $0.status == .paused || $0.status == .succeeded }, "\(parts.map { "\($0.jobType) \($0.status)" })")

        // Its JSON rebuilds it in a new "process" (a registry), which finishes it.
        let json = try job.toJSON()
        let schema = dir.file("job.json")
        try json.write(to: schema)
        let valid = try await ExternalTools.checkJSONSchema(Repository.schema("job.schema.json"), valid: [schema])
        #expect(valid.succeeded, "\(valid.stderr)")
        let rebuilt = try JobRegistry.withOfflineMapJobs().makeJob(from: JobSnapshot.decode(json))
        #expect(rebuilt.status == .paused)
        // Its progress combines its parts' (a fraction of each part's bytes or tiles).
        let fractions = Locked<[Double]>([])
        let updates = rebuilt.progressUpdates
        let watcher = Task { for await p in updates { fractions.update { $0.append(p.fraction) } } }
        try rebuilt.start()
        #expect(await rebuilt.waitUntilFinished() == .succeeded, "\(rebuilt.snapshot.error?.message ?? "")")
        watcher.cancel()
        let offline = try OfflineMap(directory: folder)
        #expect(offline.definition.operationalLayers.map(\.id) == ["inspection_points", "pipelines", "service_areas", "inspection_log", "countries"])
        #expect(offline.layerErrors.isEmpty && offline.basemapURL != nil)
        let gdb = try Geodatabase.open(at: offline.url("data/field_inspection.gpkg"), readOnly: true)
        #expect(try await gdb.table(named: "inspection_points").count() <= open)
        try gdb.close()
        let seen = fractions.get()
        #expect(seen.count > 2 && seen.allSatisfy { (0...1).contains($0) } && seen.contains { $0 > 0.34 && $0 < 0.66 }, "\(seen)")

        // Cancelled after its parts finished: what it made is removed and unregistered.
        let before = try await OfflineMapTests.registeredReplicas(fieldInspection)
        let cancelFaults = FaultInjector()
        let doomed = try await task.makeGenerateOfflineMapJob(parameters: parameters, downloadDirectory: dir.file("cancelled-map"), faults: cancelFaults)
        cancelFaults.onReach("offline.afterParts") { doomed.cancel() }
        try doomed.start()
        #expect(await doomed.waitUntilFinished() == .failed)
        #expect(doomed.error?.code == .cancelled)
        #expect(!FileManager.default.fileExists(atPath: dir.file("cancelled-map").path) && !FileManager.default.fileExists(atPath: dir.file("cancelled-map.partial").path))
        #expect(try await OfflineMapTests.registeredReplicas(fieldInspection) == before)

        // The sync task: nothing to do, then an office edit waiting, then synced.
        let sync = OfflineMapSyncTask(offlineMap: offline)
        #expect(try await sync.checkForUpdates().downloadAvailable == false)
        let added = try await applyEdits(
            fieldInspection, layer: 0, "adds",
            #"[{"geometry":{"x":-122.68,"y":45.52,"spatialReference":{"wkid":4326}},"attributes":{"asset_id":"LIB-1","asset_type":"valve","condition":1,"status":"open"}}]"#)
        #expect(added["addResults"]?[0]?["success"] == true)
        #expect(try await sync.checkForUpdates().downloadAvailable == true)
        let syncJob = sync.makeOfflineMapSyncJob(parameters: sync.makeDefaultOfflineMapSyncParameters())
        try syncJob.start()
        let result = try await syncJob.output
        #expect(!result.hasErrors && result.replicas.count == 2)
        #expect(result.replicas.first { $0.file == "data/field_inspection.gpkg" }?.layers.first { $0.layerId == 0 }?.downloaded.inserts == 1)
        #expect(try await sync.checkForUpdates().downloadAvailable == false)
    }

    @Test func mapDefinitionsAreCheckedWhenRead() throws {
        let example = try Data(contentsOf: Repository.schema("examples/field-crews.map.json"))
        let map = try MapDefinition.decode(example)
        #expect(map.operationalLayers.count == 6 && map.preplannedAreas?.first?.id == "south-west")
        #expect(throws: MapDefinition.Invalid.self) { try map.absolute("field_inspection/FeatureServer/0") }
        #expect(map.resolvingURLs(against: "https://gis.example.org/arcgis/rest/services").operationalLayers[0].url == "https://gis.example.org/arcgis/rest/services/field_inspection/FeatureServer/0")
        for (text, message) in [
            (#"{"title":"x","operationalLayers":[]}"#, "no formatVersion"), (#"{"formatVersion":2,"title":"x","operationalLayers":[]}"#, "format version 2"),
            (#"{"formatVersion":1,"operationalLayers":[]}"#, "lacks title"),
            (#"{"formatVersion":1,"title":"x","operationalLayers":[{"id":"a","title":"a","url":"u"},{"id":"a","title":"b","url":"v"}]}"#, "two operational layers"),
            (#"{"formatVersion":1,"title":"x","operationalLayers":[],"preplannedAreas":[{"id":"a b","title":"t","extent":{"xmin":0,"ymin":0,"xmax":1,"ymax":1}}]}"#, "letters, digits"),
            ("not json", "not JSON"),
        ] {
            #expect {
                try MapDefinition.decode(Data(text.utf8))
            } throws: { error in
                "\(error)".contains(message)
            }
        }
    }

    /// A folder is an offline map only when its map.json reads, has its offline section, and every
    /// file it names is there and inside the folder; the CLI says which.
    @Test func anOfflineMapFolderIsCheckedWhenOpened() async throws {
        let dir = TemporaryDirectory()
        let folder = dir.file("map")
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("data"), withIntermediateDirectories: true)
        func write(_ map: MapDefinition) throws { try map.encoded().write(to: folder.appendingPathComponent("map.json")) }
        func refusal() -> String? {
            do {
                _ = try OfflineMap(directory: folder)
                return nil
            } catch {
                return "\(error)"
            }
        }
        #expect(refusal()?.contains("has no map.json") == true)
        var map = MapDefinition(title: "t", operationalLayers: [.init(id: "a", title: "a", url: "http://h/arcgis/rest/services/s/FeatureServer/0", file: "data/s.gpkg", table: "a")])
        try write(map)
        #expect(refusal()?.contains("no offline section") == true)
        map.offline = MapDefinition.Offline(
            generatedAt: Date(), source: nil, areaOfInterest: .init(Envelope(xmin: 0, ymin: 0, xmax: 1, ymax: 1)), minScale: 0, maxScale: 0,
            replicas: [.init(file: "data/s.gpkg", serviceUrl: "http://h/arcgis/rest/services/s/FeatureServer", layers: [0], snapshot: false, readOnly: false)],
            layerErrors: [])
        try write(map)
        #expect(refusal()?.contains("lacks data/s.gpkg") == true)
        let status = try await outpost(["offline", "status", folder.path])
        #expect(!status.succeeded && status.stderr.contains("lacks data/s.gpkg"), "\(status.stderr)")
        _ = FileManager.default.createFile(atPath: folder.appendingPathComponent("data/s.gpkg").path, contents: Data())
        map.operationalLayers[0].file = "../elsewhere.gpkg"
        try write(map)
        #expect(refusal()?.contains("outside the offline map's folder") == true)
    }
}
