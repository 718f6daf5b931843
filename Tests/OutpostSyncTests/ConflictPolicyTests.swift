import Foundation
import OutpostCore
import OutpostProtocol
import OutpostServer
import OutpostStorage
import OutpostSyncService
import OutpostTestSupport
import OutpostServiceTestSupport
import Testing

@testable import OutpostSync

/// Conflict policies (docs/sync.md, "Conflicts"): every pair of concurrent operations, each rule,
/// over real HTTP, with the records checked on the server and in the replica.
@Suite("Conflict policies")
struct ConflictPolicyTests {
    /// A replica of the points layer, one of its features, and that feature's server object id.
    struct Scenario {
        let h: SyncHarness
        let gdb: Geodatabase
        let points: FeatureTable
        let local: Feature
        let serverID: Int64
        var gid: String { local.globalID! }

        static func start(_ kind: BackendKind, _ policy: ConflictPolicy?) async throws -> Scenario {
            let h = try await SyncHarness.start(kind, policy: policy)
            let gdb = try await h.replica(layers: [0])
            let points = try gdb.table(named: "inspection_points")
            let local = try #require(try await points.feature(objectID: 3))
            var q = FeatureQuery()
            q.globalIDs = [local.globalID!]
            let serverID = try #require(try await h.service.backend.features(layerID: 0, query: q).first?.objectID)
            return Scenario(h: h, gdb: gdb, points: points, local: local, serverID: serverID)
        }

        func crewUpdate(_ attributes: [String: FieldValue], geometry: Geometry? = nil) async throws {
            try await points.update([Feature(objectID: local.objectID, attributes: attributes, geometry: geometry)])
        }

        func officeUpdate(_ attributes: [String: FieldValue], geometry: Geometry? = nil) async throws {
            try await h.serverEdit(layer: 0, updates: [Feature(objectID: serverID, attributes: attributes, geometry: geometry)])
        }

        func server() async throws -> SyncHarness.Row? { try await h.serverRows(0)[gid] }
        func replica() async throws -> SyncHarness.Row? { try await SyncHarness.localRows(gdb, "inspection_points")[gid] }

        func serverRecords() async throws -> [ConflictRecord] {
            try await (h.service.backend as! any SyncBackend).conflictRecords().filter { $0.globalId == gid }
        }

        func replicaRecords() async throws -> [(SyncConflict, ConflictRecord)] {
            try await gdb.read { try $0.conflicts() }.filter { $0.globalID == gid }.map {
                ($0, try JSONValueDecoder().decode(ConflictRecord.self, from: Data($0.record.utf8)))
            }
        }

        /// The same records on both sides (the replica mirrors what the server kept).
        func expectRecords(_ expected: [(policy: String, winner: String, columns: [String])], sourceLocation: SourceLocation = #_sourceLocation) async throws {
            let server = try await serverRecords(), mirrored = try await replicaRecords().map(\.1)
            let describe: ([ConflictRecord]) -> [String] = { $0.map { "\($0.policy)/\($0.winner)/\($0.columns.joined(separator: ","))" }.sorted() }
            let want = expected.map { "\($0.policy)/\($0.winner)/\($0.columns.joined(separator: ","))" }.sorted()
            #expect(describe(server) == want, "server records", sourceLocation: sourceLocation)
            #expect(describe(mirrored) == want, "replica records", sourceLocation: sourceLocation)
            #expect(Set(server.compactMap(\.id)) == Set(mirrored.compactMap(\.id)), sourceLocation: sourceLocation)
        }

        func finish() async throws {
            try await h.expectConverged(gdb, table: "inspection_points", layerID: 0)
            try await h.stop()
        }
    }

