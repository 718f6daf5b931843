import OutpostCore

/// A replica as the server keeps it (`GET …/FeatureServer/replicas/{id}` and the native API).
public struct ReplicaInfo: Codable, Hashable, Sendable {
    /// How the replica syncs.
    public enum SyncModel: String, Codable, Hashable, Sendable {
        /// As a whole (one generation); layer by layer; not at all (a snapshot).
        case perReplica, perLayer, none
    }

    /// Which way edits move for a layer (or the attachments).
    public enum Direction: String, Codable, Hashable, Sendable {
        /// Both ways; up only; down only; neither.
        case bidirectional, upload, download, none
    }

    /// A layer of the replica.
    public struct Layer: Codable, Hashable, Sendable {
        /// The service layer id.
        public var id: Int
        /// What this layer has received up to (per-layer sync model).
        public var serverGen: Int64
        /// Which way its edits move.
        public var syncDirection: Direction
        /// The layer's where clause, if any.
        public var `where`: String?
        /// Whether the replica's geometry filters this layer.
        public var useGeometry: Bool
        /// all: every feature; none: no features (upload-only layers); useFilter: the filter.
        public var queryOption: String

        /// A layer of these values.
        public init(id: Int, serverGen: Int64, syncDirection: Direction, where: String? = nil, useGeometry: Bool = true, queryOption: String = "useFilter") {
            self.id = id
            self.serverGen = serverGen
            self.syncDirection = syncDirection
            self.where = `where`
            self.useGeometry = useGeometry
            self.queryOption = queryOption
        }
    }

    /// The replica's id (a GUID in braces).
    public var replicaID: String
    /// The name the replica was registered with.
    public var replicaName: String
    /// How it syncs.
    public var syncModel: SyncModel
    /// What the replica has received up to (per-replica sync model).
    public var replicaServerGen: Int64
    /// Its layers.
    public var layers: [Layer]
    /// The filter geometry (Esri JSON, in the service's spatial reference), if any.
    public var geometry: JSONValue?
    /// Whether the replica holds attachments.
    public var returnAttachments: Bool
    /// Which way attachments move.
    public var attachmentsSyncDirection: Direction
    /// The last batch sequence number the server applied.
    public var lastSeq: Int64
    /// The service's latest committed generation, when this was read.
    public var serviceGeneration: Int64
    /// The schema version the replica was made with.
    public var schemaVersion: Int
    /// The service's schema version now (a replica behind it fetches the schema and migrates).
    public var serviceSchemaVersion: Int?
    /// When it was made, in epoch milliseconds.
    public var creationDate: Int64
    /// When it last synced, in epoch milliseconds.
    public var lastSyncDate: Int64?
    /// The upload batch encodings the server reads (``UploadBatch/Encoding``); absent: JSON only.
    public var batchEncodings: [String]?

    /// A replica of these values.
    public init(
        replicaID: String, replicaName: String, syncModel: SyncModel, replicaServerGen: Int64, layers: [Layer], geometry: JSONValue?,
        returnAttachments: Bool, attachmentsSyncDirection: Direction, lastSeq: Int64, serviceGeneration: Int64, schemaVersion: Int,
        creationDate: Int64, lastSyncDate: Int64?
    ) {
        self.replicaID = replicaID
        self.replicaName = replicaName
        self.syncModel = syncModel
        self.replicaServerGen = replicaServerGen
        self.layers = layers
        self.geometry = geometry
        self.returnAttachments = returnAttachments
        self.attachmentsSyncDirection = attachmentsSyncDirection
        self.lastSeq = lastSeq
        self.serviceGeneration = serviceGeneration
        self.schemaVersion = schemaVersion
        self.creationDate = creationDate
        self.lastSyncDate = lastSyncDate
    }
}
