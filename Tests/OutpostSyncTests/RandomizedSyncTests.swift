import Foundation
import OutpostCore
import OutpostDigest
import OutpostProtocol
import OutpostServer
import OutpostStorage
import OutpostSyncService
import OutpostTestSupport
import OutpostServiceTestSupport
import OutpostHTTPTestSupport
import OutpostLoadTesting
import Synchronization
import Testing

@testable import OutpostSync

@Suite("Randomised: several replicas, random edits, random faults, against an oracle")
struct RandomizedSyncTests {
    typealias Replica = ObservedService.Replica

    static let west = Envelope(xmin: -122.70, ymin: 45.49, xmax: -122.65, ymax: 45.56)
    static let north = Envelope(xmin: -122.70, ymin: 45.53, xmax: -122.60, ymax: 45.56)

    static func intersecting(_ e: Envelope) -> FeatureQuery {
        var q = FeatureQuery()
        q.intersecting = .polygon(e.polygon)
        return q
    }

    /// Seeds and policies: the default (clientWins, deleteWins) twice, then every other rule.
    static let runs: [(seed: UInt64, policyName: String)] = [
        (20261122, "clientWins"), (7_340_033, "clientWins"), (4_111, "serverWins"), (5_227, "latestEditWins"), (6_343, "manual"),
        (7_459, "updateResurrects+keepServer"),
    ]

    static func policy(_ name: String) -> ConflictPolicy {
        switch name {
        case "updateResurrects+keepServer": ConflictPolicy(updateDelete: .updateResurrects, deleteUpdate: .keepServer)
        default: ConflictPolicy(rule: ConflictPolicy.Rule(rawValue: name)!)
        }
    }