    /// The same column changed on both sides: each rule picks its winner, the loser's value is in
    /// the record on both sides, and the replica ends equal to the server.
    @Test(.scaledTimeLimit(minutes: 2), arguments: BackendKind.syncing, [ConflictPolicy.Rule.clientWins, .serverWins, .manual])
    func sameColumnOnBothSides(kind: BackendKind, _ rule: ConflictPolicy.Rule) async throws {
        let s = try await Scenario.start(kind, ConflictPolicy(rule: rule))
        try await s.crewUpdate(["notes": .string("crew")])
        try await s.officeUpdate(["notes": .string("office")])
        let results = try await s.h.sync(s.gdb)
        #expect(results.first?.conflicts == 1 && results.first?.merged == 0)
        let winner = rule == .clientWins ? "crew" : "office"
        #expect(try await s.server()?.attributes["notes"] == .string(winner))
        #expect(try await s.replica()?.attributes["notes"] == .string(winner), "the replica holds the winner too")
        try await s.expectRecords([(rule.rawValue, rule == .clientWins ? "ours" : "theirs", ["notes"])])
        let record = try #require(try await s.serverRecords().first)
        #expect(record.ours?["notes"] == .string("crew") && record.theirs?["notes"] == .string("office"))
        #expect(record.base?["notes"] == s.local.attributes["notes"]?.jsonValue)
        #expect(record.state == (rule == .manual ? "open" : nil))
        try await s.finish()
    }

    /// `latestEditWins` compares when the edits were made, not when they reached the server: a
    /// crew edit made before the office's loses even though it syncs later, and one made after
    /// wins.
    @Test(.scaledTimeLimit(minutes: 2), arguments: BackendKind.syncing, [true, false])
    func latestEditWinsByEditTime(kind: BackendKind, crewEditsLast: Bool) async throws {
        let s = try await Scenario.start(kind, ConflictPolicy(rule: .latestEditWins))
        if crewEditsLast {
            try await s.officeUpdate(["notes": .string("office")])
            try await Task.sleep(for: .milliseconds(20))
            try await s.crewUpdate(["notes": .string("crew")])
        } else {
            try await s.crewUpdate(["notes": .string("crew")])
            try await Task.sleep(for: .milliseconds(20))
            try await s.officeUpdate(["notes": .string("office")])
        }
        try await s.h.sync(s.gdb)
        let winner = crewEditsLast ? "crew" : "office"
        #expect(try await s.server()?.attributes["notes"] == .string(winner))
        try await s.expectRecords([("latestEditWins", crewEditsLast ? "ours" : "theirs", ["notes"])])
        let record = try #require(try await s.serverRecords().first)
        #expect(try #require(record.oursEditedAt) != "" && (record.oursEditedAt! > record.theirsEditedAt!) == crewEditsLast)
        try await s.finish()
    }

    /// Different columns changed on each side merge under every rule: no record, both changes
    /// kept, the edit reported as merged. Geometry and attributes are different columns too.
    @Test(.scaledTimeLimit(minutes: 2), arguments: BackendKind.syncing, ConflictPolicy.Rule.allCases)
    func differentColumnsMerge(kind: BackendKind, _ rule: ConflictPolicy.Rule) async throws {
        let s = try await Scenario.start(kind, ConflictPolicy(rule: rule))
        let moved = try point(-122.6655, 45.5121)
        try await s.crewUpdate(["notes": .string("crew")], geometry: moved)
        try await s.officeUpdate(["status": .string("closed"), "condition": .integer(2)])
        let results = try await s.h.sync(s.gdb)
        #expect(results.first?.conflicts == 0 && results.first?.merged == 1)
        let server = try #require(try await s.server())
        #expect(server.attributes["notes"] == .string("crew") && server.geometry == moved)
        #expect(server.attributes["status"] == .string("closed") && server.attributes["condition"] == .integer(2))
        try await s.expectRecords([])
        try await s.finish()
    }

