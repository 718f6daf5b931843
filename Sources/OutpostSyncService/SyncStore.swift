import Foundation
import OutpostProtocol
import OutpostStorage

/// What a database must do for ``SyncService`` to apply batches and serve the change feed:
/// transactions, and in them a few primitive reads and writes in its own SQL. The steps between
/// them (admission, conflict rules, the ledger's answer, the feed's echo suppression) are the
/// service's, written once for every database.
///
/// The SQLite store (`SQLiteServiceBackend`) and the PostgreSQL store (`PostgresServiceBackend`)
/// implement it; a test may implement it in memory.
public protocol SyncStore: Sendable {
    /// One transaction's view of the store.
    associatedtype Transaction: SyncTransaction

    /// Runs `body` in a write transaction: committed when it returns, rolled back when it throws
    /// (its error passes through). Transactions that take the commit lock
    /// (`SyncTransaction.lockGeneration()`) run one at a time.
    func writeTransaction<T: Sendable>(_ body: @escaping @Sendable (Transaction) async throws -> T) async throws -> T

    /// Runs `body` in a read-only transaction that sees one snapshot throughout.
    func readTransaction<T: Sendable>(_ body: @escaping @Sendable (Transaction) async throws -> T) async throws -> T

    /// Whether a batch may be applied as its frames arrive: the store's applier reads them in
    /// its transaction (`BatchApplying.apply(layerID:expectedGeometryWrites:runs:)`).
    var appliesStreamedBatches: Bool { get }

    /// Where the service reads the time (ledger rows, conflict time stamps).
    var clock: ServiceClock { get }

    /// Fault points for tests (`server.beforeCommit`: a batch applied, not yet committed).
    var faults: FaultInjector { get }
}

/// The primitive operations of one transaction of a ``SyncStore``.
public protocol SyncTransaction: Sendable {
    /// What applies a batch's edits in this transaction.
    associatedtype Applier: BatchApplying

    // MARK: Applying a batch

    /// Takes the service's commit lock (held to the end of the transaction) and returns the
    /// generation committed so far.
    func lockGeneration() async throws -> Int64

    /// The replica `id` (normalised) with its ledger position and the service's generation and
    /// schema version; `forUpdate` holds its row to the end of the transaction.
    /// - Throws: `SyncServiceError` (`notFound`) for an unknown replica.
    func replica(_ id: String, forUpdate: Bool) async throws -> ReplicaInfo

    /// The ledger's row for the replica's batch `seq`, if it holds one.
    func ledgerEntry(replicaID: String, seq: Int64) async throws -> BatchAdmission.LedgerEntry?

    /// Fields dropped from each layer (lower case) by migrations after schema `version`.
    func droppedFields(since version: Int) async throws -> [Int: Set<String>]

    /// Marks the open manual conflicts `ids` resolved (the batch carries their resolving edits).
    func resolveConflicts(_ ids: [Int64]) async throws

    /// An applier of the batch `context` describes.
    func applier(_ context: BatchContext) async throws -> Applier

    /// Writes what an applied batch commits with: the generation, the ledger row (replacing a
    /// kept rejection of its seq, pruning the older ones) and the replica's position and last
    /// sync `time` (milliseconds since 1970).
    func record(_ commit: BatchAdmission.Commit, at time: Int64) async throws

    /// Writes a rolled-back batch's ledger row (replacing one of its seq), leaving the replica's
    /// position and the generation as they are.
    func keep(_ rejection: BatchAdmission.KeptRejection) async throws

    // MARK: Reading the change feed

    /// The service schema as this transaction sees it, for a replica that knows schema version
    /// `version` (a store shared by processes reads it again when another migrated it).
    func schema(knownVersion version: Int) async throws -> ServiceSchema

    /// Whether anyone but `replicaID` changed layer `layerID` in `since < generation ≤ upto`.
    func othersChanged(layerID: Int, since: Int64, upto: Int64, replicaID: String) async throws -> Bool

