import Foundation
import HTTPTypes
import HummingbirdTesting
import OutpostCore
import OutpostProtocol
@testable import OutpostSQLiteService
import OutpostStorage
@testable import OutpostSyncService
import OutpostTestSupport
import OutpostServiceTestSupport
import Testing

@testable import OutpostServer

let native = "/outpost/v1/services/field_inspection"

/// Registers a replica of every layer directly on the backend (its file is not needed here).
func registerReplica(_ service: TestService, layers: [Int] = [0, 1, 2, 3]) async throws -> ReplicaInfo {
    let sync = service.backend as! any SyncBackend
    return try await sync.createReplica(
        ReplicaRequest(name: "test", layers: layers.map { .init(id: $0, serverGen: 0, syncDirection: .bidirectional) }),
        serviceURL: "http://127.0.0.1/arcgis/rest/services/field_inspection/FeatureServer", format: .geopackage,
        writingTo: service.directory.file("replica-\(UUID().uuidString).gpkg"))
}

func batch(_ info: ReplicaInfo, seq: Int64, _ edits: [BatchEdit], layer: Int = 0, rollback: Bool = true, as encoding: UploadBatch.Encoding = .json) throws -> Data {
    try UploadBatch(replicaId: info.replicaID, batchId: GlobalID.make(), seq: seq, schemaVersion: 1, rollbackOnFailure: rollback, layers: [BatchLayer(id: layer, edits: edits)])
        .encoded(as: encoding)
}

let newGID = "{0C0C0C0C-0000-4000-8000-000000000001}"

func insertEdit(_ gid: String = newGID, assetType: String = "valve") -> BatchEdit {
    BatchEdit(op: .insert, globalId: gid, attributes: ["asset_id": "B-1", "asset_type": .string(assetType), "status": "open"], geometry: ["x": -122.65, "y": 45.52])
}