    /// Geometry against geometry is a conflict like any column; with serverWins the crew's point
    /// is discarded (kept in the record) and the replica gets the office's back.
    @Test(.scaledTimeLimit(minutes: 2), arguments: BackendKind.syncing)
    func geometryAgainstGeometry(kind: BackendKind) async throws {
        let s = try await Scenario.start(kind, ConflictPolicy(rule: .serverWins))
        let crew = try point(-122.6655, 45.5121), office = try point(-122.6601, 45.5102)
        try await s.crewUpdate([:], geometry: crew)
        try await s.officeUpdate([:], geometry: office)
        try await s.h.sync(s.gdb)
        let (server, replica) = (try await s.server(), try await s.replica())
        #expect(server?.geometry == office && replica?.geometry == office)
        try await s.expectRecords([("serverWins", "theirs", ["geom"])])
        let record = try #require(try await s.serverRecords().first)
        #expect(try EsriJSON.decodeGeometry(try #require(record.ours?["geom"])) == crew)
        try await s.finish()
    }

    /// A per-field rule overrides the layer's, and a sync's requested rule replaces the layer's
    /// but not a field's.
    @Test(.scaledTimeLimit(minutes: 2), arguments: BackendKind.syncing)
    func fieldRulesOverrideTheLayerAndTheSync(kind: BackendKind) async throws {
        let s = try await Scenario.start(kind, ConflictPolicy(rule: .clientWins, fields: ["status": .serverWins, "inspector": .clientWins]))
        // Two statuses other than the feature's own, so both sides change it.
        let statuses = ["open", "in_progress", "closed"].filter { FieldValue.string($0) != s.local.attributes["status"] }
        try await s.crewUpdate(["notes": .string("crew"), "status": .string(statuses[0]), "inspector": .string("crew")])
        try await s.officeUpdate(["notes": .string("office"), "status": .string(statuses[1]), "inspector": .string("office")])
        try await s.h.sync(s.gdb)
        var server = try #require(try await s.server())
        #expect(server.attributes["notes"] == .string("crew") && server.attributes["inspector"] == .string("crew"))
        #expect(server.attributes["status"] == .string(statuses[1]))
        try await s.expectRecords([("clientWins", "ours", ["inspector", "notes"]), ("serverWins", "theirs", ["status"])])
        try await s.h.expectConverged(s.gdb, table: "inspection_points", layerID: 0)

        // This sync asks for serverWins: notes goes the server's way, inspector keeps its field
        // rule (clientWins).
        try await s.crewUpdate(["notes": .string("crew 2"), "inspector": .string("crew 2")])
        try await s.officeUpdate(["notes": .string("office 2"), "inspector": .string("office 2")])
        try await s.h.sync(s.gdb, SyncGeodatabaseParameters(conflictPolicy: .serverWins))
        server = try #require(try await s.server())
        #expect(server.attributes["notes"] == .string("office 2") && server.attributes["inspector"] == .string("crew 2"))
        try await s.finish()
    }

    /// Update here, delete there: the delete wins by default (the update's values recorded and
    /// the replica's copy removed); `updateResurrects` brings the feature back with its last
    /// values and the update applied.
    @Test(.scaledTimeLimit(minutes: 2), arguments: BackendKind.syncing, [ConflictPolicy.UpdateDeleteRule.deleteWins, .updateResurrects])
    func updateAgainstDelete(kind: BackendKind, _ rule: ConflictPolicy.UpdateDeleteRule) async throws {
        let s = try await Scenario.start(kind, ConflictPolicy(updateDelete: rule))
        try await s.officeUpdate(["inspector": .string("office, before deleting")])
        try await s.h.sync(s.gdb)
        try await s.crewUpdate(["notes": .string("crew")])
        try await s.h.serverEdit(layer: 0, deletes: [Feature(objectID: s.serverID)])
        try await s.h.sync(s.gdb)
        let server = try await s.server()
        if rule == .deleteWins {
            let replica = try await s.replica()
            #expect(server == nil && replica == nil)
            try await s.expectRecords([("deleteWins", "theirs", ["notes"])])
            #expect(try await s.serverRecords().first?.ours?["notes"] == .string("crew"))
        } else {
            #expect(server?.attributes["notes"] == .string("crew"))
            #expect(server?.attributes["inspector"] == .string("office, before deleting"), "the last values come back")
            #expect(server?.geometry == s.local.geometry)
            try await s.expectRecords([("updateResurrects", "ours", ["notes"])])
        }
        try await s.finish()
    }

