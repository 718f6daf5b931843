import Foundation
import OutpostCore
import OutpostProtocol
import OutpostStorage
import OutpostTestSupport
import OutpostServiceTestSupport
import Testing

@testable import OutpostSync

/// The seal writes each feature's current row straight into the binary batch: what it writes
/// must be what the feature API reads, for every kind of field, geometry and coalesced edit.
@Suite("Sealing upload batches")
struct BatchSealerTests {
    @Test(.scaledTimeLimit(minutes: 2))
    func aSealedBatchCarriesTheValuesTheFeatureAPIReads() async throws {
        let h = try await SyncHarness.start()
        let gdb = try await h.replica(layers: [0, 1, 2, 3])
        let points = try gdb.table(named: "inspection_points"), lines = try gdb.table(named: "pipelines")
        let areas = try gdb.table(named: "service_areas"), log = try gdb.table(named: "inspection_log")
        let p = try await points.features(matching: FeatureQuery(where: "objectid <= 4"))
        let line = try #require(try await lines.features(matching: FeatureQuery(where: "objectid = 1")).first)
        let area = try #require(try await areas.features(matching: FeatureQuery(where: "objectid = 1")).first)
        // Two updates of one feature (their columns merge), a moved point, a delete, an insert
        // then updated, an insert then deleted (nothing to send), a line reshaped, a polygon's
        // name, a row of a table without geometry.
        try await points.update([Feature(objectID: p[0].objectID, attributes: ["notes": .string("first look")])])
        try await points.update([Feature(objectID: p[0].objectID, attributes: ["depth_m": .double(2.75), "notes": .string("second look")])])
        try await points.update([Feature(objectID: p[1].objectID, geometry: try point(-122.66, 45.51))])
        try await points.delete(objectIDs: [p[2].objectID!])
        let added = try await points.add([
            Feature(attributes: ["asset_id": .string("N-1"), "asset_type": .string("valve"), "condition": .integer(2), "inspected_at": .date(Date(timeIntervalSince1970: 1_780_000_000.123))]),
            Feature(attributes: ["asset_id": .string("N-2"), "asset_type": .string("pole")], geometry: try point(-122.65, 45.52)),
        ])
        try await points.update([Feature(objectID: added[0].objectID, attributes: ["notes": .string("no position yet")])])
        try await points.delete(objectIDs: [added[1].objectID!])
        try await lines.update([Feature(objectID: line.objectID, geometry: .lineString(try LineString([Position(x: -122.7, y: 45.5), Position(x: -122.69, y: 45.51)])))])
        try await areas.update([Feature(objectID: area.objectID, attributes: ["name": .string("Ä north 😀")])])
        let entry = try await log.add([Feature(attributes: ["point_globalid": .string(p[0].globalID!), "action": .string("checked"), "logged_at": .date(Date(timeIntervalSince1970: 1_780_000_100)), "note": .null])])
        // Another writer's forms: text in an integer column, a value set to null.
        try await gdb.write { conn in
            try conn.execute("UPDATE inspection_points SET condition = 'n/a', notes = NULL WHERE objectid = ?", arguments: [.integer(p[3].objectID!)])
        }

        let (framed, binary, json, tables) = try await gdb.write { conn -> (PreparedBatch, PreparedBatch, PreparedBatch, [String]) in
            var state = try #require(try conn.replicaState())
            let tables = state.layers.map(\.table)
            func make(_ encodings: [String]?) throws -> PreparedBatch {
                state.batchEncodings = encodings
                try conn.setReplicaState(state)
                return try #require(try BatchSealer.prepare(conn, seq: state.lastAckedSeq + 1, after: 0, tables: tables, maxChanges: 1000, rollbackOnFailure: true))
            }
            return (try make(UploadBatch.acceptedEncodings), try make(["json", "binary"]), try make(nil), tables)
        }
        #expect(tables.count == 4)
        #expect(UploadBatch.isFramed(framed.made.stored.body) && !UploadBatch.isFramed(binary.made.stored.body))
        #expect(UploadBatch.Encoding(of: binary.made.stored.body) == .binary && UploadBatch.Encoding(of: json.made.stored.body) == .json)
        let batch = try UploadBatch.decode(binary.made.stored.body)
        #expect(try batch.encoded(as: .binary) == binary.made.stored.body, "the written body is the canonical encoding of what it holds")
        var fromJSON = try UploadBatch.decode(json.made.stored.body)
        fromJSON.batchId = batch.batchId
        #expect(fromJSON == batch, "JSON for a service that reads only JSON: the same batch")
        // Framed for a service that reads it, the geometries as stored (blobs): the same batch.
        let framedRead = try UploadBatch.decode(framed.made.stored.body)
        var fromFramed = try framedRead.withEsriGeometries()
        fromFramed.batchId = batch.batchId
        #expect(fromFramed == batch, "framed for a service that reads it: the same batch")
        let blobs = framedRead.layers.flatMap { layer in layer.edits.compactMap { e in e.geometryBlob.map { (layer.id, e.globalId, $0) } } }
        #expect(blobs.count == 2 && framedRead.layers.allSatisfy { $0.edits.allSatisfy { $0.geometry == nil } }, "the moved point and the reshaped line")
        for (layer, gid, blob) in blobs {
            let table = layer == 0 ? "inspection_points" : "pipelines", column = layer == 0 ? points.definition.geometryColumn : lines.definition.geometryColumn
            let stored = try await gdb.read { try $0.query("SELECT \(column) FROM \(table) WHERE globalid = ?", arguments: [.text(gid)]).first?[0] }
            guard case .blob(let bytes)? = stored else {
                Issue.record("no stored geometry for \(gid)")
                continue
            }
            #expect(bytes == blob, "the bytes as stored, not read and written again")
        }
        #expect(framed.made.editCount == 8)
        #expect(binary.made.editCount == 8 && batch.editCount == 8 && batch.compactAnswer == true && binary.made.attachments.isEmpty)

        // Each edit, against the feature API's reading of the replica now.
        func edit(_ layer: Int, _ gid: String?) throws -> BatchEdit {
            try #require(batch.layers.first { $0.id == layer }?.edits.first { $0.globalId == gid })
        }
        func current(_ table: FeatureTable, _ gid: String?) async throws -> Feature { try #require(try await table.feature(globalID: gid!)) }
        func values(_ f: Feature, _ names: [String]) -> [String: JSONValue] {
            Dictionary(uniqueKeysWithValues: names.map { ($0, (f.attributes[$0] ?? .null).jsonValue) })
        }
        let pointFields = ["asset_id", "asset_type", "condition", "status", "inspected_at", "inspector", "notes", "depth_m"]

        let twice = try edit(0, p[0].globalID)
        #expect(twice.op == .update && twice.changedColumns == ["depth_m", "notes"] && twice.geometry == nil)
        #expect(twice.attributes == ["depth_m": .number(2.75), "notes": .string("second look")])
        #expect(twice.baseValues == values(p[0], ["depth_m", "notes"]), "the values before the first of the two edits")
        #expect(twice.baseGeneration != nil)

        let moved = try edit(0, p[1].globalID)
        #expect(moved.op == .update && moved.attributes == [:] && moved.changedColumns == [points.definition.geometryColumn])
        #expect(moved.geometry == ["x": .number(-122.66), "y": .number(45.51)])

        let deleted = try edit(0, p[2].globalID)
        #expect(deleted.op == .delete && deleted.attributes == nil && deleted.geometry == nil)
        // Its values as the capture recorded them (dates as stored), the global id too.
        #expect(deleted.baseValues.map { Set($0.keys) } == Set(pointFields + ["globalid"]))
        #expect(deleted.baseValues?["asset_id"] == p[2]["asset_id"]?.jsonValue && deleted.baseValues?["globalid"] == .string(p[2].globalID!))

        let foreign = try edit(0, p[3].globalID)
        #expect(foreign.attributes == ["condition": .string("n/a"), "notes": .null])
        #expect(foreign.attributes == values(try await current(points, p[3].globalID), ["condition", "notes"]))

        let inserted = try edit(0, added[0].globalID)
        let insertedNow = try await current(points, added[0].globalID)
        #expect(inserted.op == .insert && inserted.changedColumns == nil && inserted.baseValues == nil && inserted.baseGeneration == nil)
        #expect(inserted.attributes == values(insertedNow, pointFields) && inserted.geometry == nil, "no geometry: none sent")
        #expect(inserted.attributes?["inspected_at"] == .integer(1_780_000_000_123) && inserted.attributes?["notes"] == .string("no position yet"))
        #expect(batch.layers.first { $0.id == 0 }?.edits.count == 5, "the point added and deleted again is not sent")

        let reshaped = try edit(1, line.globalID)
        #expect(reshaped.geometry == (try EsriJSON.value(try #require(try await current(lines, line.globalID).geometry))))
        #expect(reshaped.geometry?.objectValue?["paths"] != nil)
        let renamed = try edit(2, area.globalID)
        #expect(renamed.attributes == ["name": .string("Ä north 😀")] && renamed.geometry == nil && renamed.changedColumns == ["name"])
        let logged = try edit(3, entry[0].globalID)
        #expect(logged.op == .insert && logged.geometry == nil)
        #expect(logged.attributes == values(try await current(log, entry[0].globalID), ["point_globalid", "action", "logged_at", "note"]))
        try await h.stop()
    }

    /// A row the seal cannot read (a geometry blob that is not GeoPackage binary, written by
    /// another tool) fails the seal with a typed error naming the table, and nothing is stored:
    /// whether the seal writes geometries as Esri JSON or copies their blobs.
    @Test(.scaledTimeLimit(minutes: 2), arguments: [false, true])
    func aRowThatCannotBeReadFailsTheSealAndStoresNothing(blobs: Bool) async throws {
        let h = try await SyncHarness.start()
        let gdb = try await h.replica(layers: [0])
        let points = try gdb.table(named: "inspection_points")
        let f = try #require(try await points.features(matching: FeatureQuery(where: "objectid = 1")).first)
        try await points.update([Feature(objectID: f.objectID, attributes: ["notes": .string("before the damage")])])
        try await gdb.write { conn in
            try conn.execute("UPDATE inspection_points SET geom = x'0badbeef' WHERE objectid = ?", arguments: [.integer(f.objectID!)])
        }
        let error = await #expect(throws: StorageError.self) {
            try await gdb.write { conn in
                var state = try #require(try conn.replicaState())
                state.batchEncodings = blobs ? UploadBatch.acceptedEncodings : ["json", "binary", "binary-framed"]
                #expect(BatchSealer.sealsGeometryBlobs(state) == blobs)
                _ = try BatchSealer.seal(conn, state: state, tables: ["inspection_points"], maxChanges: 100, rollbackOnFailure: true)
            }
        }
        #expect(error?.code == .corrupt && error?.table == "inspection_points")
        #expect(try await gdb.read { try $0.sealedBatch() } == nil)
        try await h.stop()
    }
}
