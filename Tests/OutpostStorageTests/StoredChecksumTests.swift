import Foundation
import GRDB
import OutpostCore
import OutpostTestSupport
import Testing

@testable import OutpostStorage

/// A replica's stored layer checksums must stay equal to the layers hashed afresh through every
/// write of server values, and must stop being trusted once anything else writes the layer.
@Suite("Stored layer checksums")
struct StoredChecksumTests {
    /// The field-inspection sample (values in other writers' forms) made a replica of every
    /// layer, its checksums stored.
    static func replica(in dir: TemporaryDirectory) async throws -> Geodatabase {
        let gdb = try await SampleGeodatabases.fieldInspectionInOtherWritersForms(in: dir)
        try await gdb.write { conn in
            let layers = conn.geodatabase.schema.allLayers.map { ReplicaState.Layer(id: $0.id, table: $0.name, direction: .bidirectional, cursor: 1) }
            try conn.setReplicaState(ReplicaState(
                replicaID: "{00000000-0000-0000-0000-000000000001}", replicaName: "crew", serviceURL: "http://127.0.0.1:1/x/FeatureServer", syncModel: .perReplica, cursor: 1,
                layers: layers))
            try conn.storeLayerChecksums()
        }
        return gdb
    }

    /// Each layer's stored checksum (nil where none holds) and its checksum hashed now.
    static func storedAndHashed(_ gdb: Geodatabase) async throws -> [String: (stored: String?, hashed: String)] {
        try await gdb.read { conn in
            var out: [String: (String?, String)] = [:]
            for layer in conn.geodatabase.schema.allLayers {
                let stored = try conn.storedChecksum(of: layer.name)
                let hashed = try conn.geodatabase.table(named: layer.name).checksum(matching: .all, in: conn)
                out[layer.name] = (stored.map { "\($0.hex)/\($0.count)" }, "\(hashed.hex)/\(hashed.count)")
            }
            return out
        }
    }

    static func expectAllHold(_ gdb: Geodatabase, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        for (layer, sums) in try await storedAndHashed(gdb) {
            #expect(sums.stored == sums.hashed, "\(layer)", sourceLocation: sourceLocation)
        }
    }

    static func serverWrites(_ gdb: Geodatabase) async throws -> Int64 {
        try await gdb.read { try $0.replicaState()?.serverWrites ?? 0 }
    }

    @Test func storedChecksumsFollowEveryWriteOfServerValues() async throws {
        struct Stop: Error {}
        let dir = TemporaryDirectory()
        let gdb = try await Self.replica(in: dir)
        defer { try? gdb.close() }
        try await Self.expectAllHold(gdb)
        let points = try gdb.table(named: "inspection_points"), log = try gdb.table(named: "inspection_log")
        try await gdb.write { conn in
            try conn.withChangeCaptureSilenced {
                // Through the API: moves, attribute changes, inserts, deletes.
                try points.update((10...40).map { Feature(objectID: Int64($0), attributes: ["notes": .string("n\($0)")], geometry: .point(try Point(x: -122.5, y: 45.4))) }, in: conn)
                _ = try points.add((0..<20).map { i in
                    Feature(attributes: ["asset_id": .string("S-\(i)"), "asset_type": .string("valve"), "inspected_at": .date(Date(timeIntervalSince1970: 1.7e9))],
                            geometry: .point(try Point(x: -122.7, y: 45.6)))
                }, in: conn)
                try points.delete(objectIDs: [41, 42, 43], in: conn)
                _ = try log.add([Feature(attributes: ["point_globalid": .string(GlobalID.make()), "action": .string("checked"), "logged_at": .date(Date(timeIntervalSince1970: 1.7e9)), "note": .string("ok")])], in: conn)
                // Raw SQL, as other writers store values: text in numeric columns, dates as epoch
                // milliseconds, a big-endian body, a cleared geometry, a row id that changes, a row
                // replaced in place, features 1 to 9 (stored in other forms) rewritten.
                try conn.execute("UPDATE inspection_points SET condition = '2', inspected_at = 1700000000999 WHERE objectid IN (1, 2, 3)")
                try conn.execute("UPDATE inspection_points SET geom = ? WHERE objectid = 11",
                                 arguments: [.blob(GeoPackageBinary.encode(.point(try Point(x: -122.1, y: 45.1)), srsID: 4326, littleEndian: false))])
                try conn.execute("UPDATE inspection_points SET geom = NULL WHERE objectid = 12")
                try conn.execute("UPDATE inspection_points SET objectid = 9000 WHERE objectid = 13")
                try conn.execute("INSERT OR REPLACE INTO inspection_points (objectid, globalid, asset_id, asset_type, status) SELECT 14, globalid, 'R', 'valve', 'open' FROM inspection_points WHERE objectid = 14")
                try conn.execute("DELETE FROM pipelines WHERE objectid = 1")
                // A savepoint that rolls back takes its rows out again.
                #expect(throws: Stop.self) {
                    try conn.inSavepoint {
                        try conn.execute("DELETE FROM inspection_points WHERE objectid BETWEEN 20 AND 30")
                        try conn.execute("UPDATE service_areas SET name = 'gone'")
                        throw Stop()
                    }
                }
            }
        }
        try await Self.expectAllHold(gdb)
        #expect(try await Self.serverWrites(gdb) == 1)

