import OutpostCore

/// A replica as the server keeps it (`GET …/FeatureServer/replicas/{id}` and the native API).
public struct ReplicaInfo: Codable, Hashable, Sendable {
    public enum SyncModel: String, Codable, Hashable, Sendable {
        case perReplica, perLayer, none
    }

    public enum Direction: String, Codable, Hashable, Sendable {
        case bidirectional, upload, download, none
    }

    public struct Layer: Codable, Hashable, Sendable {
        public var id: Int
        /// What this layer has received up to (per-layer sync model).
        public var serverGen: Int64
        public var syncDirection: Direction
        /// The layer's where clause, if any.
        public var `where`: String?
        /// Whether the replica's geometry filters this layer.
        public var useGeometry: Bool
        /// all: every feature; none: no features (upload-only layers); useFilter: the filter.
        public var queryOption: String

        public init(id: Int, serverGen: Int64, syncDirection: Direction, where: String? = nil, useGeometry: Bool = true, queryOption: String = "useFilter") {
            self.id = id
            self.serverGen = serverGen
            self.syncDirection = syncDirection
            self.where = `where`
            self.useGeometry = useGeometry
            self.queryOption = queryOption
        }
    }

    public var replicaID: String
    public var replicaName: String
    public var syncModel: SyncModel
    /// What the replica has received up to (per-replica sync model).
    public var replicaServerGen: Int64
    public var layers: [Layer]
    /// The filter geometry (Esri JSON, in the service's spatial reference), if any.
    public var geometry: JSONValue?
    public var returnAttachments: Bool
    public var attachmentsSyncDirection: Direction
    /// The last batch sequence number the server applied.
    public var lastSeq: Int64
    /// The service's latest committed generation, when this was read.
    public var serviceGeneration: Int64
    /// The schema version the replica was made with.
    public var schemaVersion: Int
    /// The service's schema version now (a replica behind it fetches the schema and migrates).
    public var serviceSchemaVersion: Int?
    public var creationDate: Int64
    public var lastSyncDate: Int64?
    /// The upload batch encodings the server reads (``UploadBatch/Encoding``); absent: JSON only.
    public var batchEncodings: [String]?

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
