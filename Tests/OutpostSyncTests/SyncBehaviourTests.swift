import Foundation
import OutpostCore
import OutpostHTTPTestSupport
import OutpostProtocol
import OutpostServer
@testable import OutpostStorage
import OutpostSyncService
import OutpostTestSupport
import OutpostServiceTestSupport
import Testing

@testable import OutpostSync

@Suite("Sync behaviour: filters, conflicts, concurrency, repair")
struct SyncBehaviourTests {
    static let area = Envelope(xmin: -122.70, ymin: 45.49, xmax: -122.64, ymax: 45.53)

    static var scope: FeatureQuery {
        var q = FeatureQuery()
        q.intersecting = .polygon(area.polygon)
        return q
    }

    @Test(.scaledTimeLimit(minutes: 2), arguments: BackendKind.syncing)
    func featuresLeavingAndEnteringTheFilterFollow(kind: BackendKind) async throws {
        let h = try await SyncHarness.start(kind)
        let gdb = try await h.replica("area", extent: Self.area, layers: [0])
        let inside = try await h.service.backend.features(layerID: 0, query: Self.scope).prefix(3).map { $0 }
        var outsideQuery = FeatureQuery(where: "objectid > 0")
        outsideQuery.envelope = Envelope(xmin: -122.62, ymin: 45.54, xmax: -122.60, ymax: 45.56)
        let outside = try #require(try await h.service.backend.features(layerID: 0, query: outsideQuery).first)
        // Another user moves one feature out, one in, and deletes one.
        try await h.serverEdit(layer: 0, updates: [
            Feature(objectID: inside[0].objectID, geometry: try point(-122.61, 45.555)),
            Feature(objectID: outside.objectID, geometry: try point(-122.68, 45.50)),
        ], deletes: [Feature(objectID: inside[1].objectID)])
        // The replica moves one of its own out of the area.
        let local = try gdb.table(named: "inspection_points")
        let mine = try #require(try await local.feature(globalID: inside[2].globalID!))
        try await local.update([Feature(objectID: mine.objectID, geometry: try point(-122.61, 45.556))])

        let results = try await h.sync(gdb)
        #expect(results.first?.checksumMatches == true)
        let rows = try await SyncHarness.localRows(gdb, "inspection_points")
        #expect(rows[inside[0].globalID!] == nil, "moved out on the server: left the replica")
        #expect(rows[outside.globalID!] != nil, "moved in on the server: entered the replica")
        #expect(rows[inside[1].globalID!] == nil, "deleted on the server")
        #expect(rows[inside[2].globalID!] == nil, "moved out here: uploaded, then dropped from the replica")
        #expect(try await h.serverRows(0)[inside[2].globalID!]?.geometry == .point(try Point(x: -122.61, y: 45.556)))
        try await h.expectConverged(gdb, table: "inspection_points", layerID: 0, scope: Self.scope)

        // A where clause filters the same way.
        let open = try await h.replica("open", layers: [0], where: [0: "status = 'open'"])
        let someOpen = try #require(try await h.service.backend.features(layerID: 0, query: FeatureQuery(where: "status = 'open'")).first)
        try await h.serverEdit(layer: 0, updates: [Feature(objectID: someOpen.objectID, attributes: ["status": .string("closed")])])
        try await h.sync(open)
        #expect(try await SyncHarness.localRows(open, "inspection_points")[someOpen.globalID!] == nil)
        try await h.expectConverged(open, table: "inspection_points", layerID: 0, scope: FeatureQuery(where: "status = 'open'"))
        try await h.stop()
    }

