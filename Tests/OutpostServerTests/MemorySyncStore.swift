import Foundation
import OutpostCore
import OutpostProtocol
import OutpostStorage
import OutpostSyncService

/// A `SyncStore` held in memory, for running `SyncService`'s steps with no I/O: features by
/// layer and global id, the change log, the ledger, replicas and conflicts. A write transaction
/// works on a copy of the state, swapped in when it commits; transactions run one at a time.
final class MemorySyncStore: SyncStore {
    struct LogRow: Equatable {
        var generation: Int64
        var layerID: Int
        var globalID: String
        var op: String
        var columns: [String]
        var origin: String?
        var editedAt: String
    }

    struct State {
        var generation: Int64 = 0
        var schema: ServiceSchema
        var features: [Int: [String: Feature]] = [:]
        var nextObjectID: Int64 = 1
        var log: [LogRow] = []
        var tombstones: [String: TombstoneInfo] = [:]
        var replicas: [String: ReplicaInfo] = [:]
        var ledger: [String: [Int64: BatchAdmission.LedgerEntry]] = [:]
        var conflicts: [Int64: (ConflictRecord, state: String)] = [:]
    }

    private let state: Locked<State>
    /// Transactions one at a time (a write holds it from its commit lock to its end).
    private let serial = AsyncSemaphore()
    /// Runs as each write transaction begins, before it waits for its turn, given the
    /// transaction's number from 1: a test's way to put another writer between two
    /// transactions of one call (as another process would).
    let beforeWrite = Locked<(@Sendable (Int) async throws -> Void)?>(nil)
    private let writes = Locked(0)
    let clock: ServiceClock
    let faults = FaultInjector()
    var appliesStreamedBatches: Bool { false }

    init(schema: ServiceSchema, clock: ServiceClock) {
        state = Locked(State(schema: schema))
        self.clock = clock
    }

    /// The committed state now.
    var committed: State { state.withLock { $0 } }

    /// Changes the committed state (a feature another writer added, a replica registered).
    func change(_ body: (inout State) -> Void) { state.withLock { body(&$0) } }

    func writeTransaction<T: Sendable>(_ body: @escaping @Sendable (MemoryTransaction) async throws -> T) async throws -> T {
        let number = writes.withLock { $0 += 1; return $0 }
        if let hook = beforeWrite.withLock({ $0 }) { try await hook(number) }
        await serial.wait()
        defer { serial.signal() }
        let tx = MemoryTransaction(state: committed, clock: clock)
        let value = try await body(tx)
        let after = tx.state.withLock { $0 }
        state.withLock { $0 = after }
        return value
    }

    func readTransaction<T: Sendable>(_ body: @escaping @Sendable (MemoryTransaction) async throws -> T) async throws -> T {
        try await body(MemoryTransaction(state: committed, clock: clock))
    }
}

/// One transaction of a ``MemorySyncStore``: its own copy of the state.
final class MemoryTransaction: SyncTransaction {
    let state: Locked<MemorySyncStore.State>
    let clock: ServiceClock

    init(state: MemorySyncStore.State, clock: ServiceClock) {
        self.state = Locked(state)
        self.clock = clock
    }

    func lockGeneration() -> Int64 { state.withLock { $0.generation } }

    func replica(_ id: String, forUpdate: Bool) throws -> ReplicaInfo {
        try state.withLock { s in
            guard var info = s.replicas[id] else { throw SyncServiceError.notFound("replica \(id)") }
            info.serviceGeneration = s.generation
            info.serviceSchemaVersion = s.schema.schemaVersion
            return info
        }
    }

    func ledgerEntry(replicaID: String, seq: Int64) -> BatchAdmission.LedgerEntry? { state.withLock { $0.ledger[replicaID]?[seq] } }

    func droppedFields(since version: Int) -> [Int: Set<String>] { [:] }

    func resolveConflicts(_ ids: [Int64]) {
        state.withLock { s in
            for id in ids where s.conflicts[id]?.state == "open" { s.conflicts[id]?.state = "resolved" }
        }
    }

    func applier(_ context: BatchContext) -> MemoryApplier { MemoryApplier(tx: self, context: context) }

