import Foundation
import OutpostCore
import OutpostProtocol
import OutpostServer
import OutpostStorage
import OutpostTestSupport
import Synchronization
import Testing

@testable import OutpostSync

/// A small deterministic generator (SplitMix64), so a failing seed can be replayed.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// What the server must hold: the initial data with every accepted change applied in generation
/// order, from two sources the test sees independently of the server's own bookkeeping — the
/// batches as the proxy saw them accepted, and the direct edits the test made.
final class Oracle: Sendable {
    typealias Row = [String: JSONValue]

    enum Event: Sendable {
        case batch(UploadBatch, BatchResult)
        case direct(layer: Int, upserts: [String: Row], deletes: [String])
    }

    private let events = Mutex<[(Int64, Event)]>([])

    var batchCount: Int { events.withLock { $0.filter { if case .batch = $0.1 { true } else { false } }.count } }

    func record(_ generation: Int64, _ event: Event) {
        events.withLock { $0.append((generation, event)) }
    }

    /// The proxy's view: accepted batch uploads (replays excluded: they applied nothing).
    func observe(_ method: String, _ uri: String, _ request: Data, _ status: Int, _ response: Data) {
        guard method == "PUT", uri.contains("/batches/"), status == 200,
            let batch = try? UploadBatch.decode(request), let result = try? JSONDecoder().decode(BatchResult.self, from: response),
            result.replayed != true, let generation = result.generation
        else { return }
        record(generation, .batch(batch, result))
    }

    /// `initial` with the events applied in generation order.
    func expected(from initial: [Int: [String: Row]], geometryColumn: (Int) -> String?) -> [Int: [String: Row]] {
        var state = initial
        for (_, event) in events.withLock({ $0 }).sorted(by: { $0.0 < $1.0 }) {
            switch event {
            case .batch(let batch, let result):
                for layer in batch.layers {
                    let outcomes = result.layers.first { $0.id == layer.id }?.results ?? []
                    let geometry = geometryColumn(layer.id)
                    for edit in layer.edits where outcomes.first(where: { $0.globalId == edit.globalId })?.success == true {
                        switch edit.op {
                        case .insert:
                            guard state[layer.id]?[edit.globalId] == nil else { continue }
                            var row = edit.attributes ?? [:]
                            if let geometry { row[geometry] = edit.geometry ?? .null }
                            state[layer.id, default: [:]][edit.globalId] = row
                        case .update:
                            guard var row = state[layer.id]?[edit.globalId] else { continue }  // deleted: the delete wins
                            for c in edit.changedColumns ?? [] {
                                row[c] = c == geometry ? edit.geometry ?? .null : edit.attributes?[c] ?? .null
                            }
                            state[layer.id]![edit.globalId] = row
                        case .delete:
                            state[layer.id]?[edit.globalId] = nil
                        }
                    }
                }
            case .direct(let layer, let upserts, let deletes):
                for (gid, values) in upserts {
                    var row = state[layer]?[gid] ?? [:]
                    row.merge(values) { _, new in new }
                    state[layer, default: [:]][gid] = row
                }
                for gid in deletes { state[layer]?[gid] = nil }
            }
        }
        return state
    }

    /// A feature as sync JSON: every attribute but the ids, the geometry as Esri JSON.
    static func row(_ f: Feature, _ layer: LayerDefinition) throws -> Row {
        var row: Row = [:]
        for field in layer.fields where field.type != .oid && field.type != .globalID { row[field.name] = (f.attributes[field.name] ?? .null).jsonValue }
        if layer.isSpatial { row[layer.geometryColumn] = try f.geometry.map { try JSONValue.parse(try EsriJSON.encode($0)) } ?? .null }
        return row
    }
}

@Suite("Randomised: several replicas, random edits, random faults, against an oracle")
struct RandomizedSyncTests {
    struct Replica: Sendable {
        var name: String
        var gdb: Geodatabase
        var layers: [Int]
        /// The server query that selects what it must hold, per layer.
        var scope: [Int: FeatureQuery]
    }

    static let west = Envelope(xmin: -122.70, ymin: 45.49, xmax: -122.65, ymax: 45.56)
    static let north = Envelope(xmin: -122.70, ymin: 45.53, xmax: -122.60, ymax: 45.56)

    static func intersecting(_ e: Envelope) -> FeatureQuery {
        var q = FeatureQuery()
        q.intersecting = .polygon(e.polygon)
        return q
    }

