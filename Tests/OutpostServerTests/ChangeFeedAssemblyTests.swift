import Foundation
import OutpostCore
import OutpostProtocol
import OutpostServer
import OutpostStorage
import OutpostSyncService
import OutpostTestSupport
import Testing

/// The change feed's decisions without a database: which features a page reads, and what each
/// changed feature becomes for the replica (upsert, leave, or nothing for its own echo). And the
/// SQLite backend's reading of those features straight from their rows, against a decoded
/// feature converted.
@Suite("Change feed assembly")
struct ChangeFeedAssemblyTests {
    static let layer = LayerDefinition(
        id: 0, name: "points", geometryType: .point,
        fields: [FieldDefinition(name: "objectid", type: .oid), FieldDefinition(name: "globalid", type: .globalID), FieldDefinition(name: "status", type: .string)])

    static func row(_ n: Int, echo: Bool, inserted: Bool = false, deleted: Bool = false) -> ChangeFeedAssembly.Row {
        ChangeFeedAssembly.Row(globalID: gid(n), generation: Int64(10 + n), echo: echo, inserted: inserted, deleted: deleted)
    }

    static func gid(_ n: Int) -> String { "{00000000-0000-4000-8000-\(String(format: "%012d", n))}" }

    static func feature(_ n: Int) throws -> Feature {
        Feature(objectID: Int64(n), globalID: gid(n), attributes: ["status": .string("open")], geometry: .point(try Point(x: Double(n), y: 1)))
    }

    static let filtered = FeatureQuery(where: "status = 'open'")

    @Test func othersChangesAreReadWholeOwnOnlyForScope() {
        let rows = [Self.row(1, echo: false), Self.row(2, echo: true), Self.row(3, echo: false)]
        let reads = ChangeFeedAssembly.reads(rows, scope: Self.filtered)
        #expect(reads.count == 2)
        #expect(reads[0].globalIDs == [Self.gid(1), Self.gid(3)] && reads[0].outFields == nil && reads[0].whereClause == "status = 'open'")
        #expect(reads[1].globalIDs == [Self.gid(2)] && reads[1].outFields == [] && !reads[1].returnGeometry, "own changes: only whether still in scope")
    }

    @Test func aWholeLayerReplicaReadsNothingOfItsOwn() {
        let reads = ChangeFeedAssembly.reads([Self.row(1, echo: true), Self.row(2, echo: false)], scope: FeatureQuery())
        #expect(reads.count == 1 && reads[0].globalIDs == [Self.gid(2)])
        #expect(ChangeFeedAssembly.reads([Self.row(1, echo: true)], scope: FeatureQuery()).isEmpty)
    }

    @Test func aWindowOfOnlyItsOwnChangesIsEmptyForAWholeLayerReplicaOnly() {
        #expect(ChangeFeedAssembly.windowIsEmpty(scope: FeatureQuery(), othersChangedWindow: false))
        #expect(!ChangeFeedAssembly.windowIsEmpty(scope: FeatureQuery(), othersChangedWindow: true))
        // A filtered replica's own edit may have moved a feature out of its scope: read the window.
        #expect(!ChangeFeedAssembly.windowIsEmpty(scope: Self.filtered, othersChangedWindow: false))
        #expect(ChangeFeedAssembly.windowIsEmpty(scope: nil, othersChangedWindow: true))
    }

    @Test func aLayerOutsideTheReplicaReadsNothing() {
        #expect(ChangeFeedAssembly.reads([Self.row(1, echo: false)], scope: nil).isEmpty)
        #expect(ChangeFeedAssembly.reads([], scope: Self.filtered).isEmpty)
    }

    @Test func eachChangedFeatureBecomesWhatTheReplicaNeeds() throws {
        let rows = [
            Self.row(1, echo: false, inserted: true),  // someone added it, in scope: upsert (inserted)
            Self.row(2, echo: false),  // someone changed it out of scope or deleted it: leave
            Self.row(3, echo: true),  // only the replica changed it, still in scope: nothing
            Self.row(4, echo: true),  // the replica moved it out of its filter: leave
            Self.row(5, echo: true, deleted: true),  // the replica deleted it: nothing
        ]
        let inScope = [Self.gid(1): try Self.feature(1), Self.gid(3): try Self.feature(3)]
        let attachment = AttachmentInfo(globalId: Self.gid(9), name: "a.jpg", contentType: "image/jpeg", size: 3, sha256: String(repeating: "a", count: 64))
        let changes = try ChangeFeedAssembly.changes(
            rows, scope: Self.filtered, inScope: inScope, layer: Self.layer, attachments: [Self.gid(1): [attachment]])
        #expect(changes.map(\.globalId) == [Self.gid(1), Self.gid(2), Self.gid(4)])
        #expect(changes.map(\.kind) == [.upsert, .leave, .leave])
        #expect(changes[0].inserted == true && changes[0].generation == 11 && changes[0].attributes?["status"] == "open")
        #expect(changes[0].attributes?["objectid"] == nil, "the object id is the server's own")
        #expect(changes[0].attachments == [attachment])
    }

    @Test func aWholeLayerReplicaGetsNoLeaveForItsOwnChanges() throws {
        let changes = try ChangeFeedAssembly.changes([Self.row(4, echo: true)], scope: FeatureQuery(), inScope: [:], layer: Self.layer, attachments: nil)
        #expect(changes.isEmpty)
    }

    @Test func aFullPageNamesTheNextCursor() {
        let rows = [Self.row(1, echo: false), Self.row(2, echo: false)]
        #expect(ChangeFeedAssembly.next(rows, limit: 2) == Self.gid(2))
        #expect(ChangeFeedAssembly.next(rows, limit: 3) == nil)
    }

    @Test func aFeatureReadAsSyncValuesEqualsTheDecodedFeatureConverted() async throws {
        let dir = TemporaryDirectory()
        let gdb = try await SampleGeodatabases.fieldInspectionInOtherWritersForms(in: dir)
        defer { try? gdb.close() }
        try await gdb.read { conn in
            var compared = 0
            for layer in conn.geodatabase.schema.allLayers where layer.globalIDField != nil {
                let table = try conn.geodatabase.table(named: layer.name)
                let fields = layer.fields.filter { $0.type != .oid }
                var gids: [String] = []
                try table.forEach(matching: .all, in: conn) { if gids.count < 5, let gid = $0.globalID { gids.append(gid) } }
                var some = FeatureQuery()
                some.globalIDs = gids
                for query in [FeatureQuery.all, FeatureQuery(where: "objectid > 3"), some] {
                    var expected: [String: FeatureTable.SyncRow] = [:]
                    try table.forEach(matching: query, in: conn) { expected[$0.globalID!] = try ReplicaRows.syncRow($0, fields: fields) }
                    var read: [String: FeatureTable.SyncRow] = [:]
                    try table.forEachSyncRow(matching: query, in: conn) { read[$0.globalID] = $0 }
                    #expect(read.count == expected.count, "\(layer.name)")
                    for (gid, row) in expected {
                        #expect(read[gid]?.attributes == row.attributes, "\(layer.name) \(gid)")
                        #expect(read[gid]?.geometry == row.geometry, "\(layer.name) \(gid)")
                        compared += 1
                    }
                }
            }
            #expect(compared > 20)
            // An exact spatial filter is the feature reader's.
            var inArea = FeatureQuery()
            inArea.intersecting = .point(try Point(x: -122.6, y: 45.5))
            #expect(throws: StorageError.self) { try conn.geodatabase.table(named: "inspection_points").forEachSyncRow(matching: inArea, in: conn) { _ in } }
        }
    }
}