    func record(_ commit: BatchAdmission.Commit, at time: Int64) {
        state.withLock { s in
            if let generation = commit.advancesGenerationTo { s.generation = generation }
            s.ledger[commit.replicaID, default: [:]][commit.seq] = .init(hash: commit.hash, result: commit.answer.json)
            s.ledger[commit.replicaID] = s.ledger[commit.replicaID]?.filter { $0.key >= commit.pruneBelow }
            s.replicas[commit.replicaID]?.lastSeq = commit.lastSeq
            s.replicas[commit.replicaID]?.lastSyncDate = time
        }
    }

    func keep(_ rejection: BatchAdmission.KeptRejection) {
        state.withLock { $0.ledger[rejection.replicaID, default: [:]][rejection.seq] = .init(hash: rejection.hash, result: rejection.result) }
    }

    func schema(knownVersion version: Int) -> ServiceSchema { state.withLock { $0.schema } }

    func othersChanged(layerID: Int, since: Int64, upto: Int64, replicaID: String) -> Bool {
        state.withLock { s in s.log.contains { $0.layerID == layerID && $0.generation > since && $0.generation <= upto && $0.origin != replicaID } }
    }

    func changedFeatures(layerID: Int, since: Int64, upto: Int64, after: String?, limit: Int, replicaID: String) -> [ChangeFeedAssembly.Row] {
        state.withLock { s in
            let window = s.log.filter { $0.layerID == layerID && $0.generation > since && $0.generation <= upto && $0.globalID > (after ?? "") }
            return Dictionary(grouping: window, by: \.globalID).sorted { $0.key < $1.key }.prefix(limit).map { gid, rows in
                ChangeFeedAssembly.Row(
                    globalID: gid, generation: rows.map(\.generation).max()!, echo: rows.allSatisfy { $0.origin == replicaID },
                    inserted: rows.contains { $0.op == "insert" }, deleted: rows.contains { $0.op == "delete" })
            }
        }
    }

    /// Reads by global id, whole layers, and attribute equality (`field = 'value'`) only.
    func syncRows(_ layer: LayerDefinition, matching reads: [FeatureQuery]) throws -> [String: FeatureTable.SyncRow] {
        let features = state.withLock { $0.features[layer.id] ?? [:] }
        let fields = layer.fields.filter { $0.type != .oid }
        var out: [String: FeatureTable.SyncRow] = [:]
        for read in reads {
            precondition(read.intersecting == nil, "the memory store reads no spatial filter")
            for (gid, feature) in features where read.globalIDs.map({ $0.contains(gid) }) ?? true {
                if let clause = read.whereClause, clause != "1=1" {
                    let parts = clause.components(separatedBy: " = ")
                    guard parts.count == 2, feature.attributes[parts[0]] == .string(parts[1].trimmingCharacters(in: CharacterSet(charactersIn: "'"))) else { continue }
                }
                out[gid] = try ReplicaRows.syncRow(feature, fields: fields)
            }
        }
        return out
    }

    func attachmentInfos(_ layer: LayerDefinition, features globalIDs: [String]) -> [String: [AttachmentInfo]] { [:] }
}

/// Applies edits to a ``MemoryTransaction``'s features as the `BatchPlanner` plans them, reading
/// what it needs from the transaction's features and log first.
struct MemoryApplier: BatchApplying {
    let tx: MemoryTransaction
    let context: BatchContext
    private(set) var applied = 0
    private(set) var failed = 0
    private(set) var stages = BatchStages()

    init(tx: MemoryTransaction, context: BatchContext) {
        self.tx = tx
        self.context = context
    }

    mutating func apply(_ edits: BatchLayer) throws -> [BatchEditResult] {
        let layer = try tx.state.withLock { s in
            guard let layer = s.schema.layer(id: edits.id) else { throw SyncServiceError.notFound("layer \(edits.id)") }
            return layer
        }
        var planner = context.planner(for: layer)
        prefetch(edits, into: &planner)
        var results: [BatchEditResult] = []
        for edit in edits.edits {
            // Each edit on its own copy of the state: a failed one leaves nothing behind.
            let before = tx.state.withLock { $0 }
            let undo = planner.undoPoint(edit)
            do {
                let plan = try run(edit, layer: layer, &planner)
                applied += 1
                results.append(plan.result)
            } catch {
                planner.undo(undo)
                tx.state.withLock { $0 = before }
                failed += 1
                results.append(BatchPlanner.failure(edit, error))
            }
        }
        return results
    }