    /// I8: every value a sync discards is kept in a conflict record, on the server and in the
    /// replica; changes to different columns merge without one.
    @Test(.scaledTimeLimit(minutes: 2), arguments: BackendKind.syncing)
    func discardedValuesAreRecorded(kind: BackendKind) async throws {
        let h = try await SyncHarness.start(kind)
        let gdb = try await h.replica(layers: [0])
        let points = try gdb.table(named: "inspection_points")
        let f = try await points.features(matching: FeatureQuery(where: "objectid <= 4"))
        let gid = f.map { $0.globalID! }
        // Local edits.
        try await points.update([
            Feature(objectID: f[0].objectID, attributes: ["notes": .string("crew: cap loose")]),
            Feature(objectID: f[1].objectID, attributes: ["notes": .string("crew: repainted")]),
            Feature(objectID: f[3].objectID, attributes: ["notes": .string("crew: merged")]),
        ])
        try await points.delete(objectIDs: [f[2].objectID!])
        // Meanwhile on the server: the same column, a delete, an update of what the crew
        // deleted, and a different column.
        func serverID(_ g: String) async throws -> Int64 { try #require(try await h.service.backend.features(layerID: 0, query: { var q = FeatureQuery(); q.globalIDs = [g]; return q }()).first?.objectID) }
        try await h.serverEdit(layer: 0, updates: [
            Feature(objectID: try await serverID(gid[0]), attributes: ["notes": .string("office: replace cap")]),
            Feature(objectID: try await serverID(gid[2]), attributes: ["notes": .string("office: inspected")]),
            Feature(objectID: try await serverID(gid[3]), attributes: ["status": .string("in_progress")]),
        ], deletes: [Feature(objectID: try await serverID(gid[1]))])

        let results = try await h.sync(gdb)
        #expect(results.first?.conflicts == 3)
        let server = try await h.serverRows(0)
        #expect(server[gid[0]]?.attributes["notes"] == .string("crew: cap loose"), "client wins the same column")
        #expect(server[gid[1]] == nil, "update vs server delete: the delete wins")
        #expect(server[gid[2]] == nil, "delete vs server update: the delete wins")
        #expect(server[gid[3]]?.attributes["notes"] == .string("crew: merged"))
        #expect(server[gid[3]]?.attributes["status"] == .string("in_progress"), "different columns merge")
        try await h.expectConverged(gdb, table: "inspection_points", layerID: 0)

        let mirrored = try await gdb.read { try $0.conflicts() }
        #expect(Set(mirrored.map(\.globalID)) == [gid[0], gid[1], gid[2]])
        let records = try mirrored.map { try JSONDecoder().decode(ConflictRecord.self, from: Data($0.record.utf8)) }
        let sameColumn = try #require(records.first { $0.globalId == gid[0] })
        #expect(sameColumn.kind == .updateUpdate && sameColumn.columns == ["notes"])
        #expect(sameColumn.theirs?["notes"] == .string("office: replace cap"), "the discarded value is kept")
        #expect(sameColumn.ours?["notes"] == .string("crew: cap loose"))
        #expect(sameColumn.base?["notes"] == f[0].attributes["notes"]?.jsonValue)
        #expect(records.first { $0.globalId == gid[1] }?.ours?["notes"] == .string("crew: repainted"), "the update the delete beat is kept")
        #expect(records.first { $0.globalId == gid[2] }?.theirs?["notes"] == .string("office: inspected"), "the server's update the delete beat is kept")
        let onServer = try await (h.service.backend as! any SyncBackend).conflictRecords().count
        #expect(onServer == 3)
        try await h.stop()
    }

    /// One sync per geodatabase; edits made while it runs are uploaded by a later batch and
    /// never overwritten by the download.
    @Test(.scaledTimeLimit(minutes: 2), arguments: BackendKind.syncing)
    func editsDuringASyncAreKept(kind: BackendKind) async throws {
        let h = try await SyncHarness.start(kind)
        let gdb = try await h.replica(layers: [0])
        let points = try gdb.table(named: "inspection_points")
        let one = try #require(try await points.feature(objectID: 1))
        try await points.update([Feature(objectID: 1, attributes: ["notes": .string("before the sync")])])
        // The server changes another column of the same feature: the download brings it.
        let serverOne = try #require(try await h.service.backend.features(layerID: 0, query: { var q = FeatureQuery(); q.globalIDs = [one.globalID!]; return q }()).first)
        try await h.serverEdit(layer: 0, updates: [Feature(objectID: serverOne.objectID, attributes: ["condition": .integer(5)])])
        let faults = FaultInjector()
        let url = gdb.url
        faults.onReach("client.afterSeal") {
            #expect(throws: SyncError.self, "a second sync of the same file is refused") { try SyncLock.acquire(for: url) }
            // Edits after sealing go into the next batch (of this same sync).
            #expect(throws: Never.self) { try gdb.write { conn in try points.update([Feature(objectID: 8, attributes: ["condition": .integer(5)])], in: conn) } }
        }
        faults.onReach("client.afterStage") {
            // An edit between download and apply: the apply must not overwrite it.
            #expect(throws: Never.self) { try gdb.write { conn in try points.update([Feature(objectID: 1, attributes: ["notes": .string("during the download")])], in: conn) } }
        }
        // Staged, so that an edit can be made between the download and its apply.
        let first = try await h.sync(gdb, SyncGeodatabaseParameters(applyWhileDownloadingUpTo: 0), faults: faults)
        #expect(first.first?.uploaded.updates == 2)
        #expect(first.first?.checksumMatches == nil, "edited during the sync: checked next time")
        let after = try #require(try await points.feature(objectID: 1))
        #expect(after.attributes["notes"] == .string("during the download"), "the download did not overwrite the pending edit")
        #expect(after.attributes["condition"] == .integer(5), "but brought the server's other column")
        #expect(try await points.pendingChanges().updates == 1)
        let second = try await h.sync(gdb)
        #expect(second.first?.uploaded.updates == 1)
        #expect(second.first?.checksumMatches == true)
        #expect(try await h.serverRows(0)[one.globalID!]?.attributes["notes"] == .string("during the download"))
        try await h.stop()
    }

    /// A replica made by a server that reads only JSON batches seals JSON; once a download hears
    /// the server list the binary encoding in its replica info, it seals binary. Both apply.
    @Test(.scaledTimeLimit(minutes: 2), arguments: BackendKind.syncing)
    func batchesAreSealedInAnEncodingTheServerReads(kind: BackendKind) async throws {
        let h = try await SyncHarness.start(kind)
        let gdb = try await h.replica(layers: [0])
        #expect(try await gdb.read { try $0.replicaState()?.batchEncodings } == ["json", "binary", "binary-framed", "binary-gpkg-geometry"], "the replica file says what its server reads")
        // As a replica made by a server before the binary encoding.
        try await gdb.write { conn in
            var state = try #require(try conn.replicaState())
            state.batchEncodings = nil
            try conn.setReplicaState(state)
        }
        let points = try gdb.table(named: "inspection_points")
        var sealed: [UploadBatch.Encoding] = []
        for id in [Int64(1), 2] {
            try await points.update([Feature(objectID: id, attributes: ["notes": .string("sealed \(id)")])])
            let faults = FaultInjector()
            let seen = SealedEncoding()
            faults.onReach("client.afterSeal") {
                seen.value = (try? gdb.read { try $0.sealedBatch()?.body }).flatMap { $0.map(UploadBatch.Encoding.init(of:)) }
            }
            let result = try await h.sync(gdb, faults: faults)
            #expect(result.first?.uploaded.updates == 1)
            #expect(result.first?.checksumMatches == true)
            sealed.append(try #require(seen.value))
        }
        #expect(sealed == [.json, .binary])
        #expect(try await gdb.read { try $0.replicaState()?.batchEncodings } == ["json", "binary", "binary-framed", "binary-gpkg-geometry"], "learned from the replica info")
        let rows = try await h.serverRows(0)
        #expect(rows.values.filter { $0.attributes["notes"]?.stringValue?.hasPrefix("sealed") == true }.count == 2)
        try await h.stop()
    }

    /// A server that no longer reads binary batches (an older one put back in its place)
    /// answers 400 to one: the client sends the same batch as JSON, which applies once.
    @Test(.scaledTimeLimit(minutes: 2), arguments: BackendKind.syncing)
    func aBatchTheServerCannotReadGoesAgainAsJSON(kind: BackendKind) async throws {
        let h = try await SyncHarness.start(kind)
        let refusals = Locked(0), sent = Locked<[UploadBatch.Encoding]>([])
        let proxy = try await LoopbackProxy.start(
            upstream: h.live.baseURL,
            observer: { method, uri, request, _, _ in
                if method == "PUT", uri.contains("/batches/") { sent.withLock { $0.append(UploadBatch.Encoding(of: request)) } }
            }
        ) { method, uri in
            guard method == "PUT", uri.contains("/batches/"), refusals.withLock({ n in n += 1; return n == 1 }) else { return .forward }
            return .answer(status: 400, json: #"{"error":{"code":400,"message":"Invalid or missing input parameter 'body': not an upload batch"}}"#)
        }
        let url = proxy.url(for: h.url)
        let gdb = try await h.replica(layers: [0], url: url)
        let points = try gdb.table(named: "inspection_points")
        for id in [Int64(1), 2] {
            try await points.update([Feature(objectID: id, attributes: ["notes": .string("resent \(id)")])])
            let result = try await h.sync(gdb, url: url)
            #expect(result.first?.uploaded.updates == 1)
            #expect(result.first?.checksumMatches == true)
        }
        #expect(sent.withLock { $0 } == [.json, .binary], "the refused batch went as JSON; the server lists binary, so the next is binary")
        #expect(try await h.serverRows(0).values.filter { $0.attributes["notes"]?.stringValue?.hasPrefix("resent") == true }.count == 2)
        try await proxy.stop()
        try await h.stop()
    }

    /// The next batch is made while the server applies the current one and sealed as made only
    /// when it still carries exactly the change rows a fresh seal would take. Edits made while a
    /// batch is in flight — to features the next batch carries, and new ones — still reach the
    /// server once, with their latest values.
    @Test(.scaledTimeLimit(minutes: 2), arguments: BackendKind.syncing)
    func batchesMadeAheadKeepEveryEditOnce(kind: BackendKind) async throws {
        let h = try await SyncHarness.start(kind)
        let gdb = try await h.replica(layers: [0])
        let points = try gdb.table(named: "inspection_points")
        // 24 change rows: batches of 10, 10 and 4.
        for id in 1...12 { try await points.update([Feature(objectID: Int64(id), attributes: ["notes": .string("first \(id)")])]) }
        let added = try await points.add((0..<12).map { i in
            Feature(attributes: ["asset_id": .string("AHEAD-\(i)"), "asset_type": .string("valve"), "status": .string("open")], geometry: .point(try Point(x: -122.6, y: 45.5)))
        })
        let faults = FaultInjector()
        let edit: @Sendable (Int64, String) -> Void = { id, notes in
            #expect(throws: Never.self) { try gdb.write { conn in try points.update([Feature(objectID: id, attributes: ["notes": .string(notes)])], in: conn) } }
        }
        // Batch 1 answered (batch 2 already made): features batch 2 carries are edited again,
        // after the rows it covers, so it is still sealed as made and a later batch brings them.
        let carried = added[0].objectID!
        faults.onReach("client.afterSend") {
            edit(carried, "edited while batch 1 was applied")
            edit(5, "edited while batch 1 was applied")
            // Batch 2 answered: batch 3 (the last 4 rows, made ahead) no longer covers every
            // pending row once this edit lands, so it is sealed afresh with it.
            faults.onReach("client.afterSend") { edit(7, "edited while batch 2 was applied") }
        }
        var parameters = SyncGeodatabaseParameters()
        parameters.maxChangesPerBatch = 10
        let job = try h.task().makeSyncGeodatabaseJob(parameters: parameters, geodatabase: gdb, faults: faults)
        try job.start()
        _ = try await job.output
        let texts = job.messages.map(\.text)
        #expect(texts.contains("batch 2 was made while batch 1 was applied"))
        #expect(!texts.contains("batch 3 was made while batch 2 was applied"), "a batch made ahead that no longer covers the pending rows is dropped")
        // Batch 3: the last 4 rows of before and the 3 edits made in flight.
        #expect(texts.contains { $0.hasPrefix("sending batch 3 (7 edits") }, "\(texts)")
        #expect(!texts.contains { $0.hasPrefix("sending batch 4 ") })
        #expect(try await points.pendingChanges().total == 0)
        try await h.expectConverged(gdb, table: "inspection_points", layerID: 0)
        let server = try await h.serverRows(0)
        let aheadAssets = server.values.compactMap { row -> String? in
            if case .string(let id)? = row.attributes["asset_id"], id.hasPrefix("AHEAD-") { return id }
            return nil
        }
        #expect(aheadAssets.count == 12 && Set(aheadAssets).count == 12, "each new feature once")
        let local = try #require(try await points.feature(objectID: 5))
        #expect(server[local.globalID!]?.attributes["notes"] == .string("edited while batch 1 was applied"))
        let seventh = try #require(try await points.feature(objectID: 7))
        #expect(server[seventh.globalID!]?.attributes["notes"] == .string("edited while batch 2 was applied"))
        let ahead = try #require(try await points.feature(objectID: carried))
        #expect(server[ahead.globalID!]?.attributes["notes"] == .string("edited while batch 1 was applied"))
        try await h.stop()
    }

    /// A sync's first batch can be made small, so the server starts on it while the rest is
    /// made; every later batch carries up to the most a batch carries.
    @Test(.scaledTimeLimit(minutes: 2), arguments: BackendKind.syncing)
    func batchesAfterTheFirstCarryTheMost(kind: BackendKind) async throws {
        let h = try await SyncHarness.start(kind)
        let gdb = try await h.replica(layers: [0])
        let points = try gdb.table(named: "inspection_points")
        _ = try await points.add((0..<40).map { i in
            Feature(attributes: ["asset_id": .string("GROW-\(i)"), "asset_type": .string("valve"), "status": .string("open")], geometry: .point(try Point(x: -122.6, y: 45.5)))
        })
        let parameters = SyncGeodatabaseParameters(maxChangesPerBatch: 20, firstBatchChanges: 2)
        #expect((0..<5).map { parameters.changeLimit(ofBatch: $0, streams: true) } == [2, 20, 20, 20, 20])
        let defaults = SyncGeodatabaseParameters()
        #expect(defaults.changeLimit(ofBatch: 0, streams: false) == 3_000 && defaults.changeLimit(ofBatch: 1, streams: false) == 20_000)
        #expect(defaults.changeLimit(ofBatch: 0, streams: true) == 20_000, "a framed batch is applied as it is sealed: the first is as large as any")
        #expect(SyncGeodatabaseParameters(maxChangesPerBatch: 10).changeLimit(ofBatch: 3, streams: false) == 10)
        let job = try h.task().makeSyncGeodatabaseJob(parameters: parameters, geodatabase: gdb, faults: FaultInjector())
        try job.start()
        _ = try await job.output
        let sent = job.messages.map(\.text).filter { $0.hasPrefix("sending batch") }
        #expect(sent.count == 3, "\(sent)")
        for (i, size) in [2, 20, 18].enumerated() { #expect(sent.count > i && sent[i].hasPrefix("sending batch \(i + 1) (\(size) edits"), "\(sent)") }
        // The first went out while it was sealed; the others were made while the one before applied.
        #expect(job.messages.map(\.text).filter { $0.hasSuffix("went out while it was sealed") } == ["batch 1 went out while it was sealed"])
        #expect(try await points.pendingChanges().total == 0)
        try await h.expectConverged(gdb, table: "inspection_points", layerID: 0)
        try await h.stop()
    }

    /// I9: a replica that drifted from the server (a change made with capture off) is found by
    /// the checksum and that layer alone is fetched again.
    @Test(.scaledTimeLimit(minutes: 2), arguments: BackendKind.syncing)
    func aChecksumMismatchRefetchesTheLayer(kind: BackendKind) async throws {
        let h = try await SyncHarness.start(kind)
        let gdb = try await h.replica(layers: [0, 1])
        try await gdb.write { conn in
            try conn.withChangeCaptureSilenced {
                try conn.execute("UPDATE inspection_points SET notes = 'drifted' WHERE objectid = 3")
                try conn.execute("DELETE FROM inspection_points WHERE objectid = 4")
            }
        }
        let results = try await h.sync(gdb)
        let points = try #require(results.first { $0.layerId == 0 })
        #expect(points.refetched)
        #expect(points.checksumMatches == true)
        #expect(results.first { $0.layerId == 1 }?.refetched == false)
        try await h.expectConverged(gdb, table: "inspection_points", layerID: 0)
        try await h.stop()
    }

    /// A generated replica keeps each layer's checksum (hashed once, when the file arrived) and
    /// keeps it current through its downloads: a verify that compares whole layers takes it
    /// instead of hashing them. A stored checksum that no longer describes its layer is found
    /// (the layer is hashed, nothing fetched), and a sync asked to verify whole layers hashes.
    @Test(.scaledTimeLimit(minutes: 2), arguments: BackendKind.syncing)
    func storedChecksumsSpareTheVerifyHashingTheLayers(kind: BackendKind) async throws {
        let h = try await SyncHarness.start(kind)
        let gdb = try await h.replica(layers: [0, 1])
        func holding() async throws -> [String] {
            try await gdb.read { conn in
                try ["inspection_points", "pipelines"].filter { table in
                    try conn.storedChecksum(of: table).map(\.hex) == (try conn.geodatabase.table(named: table).checksum(matching: .all, in: conn).hex)
                }
            }
        }
        #expect(try await holding() == ["inspection_points", "pipelines"], "stored when the file arrived")
        func sync(_ parameters: SyncGeodatabaseParameters = SyncGeodatabaseParameters()) async throws -> ([SyncLayerResult], [String]) {
            let job = try h.task().makeSyncGeodatabaseJob(parameters: parameters, geodatabase: gdb, faults: FaultInjector())
            try job.start()
            let results = try await job.output
            return (results, job.messages.map(\.text))
        }

        /// Makes the next verify compare whole layers, the stored checksum of inspection_points
        /// changed to `wrong` (as after a write no hook saw).
        func forget(_ wrong: String? = nil) async throws {
            try await gdb.write { conn in
                var state = try #require(try conn.replicaState())
                for i in state.layers.indices {
                    state.layers[i].verifiedAt = nil
                    if let wrong, state.layers[i].table == "inspection_points" { state.layers[i].checksum?.value = wrong }
                }
                try conn.setReplicaState(state)
            }
        }
        // The office adds, moves and deletes; the replica, never verified, compares whole layers.
        let rows = try await h.service.backend.features(layerID: 0, query: FeatureQuery(where: "objectid <= 3"))
        try await h.serverEdit(
            layer: 0, adds: [Feature(attributes: ["asset_id": .string("OFF-1"), "asset_type": .string("valve"), "status": .string("open")], geometry: try point(-122.65, 45.52))],
            updates: [Feature(objectID: rows[0].objectID, attributes: ["notes": .string("office")], geometry: try point(-122.66, 45.53))],
            deletes: [Feature(objectID: rows[1].objectID)])
        var (results, log) = try await sync()
        #expect(results.allSatisfy { $0.checksumMatches == true && !$0.refetched })
        #expect(results.first { $0.layerId == 0 }?.downloaded.total == 3)
        #expect(log.contains("2 of the replica's layer checksums kept since they were last hashed"), "\(log)")
        #expect(try await holding() == ["inspection_points", "pipelines"], "kept through the download")
        try await h.expectConverged(gdb, table: "inspection_points", layerID: 0)

        // A local edit ends every stored checksum (the capture's sequence moves); the sync that
        // uploads it hashes the layers whole (never verified since) and stores them again.
        try await gdb.write { conn in try conn.execute("UPDATE inspection_points SET notes = 'crew' WHERE objectid = 5") }
        #expect(try await holding().isEmpty)
        try await forget()
        (results, log) = try await sync()
        #expect(results.allSatisfy { $0.checksumMatches == true && !$0.refetched })
        #expect(results.first { $0.layerId == 0 }?.uploaded.updates == 1)
        #expect(try await holding() == ["inspection_points", "pipelines"], "hashed at this verify, stored")

        // A stored checksum that no longer describes the layer.
        try await forget("0000000000000001")
        (results, log) = try await sync()
        #expect(results.allSatisfy { $0.checksumMatches == true && !$0.refetched })
        #expect(log.contains("inspection_points: its stored checksum no longer held; hashed the layer again"), "\(log)")
        #expect(try await holding() == ["inspection_points", "pipelines"], "the layer hashed is stored")

        // Asked to verify whole layers, the sync hashes them.
        try await forget()
        (results, log) = try await sync(SyncGeodatabaseParameters(verifyWholeLayers: true))
        #expect(results.allSatisfy { $0.checksumMatches == true })
        #expect(!log.contains { $0.contains("kept since they were last hashed") }, "\(log)")
        try await h.stop()
    }

    /// Once a layer matched, verify compares only the features changed since (all of them pass
    /// through the server's change log). A changed feature that differs brings the whole layer into
    /// the comparison, and the layer is fetched again; drift elsewhere is found by a whole-layer
    /// verify (`verifyWholeLayers`).
    @Test(.scaledTimeLimit(minutes: 2), arguments: BackendKind.syncing)
    func verifyComparesTheFeaturesChangedSinceTheLastMatch(kind: BackendKind) async throws {
        let h = try await SyncHarness.start(kind)
        let gdb = try await h.replica(layers: [0])
        #expect(try await h.sync(gdb).first?.checksumMatches == true)
        func verifiedAt() async throws -> Int64? { try await gdb.read { try $0.replicaState()!.layers.first { $0.id == 0 }?.verifiedAt } }
        let first = try #require(try await verifiedAt())
        #expect(first == (try await h.service.backend.generation()), "a full match is recorded at the server's generation")

        // An edit on each side: the server's window lists exactly the features changed since.
        let points = try gdb.table(named: "inspection_points")
        let crew = try #require(try await points.feature(objectID: 1))
        try await points.update([Feature(objectID: 1, attributes: ["notes": .string("crew")])])
        let office = try #require(try await h.service.backend.features(layerID: 0, query: FeatureQuery(where: "objectid = 2")).first)
        try await h.serverEdit(layer: 0, updates: [Feature(objectID: office.objectID, attributes: ["notes": .string("office")])])
        let backend = try #require(h.service.backend as? any SyncBackend)
        let replicaID = try #require(try await gdb.read { try $0.replicaState()?.replicaID })
        let window = try await backend.checksums(replicaID: replicaID, layerIDs: [0], since: first)
        #expect(window.layers.first?.globalIds == [office.globalID!], "only the office's edit is on the server yet")
        #expect(window.layers.first?.count == 1)

        let job = try h.task().makeSyncGeodatabaseJob(parameters: SyncGeodatabaseParameters(), geodatabase: gdb, faults: FaultInjector())
        try job.start()
        #expect(try await job.output.first?.checksumMatches == true)
        #expect(!job.messages.contains { $0.text.contains("comparing the whole layer") })
        let second = try #require(try await verifiedAt())
        #expect(second > first)
        let after = try await backend.checksums(replicaID: replicaID, layerIDs: [0], since: first)
        #expect(Set(after.layers.first?.globalIds ?? []) == [crew.globalID!, office.globalID!])

        // A downloaded feature altered before verify (capture off): the window differs, the whole
        // layer decides, and the layer is fetched again.
        try await h.serverEdit(layer: 0, updates: [Feature(objectID: office.objectID, attributes: ["notes": .string("office again")])])
        let faults = FaultInjector()
        faults.onReach("client.afterApply") {
            #expect(throws: Never.self) {
                try gdb.write { conn in try conn.withChangeCaptureSilenced { try conn.execute("UPDATE inspection_points SET notes = 'altered' WHERE objectid = 2") } }
            }
        }
        let repair = try h.task().makeSyncGeodatabaseJob(parameters: SyncGeodatabaseParameters(), geodatabase: gdb, faults: faults)
        try repair.start()
        let repaired = try #require(try await repair.output.first)
        #expect(repair.messages.contains { $0.text.contains("comparing the whole layer") })
        #expect(repaired.refetched && repaired.checksumMatches == true)
        try await h.expectConverged(gdb, table: "inspection_points", layerID: 0)

        // Drift outside the changed features is not in the window; a whole-layer verify finds it.
        try await gdb.write { conn in try conn.withChangeCaptureSilenced { try conn.execute("UPDATE inspection_points SET notes = 'drifted' WHERE objectid = 5") } }
        #expect(try await h.sync(gdb).first?.refetched == false, "nothing changed: the empty window matches")
        let whole = try await h.sync(gdb, SyncGeodatabaseParameters(verifyWholeLayers: true))
        #expect(whole.first?.refetched == true && whole.first?.checksumMatches == true)
        try await h.expectConverged(gdb, table: "inspection_points", layerID: 0)
        try await h.stop()
    }

    /// I7: applying the same staged page twice gives the same tables.
    @Test(.scaledTimeLimit(minutes: 3), arguments: BackendKind.syncing)
    func applyingAPageTwiceChangesNothing(kind: BackendKind) async throws {
        let h = try await SyncHarness.start(kind)
        let gdb = try await h.replica()
        let existing = try #require(try await gdb.table(named: "inspection_points").feature(objectID: 5))
        let changes = [
            FeedChange(kind: .upsert, globalId: Scenario.serverPoint, generation: 9, attributes: ["asset_id": "SRV-9", "asset_type": "meter", "status": "open"], geometry: ["x": -122.6, "y": 45.5]),
            FeedChange(kind: .upsert, globalId: existing.globalID!, generation: 9, attributes: ["notes": "from the server"], geometry: ["x": -122.61, "y": 45.51]),
            FeedChange(kind: .leave, globalId: try #require(try await gdb.table(named: "inspection_points").feature(objectID: 6)?.globalID), generation: 9),
        ]
        func applyOnce() async throws -> [String: [[SQLLiteral]]] {
            try await gdb.write { conn in
                for c in changes { try conn.stage(layerID: 0, globalID: c.globalId, kind: c.kind.rawValue, generation: c.generation, row: String(decoding: try JSONEncoder().encode(c), as: UTF8.self)) }
                _ = try conn.withChangeCaptureSilenced { try SyncGeodatabaseJob.applyStaged(layerID: 0, table: "inspection_points", conn) }
                try conn.clearStaging()
            }
            return try await Scenario.tableDump(gdb)
        }
        let once = try await applyOnce()
        let twice = try await applyOnce()
        #expect(once == twice)
        #expect(try await gdb.read { try $0.capturedChanges().count } == 0, "downloads are not captured as local edits")
        try await h.stop()
    }

    /// Rows a sync that did not finish left staged are not applied by the next (fresh)
    /// download, which fetches them again: it clears them first (without waiting for the disk,
    /// docs/sync.md, "Durability"; and only when something is staged).
    @Test(.scaledTimeLimit(minutes: 2), arguments: BackendKind.syncing)
    func rowsLeftStagedAreFetchedAgain(kind: BackendKind) async throws {
        let h = try await SyncHarness.start(kind)
        let gdb = try await h.replica()
        let ghost = "{0D0D0D0D-0000-4000-8000-00000000000D}"
        let stale = FeedChange(kind: .upsert, globalId: ghost, generation: 1, attributes: ["asset_id": "GHOST", "asset_type": "meter", "status": "open"], geometry: ["x": -122.6, "y": 45.5])
        try await gdb.write { conn in
            try conn.stage(layerID: 0, globalID: ghost, kind: "upsert", generation: 1, row: String(decoding: try JSONEncoder().encode(stale), as: UTF8.self))
        }
        #expect(try await gdb.read { try $0.hasStagedRows() })
        let open = try #require(try await h.service.backend.features(layerID: 0, query: FeatureQuery(where: "status = 'open'", limit: 1)).first)
        try await h.serverEdit(layer: 0, updates: [Feature(objectID: open.objectID, attributes: ["notes": .string("from the office")])])
        // Staged, then applied: the path that reads the staging table.
        let results = try await h.sync(gdb, SyncGeodatabaseParameters(applyWhileDownloadingUpTo: 0))
        #expect(results.first { $0.layerId == 0 }?.downloaded.updates == 1)
        #expect(results.allSatisfy { $0.checksumMatches == true })
        var query = FeatureQuery()
        query.globalIDs = [ghost]
        #expect(try await gdb.table(named: "inspection_points").features(matching: query).isEmpty, "the stale row was not applied")
        #expect(try await !gdb.read { try $0.hasStagedRows() })
        try await h.expectConverged(gdb, table: "inspection_points", layerID: 0)
        try await h.stop()
    }

    @Test(.scaledTimeLimit(minutes: 2), arguments: BackendKind.syncing)
    func perLayerDirections(kind: BackendKind) async throws {
        let h = try await SyncHarness.start(kind)
        let gdb = try await h.replica(layers: [0, 3], model: .layer)
        #expect(try await gdb.read { try $0.replicaState()?.syncModel } == .perLayer)
        let points = try gdb.table(named: "inspection_points"), log = try gdb.table(named: "inspection_log")
        try await points.update([Feature(objectID: 1, attributes: ["notes": .string("local point edit")])])
        try await log.update([Feature(objectID: 1, attributes: ["note": .string("local log edit")])])
        let serverPoint = try #require(try await h.service.backend.features(layerID: 0, query: FeatureQuery(where: "objectid = 2")).first)
        let serverLog = try #require(try await h.service.backend.features(layerID: 3, query: FeatureQuery(where: "objectid = 2")).first)
        try await h.serverEdit(layer: 0, updates: [Feature(objectID: serverPoint.objectID, attributes: ["notes": .string("server point edit")])])
        try await h.serverEdit(layer: 3, updates: [Feature(objectID: serverLog.objectID, attributes: ["note": .string("server log edit")])])

        let parameters = SyncGeodatabaseParameters(layerOptions: [.init(layerID: 0, syncDirection: .upload), .init(layerID: 3, syncDirection: .download)])
        let results = try await h.sync(gdb, parameters)
        #expect(results.first { $0.layerId == 0 }?.uploaded.updates == 1)
        #expect(results.first { $0.layerId == 0 }?.downloaded.total == 0)
        #expect(results.first { $0.layerId == 3 }?.uploaded.total == 0)
        #expect(results.first { $0.layerId == 3 }?.downloaded.updates == 1)
        #expect(try await points.feature(globalID: serverPoint.globalID!)?.attributes["notes"] != .string("server point edit"), "layer 0 did not download")
        #expect(try await log.feature(globalID: serverLog.globalID!)?.attributes["note"] == .string("server log edit"))
        #expect(try await log.pendingChanges().updates == 1, "layer 3 did not upload")
        let state = try #require(try await gdb.read { try $0.replicaState() })
        #expect(state.cursor(forLayer: 3) > state.cursor(forLayer: 0), "each layer has its own generation")

        try await h.sync(gdb)
        try await h.expectConverged(gdb, table: "inspection_points", layerID: 0)
        try await h.expectConverged(gdb, table: "inspection_log", layerID: 3)
        try await h.stop()
    }

    @Test(.scaledTimeLimit(minutes: 2), arguments: BackendKind.syncing)
    func anUnregisteredReplicaKeepsItsEdits(kind: BackendKind) async throws {
        let h = try await SyncHarness.start(kind)
        let a = try await h.replica("a", layers: [0]), b = try await h.replica("b", layers: [0])
        try await a.table(named: "inspection_points").update([Feature(objectID: 1, attributes: ["notes": .string("a")])])
        try await h.task().unregisterGeodatabase(a)
        let error = await #expect(throws: JobError.self) { try await h.sync(a) }
        #expect(error?.syncErrorCode == .notRegistered)
        #expect(try await a.table(named: "inspection_points").pendingChanges().updates == 1, "the local edit stays")

        // Unregistered on the server by someone else (ArcGIS unRegisterReplica with *).
        try await b.table(named: "inspection_points").update([Feature(objectID: 1, attributes: ["notes": .string("b")])])
        try await (h.service.backend as! any SyncBackend).unregisterReplica(id: try #require(try await b.read { try $0.replicaState()?.replicaID }))
        let error2 = await #expect(throws: JobError.self) { try await h.sync(b) }
        #expect(error2?.syncErrorCode == .notRegistered, "\(String(describing: error2))")
        #expect(try await b.table(named: "inspection_points").pendingChanges().updates == 1)
        try await h.stop()
    }

    /// A sync job paused mid-download is saved as JSON, rebuilt, and finishes.
    @Test(.scaledTimeLimit(minutes: 2), arguments: BackendKind.syncing)
    func aPausedSyncJobResumesFromJSON(kind: BackendKind) async throws {
        let h = try await SyncHarness.start(kind)
        let gdb = try await h.replica()
        try await Scenario.edit(h, gdb)
        let task = try h.task()
        let faults = FaultInjector()
        let job = task.makeSyncGeodatabaseJob(parameters: SyncGeodatabaseParameters(applyWhileDownloadingUpTo: 0), geodatabase: gdb, faults: faults)
        faults.onReach("client.afterStage") { try? job.pause() }
        let updates = job.statusUpdates
        try job.start()
        for await status in updates where status == .paused || status.isFinished { break }
        #expect(job.status == .paused)
        let json = try job.toJSON()
        let snapshot = try JobSnapshot.decode(json)
        #expect(snapshot.currentStep == 1, "paused in the download step")

        var environment = SyncJobEnvironment()
        environment.faults = FaultInjector()
        var registry = JobRegistry.withSyncJobs(environment: environment)
        registry.environment[Geodatabase.self] = gdb
        let rebuilt = try registry.makeJob(from: snapshot)
        #expect(rebuilt.status == .paused)
        try rebuilt.start()
        #expect(await rebuilt.waitUntilFinished() == .succeeded)
        try await h.expectConverged(gdb, table: "inspection_points", layerID: 0)
        try await h.stop()
    }

    /// A download rewrites a feature's geometry (and so its R-tree entry) only when the server
    /// changed it: an attribute edit leaves the geometry column alone.
    @Test(.scaledTimeLimit(minutes: 2), arguments: BackendKind.syncing)
    func unchangedGeometriesAreNotRewritten(kind: BackendKind) async throws {
        let h = try await SyncHarness.start(kind)
        let gdb = try await h.replica("geometry-writes", layers: [0])
        try await gdb.write { conn in
            try conn.execute("CREATE TABLE geometry_writes (fid INTEGER)")
            try conn.execute(
                "CREATE TRIGGER count_geometry_writes AFTER UPDATE OF geom ON inspection_points BEGIN INSERT INTO geometry_writes VALUES (NEW.objectid); END")
        }
        func writes() async throws -> Int64 {
            try await gdb.read { conn in try conn.query("SELECT count(*) FROM geometry_writes").first?[0].integerValue ?? -1 }
        }
        let features = try await h.service.backend.features(layerID: 0, query: FeatureQuery(where: "objectid > 0")).prefix(2).map { $0 }
        let status: FieldValue = features[0].attributes["status"] == .string("closed") ? .string("open") : .string("closed")
        try await h.serverEdit(layer: 0, updates: [Feature(objectID: features[0].objectID, attributes: ["status": status])])
        try await h.sync(gdb)
        #expect(try await SyncHarness.localRows(gdb, "inspection_points")[features[0].globalID!]?.attributes["status"] == status)
        #expect(try await writes() == 0, "an attribute edit does not touch the geometry")
        try await h.serverEdit(layer: 0, updates: [Feature(objectID: features[1].objectID, geometry: try point(-122.66, 45.51))])
        try await h.sync(gdb)
        #expect(try await writes() == 1, "a moved feature is written once")
        #expect(try await SyncHarness.localRows(gdb, "inspection_points")[features[1].globalID!]?.geometry == (try point(-122.66, 45.51)))
        try await h.expectConverged(gdb, table: "inspection_points", layerID: 0)
        try await h.stop()
    }

    /// A download the server counts at no more than the limit is applied while its pages arrive;
    /// a larger one is staged first. Both end in the same state, and a failure after some pages
    /// of a direct download were applied leaves the replica as it was (one transaction, cursor
    /// unchanged), the next sync finishing it.
    @Test(.scaledTimeLimit(minutes: 3), arguments: BackendKind.syncing)
    func smallDownloadsApplyWhileArrivingLargeOnesStage(kind: BackendKind) async throws {
        let h = try await SyncHarness.start(kind)
        let direct = try await h.replica("direct", layers: [0])
        let staged = try await h.replica("staged", layers: [0])
        let interrupted = try await h.replica("interrupted", layers: [0])
        // 1,200 new features: two pages of the feed.
        let adds = try (0..<1200).map { i in
            Feature(
                attributes: ["asset_id": .string("MODE-\(i)"), "asset_type": .string("valve"), "status": .string("open")],
                geometry: .point(try Point(x: -122.7 + Double(i) * 1e-5, y: 45.5)))
        }
        try await h.serverEdit(layer: 0, adds: adds)
        func run(_ gdb: Geodatabase, _ parameters: SyncGeodatabaseParameters, faults: FaultInjector = FaultInjector()) async throws -> [String] {
            let job = try h.task().makeSyncGeodatabaseJob(parameters: parameters, geodatabase: gdb, faults: faults)
            try job.start()
            _ = try await job.output
            return job.messages.map(\.text)
        }
        let directLog = try await run(direct, SyncGeodatabaseParameters())
        #expect(directLog.contains { $0.contains("while downloading") } && !directLog.contains { $0.hasPrefix("staged") }, "\(directLog)")
        let stagedLog = try await run(staged, SyncGeodatabaseParameters(applyWhileDownloadingUpTo: 1000))
        #expect(stagedLog.contains { $0.hasPrefix("staged 1200 changes") } && !stagedLog.contains { $0.contains("while downloading") }, "\(stagedLog)")
        try await h.expectConverged(direct, table: "inspection_points", layerID: 0)
        try await h.expectConverged(staged, table: "inspection_points", layerID: 0)
        #expect(try await SyncHarness.localRows(direct, "inspection_points") == SyncHarness.localRows(staged, "inspection_points"))

        let before = try await SyncHarness.localRows(interrupted, "inspection_points")
        let cursor = try await interrupted.read { try $0.replicaState()!.cursor }
        let faults = FaultInjector()
        // It fails once the first page was applied, while the second is fetched.
        faults.arm("client.afterPageApplied")
        await #expect(throws: (any Error).self) { _ = try await run(interrupted, SyncGeodatabaseParameters(attempts: 1), faults: faults) }
        #expect(try await SyncHarness.localRows(interrupted, "inspection_points") == before, "nothing of the failed download stays")
        #expect(try await interrupted.read { try $0.replicaState()!.cursor } == cursor, "I6: the cursor did not move")
        _ = try await run(interrupted, SyncGeodatabaseParameters())
        try await h.expectConverged(interrupted, table: "inspection_points", layerID: 0)
        try await h.stop()
    }

    /// A download of several pages applied while they arrive, onto a replica with a local edit
    /// pending (a download-only sync): the edited column keeps its local value, the rest of the
    /// server's change is written, and everything else equals the same download staged first.
    @Test(.scaledTimeLimit(minutes: 3), arguments: BackendKind.syncing)
    func aPagedDownloadLeavesPendingLocalColumnsAlone(kind: BackendKind) async throws {
        let h = try await SyncHarness.start(kind)
        let crew = try await h.replica("crew", layers: [0])
        let staged = try await h.replica("staged", layers: [0])
        let four = try #require(try await crew.table(named: "inspection_points").feature(objectID: 4))
        try await crew.table(named: "inspection_points").update([Feature(objectID: 4, attributes: ["notes": .string("crew")])])
        var byGlobalID = FeatureQuery()
        byGlobalID.globalIDs = [four.globalID!]
        let serverFour = try #require(try await h.service.backend.features(layerID: 0, query: byGlobalID).first)
        let serverTwo = try #require(try await h.service.backend.features(layerID: 0, query: FeatureQuery(where: "objectid = 2")).first)
        let moved = Geometry.point(try Point(x: -122.61, y: 45.49))
        // 1,200 new features (two pages of the feed), an attribute and geometry update of the
        // feature edited locally, and a moved one.
        let adds = try (0..<1200).map { i in
            Feature(
                attributes: ["asset_id": .string("PAGED-\(i)"), "asset_type": .string("valve"), "status": .string("open"), "inspected_at": .date(Date(timeIntervalSince1970: 1_700_000_000 + Double(i)))],
                geometry: .point(try Point(x: -122.7 + Double(i) * 1e-5, y: 45.5)))
        }
        try await h.serverEdit(
            layer: 0, adds: adds,
            updates: [
                Feature(objectID: serverFour.objectID, attributes: ["notes": .string("office"), "status": .string("closed")], geometry: moved),
                Feature(objectID: serverTwo.objectID, geometry: moved),
            ])
        // Downloads only: the crew's edit stays pending while the pages apply.
        let job = try h.task().makeSyncGeodatabaseJob(
            parameters: SyncGeodatabaseParameters(geodatabaseSyncDirection: .download), geodatabase: crew, faults: FaultInjector())
        try job.start()
        _ = try await job.output
        #expect(job.messages.contains { $0.text.contains("while downloading") }, "\(job.messages.map(\.text))")
        let local = try await SyncHarness.localRows(crew, "inspection_points")
        let mine = try #require(local[four.globalID!])
        #expect(mine.attributes["notes"] == .string("crew"), "the pending local column is left alone")
        #expect(mine.attributes["status"] == .string("closed") && mine.geometry == moved, "the rest of the server's change is written")

        // The same download, staged first.
        _ = try await h.sync(staged, SyncGeodatabaseParameters(applyWhileDownloadingUpTo: 1000))
        var expected = try await SyncHarness.localRows(staged, "inspection_points")
        #expect(expected.count == local.count && expected[serverTwo.globalID!]?.geometry == moved)
        expected[four.globalID!]?.attributes["notes"] = .string("crew")
        #expect(local == expected)
        try await h.stop()
    }

    /// Every step of a sync holds the replica's WAL checkpoints back (docs/sync.md, "WAL"), and
    /// the hold ends with the job, whether it succeeds or fails.
    @Test(.scaledTimeLimit(minutes: 2))
    func aSyncHoldsTheReplicasCheckpointsUntilItEnds() async throws {
        let h = try await SyncHarness.start(.sqlite)
        let gdb = try await h.replica("a", layers: [0])
        let checkpointer = try #require(gdb.checkpointer)
        let deferred = Locked<[String: Bool]>([:])
        func watching(_ faults: FaultInjector) -> FaultInjector {
            for point in ["client.afterSeal", "client.afterAck", "client.afterApply"] {
                faults.onReach(point) { deferred.withLock { $0[point] = checkpointer.isDeferred } }
            }
            return faults
        }
        try await gdb.table(named: "inspection_points").update([Feature(objectID: 1, attributes: ["notes": .string("crew")])])
        _ = try await h.serverEdit(layer: 0, updates: [Feature(objectID: 2, attributes: ["notes": .string("office")])])
        let job = try h.task().makeSyncGeodatabaseJob(parameters: SyncGeodatabaseParameters(), geodatabase: gdb, faults: watching(FaultInjector()))
        try job.start()
        #expect(try await job.output.first?.checksumMatches == true)
        #expect(deferred.withLock { $0 } == ["client.afterSeal": true, "client.afterAck": true, "client.afterApply": true])
        #expect(!checkpointer.isDeferred, "the hold ended with the job")

        // A job that fails in its download ends the hold too.
        _ = try await h.serverEdit(layer: 0, updates: [Feature(objectID: 3, attributes: ["notes": .string("office again")])])
        let failing = FaultInjector()
        failing.arm("client.afterApply")
        let failed = try h.task().makeSyncGeodatabaseJob(parameters: SyncGeodatabaseParameters(), geodatabase: gdb, faults: watching(failing))
        try failed.start()
        await #expect(throws: (any Error).self) { _ = try await failed.output }
        #expect(!checkpointer.isDeferred, "the hold ended with the failed job")
        try await h.stop()
    }

    /// Once the last batch is answered, the download's first requests go out while the replica
    /// acknowledges it (DownloadAhead), and the download takes them. Their window ends at the
    /// generation the service had then: a server edit made after them comes with the next sync.
    /// Pages asked from another cursor are not used, and a job that fails before its download
    /// holds nothing.
    @Test(.scaledTimeLimit(minutes: 2), arguments: BackendKind.syncing)
    func theDownloadsFirstRequestsGoOutWhileTheLastBatchIsAcknowledged(kind: BackendKind) async throws {
        let h = try await SyncHarness.start(kind)
        let gdb = try await h.replica("a", layers: [0])
        let points = try gdb.table(named: "inspection_points")
        func notes(_ gdb: Geodatabase, _ objectID: Int64) async throws -> String? {
            try await gdb.table(named: "inspection_points").features(matching: FeatureQuery(where: "objectid = \(objectID)")).first?.attributes["notes"]?.stringValue
        }

        // An upload, and another's change to bring down: the download starts from the requests
        // made while the batch was acknowledged.
        try await points.update([Feature(objectID: 1, attributes: ["notes": .string("crew")])])
        _ = try await h.serverEdit(layer: 0, updates: [Feature(objectID: 2, attributes: ["notes": .string("office")])])
        let job = try h.task().makeSyncGeodatabaseJob(parameters: SyncGeodatabaseParameters(), geodatabase: gdb, faults: FaultInjector())
        try job.start()
        let first = try #require(try await job.output.first { $0.layerId == 0 })
        let log = job.messages.map(\.text)
        #expect(log.contains("the download's first requests went out while the last batch was acknowledged"), "\(log)")
        #expect(first.uploaded.updates == 1 && first.downloaded.updates == 1 && first.checksumMatches == true)
        #expect(try await notes(gdb, 2) == "office")
        #expect(!DownloadAhead.shared.holds(job: job.id))

        // Requests made, then a server edit: the download applies the window they fixed; the
        // verify, finding the server past it, fetches the layer again (as when an edit lands
        // during any download), so nothing is missed.
        let state = try #require(try await gdb.read { try $0.replicaState() })
        _ = try await h.serverEdit(layer: 0, updates: [Feature(objectID: 3, attributes: ["notes": .string("before")])])
        let client = NativeSyncClient(try ServiceConnection(featureServerURL: h.url), replicaID: state.replicaID)
        let info = try await client.replicaInfo()
        let upto = try #require(info["serviceGeneration"]?.integerValue)
        let since = state.cursor(forLayer: 0)
        let page = try await client.changes(layer: 0, since: since, upto: upto, after: nil, countUpTo: 50_000)
        _ = try await h.serverEdit(layer: 0, updates: [Feature(objectID: 4, attributes: ["notes": .string("after")])])
        let held = try h.task().makeSyncGeodatabaseJob(parameters: SyncGeodatabaseParameters(), geodatabase: gdb, faults: FaultInjector())
        DownloadAhead.shared.start(job: held.id) { DownloadAhead.Start(info: info, firstPages: [0: (since, page)]) }
        try held.start()
        let second = try #require(try await held.output.first { $0.layerId == 0 })
        let heldLog = held.messages.map(\.text)
        #expect(heldLog.contains("applied 1 changes of inspection_points while downloading them"), "the edit before the requests only: \(heldLog)")
        #expect(second.refetched && second.checksumMatches == true)
        #expect(try await notes(gdb, 3) == "before")
        #expect(try await notes(gdb, 4) == "after")
        let third = try #require(try await h.sync(gdb).first { $0.layerId == 0 })
        #expect(!third.refetched && third.checksumMatches == true)

        // Pages asked from another cursor: the download asks for its own.
        _ = try await h.serverEdit(layer: 0, updates: [Feature(objectID: 5, attributes: ["notes": .string("office again")])])
        let stale = try await client.changes(layer: 0, since: since, upto: try #require(try await client.replicaInfo()["serviceGeneration"]?.integerValue), after: nil, countUpTo: 50_000)
        let other = try h.task().makeSyncGeodatabaseJob(parameters: SyncGeodatabaseParameters(), geodatabase: gdb, faults: FaultInjector())
        let fresh = try await client.replicaInfo()
        DownloadAhead.shared.start(job: other.id) { DownloadAhead.Start(info: fresh, firstPages: [0: (since, stale)]) }
        try other.start()
        let fourth = try #require(try await other.output.first { $0.layerId == 0 })
        #expect(fourth.downloaded.updates == 1 && fourth.checksumMatches == true, "only the change after the replica's cursor")
        #expect(try await notes(gdb, 5) == "office again")

        // A job that fails after its acknowledgement ends without a start held.
        try await points.update([Feature(objectID: 6, attributes: ["notes": .string("crew again")])])
        let faults = FaultInjector()
        faults.arm("client.afterAck")
        let failed = try h.task().makeSyncGeodatabaseJob(parameters: SyncGeodatabaseParameters(), geodatabase: gdb, faults: faults)
        try failed.start()
        await #expect(throws: (any Error).self) { _ = try await failed.output }
        #expect(!DownloadAhead.shared.holds(job: failed.id))
        try await h.stop()
    }

    /// A sync that verifies whole layers computes the replica's checksums while the server
    /// applies the last batch, and asks for the server's as soon as it answers. They are used
    /// only while they describe the replica: not for a layer the download changed, nor for one
    /// edited meanwhile.
    @Test(.scaledTimeLimit(minutes: 2), arguments: BackendKind.syncing)
    func checksumsMadeAheadAreUsedOnlyWhileTheyHold(kind: BackendKind) async throws {
        let h = try await SyncHarness.start(kind)
        let points = { (gdb: Geodatabase) throws -> FeatureTable in try gdb.table(named: "inspection_points") }
        func run(_ gdb: Geodatabase, faults: FaultInjector = FaultInjector()) async throws -> (SyncLayerResult?, [String]) {
            let job = try h.task().makeSyncGeodatabaseJob(parameters: SyncGeodatabaseParameters(), geodatabase: gdb, faults: faults)
            try job.start()
            let results = try await job.output
            return (results.first { $0.layerId == 0 }, job.messages.map(\.text))
        }

        // A fresh replica (never verified: whole layers) uploads; nothing comes down.
        let a = try await h.replica("a", layers: [0])
        try await points(a).update([Feature(objectID: 1, attributes: ["notes": .string("crew a")])])
        let (first, firstLog) = try await run(a)
        #expect(first?.checksumMatches == true && first?.refetched == false)
        #expect(firstLog.contains("checksums made ahead: 1 of the replica's layers, the server's"), "\(firstLog)")

        // The download brings another's change: the replica's checksum is computed again.
        let b = try await h.replica("b", layers: [0])
        try await points(b).update([Feature(objectID: 2, attributes: ["notes": .string("crew b")])])
        // A feature far along the object ids: the layer is hashed in two halves at once.
        try await b.write { conn in
            try conn.execute("INSERT INTO inspection_points (objectid, asset_id, asset_type, condition, status, geom) SELECT 90000, 'FAR', asset_type, condition, status, geom FROM inspection_points WHERE objectid = 1")
        }
        let serverThree = try #require(try await h.service.backend.features(layerID: 0, query: FeatureQuery(where: "objectid = 3")).first)
        _ = try await h.serverEdit(layer: 0, updates: [Feature(objectID: serverThree.objectID, attributes: ["notes": .string("office")])])
        let (second, secondLog) = try await run(b)
        #expect(second?.downloaded.updates == 1, "the office's")
        #expect(second?.checksumMatches == true && second?.refetched == false, "a stale checksum would have differed and refetched")
        #expect(secondLog.contains("checksums made ahead: 0 of the replica's layers, the server's"), "\(secondLog)")
        let job = SyncGeodatabaseJob(parameters: SyncGeodatabaseParameters(), geodatabase: b)
        let layer = try #require(try await b.read { conn in try conn.replicaState() }?.layers.first { $0.id == 0 })
        let halves = try await job.wholeChecksum(layer, useStored: false)?.sum
        let whole = try await b.read { conn in try conn.geodatabase.table(named: "inspection_points").checksum(matching: .all, in: conn) }
        #expect(halves != nil && halves?.hex == whole.hex && halves?.count == whole.count && whole.count > 2)

        // An edit after the upload (during the download): pending at the verify, checked next time.
        let c = try await h.replica("c", layers: [0])
        try await points(c).update([Feature(objectID: 4, attributes: ["notes": .string("crew c")])])
        let faults = FaultInjector(), late = try points(c)
        faults.onReach("client.afterApply") {
            #expect(throws: Never.self) { try c.write { conn in try late.update([Feature(objectID: 5, attributes: ["notes": .string("late")])], in: conn) } }
        }
        let (third, thirdLog) = try await run(c, faults: faults)
        #expect(third?.checksumMatches == nil && third?.refetched == false, "\(thirdLog)")
        let (fourth, _) = try await run(c)
        #expect(fourth?.uploaded.updates == 1 && fourth?.checksumMatches == true)
        try await h.stop()
    }
}

/// What a fault closure saw of a sealed batch.
private final class SealedEncoding: @unchecked Sendable {
    private let lock = NSLock()
    private var seen: UploadBatch.Encoding?
    var value: UploadBatch.Encoding? {
        get { lock.withLock { seen } }
        set { lock.withLock { seen = newValue } }
    }
}
