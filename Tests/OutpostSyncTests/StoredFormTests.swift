import Foundation
import OutpostCore
import OutpostProtocol
import OutpostSyncService
import OutpostTestSupport
import Testing

@testable import OutpostStorage
@testable import OutpostSync

/// The stored form of a change page (values as the service stores them, geometries as their
/// GeoPackage blobs) must mean what the JSON form means: made JSON it is the JSON page, and
/// applied it writes what the JSON page writes, however another writer stored the values.
@Suite("The stored form of change pages")
struct StoredFormTests {
    /// Every feature of `name` as a page's changes in both forms, each through its page's bytes
    /// as a download gets them.
    static func changes(of gdb: Geodatabase, layer name: String) async throws -> (json: [FeedChange], stored: [FeedChange]) {
        try await gdb.read { conn in
            let table = try conn.geodatabase.table(named: name)
            let layer = table.definition
            let columns = ReplicaRows.storedColumns(of: table)
            var json: [FeedChange] = [], stored: [FeedChange] = []
            try table.forEachSyncRow(matching: FeatureQuery(), in: conn) {
                json.append(FeedChange(kind: .upsert, globalId: $0.globalID, generation: 3, attributes: $0.attributes, geometry: $0.geometry, inserted: true))
            }
            try table.forEachStoredRow(matching: FeatureQuery(), in: conn) { gid, values, geometry in
                var change = FeedChange(kind: .upsert, globalId: gid, generation: 3, inserted: true)
                change.stored = FeedRow(columns: columns, values: values, geometry: geometry)
                stored.append(change)
            }
            func sent(_ changes: [FeedChange]) throws -> [FeedChange] {
                try ChangePage.decode(Data(ChangePage(layerId: layer.id, since: 0, upto: 3, changes: changes, next: nil).binaryEncoded())).changes
            }
            return (try sent(json), try sent(stored))
        }
    }

    @Test func storedChangesMadeJSONAreTheJSONChanges() async throws {
        let dir = TemporaryDirectory()
        let gdb = try await SampleGeodatabases.fieldInspectionInOtherWritersForms(in: dir)
        for table in gdb.tables where table.definition.globalIDField != nil {
            let (json, stored) = try await Self.changes(of: gdb, layer: table.name)
            #expect(!json.isEmpty && json.count == stored.count)
            #expect(stored.allSatisfy { $0.stored != nil && $0.attributes == nil })
            for (j, s) in zip(json, try FeedChange.withJSONValues(stored)) {
                #expect(s == j, "\(table.name) \(j.globalId)")
            }
        }
    }

    /// Two copies of the schema with no features, one given the JSON changes, the other the
    /// stored ones: the same rows; then both given the other copy's values again as updates.
    @Test func storedChangesApplyAsTheJSONChangesDo() async throws {
        let dir = TemporaryDirectory()
        let source = try await SampleGeodatabases.fieldInspectionInOtherWritersForms(in: dir)
        // Not the multipoint, the point with Z and the line (5, 8, 9): an XY point layer refuses them.
        let points = try source.table(named: DownloadApplierTests.table)
        var refused: Set<String> = []
        for id: Int64 in [5, 8, 9] { refused.insert(try #require(try await points.feature(objectID: id)?.globalID)) }
        var (json, stored) = try await Self.changes(of: source, layer: DownloadApplierTests.table)
        json.removeAll { refused.contains($0.globalId) }
        stored.removeAll { refused.contains($0.globalId) }
        let byJSON = try SampleGeodatabases.emptyFieldInspection(in: dir, name: "json.gpkg")
        let byStored = try SampleGeodatabases.emptyFieldInspection(in: dir, name: "stored.gpkg")
        #expect(try await DownloadApplierTests.apply(json, to: byJSON) == PendingChanges(inserts: json.count, updates: 0, deletes: 0))
        #expect(try await DownloadApplierTests.apply(stored, to: byStored) == PendingChanges(inserts: stored.count, updates: 0, deletes: 0))
        try await Self.expectSameRows(byJSON, byStored)
        // Written again over themselves, as updates: the same, and nothing moves in the R-tree.
        #expect(try await DownloadApplierTests.apply(stored, to: byStored) == PendingChanges(inserts: 0, updates: stored.count, deletes: 0))
        try await Self.expectSameRows(byJSON, byStored)
        // The values the replica reads are the service's.
        let wanted = try await points.features(matching: FeatureQuery()).filter { !refused.contains($0.globalID!) }
        let got = try await byStored.table(named: DownloadApplierTests.table).features(matching: FeatureQuery())
        #expect(Dictionary(uniqueKeysWithValues: got.map { ($0.globalID!, $0.attributes) }) == Dictionary(uniqueKeysWithValues: wanted.map { ($0.globalID!, $0.attributes) }))
        // The geometries the layer cannot hold are refused in either form.
        let (allJSON, allStored) = try await Self.changes(of: source, layer: DownloadApplierTests.table)
        for changes in [allJSON, allStored] {
            for change in changes where refused.contains(change.globalId) {
                await #expect(throws: StorageError.self) { _ = try await DownloadApplierTests.apply([change], to: byStored) }
            }
        }
    }

    static func expectSameRows(_ a: Geodatabase, _ b: Geodatabase) async throws {
        let sql = "SELECT * FROM \(DownloadApplierTests.table) ORDER BY globalid"
        let left = try await a.read { try $0.query(sql) }, right = try await b.read { try $0.query(sql) }
        #expect(left == right)
        #expect(!left.isEmpty)
    }

    /// A stored geometry that is no GeoPackage blob refuses the page's chunk: nothing of it is written.
    @Test func anUnreadableStoredGeometryIsRefused() async throws {
        let dir = TemporaryDirectory()
        let source = try SampleGeodatabases.fieldInspection(in: dir)
        var (_, stored) = try await Self.changes(of: source, layer: DownloadApplierTests.table)
        stored[1].stored!.geometry = [0x47, 0x50, 0, 1, 2, 3]
        let replica = try SampleGeodatabases.emptyFieldInspection(in: dir, name: "replica.gpkg")
        await #expect {
            _ = try await DownloadApplierTests.apply(Array(stored.prefix(3)), to: replica)
        } throws: { ($0 as? SyncError)?.code == .invalidResponse }
        #expect(try await replica.table(named: DownloadApplierTests.table).features(matching: FeatureQuery()).isEmpty)
    }
}
