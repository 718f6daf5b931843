import Foundation
import OutpostCore
import OutpostProtocol
import OutpostStorage

/// How a sync runs (ArcGIS `SyncGeodatabaseParameters`).
public struct SyncGeodatabaseParameters: Sendable, Hashable, Codable {
    /// Which way a sync moves edits.
    public enum Direction: String, Sendable, Hashable, Codable {
        /// Edits go both ways, only up to the service, or only down to the replica.
        case bidirectional, upload, download
    }

    /// The direction of one layer, for a replica that syncs layer by layer.
    public struct LayerOption: Sendable, Hashable, Codable {
        /// The layer's id in the service.
        public var layerID: Int
        /// Which way the layer syncs.
        public var syncDirection: Direction

        /// The direction of layer `layerID`.
        public init(layerID: Int, syncDirection: Direction) {
            self.layerID = layerID
            self.syncDirection = syncDirection
        }
    }

    /// Which way the replica syncs: both ways, or only up or down.
    public var geodatabaseSyncDirection: Direction
    /// true: an invalid edit rejects the whole upload and the geodatabase stays as it was (edits
    /// still pending, errors recorded); false: valid edits apply, invalid ones come back as
    /// per-edit errors and are kept as rejected edits.
    public var shouldRollbackOnFailure: Bool
    /// Directions per layer (replicas with the per-layer sync model); layers not listed follow
    /// `geodatabaseSyncDirection`.
    public var layerOptions: [LayerOption]
    /// The most captured changes one upload batch carries; a larger backlog goes in several
    /// batches, one after the other (20,000 by default).
    public var maxChangesPerBatch: Int
    /// The most changes the first batch of a sync carries (nil: `maxChangesPerBatch` to a
    /// server that reads framed batches, else 3,000, at most `maxChangesPerBatch`). Each batch
    /// costs the server fixed work (a commit, an R-tree pack once it rewrites much of a layer),
    /// so batches are as large as allowed; a framed batch goes out while it is sealed, and the
    /// server applies its frames as they arrive. To an older server the first batch is small, so
    /// that the server starts on it while the rest is made into the next (sealing costs the
    /// replica about a third of what applying costs the server, per edit).
    public var firstBatchChanges: Int?
    /// Attempts per request when the server cannot be reached, before the sync fails (a later
    /// sync resends the same sealed batch).
    public var attempts: Int
    /// The rule for a column changed both here and on the server, asked of the server for this
    /// sync's uploads (its per-field rules still apply); nil: each layer's own rule.
    public var conflictPolicy: ConflictPolicy.Rule?
    /// A download of at most this many changes (the server counts its window first) is applied
    /// page by page as it arrives, in the one transaction that also moves the cursor, while the
    /// next page is fetched; a larger one is staged first (resumable page by page, and applied in
    /// the order of the table's rows). nil: 50,000; 0: every download is staged; at most 1,000,000.
    public var applyWhileDownloadingUpTo: Int?
    /// The most changes batch `index` (0: the first) of a sync carries; `streams`: the replica
    /// sends framed batches while it seals them.
    func changeLimit(ofBatch index: Int, streams: Bool) -> Int {
        index == 0 ? max(1, min(firstBatchChanges ?? (streams ? maxChangesPerBatch : 3_000), maxChangesPerBatch)) : maxChangesPerBatch
    }
    var applyWhileDownloadingLimit: Int { min(max(0, applyWhileDownloadingUpTo ?? 50_000), ChangePage.maxCount) }
    /// true: verify compares every feature of each layer with the server. Otherwise a layer that
    /// matched before compares only the features changed since (docs/sync.md, "Verify"), which
    /// finds any difference the sync itself could make but not a change made to either file
    /// outside Outpost's capture.
    public var verifyWholeLayers: Bool?
    /// Bytes of attachment content per upload request (and per download range); nil: 4 MB.
    public var attachmentChunkBytes: Int?
    var attachmentChunkSize: Int { max(4096, attachmentChunkBytes ?? 4 << 20) }

    /// Parameters with the given values; see each property.
    public init(
        geodatabaseSyncDirection: Direction = .bidirectional, shouldRollbackOnFailure: Bool = true, layerOptions: [LayerOption] = [],
        maxChangesPerBatch: Int = 20_000, attempts: Int = 3, conflictPolicy: ConflictPolicy.Rule? = nil, applyWhileDownloadingUpTo: Int? = nil,
        verifyWholeLayers: Bool? = nil, firstBatchChanges: Int? = nil
    ) {
        self.firstBatchChanges = firstBatchChanges
        self.verifyWholeLayers = verifyWholeLayers
        self.applyWhileDownloadingUpTo = applyWhileDownloadingUpTo
        self.conflictPolicy = conflictPolicy
        self.geodatabaseSyncDirection = geodatabaseSyncDirection
        self.shouldRollbackOnFailure = shouldRollbackOnFailure
        self.layerOptions = layerOptions
        self.maxChangesPerBatch = max(maxChangesPerBatch, 1)
        self.attempts = max(attempts, 1)
    }