    mutating func apply(_ edits: [AttachmentEdit]) throws -> [BatchEditResult] {
        throw StorageError(.invalidEdit, "the memory store keeps no attachments")
    }

    private func prefetch(_ edits: BatchLayer, into planner: inout BatchPlanner) {
        let gids = Set(BatchPlanner.globalIDs(edits))
        let base = edits.edits.compactMap(\.baseGeneration).min()
        tx.state.withLock { s in
            for gid in gids { if let id = s.features[edits.id]?[gid]?.objectID { planner.objectIDs[gid] = id } }
            if let base {
                for row in s.log where row.layerID == edits.id && gids.contains(row.globalID) && row.generation > base && row.origin != context.origin.replica {
                    planner.others[row.globalID, default: []].append(OthersChange(generation: row.generation, columns: row.columns, editedAt: row.editedAt))
                }
            }
            for gid in planner.needsCurrentValues(edits) { planner.current[gid] = s.features[edits.id]?[gid] }
            for gid in planner.needsTombstones(edits) { planner.tombstones[gid] = s.tombstones[gid] }
        }
    }

    private func run(_ edit: BatchEdit, layer: LayerDefinition, _ planner: inout BatchPlanner) throws -> EditPlan {
        var plan = try planner.plan(edit)
        let context = context
        try tx.state.withLock { s in
            for step in plan.steps {
                switch step {
                case .insert(var feature):
                    guard let gid = feature.globalID, s.features[layer.id]?[gid] == nil else {
                        throw StorageError(.invalidEdit, "feature \(feature.globalID ?? "") exists", table: layer.name)
                    }
                    feature.objectID = s.nextObjectID
                    s.nextObjectID += 1
                    s.features[layer.id, default: [:]][gid] = feature
                    planner.inserted(gid, objectID: feature.objectID!)
                    plan.result.objectId = feature.objectID
                case .update(let objectID, let changes, let clearGeometry):
                    guard let gid = s.features[layer.id]?.first(where: { $0.value.objectID == objectID })?.key else {
                        throw StorageError(.notFound, "no feature \(objectID)", table: layer.name)
                    }
                    s.features[layer.id]![gid]!.attributes.merge(changes.attributes) { $1 }
                    if let geometry = changes.geometry { s.features[layer.id]![gid]!.geometry = geometry }
                    if clearGeometry { s.features[layer.id]![gid]!.geometry = nil }
                case .delete(let objectID):
                    guard let gid = s.features[layer.id]?.first(where: { $0.value.objectID == objectID })?.key else {
                        throw StorageError(.notFound, "no feature \(objectID)", table: layer.name)
                    }
                    s.features[layer.id]![gid] = nil
                }
            }
            for entry in plan.log {
                s.log.append(.init(
                    generation: context.generation, layerID: layer.id, globalID: entry.globalID, op: entry.op, columns: entry.columns,
                    origin: entry.toOrigin ? nil : context.origin.replica, editedAt: entry.editedAt ?? context.now))
                if entry.op == "delete" { s.tombstones[entry.globalID] = TombstoneInfo(row: entry.row.flatMap { try? JSONValue.parse($0) }, editedAt: entry.editedAt ?? context.now) }
            }
            if let conflicts = plan.result.conflicts {
                plan.result.conflicts = conflicts.map { conflict in
                    var kept = conflict
                    kept.replicaId = context.origin.replica
                    kept.seq = context.origin.seq
                    kept.generation = context.generation
                    kept.id = Int64(s.conflicts.count + 1)
                    s.conflicts[kept.id!] = (kept, kept.state ?? "")
                    return kept
                }
            }
        }
        return plan
    }
}

/// A counting semaphore for tasks.
actor AsyncSemaphore {
    private var free = 1
    private var waiting: [CheckedContinuation<Void, Never>] = []

    func wait() async {
        if free > 0 {
            free -= 1
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }

    nonisolated func signal() { Task { await release() } }

    private func release() {
        if waiting.isEmpty { free += 1 } else { waiting.removeFirst().resume() }
    }
}