    @Test(.timeLimit(.minutes(6)), arguments: [UInt64(20261122), 7_340_033])
    func replicasConvergeAndTheServerMatchesTheOracle(seed: UInt64) async throws {
        var rng = SeededGenerator(state: seed)
        let h = try await SyncHarness.start()
        let schema = try await h.service.backend.schema()
        let oracle = Oracle()
        let dropping = Mutex<LoopbackProxy.Action?>(nil)
        let proxy = try await LoopbackProxy.start(upstream: h.live.baseURL, observer: oracle.observe) { method, uri in
            // A pending drop applies to the next batch upload or change page.
            guard uri.contains("/batches/") || uri.contains("/changes") else { return .forward }
            return dropping.withLock { d in
                defer { d = nil }
                return d ?? .forward
            }
        }
        let url = proxy.url(for: h.url)
        var initial: [Int: [String: Oracle.Row]] = [:]
        for layer in schema.allLayers {
            for f in try await h.service.backend.features(layerID: layer.id, query: FeatureQuery(limit: 100_000)) {
                initial[layer.id, default: [:]][f.globalID!] = try Oracle.row(f, layer)
            }
        }

        let replicas = [
            Replica(name: "all", gdb: try await h.replica("all", url: url), layers: [0, 1, 2, 3], scope: [:]),
            Replica(name: "west", gdb: try await h.replica("west", extent: Self.west, layers: [0, 3], url: url), layers: [0, 3], scope: [0: Self.intersecting(Self.west)]),
            Replica(
                name: "open", gdb: try await h.replica("open", layers: [0], where: [0: "status = 'open'"], model: .layer, url: url), layers: [0],
                scope: [0: FeatureQuery(where: "status = 'open'")]),
            Replica(name: "north", gdb: try await h.replica("north", extent: Self.north, layers: [0, 1], model: .layer, url: url), layers: [0, 1], scope: [0: Self.intersecting(Self.north), 1: Self.intersecting(Self.north)]),
        ]
        let faultPoints = ExactlyOnceTests.clientPoints
        var failures = 0, syncs = 0
        for round in 0..<6 {
            // Local edits on every replica.
            for r in replicas.indices {
                for _ in 0..<Int.random(in: 3...8, using: &rng) {
                    try await Self.randomLocalEdit(replicas[r], &rng)
                }
            }
            // Another user edits the server directly.
            for _ in 0..<Int.random(in: 1...4, using: &rng) {
                try await Self.randomServerEdit(h, oracle, schema, &rng)
            }
            // Syncs in random order, some with a fault.
            for r in replicas.indices.shuffled(using: &rng) {
                let faults = FaultInjector()
                switch Int.random(in: 0..<10, using: &rng) {
                case 0, 1: faults.arm(faultPoints.randomElement(using: &rng)!)
                case 2: dropping.withLock { $0 = .dropResponse }
                case 3: dropping.withLock { $0 = .dropRequest }
                default: break
                }
                syncs += 1
                do {
                    try await h.sync(replicas[r].gdb, SyncGeodatabaseParameters(attempts: 1), faults: faults, url: url)
                } catch {
                    failures += 1
                }
                dropping.withLock { $0 = nil }
            }
            _ = round
        }
        // Quiesce: everything uploaded, then everything downloaded.
        for _ in 0..<2 {
            for r in replicas { try await h.sync(r.gdb, url: url) }
        }
        #expect(failures > 0, "the run injected failures (\(failures) of \(syncs) syncs failed)")
        #expect(oracle.batchCount >= replicas.count, "the oracle saw the accepted batches (\(oracle.batchCount))")

        // The server equals the oracle.
        let expected = oracle.expected(from: initial) { id in schema.layer(id: id).flatMap { $0.isSpatial ? $0.geometryColumn : nil } }
        for layer in schema.allLayers {
            var actual: [String: Oracle.Row] = [:]
            for f in try await h.service.backend.features(layerID: layer.id, query: FeatureQuery(limit: 100_000)) { actual[f.globalID!] = try Oracle.row(f, layer) }
            let want = expected[layer.id] ?? [:]
            let wrong = Set(actual.keys).symmetricDifference(want.keys).union(actual.keys.filter { want[$0] != nil && want[$0] != actual[$0] })
            #expect(wrong.isEmpty, "seed \(seed): layer \(layer.id): \(wrong.count) features differ from the oracle, e.g. \(wrong.first.map { "\($0): server \(String(describing: actual[$0])) oracle \(String(describing: want[$0]))" } ?? "")")
        }
        // Each replica equals the server within its filter.
        for r in replicas {
            for id in r.layers {
                let table = schema.layer(id: id)!.name
                try await h.expectConverged(r.gdb, table: table, layerID: id, scope: r.scope[id] ?? FeatureQuery())
            }
            #expect(try await r.gdb.read { try $0.capturedChanges().count } == 0, "\(r.name) has nothing pending")
        }
        try await proxy.stop()
        try await h.stop()
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
        let id = ids.randomElement(using: &rng)!
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
        let target = features.randomElement(using: &rng)!
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
            try await h.serverEdit(layer: 0, updates: [f])
            var row: Oracle.Row = ["status": .string(status), "notes": f.attributes["notes"]!.jsonValue]
            if let g = f.geometry { row[layer.geometryColumn] = try JSONValue.parse(try EsriJSON.encode(g)) }
            upserts[target.globalID!] = row
        }
        oracle.record(try await h.service.backend.generation(), .direct(layer: 0, upserts: upserts, deletes: deletes))
    }
}

extension Double {
    func rounded(toPlaces places: Int) -> Double {
        let scale = Foundation.pow(10, Double(places))
        return (self * scale).rounded() / scale
    }
}