    /// The direction a layer syncs in, given its direction in the replica.
    func direction(of layer: ReplicaState.Layer, model: ReplicaState.SyncModel) -> Direction? {
        let asked = (model == .perLayer ? layerOptions.first { $0.layerID == layer.id }?.syncDirection : nil) ?? geodatabaseSyncDirection
        let allowed: Set<Direction> =
            switch layer.direction {
            case .bidirectional: [.bidirectional, .upload, .download]
            case .upload: [.upload]
            case .download: [.download]
            case .none: []
            }
        switch asked {
        case .bidirectional:
            if allowed.contains(.bidirectional) { return .bidirectional }
            return allowed.first
        default:
            return allowed.contains(asked) ? asked : nil
        }
    }

    func uploads(_ layer: ReplicaState.Layer, model: ReplicaState.SyncModel) -> Bool {
        let d = direction(of: layer, model: model)
        return d == .bidirectional || d == .upload
    }

    func downloads(_ layer: ReplicaState.Layer, model: ReplicaState.SyncModel) -> Bool {
        let d = direction(of: layer, model: model)
        return d == .bidirectional || d == .download
    }
}

/// What a sync did to one layer. Like ArcGIS, `editResults` holds only the failures; the counts
/// say what moved.
public struct SyncLayerResult: Sendable, Hashable, Codable {
    /// An edit the service refused.
    public struct EditError: Sendable, Hashable, Codable {
        /// The global id of the feature the edit was to.
        public var globalId: String
        /// `add`, `update` or `delete`.
        public var operation: String
        /// The service's reason.
        public var message: String
    }

    /// The layer's id in the service.
    public var layerId: Int
    /// The layer's table in the replica.
    public var tableName: String
    /// The edits the service refused (none when all applied).
    public var editResults: [EditError]
    /// The edits sent up: adds, updates and deletes.
    public var uploaded: PendingChanges
    /// The service's changes applied here: adds, updates and deletes.
    public var downloaded: PendingChanges
    /// Whether the layer's checksum matched the server's after the sync (nil: not checked, as
    /// for an upload-only sync or a layer edited while the sync ran).
    public var checksumMatches: Bool?
    /// True when a checksum mismatch made the sync fetch the layer again.
    public var refetched: Bool
    /// Conflicts the server resolved for this layer's uploaded edits (kept as records on both
    /// sides).
    public var conflicts: Int
    /// Uploaded updates the server merged with its own changes to other columns of the feature.
    public var merged: Int
    /// Attachment edits the server applied, and attachments whose content was downloaded.
    public var attachmentsUploaded: Int
    /// Attachments whose content was downloaded.
    public var attachmentsDownloaded: Int

    /// An empty result for a layer.
    public init(layerId: Int, tableName: String) {
        self.layerId = layerId
        self.tableName = tableName
        editResults = []
        uploaded = PendingChanges()
        downloaded = PendingChanges()
        checksumMatches = nil
        refetched = false
        conflicts = 0
        merged = 0
        attachmentsUploaded = 0
        attachmentsDownloaded = 0
    }

    private enum CodingKeys: String, CodingKey {
        case layerId, tableName, editResults, uploaded, downloaded, checksumMatches, refetched, conflicts, merged, attachmentsUploaded, attachmentsDownloaded
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        layerId = try c.decode(Int.self, forKey: .layerId)
        tableName = try c.decode(String.self, forKey: .tableName)
        editResults = try c.decode([EditError].self, forKey: .editResults)
        uploaded = try c.decode(PendingChanges.self, forKey: .uploaded)
        downloaded = try c.decode(PendingChanges.self, forKey: .downloaded)
        checksumMatches = try c.decodeIfPresent(Bool.self, forKey: .checksumMatches)
        refetched = try c.decode(Bool.self, forKey: .refetched)
        conflicts = try c.decode(Int.self, forKey: .conflicts)
        merged = try c.decodeIfPresent(Int.self, forKey: .merged) ?? 0
        attachmentsUploaded = try c.decodeIfPresent(Int.self, forKey: .attachmentsUploaded) ?? 0
        attachmentsDownloaded = try c.decodeIfPresent(Int.self, forKey: .attachmentsDownloaded) ?? 0
    }
}
