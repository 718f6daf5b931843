import Foundation
import OutpostCore
import OutpostProtocol
import OutpostStorage

/// What the server must hold: the initial data with every accepted change applied in generation
/// order by the layer's conflict policy, from two sources the test sees independently of the
/// server's own bookkeeping — the batches as the proxy saw them accepted, and the direct edits
/// the test made. It also lists every value a resolution discarded, which the server must have
/// kept in a conflict record (invariant I8).
public final class Oracle: Sendable {
    /// A feature's values by column.
    public typealias Row = [String: JSONValue]

    /// A change the server accepted.
    public enum Event: Sendable {
        /// A batch and the server's answer to it.
        case batch(UploadBatch, BatchResult)
        /// Edits made directly on the service (not through a replica).
        case direct(layer: Int, upserts: [String: Row], deletes: [String], editedAt: String)
    }

    /// A value the server discarded in resolving a conflict: which batch, feature and column.
    public struct Discard: Hashable, Sendable, CustomStringConvertible {
        /// The replica whose batch lost the value.
        public var replica: String
        /// The batch's sequence number.
        public var seq: Int64
        /// The feature's global id.
        public var globalId: String
        /// The column.
        public var column: String

        /// A discard of these values.
        public init(replica: String, seq: Int64, globalId: String, column: String) {
            self.replica = replica
            self.seq = seq
            self.globalId = globalId
            self.column = column
        }

        public var description: String { "\(globalId).\(column) (batch \(seq) of \(replica))" }
    }

    private let events = Locked<[(Int64, Event)]>([])

    /// An oracle with no events.
    public init() {}

    /// How many batches were recorded.
    public var batchCount: Int { events.withLock { $0.filter { if case .batch = $0.1 { true } else { false } }.count } }

    /// Records an event committed under `generation` (a batch's geometry blobs kept as their
    /// Esri JSON, the form the oracle compares; a blob that cannot be read stays a blob, and its
    /// edit did not apply).
    public func record(_ generation: Int64, _ event: Event) {
        var kept = event
        if case .batch(let batch, let result) = event, let esri = try? batch.withEsriGeometries() { kept = .batch(esri, result) }
        events.withLock { $0.append((generation, kept)) }
    }

    /// The proxy's view: accepted batch uploads, each once. A replayed answer (the ledger's
    /// stored result, generation included) counts when it is the first 200 the proxy saw for its
    /// batch: the batch committed but its first answer never came back as a 200 (the database
    /// failed over between the commit and its acknowledgement, and the server answered 503).
    public func observe(_ method: String, _ uri: String, _ request: Data, _ status: Int, _ response: Data) {
        guard method == "PUT", uri.contains("/batches/"), status == 200,
            let batch = try? UploadBatch.decode(request), let result = try? JSONDecoder().decode(BatchResult.self, from: response),
            let generation = result.generation
        else { return }
        let key = "\(GlobalID.normalized(batch.replicaId) ?? batch.replicaId) \(batch.seq)"
        guard seen.withLock({ $0.insert(key).inserted }) else { return }
        record(generation, .batch(batch, result))
    }

    /// The batches recorded, by replica and sequence number.
    private let seen = Locked<Set<String>>([])

    /// A change the server logged: its generation, who made it (nil: not a replica), the
    /// columns, when it was edited.
    private struct Change {
        var generation: Int64
        var origin: String?
        var columns: Set<String>
        var editedAt: String
    }

