import Foundation
import OutpostCore
import OutpostDigest
import OutpostHTTPTestSupport
import OutpostLoadTesting
import OutpostProtocol
import OutpostServer
import OutpostStorage
import OutpostSyncService
import OutpostTestSupport
import Testing

@testable import OutpostSync

/// A field-inspection service behind a proxy that feeds the oracle every accepted batch and can
/// drop the next upload or change page, with what the service held at the start; and the checks
/// every randomised run ends with.
final class ObservedService: Sendable {
    /// A replica and what of the service it must hold.
    struct Replica: Sendable {
        var name: String
        var gdb: Geodatabase
        var layers: [Int]
        /// The server query that selects what it must hold, per layer.
        var scope: [Int: FeatureQuery]
    }

    /// A proxy action waiting for the next upload or change page.
    final class NextAction: Sendable {
        private let action = Locked<LoopbackProxy.Action?>(nil)
        func set(_ a: LoopbackProxy.Action?) { action.withLock { $0 = a } }
        func take() -> LoopbackProxy.Action? { action.withLock { a in defer { a = nil }; return a } }
    }

    let harness: SyncHarness
    let proxy: LoopbackProxy
    let oracle = Oracle()
    /// What the proxy does to the next batch upload or change page (then forwards again).
    let next = NextAction()
    let schema: ServiceSchema
    let initial: [Int: [String: Oracle.Row]]

    /// The URL replicas sync through (the proxy's).
    var url: URL { proxy.url(for: harness.url) }

    init(_ harness: SyncHarness) async throws {
        self.harness = harness
        schema = try await harness.service.backend.schema()
        var initial: [Int: [String: Oracle.Row]] = [:]
        for layer in schema.allLayers {
            for f in try await harness.service.backend.features(layerID: layer.id, query: FeatureQuery(limit: 100_000)) {
                initial[layer.id, default: [:]][f.globalID!] = try Oracle.row(f, layer)
            }
        }
        self.initial = initial
        let oracle = self.oracle, next = self.next
        proxy = try await LoopbackProxy.start(upstream: harness.live.baseURL, observer: oracle.observe) { _, uri in
            guard uri.contains("/batches/") || uri.contains("/changes") else { return .forward }
            return next.take() ?? .forward
        }
    }

    func stop() async throws {
        try await proxy.stop()
        try await harness.stop()
    }

    /// Records in the oracle a batch a service applied from an edits file (the proxy sees no
    /// file): the batch as the file carries it and the answer as the reply does.
    func observeDelta(edits: URL, reply: URL) throws {
        guard let (kind, body) = try DeltaReader(url: edits).next(), kind == .batch else { return }
        let answerReader = try DeltaReader(url: reply)
        guard let (answerKind, answer) = try answerReader.next(), answerKind == .batchAnswer else { return }
        let batch = try UploadBatch.decode(body)
        let result = try BatchResult(json: JSONValue.parse(answer))
        guard result.replayed != true, let generation = result.generation else { return }
        oracle.record(generation, .batch(batch, result))
    }

    /// What a run's end found, for checks of its own.
    struct Outcome {
        /// Values resolutions discarded.
        var discarded = 0
        /// Attachments the replicas that sync them hold.
        var attachments = 0
    }