    /// One row per feature of the layer changed in `since < generation ≤ upto` with a global id
    /// after `after`, in global-id order, at most `limit`: its latest generation, whether anyone
    /// but `replicaID` changed it, whether it was added or deleted in the window.
    func changedFeatures(
        layerID: Int, since: Int64, upto: Int64, after: String?, limit: Int, replicaID: String
    ) async throws -> [ChangeFeedAssembly.Row]

    /// The features of `layer` the reads find, as sync rows by global id.
    func syncRows(_ layer: LayerDefinition, matching reads: [FeatureQuery]) async throws -> [String: FeatureTable.SyncRow]

    /// The features of `layer` the reads find as the store keeps them (a change page's stored
    /// form), by global id: each with its values, or nil for a feature a read asked only
    /// whether it is there (`outFields` empty, no geometry). Nil when the store has no stored
    /// form: the page is then made of ``syncRows(_:matching:)``.
    func storedRows(_ layer: LayerDefinition, matching reads: [FeatureQuery]) async throws -> [String: FeedRow?]?

    /// The attachments of the features `globalIDs` of `layer`, by feature global id.
    func attachmentInfos(_ layer: LayerDefinition, features globalIDs: [String]) async throws -> [String: [AttachmentInfo]]
}

/// What an applier is told of the batch it applies.
public struct BatchContext: Sendable {
    /// The generation the batch's changes are logged under.
    public var generation: Int64
    /// The batch's replica (normalised id) and seq, logged as each change's origin.
    public var origin: (replica: String, seq: Int64)
    /// Whether one failed edit rejects the whole batch.
    public var rollbackOnFailure: Bool
    /// The conflict rule the sync asked for (per-field rules of a layer still apply).
    public var requestedRule: ConflictPolicy.Rule?
    /// Fields dropped by migrations since the batch's schema version, by layer (lower case).
    public var droppedFields: [Int: Set<String>]
    /// When the batch is applied (`BatchPlanner.timestamp(_:)`), for edits that carry no edit time.
    public var now: String

    /// A context of these values.
    public init(
        generation: Int64, origin: (replica: String, seq: Int64), rollbackOnFailure: Bool, requestedRule: ConflictPolicy.Rule?,
        droppedFields: [Int: Set<String>], now: String
    ) {
        self.generation = generation
        self.origin = origin
        self.rollbackOnFailure = rollbackOnFailure
        self.requestedRule = requestedRule
        self.droppedFields = droppedFields
        self.now = now
    }
}

extension BatchContext {
    /// A planner of the batch's edits of `layer`.
    public func planner(for layer: LayerDefinition) -> BatchPlanner {
        BatchPlanner(layer: layer, generation: generation, origin: origin, requestedRule: requestedRule, droppedFields: droppedFields[layer.id] ?? [], now: now)
    }
}

/// Applies one batch's edits in a store's transaction, logging each change under the batch's
/// generation; how each edit resolves is the `BatchPlanner`'s decision.
public protocol BatchApplying {
    /// Edits applied so far.
    var applied: Int { get }
    /// Edits failed so far.
    var failed: Int { get }
    /// Where the feature edits' time went.
    var stages: BatchStages { get }

    /// Applies one layer's edits.
    mutating func apply(_ edits: BatchLayer) async throws -> [BatchEditResult]

    /// Applies one layer's edits as `runs` hands them over, run by run, until it answers nil (a
    /// batch streamed in); `expectedGeometryWrites` is what the batch's head announced.
    mutating func apply(layerID: Int, expectedGeometryWrites: Int, runs: () throws -> [BatchEdit]?) async throws -> [BatchEditResult]

    /// Applies attachment edits (their content uploaded before, by hash).
    mutating func apply(_ edits: [AttachmentEdit]) async throws -> [BatchEditResult]
}

extension BatchApplying {
    /// Whole layers only (the store's `SyncStore.appliesStreamedBatches` is false).
    public mutating func apply(layerID: Int, expectedGeometryWrites: Int, runs: () throws -> [BatchEdit]?) async throws -> [BatchEditResult] {
        throw StreamedBatch.WholeBodyNeeded()
    }
}

extension SyncTransaction {
    /// No stored form: pages are made of sync rows.
    public func storedRows(_ layer: LayerDefinition, matching reads: [FeatureQuery]) async throws -> [String: FeedRow?]? { nil }
}