    /// Delete here, update there: the delete wins by default (the server's values recorded);
    /// `keepServer` keeps the feature and the replica gets it back.
    @Test(.scaledTimeLimit(minutes: 2), arguments: BackendKind.syncing, [ConflictPolicy.DeleteUpdateRule.deleteWins, .keepServer])
    func deleteAgainstUpdate(kind: BackendKind, _ rule: ConflictPolicy.DeleteUpdateRule) async throws {
        let s = try await Scenario.start(kind, ConflictPolicy(deleteUpdate: rule))
        try await s.points.delete(objectIDs: [s.local.objectID!])
        try await s.officeUpdate(["notes": .string("office")])
        try await s.h.sync(s.gdb)
        if rule == .deleteWins {
            #expect(try await s.server() == nil)
            try await s.expectRecords([("deleteWins", "ours", ["notes"])])
            #expect(try await s.serverRecords().first?.theirs?["notes"] == .string("office"))
        } else {
            #expect(try await s.server()?.attributes["notes"] == .string("office"))
            #expect(try await s.replica()?.attributes["notes"] == .string("office"), "the replica has the feature back")
            try await s.expectRecords([("keepServer", "theirs", ["notes"])])
        }
        try await s.finish()
    }

    /// Deleted on both sides: nothing is discarded, so nothing is recorded.
    @Test(.scaledTimeLimit(minutes: 2), arguments: BackendKind.syncing)
    func deleteAgainstDelete(kind: BackendKind) async throws {
        let s = try await Scenario.start(kind, nil)
        try await s.points.delete(objectIDs: [s.local.objectID!])
        try await s.h.serverEdit(layer: 0, deletes: [Feature(objectID: s.serverID)])
        let results = try await s.h.sync(s.gdb)
        #expect(results.first?.conflicts == 0 && results.first?.editResults.isEmpty == true)
        let (server, replica) = (try await s.server(), try await s.replica())
        #expect(server == nil && replica == nil)
        try await s.expectRecords([])
        try await s.finish()
    }

    /// A manual conflict stays open until resolved on the replica: keeping ours is a normal edit
    /// that syncs; keeping theirs edits nothing; both close the server's record at the next sync.
    @Test(.scaledTimeLimit(minutes: 2), arguments: BackendKind.syncing, ["ours", "theirs", "values"])
    func manualConflictsAreResolvedLater(kind: BackendKind, _ keep: String) async throws {
        let s = try await Scenario.start(kind, ConflictPolicy(rule: .manual))
        try await s.crewUpdate(["notes": .string("crew"), "condition": .integer(1)])
        try await s.officeUpdate(["notes": .string("office"), "condition": .integer(4)])
        try await s.h.sync(s.gdb)
        let (open, _) = try #require(try await s.replicaRecords().first)
        #expect(open.state == "open")
        #expect(try await s.replica()?.attributes["notes"] == .string("office"), "the server's values stay until someone decides")
        let id = try #require(open.id)
        let resolution: ConflictResolution =
            switch keep {
            case "ours": .ours
            case "theirs": .theirs
            default: .values(["notes": .string("agreed"), "condition": .integer(3)])
            }
        try await s.gdb.write { try $0.resolveConflict(id: id, keep: resolution) }
        await #expect(throws: StorageError.self, "a resolved conflict cannot be resolved again") {
            try await s.gdb.write { try $0.resolveConflict(id: id, keep: .ours) }
        }
        try await s.h.sync(s.gdb)
        let (notes, condition): (String, Int64) = keep == "ours" ? ("crew", 1) : keep == "theirs" ? ("office", 4) : ("agreed", 3)
        let server = try #require(try await s.server())
        #expect(server.attributes["notes"] == .string(notes) && server.attributes["condition"] == .integer(condition))
        #expect(try await s.serverRecords().map(\.state) == ["resolved"])
        #expect(try await s.replicaRecords().map(\.0.state) == ["resolved"])
        #expect(try await s.replicaRecords().first?.0.resolution == keep)
        try await s.finish()
    }
}