@Suite("Native batch API: exactly once (I3, I4)")
struct NativeSyncEndpointTests {
    /// In both batch encodings, which a server lists in its replica info (with the framed one,
    /// FramedBatchTests and StreamedBatchTests).
    @Test(arguments: BackendKind.syncing, [UploadBatch.Encoding.json, .binary])
    func batchesApplyOnceInOrder(kind: BackendKind, encoding: UploadBatch.Encoding) async throws {
        try await withServer(kind) { client, service in
            let info = try await registerReplica(service)
            let listed = try await client.get("\(native)/replicas/\(q(info.replicaID))").json()["batchEncodings"]
            #expect(listed == ["json", "binary", "binary-framed", "binary-gpkg-geometry"])
            let uri = "\(native)/replicas/\(q(info.replicaID))/batches"
            func batch(_ info: ReplicaInfo, seq: Int64, _ edits: [BatchEdit], rollback: Bool = true) throws -> Data {
                try OutpostServerTests.batch(info, seq: seq, edits, rollback: rollback, as: encoding)
            }
            let first = try batch(info, seq: 1, [insertEdit()])
            #expect(UploadBatch.Encoding(of: first) == encoding)
            let applied = try await client.put("\(uri)/1", json: first)
            #expect(applied.status == 200, "\(applied.text)")
            let result = try JSONDecoder().decode(BatchResult.self, from: Data(applied.text.utf8))
            #expect(result.layers.first?.results.first?.success == true)
            #expect(result.replayed == nil)
            let generation = try await service.backend.generation()
            #expect(result.generation == generation)

            // The same bytes again: the stored answer, nothing applied.
            let replay = try await client.put("\(uri)/1", json: first)
            #expect(replay.status == 200)
            #expect(try JSONDecoder().decode(BatchResult.self, from: Data(replay.text.utf8)).replayed == true)
            #expect(try await service.backend.generation() == generation)
            #expect(try await service.backend.count(layerID: 0, query: FeatureQuery(where: "asset_id = 'B-1'")) == 1)
            #expect(try await client.get("\(uri)/1").status == 200, "a lost answer can be fetched")

            // Other content under the same number, and a gap: 409 with the expected number.
            let other = try await client.put("\(uri)/1", json: try batch(info, seq: 1, [insertEdit("{0C0C0C0C-0000-4000-8000-000000000002}")]))
            #expect(other.status == 409)
            #expect(other.errorMessage?.contains("different content") == true)
            let gap = try await client.put("\(uri)/3", json: try batch(info, seq: 3, [insertEdit("{0C0C0C0C-0000-4000-8000-000000000003}")]))
            #expect(gap.status == 409)
            #expect(gap.errorMessage?.contains("expects batch 2") == true, "\(gap.text)")

            // Rollback on failure: 422 with the per-edit results, nothing applied.
            let bad = try batch(info, seq: 2, [insertEdit("{0C0C0C0C-0000-4000-8000-000000000004}"), insertEdit("{0C0C0C0C-0000-4000-8000-000000000005}", assetType: "spaceship")])
            let rejected = try await client.put("\(uri)/2", json: bad)
            #expect(rejected.status == 422)
            let body = try rejected.json()
            #expect(body["error"]?["message"]?.stringValue?.contains("rolled back") == true)
            let results = try JSONDecoder().decode(BatchResult.self, from: Data(try #require(body["result"]).jsonString.utf8))
            #expect(results.rejected.map(\.globalId) == ["{0C0C0C0C-0000-4000-8000-000000000005}"])
            #expect(try await client.get("\(uri)/2").status == 404, "a rolled-back batch has no applied result")
            #expect(try await service.backend.generation() == generation)
            // The same bytes again: the kept answer, marked replayed, nothing applied.
            let again = try await client.put("\(uri)/2", json: bad)
            #expect(again.status == 422)
            let replayed = try JSONDecoder().decode(BatchResult.self, from: Data(try #require(try again.json()["result"]).jsonString.utf8))
            #expect(replayed.replayed == true && replayed.layers == results.layers)
            #expect(try await service.backend.generation() == generation)
            // Without rollback (other content under the rolled-back seq) the valid edit applies
            // and the batch counts; its answer replaces the kept one.
            let partialBody = try batch(info, seq: 2, [insertEdit("{0C0C0C0C-0000-4000-8000-000000000004}"), insertEdit("{0C0C0C0C-0000-4000-8000-000000000005}", assetType: "spaceship")], rollback: false)
            let partial = try await client.put("\(uri)/2", json: partialBody)
            #expect(partial.status == 200)
            #expect(try await service.backend.count(layerID: 0, query: FeatureQuery(where: "asset_id = 'B-1'")) == 2)
            #expect(try await client.get("\(uri)/2").status == 200)
            #expect(try await client.put("\(uri)/2", json: partialBody).status == 200)
            #expect(try await client.put("\(uri)/2", json: bad).status == 409, "the withdrawn batch is other content under an applied seq")
        }
    }

    /// Geometries as GeoPackage blobs (`binary-gpkg-geometry`, what a replica seals for a server
    /// that lists it) apply as their Esri JSON does, whatever spatial reference id their header
    /// holds (a batch's geometries are in the layer's, as in Esri JSON). A blob that is not a
    /// geometry, or a geometry of the wrong type, rejects its edit, naming why; with rollback
    /// nothing applies.
    @Test(arguments: BackendKind.syncing)
    func geometryBlobsApplyAsTheirEsriJSONDoes(kind: BackendKind) async throws {
        try await withServer(kind) { client, service in
            let info = try await registerReplica(service)
            let uri = "\(native)/replicas/\(q(info.replicaID))/batches"
            func withBlob(_ edit: BatchEdit, _ blob: [UInt8]) -> BatchEdit {
                var e = edit
                e.geometry = nil
                e.geometryBlob = blob
                return e
            }
            let point = try EsriJSON.decodeGeometry(["x": -122.64, "y": 45.53])
            let line = try EsriJSON.decodeGeometry(["paths": [[[-122.7, 45.5], [-122.69, 45.51], [-122.68, 45.5]]]])
            let pipe = try #require(try await service.backend.features(layerID: 1, query: FeatureQuery(where: "objectid = 1")).first)
            let moved = withBlob(
                BatchEdit(op: .update, globalId: pipe.globalID!, attributes: [:], changedColumns: ["geom"], baseGeneration: 0), GeoPackageBinary.encode(line, srsID: 77))
            let body = try UploadBatch(
                replicaId: info.replicaID, batchId: GlobalID.make(), seq: 1, schemaVersion: 1, rollbackOnFailure: true,
                layers: [BatchLayer(id: 0, edits: [withBlob(insertEdit(), GeoPackageBinary.encode(point, srsID: 4326))]), BatchLayer(id: 1, edits: [moved])]
            ).encoded(as: .binary)
            #expect(try UploadBatch.decode(body).hasGeometryBlobs)
            let applied = try await client.put("\(uri)/1", json: body)
            #expect(applied.status == 200, "\(applied.text)")
            let added = try await service.backend.features(layerID: 0, query: FeatureQuery(where: "asset_id = 'B-1'"))
            #expect(added.map(\.geometry) == [point])
            // (A polyline layer may keep a one-path line as a multi-line: the same Esri JSON.)
            let reshaped = try await service.backend.features(layerID: 1, query: FeatureQuery(where: "objectid = 1")).first?.geometry
            #expect(try reshaped.map(EsriJSON.value) == (try EsriJSON.value(line)))
            let generation = try await service.backend.generation()

            // Not a geometry (a damaged blob), and a line where points go: both edits named, nothing applied.
            var damaged = GeoPackageBinary.encode(point, srsID: 4326)
            damaged.removeLast(4)
            let bad = try OutpostServerTests.batch(
                info, seq: 2,
                [
                    withBlob(insertEdit("{0C0C0C0C-0000-4000-8000-0000000000B1}"), damaged),
                    withBlob(insertEdit("{0C0C0C0C-0000-4000-8000-0000000000B2}"), GeoPackageBinary.encode(line, srsID: 4326)),
                    withBlob(insertEdit("{0C0C0C0C-0000-4000-8000-0000000000B3}"), GeoPackageBinary.encode(point, srsID: 4326)),
                ], as: .binary)
            let rejected = try await client.put("\(uri)/2", json: bad)
            #expect(rejected.status == 422, "\(rejected.text)")
            let results = try JSONDecoder().decode(BatchResult.self, from: Data(try #require(try rejected.json()["result"]).jsonString.utf8))
            #expect(results.rejected.map(\.globalId) == ["{0C0C0C0C-0000-4000-8000-0000000000B1}", "{0C0C0C0C-0000-4000-8000-0000000000B2}"])
            #expect(results.rejected.first?.error?.description.contains("invalid geometry") == true, "\(results.rejected)")
            #expect(results.rejected.allSatisfy { $0.error?.code == EditResult.Code.invalidEdit })
            #expect(try await service.backend.generation() == generation)
            #expect(try await service.backend.count(layerID: 0, query: FeatureQuery(where: "asset_id = 'B-1'")) == 1)
        }
    }

    /// A batch without rollback that mixes updates, an insert followed by an update of the new
    /// feature, a rejected edit and a delete: the answer lists every edit in the batch's order
    /// with its object id, and only the rejected edit is left out.
    @Test(arguments: BackendKind.syncing)
    func aMixedBatchAnswersEditByEdit(kind: BackendKind) async throws {
        try await withServer(kind) { client, service in
            let info = try await registerReplica(service)
            let existing = try await service.backend.features(layerID: 0, query: FeatureQuery(limit: 4))
            #expect(existing.count == 4)
            let added = "{0C0C0C0C-0000-4000-8000-0000000000A1}"
            var edits = existing.prefix(2).enumerated().map { i, f in
                BatchEdit(op: .update, globalId: f.globalID!, attributes: ["asset_id": .string("R-\(i)")])
            }
            edits.append(insertEdit(added))
            edits.append(BatchEdit(op: .update, globalId: added, attributes: ["asset_id": "R-new"]))
            edits.append(BatchEdit(op: .update, globalId: existing[2].globalID!, attributes: ["asset_type": "spaceship"]))
            edits.append(BatchEdit(op: .delete, globalId: existing[3].globalID!))
            let answer = try await client.put("\(native)/replicas/\(q(info.replicaID))/batches/1", json: try batch(info, seq: 1, edits, rollback: false))
            #expect(answer.status == 200, "\(answer.text)")
            let results = try #require(try JSONDecoder().decode(BatchResult.self, from: Data(answer.text.utf8)).layers.first?.results)
            #expect(results.map(\.globalId) == edits.map(\.globalId))
            #expect(results.map(\.success) == [true, true, true, true, false, true])
            #expect(results[0].objectId == existing[0].objectID && results[1].objectId == existing[1].objectID)
            #expect(results[2].objectId != nil && results[3].objectId == results[2].objectId)
            func assetID(_ gid: String) async throws -> String? {
                var query = FeatureQuery()
                query.globalIDs = [gid]
                return try await service.backend.features(layerID: 0, query: query).first?.attributes["asset_id"]?.stringValue
            }
            #expect(try await assetID(existing[0].globalID!) == "R-0")
            #expect(try await assetID(existing[1].globalID!) == "R-1")
            #expect(try await assetID(added) == "R-new", "the update of a feature added in the batch follows its insert")
            #expect(try await assetID(existing[2].globalID!) == existing[2].attributes["asset_id"]?.stringValue)
            #expect(try await assetID(existing[3].globalID!) == nil)
        }
    }

    /// The same mixed batch asking for a compact answer, in both encodings: only the edit with
    /// something to say (the rejected one) is listed, the applied ones counted; the ledger keeps
    /// that form, so a resend and `GET …/batches/1` answer it too.
    @Test(arguments: BackendKind.syncing, [UploadBatch.Encoding.json, .binary])
    func aBatchAskingForACompactAnswerListsOnlyWhatSaysMore(kind: BackendKind, encoding: UploadBatch.Encoding) async throws {
        try await withServer(kind) { client, service in
            let info = try await registerReplica(service)
            let existing = try await service.backend.features(layerID: 0, query: FeatureQuery(limit: 4))
            let added = "{0C0C0C0C-0000-4000-8000-0000000000A2}"
            let edits = [
                BatchEdit(op: .update, globalId: existing[0].globalID!, attributes: ["asset_id": "C-0"]), insertEdit(added),
                BatchEdit(op: .update, globalId: added, attributes: ["asset_id": "C-new"]),
                BatchEdit(op: .update, globalId: existing[1].globalID!, attributes: ["asset_type": "spaceship"]),
                BatchEdit(op: .delete, globalId: existing[2].globalID!),
            ]
            var upload = UploadBatch(
                replicaId: info.replicaID, batchId: GlobalID.make(), seq: 1, schemaVersion: 1, rollbackOnFailure: false, layers: [BatchLayer(id: 0, edits: edits)])
            upload.compactAnswer = true
            let body = try upload.encoded(as: encoding)
            #expect(try UploadBatch.decode(body) == upload, "the request survives its encoding")
            let uri = "\(native)/replicas/\(q(info.replicaID))/batches/1"
            let answer = try await client.put(uri, json: body)
            #expect(answer.status == 200, "\(answer.text)")
            let result = try BatchResult(json: JSONValue.parse(Data(answer.text.utf8)))
            let layer = try #require(result.layers.first)
            #expect(layer.results.map(\.globalId) == [existing[1].globalID!])
            #expect(layer.results.first?.success == false && layer.results.first?.error != nil)
            #expect(layer.applied == BatchLayerResult.Applied(inserts: 1, updates: 2, deletes: 1))
            #expect(layer.succeeded(added) && layer.succeeded(existing[2].globalID!) && !layer.succeeded(existing[1].globalID!))
            #expect(try JSONDecoder().decode(BatchResult.self, from: Data(answer.text.utf8)) == result, "the generic decoder reads it the same")
            #expect(!answer.text.contains(added) && !answer.text.contains(existing[0].globalID!), "\(answer.text)")
            #expect(try await service.backend.count(layerID: 0, query: FeatureQuery(where: "asset_id IN ('C-0', 'C-new')")) == 2)

            let replay = try await client.put(uri, json: body)
            var replayed = try BatchResult(json: JSONValue.parse(Data(replay.text.utf8)))
            #expect(replayed.replayed == true)
            replayed.replayed = nil
            #expect(replayed == result, "a resend is answered in the form the batch asked for")
            #expect(try BatchResult(json: JSONValue.parse(Data(try await client.get(uri).text.utf8))).layers == result.layers)

            // Refused whole (rollback on failure): the 422's result still lists every edit.
            var refused = upload
            refused.seq = 2
            refused.batchId = GlobalID.make()
            refused.rollbackOnFailure = true
            let rejected = try await client.put("\(native)/replicas/\(q(info.replicaID))/batches/2", json: try refused.encoded(as: encoding))
            #expect(rejected.status == 422)
            let listed = try BatchResult(json: try #require(try rejected.json()["result"]))
            #expect(listed.layers.first?.results.count == edits.count && listed.layers.first?.applied == nil)
        }
    }

    @Test(arguments: BackendKind.syncing)
    func malformedRequestsGetClear4xx(kind: BackendKind) async throws {
        try await withServer(kind) { client, service in
            let info = try await registerReplica(service)
            let uri = "\(native)/replicas/\(q(info.replicaID))"
            let garbage = try await client.put("\(uri)/batches/1", json: Data("{not json".utf8))
            #expect(garbage.status == 400)
            #expect(garbage.errorMessage?.contains("body") == true)
            // A binary batch cut short (by a proxy, say) is refused whole, saying where it ends.
            let binary = try batch(info, seq: 1, [insertEdit()], as: .binary)
            let cut = try await client.put("\(uri)/batches/1", json: binary.prefix(binary.count - 3))
            #expect(cut.status == 400)
            #expect(cut.errorMessage?.contains("not an upload batch: the body ends") == true, "\(cut.text)")
            #expect(cut.errorMessage?.contains("(byte ") == true, "\(cut.text)")
            let missing = try await client.put("\(uri)/batches/1", json: Data(#"{"seq":1}"#.utf8))
            #expect(missing.status == 400)
            #expect(missing.errorMessage?.contains("missing") == true, "\(missing.text)")
            let wrongSeq = try await client.put("\(uri)/batches/2", json: try batch(info, seq: 1, [insertEdit()]))
            #expect(wrongSeq.status == 400)
            #expect(try await client.put("\(native)/replicas/%7B00000000-0000-4000-8000-000000000000%7D/batches/1", json: try batch(info, seq: 1, [insertEdit()])).status == 400)
            #expect(try await client.get("\(uri)/changes?layer=0").status == 400)
            #expect(try await client.get("\(uri)/changes?layer=0&since=5&upto=2").errorMessage?.contains("upto") == true)
            #expect(try await client.get("\(uri)/changes?layer=9&since=0&upto=0").status == 404)
            // A window past the service's generation: 400 naming the bound (docs/sync.md).
            #expect(try await client.get("\(uri)/changes?layer=0&since=0&upto=1000000").errorMessage?.contains("'upto'") == true)
            #expect(try await client.get("\(native)/replicas/%7B00000000-0000-4000-8000-000000000000%7D").status == 404)
            #expect(try await client.get("\(native.replacingOccurrences(of: "field_inspection", with: "nope"))/replicas").status == 404)
            #expect(try await client.post("\(uri)/checksums", [:]).status == 405)
        }
    }

    /// A createReplica job run again (its host stopped after registering the replica) names the
    /// replica it chose the first time: the store keeps the one registration, at the earlier
    /// run's generation (the lower: the change log is kept from there), instead of a second
    /// replica nobody holds. An id not in global-id form is refused.
    @Test(arguments: BackendKind.syncing)
    func aReplicaCreatedAgainUnderItsIDIsRegisteredOnce(kind: BackendKind) async throws {
        try await withServer(kind) { _, service in
            let sync = try #require(service.backend as? any SyncBackend)
            let before = try await sync.replicas().count
            var request = ReplicaRequest(name: "again", layers: [.init(id: 0, serverGen: 0, syncDirection: .bidirectional)])
            request.replicaID = GlobalID.make()
            let url = "http://127.0.0.1/arcgis/rest/services/field_inspection/FeatureServer"
            let first = try await sync.createReplica(request, serviceURL: url, format: .geopackage, writingTo: service.directory.file("again-1.gpkg"))
            // A commit between the runs: the second run's snapshot is a later generation.
            let other = try await registerReplica(service)
            let upload = UploadBatch(replicaId: other.replicaID, batchId: GlobalID.make(), seq: 1, schemaVersion: 1, rollbackOnFailure: true, layers: [
                BatchLayer(id: 0, edits: [insertEdit()])
            ])
            _ = try await sync.applyBatchAnswering(upload, hash: UploadBatch.hash(try upload.encoded()))
            let second = try await sync.createReplica(request, serviceURL: url, format: .geopackage, writingTo: service.directory.file("again-2.gpkg"))
            #expect(first.replicaID == request.replicaID && second.replicaID == request.replicaID)
            #expect(second.replicaServerGen > first.replicaServerGen)
            #expect(try await sync.replicas().count == before + 2, "the replica once, and the other one")
            #expect(try await sync.replica(id: first.replicaID).replicaServerGen == first.replicaServerGen)
            request.replicaID = "{not-a-guid}"
            await #expect(throws: SyncServiceError.self) {
                _ = try await sync.createReplica(request, serviceURL: url, format: .geopackage, writingTo: service.directory.file("again-3.gpkg"))
            }
        }
    }

    /// A service's writer keeps 64 MB of pages, twice a replica's 32 MB: a batch of 16,000 edits
    /// changes ~27 MB of pages, and they stay in the cache until its commit.
    @Test func aServiceWriterKeeps64MBOfPages() async throws {
        let service = try await TestService.fieldInspection(.sqlite)
        try await service.backend.close()
        let backend = try SQLiteServiceBackend(url: service.file)
        #expect(try await backend.geodatabase.write { conn in try conn.query("PRAGMA cache_size") } == [[.integer(-65536)]])
        let replica = try Geodatabase.open(at: service.file)
        #expect(try await replica.write { conn in try conn.query("PRAGMA cache_size") } == [[.integer(-32768)]])
        try replica.close()
        try await backend.close()
    }

    /// A store reads the time from the clock it was given: a replica's creation date and its
    /// last sync are the clock's, not the wall clock's.
    @Test func aStoreReadsTheTimeFromItsClock() async throws {
        let service = try await TestService.fieldInspection(.sqlite)
        try await service.backend.close()
        let start = Date(timeIntervalSince1970: 1_700_000_000)
        let later = Locked(start)
        let backend = try SQLiteServiceBackend(url: service.file, clock: ServiceClock { later.withLock { $0 } })
        let info = try await backend.createReplica(
            ReplicaRequest(name: "clocked", layers: [.init(id: 0, serverGen: 0, syncDirection: .bidirectional)]),
            serviceURL: "http://127.0.0.1/arcgis/rest/services/field_inspection/FeatureServer", format: .geopackage,
            writingTo: service.directory.file("clocked.gpkg"))
        #expect(info.creationDate == 1_700_000_000_000)
        later.withLock { $0 = start.addingTimeInterval(90) }
        let upload = UploadBatch(replicaId: info.replicaID, batchId: GlobalID.make(), seq: 1, schemaVersion: 1, rollbackOnFailure: true, layers: [
            BatchLayer(id: 0, edits: [insertEdit()])
        ])
        _ = try await backend.applyBatchAnswering(upload, hash: UploadBatch.hash(try upload.encoded()))
        #expect(try await backend.replica(id: info.replicaID).lastSyncDate == 1_700_000_090_000)
        // The change log's times too: a batch's, and an applyEdits request's a minute on.
        later.withLock { $0 = start.addingTimeInterval(150) }
        var edit = EditRequest()
        edit.adds = [Feature(attributes: ["asset_id": .string("B-2"), "asset_type": .string("valve"), "status": .string("open")], geometry: .point(try Point(x: -122.65, y: 45.53)))]
        _ = try await backend.applyEdits(layerID: 0, edits: edit, rollbackOnFailure: true)
        let times = try await backend.geodatabase.read { conn in
            try conn.query("SELECT DISTINCT changed_at FROM outpost_change_log ORDER BY changed_at").compactMap { $0[0].textValue }
        }
        #expect(times == ["2023-11-14T22:14:50.000Z", "2023-11-14T22:15:50.000Z"])
        try await backend.close()
    }

    /// The native route table (OutpostProtocol's `NativeSyncRoute`) is what the server serves:
    /// every route answers a method the table does not list with 405, not 404, and the paths the
    /// client builds from it are the ones the server routes.
    @Test func theNativeRouteTableIsWhatTheServerServes() async throws {
        #expect(NativeSyncRoute.batch.path("{A}", "3") == "replicas/{A}/batches/3")
        #expect(NativeSyncRoute.schema.path() == "schema")
        #expect(Set(NativeSyncRoute.allCases.map(\.pattern)).count == NativeSyncRoute.allCases.count)
        try await withServer(.sqlite) { client, service in
            let info = try await registerReplica(service)
            for route in NativeSyncRoute.allCases {
                let values = route.pattern.split(separator: "/").filter { $0.hasPrefix(":") }.map { name in
                    switch name {
                    case ":replica": info.replicaID
                    case ":seq": "1"
                    case ":sha256": String(repeating: "a", count: 64)
                    default: newGID
                    }
                }
                let uri = "\(native)/" + route.path(values).split(separator: "/").map { q(String($0)) }.joined(separator: "/")
                // A method no route of the table answers.
                let reply = route.methods.contains("DELETE") ? try await client.post(uri, [:]) : try await client.delete(uri)
                #expect(reply.status == 405, "\(route.pattern): \(reply.status) \(reply.text)")
            }
            // And a listed one reaches its handler: the replica the table's path names.
            let registered = try await client.get("\(native)/" + NativeSyncRoute.replica.path(q(info.replicaID)))
            #expect(registered.status == 200 && registered.text.contains(info.replicaID), "\(registered.text)")
        }
    }

    /// A replica's last batch may ask for its layers' checksums (`checksums=0,3`): the server
    /// computes them once the batch commits and answers the replica's next checksums request
    /// with them, once, and only while nothing was committed after; a malformed list is refused
    /// before anything is applied.
    @Test(arguments: BackendKind.syncing)
    func checksumsAskedWithABatchAnswerTheNextRequest(kind: BackendKind) async throws {
        try await withServer(kind) { client, service in
            let info = try await registerReplica(service)
            let uri = "\(native)/replicas/\(q(info.replicaID))"
            let sync = try #require(service.backend as? any SyncBackend)
            func sums() async throws -> ReplicaChecksums {
                try JSONDecoder().decode(ReplicaChecksums.self, from: Data(try await client.get("\(uri)/checksums?layers=0,3").text.utf8))
            }
            func answered(_ source: String) async throws -> Double {
                OperationsTests.value(try await OperationsTests.samples(try await client.get("/metrics").text), "outpost_sync_checksums_total", ["source": source])
            }
            let before = try await service.backend.generation()
            let bad = try await client.put("\(uri)/batches/1?checksums=zero", json: try batch(info, seq: 1, [insertEdit()]))
            #expect(bad.status == 400)
            #expect(bad.errorMessage?.contains("checksums") == true, "\(bad.text)")
            #expect(try await service.backend.generation() == before, "nothing applied")

            #expect(try await client.put("\(uri)/batches/1?checksums=0,3", json: try batch(info, seq: 1, [insertEdit()])).status == 200)
            let early = try await sums()
            #expect(early.generation == (try await service.backend.generation()) && early.generation > before)
            #expect(early == (try await sync.checksums(replicaID: info.replicaID, layerIDs: [0, 3])))
            #expect(early.layers[0].count == 301)
            #expect(try await answered("ahead") == 1)
            // Taken once: asked again at the same generation, the answer kept for its scope.
            #expect(try await sums() == early)
            #expect(try await answered("shared") == 1)
            #expect(try await answered("computed") == 0)

            // Another edit commits after the batch: the answer is of the generation now (made
            // afresh, or ahead when the computation started only after that commit).
            let second = try batch(info, seq: 2, [insertEdit("{0C0C0C0C-0000-4000-8000-000000000002}")])
            #expect(try await client.put("\(uri)/batches/2?checksums=0,3", json: second).status == 200)
            _ = try await service.backend.applyEdits(
                layerID: 0, edits: EditRequest(updates: [Feature(objectID: 1, attributes: ["notes": .string("office")])]), rollbackOnFailure: true)
            let later = try await sums()
            #expect(later.generation == (try await service.backend.generation()))
            #expect(later == (try await sync.checksums(replicaID: info.replicaID, layerIDs: [0, 3])))
            #expect(later.layers[0].count == 302 && later.layers[0].checksum != early.layers[0].checksum)
            let (aheadSoFar, computedSoFar) = (try await answered("ahead"), try await answered("computed"))
            #expect(aheadSoFar + computedSoFar == 2)
            // Asked for other layers than the batch named: not the entry made ahead (the answer
            // kept for these layers' scope at this generation instead).
            let ahead = try await answered("ahead")
            #expect(try await client.put("\(uri)/batches/2?checksums=0", json: second).status == 200, "a replay starts them too")
            #expect(try await sums() == later)
            #expect(try await answered("ahead") == ahead)
            #expect(try await answered("shared") == 2)
        }
    }

    /// A whole-scope answer is kept by scope: another replica holding the same features, asking
    /// at the same generation, gets it without the layers being hashed again; a replica of
    /// another scope (a filter, an area, other layers), or anyone after a commit, gets one computed.
    @Test(arguments: BackendKind.syncing)
    func checksumsOfOneScopeAreSharedAtOneGeneration(kind: BackendKind) async throws {
        try await withServer(kind) { client, service in
            let sync = try #require(service.backend as? any SyncBackend)
            let a = try await registerReplica(service), b = try await registerReplica(service)
            let open = try await sync.createReplica(
                ReplicaRequest(name: "open", layers: [.init(id: 0, serverGen: 0, syncDirection: .bidirectional, where: "status = 'open'")]),
                serviceURL: "http://127.0.0.1/arcgis/rest/services/field_inspection/FeatureServer", format: .geopackage,
                writingTo: service.directory.file("replica-open.gpkg"))
            func sums(_ info: ReplicaInfo, _ layers: String = "0,3") async throws -> ReplicaChecksums {
                try JSONDecoder().decode(
                    ReplicaChecksums.self, from: Data(try await client.get("\(native)/replicas/\(q(info.replicaID))/checksums?layers=\(layers)").text.utf8))
            }
            func answered(_ source: String) async throws -> Double {
                OperationsTests.value(try await OperationsTests.samples(try await client.get("/metrics").text), "outpost_sync_checksums_total", ["source": source])
            }
            let first = try await sums(a)
            #expect(try await sums(b) == first)
            #expect(try await answered("computed") == 1)
            #expect(try await answered("shared") == 1)
            #expect(first == (try await sync.checksums(replicaID: b.replicaID, layerIDs: [0, 3])))

            // Another filter: computed, and not the whole layer's.
            let filtered = try await sums(open, "0")
            #expect(filtered == (try await sync.checksums(replicaID: open.replicaID, layerIDs: [0])))
            #expect(filtered.layers[0].count < first.layers[0].count && filtered.layers[0].count > 0)
            // Another area, the same layers and filters: computed, and not the whole layer's.
            let area = try await sync.createReplica(
                ReplicaRequest(
                    name: "area", layers: [0, 1, 2, 3].map { .init(id: $0, serverGen: 0, syncDirection: .bidirectional) },
                    geometry: .polygon(Envelope(xmin: -123, ymin: 45, xmax: -122.65, ymax: 46).polygon)),
                serviceURL: "http://127.0.0.1/arcgis/rest/services/field_inspection/FeatureServer", format: .geopackage,
                writingTo: service.directory.file("replica-area.gpkg"))
            let inArea = try await sums(area)
            #expect(inArea == (try await sync.checksums(replicaID: area.replicaID, layerIDs: [0, 3])))
            #expect(inArea.layers[0].count > 0 && inArea.layers[0].count < first.layers[0].count)
            // Other layers of the same replicas: another scope too.
            #expect(try await sums(b, "0") == (try await sync.checksums(replicaID: b.replicaID, layerIDs: [0])))
            #expect(try await answered("computed") == 4)
            #expect(try await answered("shared") == 1)

            // A commit moves the generation: the kept answer is not used.
            _ = try await service.backend.applyEdits(
                layerID: 0, edits: EditRequest(updates: [Feature(objectID: 1, attributes: ["notes": .string("office")])]), rollbackOnFailure: true)
            let later = try await sums(b)
            #expect(later.generation > first.generation && later.layers[0].checksum != first.layers[0].checksum)
            #expect(later == (try await sync.checksums(replicaID: b.replicaID, layerIDs: [0, 3])))
            #expect(try await sums(a) == later)
            #expect(try await answered("computed") == 5)
            #expect(try await answered("shared") == 2)
        }
    }

    /// A layer whose object ids span 20,000 or more can be hashed in two halves on two readers
    /// (a server with four cores or more does); the answer is the one a single pass gives (the
    /// digest leaves the object id out, so moving the ids apart changes nothing but how the
    /// layer is cut).
    @Test func aLargeLayerIsHashedInHalvesToTheSameChecksum() async throws {
        let service = try await TestService.fieldInspection(.sqlite)
        let backend = try #require(service.backend as? SQLiteServiceBackend)
        let info = try await registerReplica(service)
        let whole = try await backend.checksums(replicaID: info.replicaID, layerIDs: [0, 1])
        let layer = try #require(backend.geodatabase.schema.layer(id: 0))
        let halves = try await backend.geodatabase.write { conn in
            let id = quotedIdentifier(layer.objectIDField)
            try conn.execute("UPDATE \(quotedIdentifier(layer.name)) SET \(id) = \(id) + 50000 WHERE \(id) > 100")
            return try conn.geodatabase.table(id: 0).checksumHalves(of: .all, in: conn)
        }
        #expect(halves?.0.throughObjectID == halves?.1.afterObjectID && halves?.0.throughObjectID != nil, "cut in two")
        let split = try await backend.checksums(replicaID: info.replicaID, layerIDs: [0, 1], since: nil, halving: true)
        #expect(split.layers == whole.layers)
        #expect(try await backend.checksums(replicaID: info.replicaID, layerIDs: [0, 1], since: nil, halving: false).layers == whole.layers)
        #expect(split.layers[0].count == 300)
        try await backend.close()
    }

    @Test(arguments: BackendKind.syncing)
    func theChangeFeedLeavesOutEchoesAndReportsLeaves(kind: BackendKind) async throws {
        try await withServer(kind) { client, service in
            let info = try await registerReplica(service)
            let start = info.replicaServerGen
            // This replica adds a feature; another user updates one and deletes one.
            #expect(try await client.put("\(native)/replicas/\(q(info.replicaID))/batches/1", json: try batch(info, seq: 1, [insertEdit()])).status == 200)
            let others = try await service.backend.features(layerID: 0, query: FeatureQuery(where: "objectid IN (1, 2)"))
            _ = try await service.backend.applyEdits(
                layerID: 0, edits: EditRequest(updates: [Feature(objectID: 1, attributes: ["notes": .string("office")])], deletes: [Feature(objectID: 2)]), rollbackOnFailure: true)
            let upto = try await service.backend.generation()
            let reply = try await client.get("\(native)/replicas/\(q(info.replicaID))/changes?layer=0&since=\(start)&upto=\(upto)")
            #expect(reply.status == 200)
            let page = try JSONDecoder().decode(ChangePage.self, from: Data(reply.text.utf8))
            #expect(page.changes.count == 2, "the replica's own insert is not echoed: \(page.changes.map(\.globalId))")
            #expect(page.changes.first { $0.globalId == others[0].globalID }?.attributes?["notes"] == .string("office"))
            #expect(page.changes.first { $0.globalId == others[1].globalID }?.kind == .leave)
            #expect(page.next == nil)
            // The same page in binary for a client that names it in Accept; both answers say
            // that they vary with it, so no cache hands one to the other.
            let binary = try await client.get(
                "\(native)/replicas/\(q(info.replicaID))/changes?layer=0&since=\(start)&upto=\(upto)",
                headers: [.accept: "\(ChangePage.binaryContentType), application/json"])
            #expect(binary.headers[.contentType] == ChangePage.binaryContentType)
            #expect(try ChangePage.decode(Data(buffer: binary.body)) == page)
            #expect(binary.headers[.vary] == "Accept" && reply.headers[.vary] == "Accept")
            // In the stored form for a client that names it first: the same changes, the
            // upserts' values as the service stores them.
            let storedReply = try await client.get(
                "\(native)/replicas/\(q(info.replicaID))/changes?layer=0&since=\(start)&upto=\(upto)",
                headers: [.accept: "\(ChangePage.storedContentType), \(ChangePage.binaryContentType), application/json"])
            let storedPage = try ChangePage.decode(Data(buffer: storedReply.body))
            let upserts = page.changes.filter { $0.kind == .upsert }
            #expect(!upserts.isEmpty)
            #expect(storedPage.changes.map(\.globalId) == page.changes.map(\.globalId) && storedPage.changes.map(\.generation) == page.changes.map(\.generation))
            #expect(storedReply.headers[.contentType] == (kind == .sqlite ? ChangePage.storedContentType : ChangePage.binaryContentType))
            if kind == .sqlite {
                for (s, j) in zip(storedPage.changes, page.changes) where j.kind == .upsert {
                    let row = try #require(s.stored)
                    #expect(s.attributes == nil && row.columns.names.contains("notes"))
                    let notes = row.values[row.columns.names.firstIndex(of: "notes")!]
                    #expect(notes == (j.attributes?["notes"]?.stringValue).map(StoredValue.text) ?? .null)
                }
            } else {
                #expect(storedPage == page, "a store without the stored form answers the first layout")
            }

            // Paging: one change per page, in global id order.
            var after: String?
            var seen: [String] = []
            repeat {
                let p = try JSONDecoder().decode(
                    ChangePage.self, from: Data(try await client.get("\(native)/replicas/\(q(info.replicaID))/changes?layer=0&since=\(start)&upto=\(upto)&limit=1\(after.map { "&after=\(q($0))" } ?? "")").text.utf8))
                seen += p.changes.map(\.globalId)
                after = p.next
            } while after != nil
            #expect(seen == page.changes.map(\.globalId).sorted())
            // A first page asked with count says how many log rows the window holds (the
            // replica's own insert too), unless it is also the last; a count past the cap is a 400.
            let counted = try JSONDecoder().decode(
                ChangePage.self, from: Data(try await client.get("\(native)/replicas/\(q(info.replicaID))/changes?layer=0&since=\(start)&upto=\(upto)&limit=1&count=50").text.utf8))
            #expect(counted.windowRows == 3 && counted.next != nil)
            #expect(page.windowRows == nil)
            let capped = try JSONDecoder().decode(
                ChangePage.self, from: Data(try await client.get("\(native)/replicas/\(q(info.replicaID))/changes?layer=0&since=\(start)&upto=\(upto)&limit=1&count=1").text.utf8))
            #expect(capped.windowRows == 2, "counted no further than count + 1")
            #expect(try await client.get("\(native)/replicas/\(q(info.replicaID))/changes?layer=0&since=\(start)&upto=\(upto)&count=2000000").status == 400)
            let sums = try JSONDecoder().decode(ReplicaChecksums.self, from: Data(try await client.get("\(native)/replicas/\(q(info.replicaID))/checksums?layers=0,3").text.utf8))
            #expect(sums.layers.map(\.id) == [0, 3])
            #expect(sums.layers[0].count == 300)
            // Unregistering removes it.
            #expect(try await client.delete("\(native)/replicas/\(q(info.replicaID))").status == 200)
            #expect(try await client.get("\(native)/replicas/\(q(info.replicaID))").status == 404)
        }
    }

    /// A page after a window's first is made while the page before it is answered, and the
    /// request for it gets that page: the same page a request made then gets, in the encoding
    /// it was made for, taken once. Another encoding, another page size or another replica asking
    /// with the same cursor gets a page made when asked.
    @Test(arguments: BackendKind.syncing)
    func feedPagesAreMadeAheadForTheRequestThatFollows(kind: BackendKind) async throws {
        try await withServer(kind) { client, service in
            let info = try await registerReplica(service), other = try await registerReplica(service)
            let start = info.replicaServerGen
            _ = try await service.backend.applyEdits(
                layerID: 0, edits: EditRequest(updates: (1...5).map { Feature(objectID: Int64($0), attributes: ["notes": .string("ahead \($0)")]) }),
                rollbackOnFailure: true)
            let upto = try await service.backend.generation()
            let binary: HTTPFields = [.accept: "\(ChangePage.binaryContentType), application/json"]
            func uri(_ replica: ReplicaInfo = info, after: String?, limit: Int = 2) -> String {
                "\(native)/replicas/\(q(replica.replicaID))/changes?layer=0&since=\(start)&upto=\(upto)&limit=\(limit)\(after.map { "&after=\(q($0))" } ?? "")"
            }
            func page(_ uri: String, headers: HTTPFields = binary) async throws -> ChangePage {
                let reply = try await client.get(uri, headers: headers)
                #expect(reply.status == 200, "\(reply.text)")
                return try ChangePage.decode(Data(buffer: reply.body))
            }
            func made(_ when: String) async throws -> Double {
                OperationsTests.value(try await OperationsTests.samples(try await client.get("/metrics").text), "outpost_sync_feed_pages_total", ["made": when])
            }
            var pages: [ChangePage] = [try await page(uri(after: nil))]
            while let next = pages.last?.next { pages.append(try await page(uri(after: next))) }
            #expect(pages.count == 3 && pages.map(\.changes.count) == [2, 2, 1], "\(pages.map(\.changes.count))")
            #expect(Set(pages.flatMap(\.changes).compactMap { $0.attributes?["notes"]?.stringValue }) == Set((1...5).map { "ahead \($0)" }))
            #expect(try await made("ahead") == 2)
            #expect(try await made("asked") == 0)
            // Nothing is held after the last page: asked again, each page is made when asked,
            // and is the page that was made ahead.
            let second = try await page(uri(after: pages[0].next))
            #expect(second == pages[1])
            #expect(try await made("asked") == 1)
            // That request made the third page ahead, for a binary answer of two changes to this
            // replica: asked as JSON, by another page size or by another replica, it is made anew.
            let json = try JSONDecoder().decode(ChangePage.self, from: Data(try await client.get(uri(after: pages[1].next)).text.utf8))
            #expect(json == pages[2])
            #expect(try await page(uri(after: pages[1].next, limit: 3)) == pages[2])
            let others = try await page(uri(other, after: pages[1].next))
            #expect(others.changes == pages[2].changes)
            #expect(try await made("asked") == 4)
            #expect(try await made("ahead") == 2)
            // Asked as it was made for, the third page is still held.
            #expect(try await page(uri(after: pages[1].next)) == pages[2])
            #expect(try await made("ahead") == 3)
            // A page made ahead in the stored form goes only to a client that names it: the first
            // layout's client gets the page made anew, in the first layout.
            let storedAccept: HTTPFields = [.accept: "\(ChangePage.storedContentType), \(ChangePage.binaryContentType), application/json"]
            let storedType = kind == .sqlite ? ChangePage.storedContentType : ChangePage.binaryContentType
            #expect(try await client.get(uri(after: pages[0].next), headers: storedAccept).headers[.contentType] == storedType)
            let firstLayout = try await client.get(uri(after: pages[1].next), headers: binary)
            #expect(firstLayout.headers[.contentType] == ChangePage.binaryContentType)
            #expect(try ChangePage.decode(Data(buffer: firstLayout.body)) == pages[2])
            #expect(try await made("asked") == 6)
            let heldStored = try await client.get(uri(after: pages[1].next), headers: storedAccept)
            #expect(heldStored.headers[.contentType] == storedType)
            #expect(try ChangePage.decode(Data(buffer: heldStored.body)).changes.map(\.globalId) == pages[2].changes.map(\.globalId))
            #expect(try await made("ahead") == 4)
        }
    }


    @Test(arguments: BackendKind.syncing)
    func aFeedRequestReadsOnPastPagesOfEchoes(kind: BackendKind) async throws {
        try await withServer(kind) { client, service in
            let info = try await registerReplica(service)
            let start = info.replicaServerGen
            // 40 features of the replica's own, one change by another user.
            let own = (1...40).map { insertEdit(String(format: "{0C0C0C0C-0000-4000-8000-0000000000%02d}", $0)) }
            #expect(try await client.put("\(native)/replicas/\(q(info.replicaID))/batches/1", json: try batch(info, seq: 1, own)).status == 200)
            _ = try await service.backend.applyEdits(
                layerID: 0, edits: EditRequest(updates: [Feature(objectID: 1, attributes: ["notes": .string("office")])]), rollbackOnFailure: true)
            let other = try await service.backend.features(layerID: 0, query: FeatureQuery(where: "objectid = 1"))[0].globalID
            let upto = try await service.backend.generation()
            // One feature per page: without reading on, 41 requests (40 of them empty).
            var after: String?
            var seen: [String] = []
            var requests = 0
            repeat {
                let reply = try await client.get(
                    "\(native)/replicas/\(q(info.replicaID))/changes?layer=0&since=\(start)&upto=\(upto)&limit=1\(after.map { "&after=\(q($0))" } ?? "")")
                let page = try JSONDecoder().decode(ChangePage.self, from: Data(reply.text.utf8))
                requests += 1
                seen += page.changes.map(\.globalId)
                after = page.next
            } while after != nil && requests < 50
            #expect(seen == [other])
            // The change, at most two requests cut short by the page bound, the end.
            #expect(requests <= 4, "\(requests) requests")
        }
    }

    @Test(arguments: BackendKind.syncing)
    func aSmallWindowOverALongHistoryIsReadByGeneration(kind: BackendKind) async throws {
        try await withServer(kind) { client, service in
            // History: 30 features updated three times each by the office.
            for round in 0..<3 {
                let updates = (1...30).map { Feature(objectID: Int64($0), attributes: ["notes": .string("round \(round)")]) }
                _ = try await service.backend.applyEdits(layerID: 0, edits: EditRequest(updates: updates), rollbackOnFailure: true)
            }
            let info = try await registerReplica(service)
            let start = info.replicaServerGen
            // The window: three features changed after the replica was made.
            let ids: [Int64] = [5, 20, 250]
            _ = try await service.backend.applyEdits(
                layerID: 0, edits: EditRequest(updates: ids.map { Feature(objectID: $0, attributes: ["notes": .string("after")]) }), rollbackOnFailure: true)
            let changed = try await service.backend.features(layerID: 0, query: FeatureQuery(where: "objectid IN (5, 20, 250)")).map { $0.globalID! }
            let upto = try await service.backend.generation()
            if let backend = service.backend as? SQLiteServiceBackend {
                let byWindow = try await backend.geodatabase.read { conn in
                    try SQLiteServiceBackend.readsFeedByWindow(conn, layerID: 0, since: start, upto: upto, limit: 1)
                }
                #expect(byWindow, "3 rows in the window, 93 in the log: the window is read by generation")
            }
            var after: String?
            var seen: [String] = []
            repeat {
                let page = try JSONDecoder().decode(
                    ChangePage.self,
                    from: Data(try await client.get("\(native)/replicas/\(q(info.replicaID))/changes?layer=0&since=\(start)&upto=\(upto)&limit=1\(after.map { "&after=\(q($0))" } ?? "")").text.utf8))
                #expect(page.changes.allSatisfy { $0.attributes?["notes"] == .string("after") })
                seen += page.changes.map(\.globalId)
                after = page.next
            } while after != nil
            #expect(seen == changed.sorted())
        }
    }

    @Test func theFeedReadsTheCheaperWay() {
        // A fresh log that is all window (the benchmark's 16,000 changes): walk the feature index.
        #expect(!SQLiteServiceBackend.feedPlanSortsWindow(windowRows: 16_000, logRows: 16_000, limit: 1000))
        #expect(!SQLiteServiceBackend.feedPlanSortsWindow(windowRows: 100_000, logRows: 2_000_000, limit: 1000))
        // A few new changes over a long history: read the window by generation.
        #expect(SQLiteServiceBackend.feedPlanSortsWindow(windowRows: 20, logRows: 2_000_000, limit: 1000))
        #expect(SQLiteServiceBackend.feedPlanSortsWindow(windowRows: 2_000, logRows: 2_000_000, limit: 1000))
        #expect(SQLiteServiceBackend.feedPlanSortsWindow(windowRows: 0, logRows: 0, limit: 1000))
    }

    /// The queries that choose a feed page's plan run for every page: they may read only ends
    /// of indexes, never the whole log (a scan per page made the feed quadratic in the log).
    @Test func choosingTheFeedPlanReadsNoWholeLog() async throws {
        let service = try await TestService.fieldInspection(.sqlite)
        let backend = try #require(service.backend as? SQLiteServiceBackend)
        let plans = try await backend.geodatabase.read { conn in
            try [SQLiteServiceBackend.historySQL, SQLiteServiceBackend.windowSQL].map { sql in
                try conn.query("EXPLAIN QUERY PLAN " + sql, arguments: sql.contains("?") ? [.integer(0), .integer(0), .integer(10), .integer(8)] : [])
                    .compactMap { $0.last?.textValue }
            }
        }
        for plan in plans {
            #expect(!plan.isEmpty && plan.allSatisfy { !$0.hasPrefix("SCAN outpost_change_log") }, "\(plan)")
        }
        #expect(plans[0].filter { $0.contains("SEARCH outpost_change_log") }.count == 2, "\(plans[0])")
        try await service.backend.close()
    }

    @Test(arguments: BackendKind.syncing)
    func uploadsNeedAnEditToken(kind: BackendKind) async throws {
        let policy = TokenPolicy(tokens: ["reader": .read, "editor": .edit])
        try await withServer(kind, configuration: ServerConfiguration(port: 0, tokens: policy)) { client, service in
            let info = try await registerReplica(service)
            let uri = "\(native)/replicas/\(q(info.replicaID))"
            #expect(try await client.get(uri).status == 401)
            #expect(try await client.get("\(uri)?token=reader").status == 200)
            #expect(try await client.put("\(uri)/batches/1?token=reader", json: try batch(info, seq: 1, [insertEdit()])).status == 403)
            #expect(try await client.put("\(uri)/batches/1", json: try batch(info, seq: 1, [insertEdit()]), headers: [.authorization: "Bearer editor"]).status == 200)
        }
    }
}

@Suite("ArcGIS sync operations")
struct ArcGISSyncEndpointTests {
    @Test(arguments: BackendKind.syncing)
    func createReplicaAsJSON(kind: BackendKind) async throws {
        try await withServer(kind) { client, service in
            let embedded = try await client.post("\(base)/createReplica", [
                "f": "json", "layers": "0,3", "replicaName": "phone", "transportType": "esriTransportTypeEmbedded", "dataFormat": "json",
                "geometry": "-122.70,45.49,-122.64,45.53", "geometryType": "esriGeometryEnvelope", "inSR": "4326",
                "layerQueries": #"{"3":{"queryOption":"all"}}"#, "syncModel": "perReplica",
            ])
            #expect(embedded.status == 200, "\(embedded.text.prefix(300))")
            let replica = try embedded.json()
            let id = try #require(replica["replicaID"]?.stringValue)
            #expect(replica["replicaServerGen"]?.integerValue == (try await service.backend.generation()))
            let layers = try #require(replica["layers"]?.arrayValue)
            #expect(layers.map { $0["id"]?.integerValue } == [0, 3])
            let inArea = try await service.backend.count(layerID: 0, query: { var q = FeatureQuery(); q.intersecting = .polygon(Envelope(xmin: -122.70, ymin: 45.49, xmax: -122.64, ymax: 45.53).polygon); return q }())
            #expect(layers[0]["features"]?.arrayValue?.count == inArea)
            #expect(layers[1]["features"]?.arrayValue?.count == 60)
            #expect(layers[0]["features"]?.arrayValue?.first?["attributes"]?["globalid"]?.stringValue != nil)

            // URL transport: a file to fetch; the replica is listed.
            let byURL = try await client.post("\(base)/createReplica", ["f": "json", "layers": "1", "dataFormat": "json"]).json()
            #expect(byURL["responseType"] == "esriReplicaResponseTypeData")
            let path = try #require(byURL["URL"]?.stringValue.flatMap { URL(string: $0)?.path })
            let file = try await client.get(path)
            #expect(file.status == 200)
            #expect(try file.json()["layers"]?[0]?["features"]?.arrayValue?.count == 80)
            let list = try await client.get("\(base)/replicas?f=json").json()
            #expect(list.arrayValue?.count == 2)
            let one = try await client.get("\(base)/replicas/\(q(id))?f=json").json()
            #expect(one["replicaName"] == "phone")
            #expect(one["layers"]?.arrayValue?.count == 2)
            #expect(try await client.post("\(base)/unRegisterReplica", ["f": "json", "replicaID": "*"]).json()["success"] == true)
            #expect(try await client.get("\(base)/replicas?f=json").json().arrayValue?.isEmpty == true)
        }
    }

    @Test(arguments: BackendKind.syncing)
    func createReplicaAsyncGeoPackageOpensInGDAL(kind: BackendKind) async throws {
        try await withServer(kind) { client, service in
            let answer = try await client.post("\(base)/createReplica", ["f": "json", "layers": "0,1,2,3", "dataFormat": "sqlite", "async": "true"]).json()
            let status = try #require(answer["statusUrl"]?.stringValue.flatMap { URL(string: $0)?.path })
            var job = JSONValue.null
            for _ in 0..<200 {
                job = try await client.get("\(status)?f=json").json()
                if ["Completed", "Failed"].contains(job["status"]?.stringValue ?? "") { break }
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(job["status"] == "Completed", "\(job)")
            #expect(try await client.get("\(status)/status?f=json").json()["status"] == "Completed")
            let result = try #require(job["resultUrl"]?.stringValue.flatMap { URL(string: $0)?.path })
            let bytes = try await client.get(result)
            #expect(bytes.status == 200)
            #expect(bytes.headers[.contentType] == "application/geopackage+sqlite3")
            let file = service.directory.file("downloaded.gpkg")
            try Data(buffer: bytes.body).write(to: file)
            let ogr = try await ExternalTools.run("ogrinfo", ["-ro", "-so", "-al", file.path])
            #expect(ogr.succeeded, "\(ogr.stderr)")
            #expect(ogr.stdout.contains("Feature Count: 300"))
            #expect(!ogr.stderr.contains("Warning"), "\(ogr.stderr)")
            let check = try await ExternalTools.run("/usr/bin/python3", [try #require(ExternalTools.validateGPKG), "-k", "--extra", "--warning-as-error", file.path])
            #expect(check.succeeded, "validate_gpkg.py: \(check.stdout)\(check.stderr)")
            #expect(try await client.get("\(base)/jobs/nope?f=json").status == 404)
        }
    }

    @Test(arguments: BackendKind.syncing)
    func createReplicaRefusesBadParameters(kind: BackendKind) async throws {
        try await withServer(kind) { client, _ in
            for (form, name) in [
                (["layers": ""], "layers"), (["layers": "9"], "layers"), (["layers": "0", "layerQueries": "[1]"], "layerQueries"),
                (["layers": "0", "layerQueries": #"{"0":{"where":"nope = 1"}}"#], "layerQueries"), (["layers": "0", "syncModel": "sometimes"], "syncModel"),
                (["layers": "0", "dataFormat": "filegdb"], "dataFormat"), (["layers": "0", "replicaSR": "3857"], "replicaSR"),
                (["layers": "0", "geometry": "1,2,3"], "geometry"), (["layers": "0", "transportType": "esriTransportTypeEmbedded", "dataFormat": "sqlite"], "transportType"),
            ] {
                let reply = try await client.post("\(base)/createReplica", form.merging(["f": "json"]) { a, _ in a })
                #expect(reply.status == 400, "\(form): \(reply.text)")
                #expect(reply.errorMessage?.contains(name) == true, "\(form): \(reply.text)")
            }
        }
    }

    @Test(arguments: BackendKind.syncing)
    func synchronizeReplicaUploadsDownloadsAndReplays(kind: BackendKind) async throws {
        try await withServer(kind) { client, service in
            let created = try await client.post("\(base)/createReplica", ["f": "json", "layers": "0", "transportType": "esriTransportTypeEmbedded"]).json()
            let id = try #require(created["replicaID"]?.stringValue)
            let gen = try #require(created["replicaServerGen"]?.integerValue)
            let target = try #require(try await service.backend.features(layerID: 0, query: FeatureQuery(where: "objectid = 5")).first)
            let edits: JSONValue = [[
                "id": 0,
                "features": [
                    "adds": [["attributes": ["globalid": .string(newGID), "asset_id": "AG-1", "asset_type": "pole", "status": "open"], "geometry": ["x": -122.66, "y": 45.51]]],
                    "updates": [["attributes": ["globalid": .string(target.globalID!), "notes": "from ArcGIS"]]],
                    "deleteIds": [],
                ],
            ]]
            // Another user changed something since the replica was made.
            _ = try await service.backend.applyEdits(layerID: 0, edits: EditRequest(updates: [Feature(objectID: 7, attributes: ["notes": .string("office")])]), rollbackOnFailure: true)
            let form = ["f": "json", "replicaID": id, "replicaServerGen": String(gen), "syncDirection": "bidirectional", "edits": edits.jsonString, "transportType": "esriTransportTypeEmbedded", "returnIdsForAdds": "true"]
            let reply = try await client.post("\(base)/synchronizeReplica", form)
            #expect(reply.status == 200, "\(reply.text)")
            let answer = try reply.json()
            #expect(answer["replicaServerGen"]?.integerValue == (try await service.backend.generation()))
            let layer = try #require(answer["edits"]?[0])
            #expect(layer["addResults"]?[0]?["success"] == true)
            #expect(layer["addResults"]?[0]?["objectId"]?.integerValue != nil)
            #expect(layer["updateResults"]?[0]?["success"] == true)
            let downloaded = layer["features"]?["updates"]?.arrayValue ?? []
            #expect(downloaded.count == 1, "the office edit comes down, the replica's own edits do not: \(downloaded)")
            #expect(downloaded.first?["attributes"]?["notes"] == "office")
            let generation = try await service.backend.generation()
            // The identical request again: the stored answer, nothing applied twice.
            let again = try await client.post("\(base)/synchronizeReplica", form)
            #expect(again.text == reply.text)
            #expect(try await service.backend.generation() == generation)
            #expect(try await service.backend.count(layerID: 0, query: FeatureQuery(where: "asset_id = 'AG-1'")) == 1)

            // Rollback on failure with an invalid edit: an error naming it, nothing applied.
            let bad: JSONValue = [["id": 0, "features": ["adds": [["attributes": ["globalid": "{0C0C0C0C-0000-4000-8000-0000000000AA}", "asset_id": "AG-2", "asset_type": "spaceship", "status": "open"], "geometry": ["x": -122.66, "y": 45.51]]]]]]
            let refused = try await client.post("\(base)/synchronizeReplica", ["f": "json", "replicaID": id, "replicaServerGen": String(generation), "edits": bad.jsonString])
            #expect(refused.status == 400)
            #expect(refused.errorMessage?.contains("rolled back") == true)
            #expect(try await service.backend.generation() == generation)
            // closeReplica unregisters after the sync.
            let closing = try await client.post("\(base)/synchronizeReplica", ["f": "json", "replicaID": id, "replicaServerGen": String(generation), "syncDirection": "download", "closeReplica": "true"])
            #expect(closing.status == 200)
            #expect(try await client.get("\(base)/replicas/\(q(id))?f=json").status == 404)
            #expect(try await client.post("\(base)/synchronizeReplica", ["f": "json", "replicaServerGen": "1"]).errorMessage?.contains("replicaID") == true)
        }
    }

    /// ArcGIS-shaped attachment edits in synchronizeReplica: an embedded (base64) add, an update
    /// that replaces it, a delete; content stored by hash; a missing parent is kept on record.
    @Test(arguments: BackendKind.syncing)
    func synchronizeReplicaTakesAttachmentEdits(kind: BackendKind) async throws {
        try await withServer(kind) { client, service in
            let created = try await client.post(
                "\(base)/createReplica", ["f": "json", "layers": "0", "returnAttachments": "true", "attachmentsSyncDirection": "bidirectional", "transportType": "esriTransportTypeEmbedded"]).json()
            let id = try #require(created["replicaID"]?.stringValue)
            var gen = try #require(created["replicaServerGen"]?.integerValue)
            let parent = try #require(try await service.backend.features(layerID: 0, query: FeatureQuery(where: "objectid = 5")).first)
            let attachmentID = "{0D0D0D0D-0000-4000-8000-00000000A771}"
            func sync(_ attachments: JSONValue) async throws -> (Int, String) {
                let edits: JSONValue = [["id": 0, "features": ["adds": [], "updates": [], "deleteIds": []], "attachments": attachments]]
                let reply = try await client.post("\(base)/synchronizeReplica", ["f": "json", "replicaID": id, "replicaServerGen": String(gen), "syncDirection": "upload", "edits": edits.jsonString])
                gen = try await service.backend.generation()
                return (reply.status, reply.text)
            }
            func stored() async throws -> [Data] {
                var out: [Data] = []
                for a in try await service.backend.attachments(layerID: 0, objectID: parent.objectID!) where a.globalID == attachmentID {
                    out.append(try await service.backend.attachmentBytes(layerID: 0, attachmentID: a.id, offset: 0, length: Int(a.size)))
                }
                return out
            }
            let first = Data("first photo".utf8), second = Data("second photo, larger".utf8)
            let add: JSONValue = ["adds": [["globalId": .string(attachmentID), "parentGlobalId": .string(parent.globalID!), "name": "a.jpg", "contentType": "image/jpeg", "data": .string(first.base64EncodedString())]]]
            #expect(try await sync(add).0 == 200)
            #expect(try await stored() == [first])
            let update: JSONValue = ["updates": [["globalId": .string(attachmentID), "parentGlobalId": .string(parent.globalID!), "name": "a.jpg", "contentType": "image/jpeg", "data": .string(second.base64EncodedString())]]]
            #expect(try await sync(update).0 == 200)
            #expect(try await stored() == [second])
            #expect(try await sync(["deleteIds": [.string(attachmentID)]]).0 == 200)
            #expect(try await stored().isEmpty)
            // The parent feature is gone: the delete wins and the attachment is kept on record.
            let orphan: JSONValue = ["adds": [["globalId": "{0D0D0D0D-0000-4000-8000-00000000A772}", "parentGlobalId": "{0D0D0D0D-0000-4000-8000-0000000000FF}", "name": "b.jpg", "data": .string(first.base64EncodedString())]]]
            #expect(try await sync(orphan).0 == 200)
            let records = try await (service.backend as! any SyncBackend).conflictRecords()
            #expect(records.contains { $0.columns == ["attachments"] && $0.ours?["attachment"]?["name"] == "b.jpg" })
            let byReference: JSONValue = ["adds": [["globalId": .string(attachmentID), "parentGlobalId": .string(parent.globalID!), "uploadId": "u1"]]]
            let refused = try await sync(byReference)
            #expect(refused.0 == 400 && refused.1.contains("base64"), "\(refused.1)")
        }
    }

    /// JSON replicas with attachments: by URL (the default; the URL serves the bytes) or
    /// embedded as base64.
    @Test(arguments: BackendKind.syncing)
    func jsonReplicasCarryAttachments(kind: BackendKind) async throws {
        try await withServer(kind) { client, service in
            let bytes = Data((0..<70_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
            let added = try await service.backend.addAttachment(layerID: 0, objectID: 5, name: "valve.jpg", contentType: "image/jpeg", data: bytes)
            for byURL in [true, false] {
                let reply = try await client.post("\(base)/createReplica", [
                    "f": "json", "layers": "0", "transportType": "esriTransportTypeEmbedded", "dataFormat": "json", "returnAttachments": "true",
                    "returnAttachmentsDataByUrl": String(byURL), "syncModel": "none",
                ])
                #expect(reply.status == 200, "\(reply.text.prefix(300))")
                let attachments = try reply.json()["layers"]?[0]?["attachments"]?.arrayValue ?? []
                let entry = try #require(attachments.first { $0["globalId"]?.stringValue == added.globalID })
                #expect(entry["size"]?.integerValue == 70_000 && entry["name"] == "valve.jpg" && entry["parentGlobalId"]?.stringValue == added.featureGlobalID)
                if byURL {
                    let path = try #require(entry["url"]?.stringValue.flatMap { URL(string: $0)?.path })
                    let fetched = try await client.get(path)
                    #expect(fetched.status == 200 && Data(fetched.body.readableBytesView) == bytes)
                } else {
                    #expect(entry["data"]?.stringValue.flatMap { Data(base64Encoded: $0) } == bytes)
                }
            }
        }
    }
}