        // Writing the values rows already have changes no checksum, and counts as no write.
        try await gdb.write { conn in
            try conn.withChangeCaptureSilenced { try conn.execute("UPDATE inspection_points SET notes = notes WHERE objectid < 50") }
        }
        #expect(try await Self.serverWrites(gdb) == 1)
        try await Self.expectAllHold(gdb)

        // A rolled-back transaction leaves the stored checksums as they were.
        await #expect(throws: Stop.self) {
            try await gdb.write { conn in
                try conn.withChangeCaptureSilenced {
                    try conn.execute("DELETE FROM inspection_points WHERE objectid < 100")
                    throw Stop()
                }
            }
        }
        try await Self.expectAllHold(gdb)
        #expect(try await Self.serverWrites(gdb) == 1)
        // No hook is left on the writer once nothing is watched.
        #expect(try await gdb.write { conn in RowChangeTracker.existing(on: conn.db) == nil })
    }

    /// The rows a transaction lists as written are every row it changed (a server hashes just
    /// those, as they were and as they are, to move a layer's whole checksum): the whole before,
    /// with the listed rows' digests before and after XOR-ed in, is the whole after, through
    /// writes by the API and by raw SQL (a row id that changes, a row replaced in place, a
    /// cleared geometry), deletes and a savepoint rolled back. Each digest before is taken from
    /// a map of every row made ahead, not by the mechanism under test.
    @Test func writtenRowsAreEveryRowAWriteChanged() async throws {
        struct Stop: Error {}
        let dir = TemporaryDirectory()
        let gdb = try await SampleGeodatabases.fieldInspectionInOtherWritersForms(in: dir)
        defer { try? gdb.close() }
        let points = try gdb.table(named: "inspection_points"), pipelines = try gdb.table(named: "pipelines")
        func rowDigests(_ table: FeatureTable) async throws -> (whole: FeatureDigest.Accumulator, rows: [Int64: FeatureDigest.Accumulator]) {
            try await gdb.read { conn in
                var rows: [Int64: FeatureDigest.Accumulator] = [:]
                for id in try table.objectIDs(matching: .all, in: conn) { rows[id] = try table.checksum(matching: FeatureQuery(objectIDs: [id]), in: conn) }
                return (try table.checksum(matching: .all, in: conn), rows)
            }
        }
        let pointsBefore = try await rowDigests(points), pipelinesBefore = try await rowDigests(pipelines)
        let written = try await gdb.write { conn in
            try conn.trackingWrittenRows(of: ["inspection_points", "pipelines"]) {
                try points.update((10...12).map { Feature(objectID: Int64($0), attributes: ["notes": .string("n\($0)")], geometry: .point(try Point(x: -122.5, y: 45.4))) }, in: conn)
                _ = try points.add([Feature(attributes: ["asset_id": .string("S-1"), "asset_type": .string("valve")], geometry: .point(try Point(x: -122.7, y: 45.6)))], in: conn)
                try points.delete(objectIDs: [41, 42], in: conn)
                try conn.execute("UPDATE inspection_points SET geom = NULL WHERE objectid = 15")
                try conn.execute("UPDATE inspection_points SET objectid = 9000 WHERE objectid = 13")
                try conn.execute("INSERT OR REPLACE INTO inspection_points (objectid, globalid, asset_id, asset_type, status) SELECT 14, globalid, 'R', 'valve', 'open' FROM inspection_points WHERE objectid = 14")
                try conn.execute("UPDATE inspection_points SET notes = notes WHERE objectid = 16")
                try conn.execute("DELETE FROM pipelines WHERE objectid = 1")
                #expect(throws: Stop.self) {
                    try conn.inSavepoint {
                        try conn.execute("DELETE FROM inspection_points WHERE objectid BETWEEN 20 AND 22")
                        throw Stop()
                    }
                }
            }.rows
        }
        let pointRows = try #require(written["inspection_points"] ?? nil), pipelineRows = try #require(written["pipelines"] ?? nil)
        #expect(pipelineRows == [1])
        #expect(Set([10, 11, 12, 13, 14, 15, 41, 42, 9000]).isSubset(of: Set(pointRows)))
        #expect(pointRows == pointRows.sorted() && Set(pointRows).count == pointRows.count)
        for (table, before, rows) in [(points, pointsBefore, pointRows), (pipelines, pipelinesBefore, pipelineRows)] {
            let after = try await rowDigests(table)
            var moved = before.whole
            for id in rows {
                if let old = before.rows[id] { moved.add(FeatureDigest.Accumulator(value: old.value, count: -old.count)) }
                if let new = after.rows[id] { moved.add(new) }
            }
            #expect(moved.value == after.whole.value && moved.count == after.whole.count, "\(table.name)")
        }
        // No hook is left on the writer once nothing is watched.
        #expect(try await gdb.write { conn in RowChangeTracker.existing(on: conn.db) == nil })
    }

    @Test func aLocalEditOrAnUnfollowedWriteEndsTheStoredChecksum() async throws {
        let dir = TemporaryDirectory()
        let gdb = try await Self.replica(in: dir)
        defer { try? gdb.close() }
        func holding() async throws -> [String] {
            try await Self.storedAndHashed(gdb).filter { $0.value.stored == $0.value.hashed }.map(\.key).sorted()
        }
        #expect(try await holding() == ["inspection_log", "inspection_points", "pipelines", "service_areas"])
        // A local edit is captured, which moves the capture's one sequence: no stored checksum
        // holds any more (each layer is hashed at its next whole verify).
        try await gdb.write { conn in try conn.execute("UPDATE inspection_points SET notes = 'local' WHERE objectid = 5") }
        #expect(try await Self.storedAndHashed(gdb).values.allSatisfy { $0.stored == nil })

        // A checksum hashed before a write of server values is not stored after it.
        func hashed() async throws -> (FeatureDigest.Accumulator, GeodatabaseConnection.ChecksumStamp) {
            try await gdb.read { conn in
                (try conn.geodatabase.table(named: "inspection_points").checksum(matching: .all, in: conn), try #require(try conn.checksumStamp()))
            }
        }
        let (sum, stamp) = try await hashed()
        try await gdb.write { conn in try conn.withChangeCaptureSilenced { try conn.execute("UPDATE pipelines SET material = 'steel' WHERE objectid = 2") } }
        #expect(try await gdb.write { conn in try conn.storeChecksum(sum, of: "inspection_points", hashedAt: stamp) } == false)
        // Hashed again and stored, it holds.
        let (again, now) = try await hashed()
        #expect(try await gdb.write { conn in try conn.storeChecksum(again, of: "inspection_points", hashedAt: now) })
        #expect(try await holding() == ["inspection_points"])

        // A bulk load with capture silenced passes no hook: that layer's checksum is dropped.
        try await gdb.write { conn in try conn.storeLayerChecksums() }
        let points = try gdb.table(named: "inspection_points")
        _ = try await gdb.write { conn in
            try points.importFeatures(in: conn) { importer in
                _ = try importer.add(Feature(attributes: ["asset_id": .string("B-1"), "asset_type": .string("valve")], geometry: .point(try Point(x: -122.6, y: 45.5))))
            }
        }
        #expect(try await holding() == ["inspection_log", "pipelines", "service_areas"])

        // A schema migration changes what every feature hashes to: all are dropped.
        var schema = gdb.schema
        schema.layers[1].fields.append(FieldDefinition(name: "coating", type: .string, length: 20))
        schema.schemaVersion += 1
        let migrated = schema
        try await gdb.write { conn in _ = try conn.migrateSchema(to: migrated, allowDrop: false, addLayers: false) }
        #expect(try await Self.storedAndHashed(gdb).values.allSatisfy { $0.stored == nil })
    }
}