    /// `initial` with the events applied in generation order under each layer's policy, and the
    /// values the resolutions discarded.
    public func expected(
        from initial: [Int: [String: Row]], policy: (Int) -> ConflictPolicy, geometryColumn: (Int) -> String?
    ) -> (state: [Int: [String: Row]], discarded: Set<Discard>) {
        var state = initial
        var log: [Int: [String: [Change]]] = [:]
        var tombstones: [Int: [String: Row]] = [:]
        var discarded = Set<Discard>()
        let id: (String) -> String = { GlobalID.normalized($0) ?? $0 }
        for (generation, event) in events.withLock({ $0 }).sorted(by: { $0.0 < $1.0 }) {
            switch event {
            case .batch(let batch, let result):
                let origin = id(batch.replicaId)
                let requested = batch.conflictPolicy.flatMap(ConflictPolicy.Rule.init(rawValue:))
                for layer in batch.layers {
                    let l = layer.id, rules = policy(l)
                    let outcomes = result.layers.first { $0.id == l }
                    let geometry = geometryColumn(l)
                    for edit in layer.edits where outcomes?.succeeded(edit.globalId) == true {
                        let gid = edit.globalId
                        let value: (String) -> JSONValue = { c in c == geometry ? edit.geometry ?? .null : edit.attributes?[c] ?? .null }
                        // Others' changes since the edit's base.
                        let others = (log[l]?[gid] ?? []).filter { c in edit.baseGeneration.map { c.generation > $0 } ?? false && c.origin != origin }
                        let changedThere = others.reduce(into: Set<String>()) { $0.formUnion($1.columns) }
                        func discard(_ column: String) { discarded.insert(Discard(replica: origin, seq: batch.seq, globalId: gid, column: column)) }
                        switch edit.op {
                        case .insert:
                            guard state[l]?[gid] == nil else { continue }
                            var row = edit.attributes ?? [:]
                            if let geometry { row[geometry] = edit.geometry ?? .null }
                            state[l, default: [:]][gid] = row
                            tombstones[l]?[gid] = nil
                            log[l, default: [:]][gid, default: []].append(Change(generation: generation, origin: origin, columns: Set(row.keys), editedAt: edit.editedAt ?? ""))
                        case .update:
                            let changed = edit.changedColumns ?? []
                            guard var row = state[l]?[gid] else {
                                // Deleted on the server meanwhile.
                                changed.forEach(discard)
                                guard rules.updateDelete == .updateResurrects, var row = tombstones[l]?[gid] else { continue }
                                for c in changed { row[c] = value(c) }
                                state[l, default: [:]][gid] = row
                                tombstones[l]?[gid] = nil
                                log[l, default: [:]][gid, default: []].append(Change(generation: generation, origin: origin, columns: Set(row.keys), editedAt: edit.editedAt ?? ""))
                                continue
                            }
                            var applied = Set<String>()
                            for c in changed {
                                if changedThere.contains(c), value(c) != row[c] {
                                    discard(c)
                                    let theirsAt = others.filter { $0.columns.contains(c) }.map(\.editedAt).max() ?? ""
                                    let oursWins =
                                        switch rules.rule(for: c, layerRule: requested) {
                                        case .clientWins: true
                                        case .serverWins, .manual: false
                                        case .latestEditWins: (edit.editedAt ?? "") >= theirsAt
                                        }
                                    if !oursWins { continue }
                                }
                                row[c] = value(c)
                                applied.insert(c)
                            }
                            state[l]![gid] = row
                            if !applied.isEmpty {
                                log[l, default: [:]][gid, default: []].append(Change(generation: generation, origin: origin, columns: applied, editedAt: edit.editedAt ?? ""))
                            }
                        case .delete:
                            guard let row = state[l]?[gid] else { continue }
                            if !changedThere.isEmpty {
                                changedThere.forEach(discard)
                                if rules.deleteUpdate == .keepServer { continue }
                            }
                            state[l]?[gid] = nil
                            tombstones[l, default: [:]][gid] = row
                        }
                    }
                }
            case .direct(let l, let upserts, let deletes, let editedAt):
                for (gid, values) in upserts {
                    var row = state[l]?[gid] ?? [:]
                    let changed = Set(values.filter { row[$0.key] != $0.value }.keys)
                    row.merge(values) { _, new in new }
                    state[l, default: [:]][gid] = row
                    if !changed.isEmpty { log[l, default: [:]][gid, default: []].append(Change(generation: generation, origin: nil, columns: changed, editedAt: editedAt)) }
                }
                for gid in deletes {
                    tombstones[l, default: [:]][gid] = state[l]?[gid]
                    state[l]?[gid] = nil
                }
            }
        }
        return (state, discarded)
    }

    /// A feature as sync JSON: every attribute but the ids, the geometry as Esri JSON.
    public static func row(_ f: Feature, _ layer: LayerDefinition) throws -> Row {
        var row: Row = [:]
        for field in layer.fields where field.type != .oid && field.type != .globalID { row[field.name] = (f.attributes[field.name] ?? .null).jsonValue }
        if layer.isSpatial { row[layer.geometryColumn] = try f.geometry.map { try JSONValue.parse(try EsriJSON.encode($0)) } ?? .null }
        return row
    }
}