    @Test(.scaledTimeLimit(minutes: 6), arguments: BackendKind.syncing, runs)
    func replicasConvergeAndTheServerMatchesTheOracle(kind: BackendKind, run: (seed: UInt64, policyName: String)) async throws {
        var rng = SeededGenerator(state: run.seed)
        let policy = Self.policy(run.policyName)
        let (seed, policyName) = run
        let observed = try await ObservedService(try await SyncHarness.start(kind, policy: policy))
        let h = observed.harness, schema = observed.schema, oracle = observed.oracle, url = observed.url

        let replicas = [
            Replica(name: "all", gdb: try await h.replica("all", url: url, attachments: .bidirectional), layers: [0, 1, 2, 3], scope: [:]),
            Replica(
                name: "west", gdb: try await h.replica("west", extent: Self.west, layers: [0, 3], url: url, attachments: .bidirectional), layers: [0, 3],
                scope: [0: Self.intersecting(Self.west)]),
            Replica(
                name: "open", gdb: try await h.replica("open", layers: [0], where: [0: "status = 'open'"], model: .layer, url: url), layers: [0],
                scope: [0: FeatureQuery(where: "status = 'open'")]),  // attachments: none
            Replica(name: "north", gdb: try await h.replica("north", extent: Self.north, layers: [0, 1], model: .layer, url: url), layers: [0, 1], scope: [0: Self.intersecting(Self.north), 1: Self.intersecting(Self.north)]),
        ]
        let faultPoints = ExactlyOnceTests.clientPoints
        var failures = 0, syncs = 0
        for round in 0..<6 {
            // Half way, the service gains a field (replicas migrate at their next download, with
            // edits pending); the office fills it from then on.
            if round == 3 {
                var next = try await h.service.backend.schema()
                next.layers[0].fields.append(FieldDefinition(name: "photo_count", type: .smallInteger, nullable: true))
                let steps = try await (h.service.backend as! any SyncBackend).migrate(to: next, allowDrop: false)
                #expect(steps.map(\.kind) == [.addField])
            }
            // Local edits on every replica.
            for r in replicas.indices {
                for _ in 0..<Int.random(in: 3...8, using: &rng) {
                    try await Self.randomLocalEdit(replicas[r], &rng)
                }
            }
            // Another user edits the server directly (apart in time from the crews' edits, so
            // latestEditWins has one answer).
            try await Task.sleep(for: .milliseconds(5))
            for _ in 0..<Int.random(in: 3...10, using: &rng) {
                try await Self.randomServerEdit(h, oracle, schema, &rng)
            }
            try await Task.sleep(for: .milliseconds(5))
            // Syncs in random order, some with a fault.
            for r in replicas.indices.shuffled(using: &rng) {
                let faults = FaultInjector()
                switch Int.random(in: 0..<10, using: &rng) {
                case 0, 1: faults.arm(faultPoints.randomElement(using: &rng)!)
                case 2: observed.next.set(.dropResponse)
                case 3: observed.next.set(.dropRequest)
                default: break
                }
                syncs += 1
                do {
                    try await h.sync(replicas[r].gdb, SyncGeodatabaseParameters(attempts: 1), faults: faults, url: url)
                } catch {
                    failures += 1
                }
                observed.next.set(nil)
            }
            // Manual conflicts: each crew decides some of its open ones (a normal edit that syncs).
            for r in replicas {
                for c in try await r.gdb.read({ try $0.conflicts() }) where c.state == "open" && Bool.random(using: &rng) {
                    let keep: ConflictResolution = Bool.random(using: &rng) ? .ours : .theirs
                    try await r.gdb.write { try $0.resolveConflict(id: c.id!, keep: keep) }
                }
            }
            _ = round
        }
        // Quiesce: everything uploaded, then everything downloaded.
        for _ in 0..<2 {
            for r in replicas { try await h.sync(r.gdb, url: url) }
        }
        #expect(failures > 0, "the run injected failures (\(failures) of \(syncs) syncs failed)")
        #expect(oracle.batchCount >= replicas.count, "the oracle saw the accepted batches (\(oracle.batchCount))")

        let migrated = try await h.service.backend.schema()
        #expect(migrated.schemaVersion == schema.schemaVersion + 1)
        let outcome = try await observed.expectInvariants(replicas, label: "seed \(seed), \(policyName)")
        if policyName != "clientWins" { #expect(outcome.discarded > 0, "the run met conflicts (\(policyName))") }
        #expect(outcome.attachments > 0, "the run synced attachments")
        try await observed.stop()
    }

    static let types = ["hydrant", "valve", "manhole", "meter", "pole"]
    static let statuses = ["open", "in_progress", "closed"]

    static func randomPoint(_ rng: inout SeededGenerator) throws -> Geometry {
        try point(Double.random(in: -122.70 ... -122.60, using: &rng).rounded(toPlaces: 5), Double.random(in: 45.49...45.56, using: &rng).rounded(toPlaces: 5))
    }

    static func randomGlobalID(_ rng: inout SeededGenerator) -> String { GlobalID.make(using: &rng) }

    static func randomLocalEdit(_ r: Replica, _ rng: inout SeededGenerator) async throws {
        let layerID = r.layers.contains(3) && Bool.random(using: &rng) && Int.random(in: 0..<3, using: &rng) == 0 ? 3 : 0
        let table = try r.gdb.table(id: layerID)
        let ids = try await table.objectIDs()
        let roll = Int.random(in: 0..<10, using: &rng)
        if roll < 2 || ids.isEmpty {
            if layerID == 3 {
                _ = try await table.add([Feature(globalID: randomGlobalID(&rng), attributes: [
                    "point_globalid": .string(randomGlobalID(&rng)), "action": .string("note \(Int.random(in: 0..<1000, using: &rng))"), "logged_at": .date(Date(timeIntervalSince1970: Double(Int.random(in: 1_700_000_000...1_800_000_000, using: &rng)))),
                ])])
            } else {
                _ = try await table.add([Feature(globalID: randomGlobalID(&rng), attributes: [
                    "asset_id": .string("R-\(Int.random(in: 0..<100_000, using: &rng))"), "asset_type": .string(types.randomElement(using: &rng)!),
                    "status": .string(statuses.randomElement(using: &rng)!), "condition": .integer(Int64.random(in: 1...5, using: &rng)),
                ], geometry: try randomPoint(&rng))])
            }
            return
        }
        // Most edits go to a small hot set the office edits too, so conflicts are common.
        let hot = ids.sorted().prefix(40)
        let id = (Int.random(in: 0..<10, using: &rng) < 7 ? hot.randomElement(using: &rng) : nil) ?? ids.randomElement(using: &rng)!
        // Photos: added to or removed from points of replicas that sync attachments.
        if layerID == 0, try await r.gdb.read({ try $0.replicaState()?.attachmentsDirection }) == .bidirectional, roll == 3 || roll == 4 {
            let existing = try await table.attachments(forFeature: id)
            if roll == 4, let doomed = existing.randomElement(using: &rng) {
                try await table.deleteAttachment(id: doomed.id)
            } else {
                let bytes = Data((0..<Int.random(in: 1_000...20_000, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) })
                _ = try await table.addAttachment(toFeature: id, name: "photo-\(Int.random(in: 0..<1000, using: &rng)).jpg", contentType: "image/jpeg", data: bytes)
            }
            return
        }
        if roll == 2 {
            try await table.delete(objectIDs: [id])
            return
        }
        var f = Feature(objectID: id)
        if layerID == 3 {
            f.attributes["note"] = .string("edited \(Int.random(in: 0..<1000, using: &rng))")
        } else {
            switch Int.random(in: 0..<4, using: &rng) {
            case 0: f.attributes["notes"] = .string("n\(Int.random(in: 0..<1000, using: &rng))")
            case 1: f.attributes["status"] = .string(statuses.randomElement(using: &rng)!)
            case 2: f.attributes["condition"] = .integer(Int64.random(in: 1...5, using: &rng))
            default: f.geometry = try randomPoint(&rng)
            }
        }
        try await table.update([f])
    }

    static func randomServerEdit(_ h: SyncHarness, _ oracle: Oracle, _ schema: ServiceSchema, _ rng: inout SeededGenerator) async throws {
        let layer = schema.layer(id: 0)!
        let features = try await h.service.backend.features(layerID: 0, query: FeatureQuery(limit: 100_000))
        let hot = features.sorted { $0.objectID! < $1.objectID! }.prefix(40)
        let target = (Int.random(in: 0..<10, using: &rng) < 7 ? hot.randomElement(using: &rng) : nil) ?? features.randomElement(using: &rng)!
        var upserts: [String: Oracle.Row] = [:]
        var deletes: [String] = []
        switch Int.random(in: 0..<6, using: &rng) {
        case 0:
            try await h.serverEdit(layer: 0, deletes: [Feature(objectID: target.objectID)])
            deletes = [target.globalID!]
        case 1:
            let gid = randomGlobalID(&rng)
            let f = Feature(globalID: gid, attributes: ["asset_id": .string("S-\(Int.random(in: 0..<1000, using: &rng))"), "asset_type": .string("meter"), "status": .string("open")], geometry: try randomPoint(&rng))
            try await h.serverEdit(layer: 0, adds: [f])
            var q = FeatureQuery()
            q.globalIDs = [gid]
            upserts[gid] = try Oracle.row(try await h.service.backend.features(layerID: 0, query: q)[0], layer)
        default:
            var f = Feature(objectID: target.objectID)
            let status = statuses.randomElement(using: &rng)!
            f.attributes["status"] = .string(status)
            f.attributes["notes"] = .string("office \(Int.random(in: 0..<1000, using: &rng))")
            if Bool.random(using: &rng) { f.geometry = try randomPoint(&rng) }
            let photos = try await h.service.backend.schema().layer(id: 0)?.field(named: "photo_count") != nil
            if photos { f.attributes["photo_count"] = .integer(Int64.random(in: 0...9, using: &rng)) }
            try await h.serverEdit(layer: 0, updates: [f])
            var row: Oracle.Row = ["status": .string(status), "notes": f.attributes["notes"]!.jsonValue]
            if photos { row["photo_count"] = f.attributes["photo_count"]!.jsonValue }
            if let g = f.geometry { row[layer.geometryColumn] = try JSONValue.parse(try EsriJSON.encode(g)) }
            upserts[target.globalID!] = row
        }
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        oracle.record(try await h.service.backend.generation(), .direct(layer: 0, upserts: upserts, deletes: deletes, editedAt: formatter.string(from: Date())))
    }
}

extension Double {
    func rounded(toPlaces places: Int) -> Double {
        let scale = Foundation.pow(10, Double(places))
        return (self * scale).rounded() / scale
    }
}