    /// The invariants at the end of a run, everything synced: the service holds exactly what the
    /// oracle does (every accepted edit once, none lost: I3, I4), each discarded value has a
    /// conflict record (I8), and each replica equals the service within its scope, attachments
    /// included, with nothing pending (I9).
    @discardableResult
    func expectInvariants(_ replicas: [Replica], label: String, sourceLocation: SourceLocation = #_sourceLocation) async throws -> Outcome {
        let h = harness, schema = self.schema
        var outcome = Outcome()
        let (expected, discarded) = oracle.expected(from: initial, policy: { schema.layer(id: $0)?.conflicts ?? .default }) { id in
            schema.layer(id: id).flatMap { $0.isSpatial ? $0.geometryColumn : nil }
        }
        outcome.discarded = discarded.count
        for layer in try await h.service.backend.schema().allLayers {
            var actual: [String: Oracle.Row] = [:]
            let features = try await h.service.backend.features(layerID: layer.id, query: FeatureQuery(limit: 100_000))
            for f in features { actual[f.globalID!] = try Oracle.row(f, layer) }
            #expect(actual.count == features.count, "\(label): layer \(layer.id) holds \(features.count - actual.count) duplicated features", sourceLocation: sourceLocation)
            // Rows the oracle knew before a field was added have it null.
            let want = (expected[layer.id] ?? [:]).mapValues { row in
                row.merging(layer.fields.filter { $0.type != .oid && $0.type != .globalID && row[$0.name] == nil }.map { ($0.name, JSONValue.null) }) { a, _ in a }
            }
            let wrong = Set(actual.keys).symmetricDifference(want.keys).union(actual.keys.filter { want[$0] != nil && want[$0] != actual[$0] })
            #expect(
                wrong.isEmpty,
                "\(label): layer \(layer.id): \(wrong.count) features differ from the oracle, e.g. \(wrong.first.map { "\($0): server \(String(describing: actual[$0])) oracle \(String(describing: want[$0]))" } ?? "")",
                sourceLocation: sourceLocation)
        }
        var recorded = Set<Oracle.Discard>()
        for r in try await (h.service.backend as! any SyncBackend).conflictRecords() {
            for c in r.columns { recorded.insert(Oracle.Discard(replica: r.replicaId ?? "", seq: r.seq ?? 0, globalId: r.globalId, column: c)) }
        }
        let missing = discarded.subtracting(recorded)
        #expect(
            missing.isEmpty, "\(label): \(missing.count) of \(discarded.count) discarded values have no conflict record, e.g. \(missing.first.map(String.init(describing:)) ?? "")",
            sourceLocation: sourceLocation)
        for r in replicas {
            for id in r.layers {
                let table = schema.layer(id: id)!.name
                let gids = try await r.gdb.table(named: table).features().compactMap(\.globalID)
                #expect(Set(gids).count == gids.count, "\(label): \(r.name) holds duplicated features in \(table)", sourceLocation: sourceLocation)
                guard Set(gids).count == gids.count else { continue }
                try await h.expectConverged(r.gdb, table: table, layerID: id, scope: r.scope[id] ?? FeatureQuery(), sourceLocation: sourceLocation)
            }
            if try await r.gdb.read({ try $0.replicaState()?.attachmentsDirection }) == .bidirectional {
                let (here, there) = try await attachments(r)
                let differing = Set(here.keys).union(there.keys).filter { here[$0] != there[$0] }
                #expect(differing.isEmpty, "\(label): \(r.name): \(differing.count) features' attachments differ from the server's", sourceLocation: sourceLocation)
                outcome.attachments += there.values.reduce(0) { $0 + $1.count }
            }
            #expect(try await r.gdb.read { try $0.capturedChanges().count } == 0, "\(label): \(r.name) has nothing pending", sourceLocation: sourceLocation)
        }
        return outcome
    }

    /// A replica's attachments of the points and the server's for the same features: feature
    /// global id → attachment global id → content hash.
    func attachments(_ r: Replica) async throws -> (here: [String: [String: String]], there: [String: [String: String]]) {
        let local = try await r.gdb.read { conn -> [String: [String: String]] in
            var gids: [String] = []
            try conn.geodatabase.table(named: "inspection_points").forEach(matching: FeatureQuery(returnGeometry: false), in: conn) { if let g = $0.globalID { gids.append(g) } }
            return try conn.attachmentRecords(layer: "inspection_points", featureGlobalIDs: gids).mapValues { list in
                Dictionary(uniqueKeysWithValues: try list.map { ($0.globalID, try conn.attachmentSHA256(id: $0.id)) })
            }
        }
        let backend = harness.service.backend
        var server: [String: [String: String]] = [:]
        var query = r.scope[0] ?? FeatureQuery()
        query.limit = 100_000
        for f in try await backend.features(layerID: 0, query: query) {
            var list: [String: String] = [:]
            for a in try await backend.attachments(layerID: 0, objectID: f.objectID!) {
                let bytes = try await backend.attachmentBytes(layerID: 0, attachmentID: a.id, offset: 0, length: Int(a.size))
                list[a.globalID] = SHA256.hex([UInt8](bytes))
            }
            if !list.isEmpty { server[f.globalID!] = list }
        }
        return (local.filter { !$0.value.isEmpty }, server)
    }
}
