import OutpostCore

/// One page of a layer's change feed (`GET …/replicas/{replica}/changes`): the features changed
/// in `since < generation ≤ upto`, each as its current state within the replica's filter.
public struct ChangePage: Codable, Hashable, Sendable {
    public var layerId: Int
    public var since: Int64
    public var upto: Int64
    public var changes: [FeedChange]
    /// Pass as `after` to get the next page; nil on the last page.
    public var next: String?

    public init(layerId: Int, since: Int64, upto: Int64, changes: [FeedChange], next: String?) {
        self.layerId = layerId
        self.since = since
        self.upto = upto
        self.changes = changes
        self.next = next
    }
}

/// A feature's state for a replica: present within its filter (`upsert`, with the full row),
/// or not (`leave`: deleted, or moved out of the filter).
public struct FeedChange: Codable, Hashable, Sendable {
    public enum Kind: String, Codable, Hashable, Sendable {
        case upsert, leave
    }

    public var kind: Kind
    public var globalId: String
    public var generation: Int64
    /// upsert: every attribute (dates in epoch ms), the object id excluded.
    public var attributes: [String: JSONValue]?
    /// upsert: Esri JSON geometry or null.
    public var geometry: JSONValue?
    /// upsert: true when the feature was added in the window (an ArcGIS "add" rather than "update").
    public var inserted: Bool?
    /// upsert: the feature's attachments now (replicas that download attachments).
    public var attachments: [AttachmentInfo]?

    public init(kind: Kind, globalId: String, generation: Int64, attributes: [String: JSONValue]? = nil, geometry: JSONValue? = nil, inserted: Bool? = nil) {
        self.kind = kind
        self.globalId = globalId
        self.generation = generation
        self.attributes = attributes
        self.geometry = geometry
        self.inserted = inserted
    }
}

/// Per-layer content checksums of a replica's scope (`GET …/replicas/{replica}/checksums`).
public struct ReplicaChecksums: Codable, Hashable, Sendable {
    public struct Layer: Codable, Hashable, Sendable {
        public var id: Int
        public var count: Int
        public var checksum: String

        public init(id: Int, count: Int, checksum: String) {
            self.id = id
            self.count = count
            self.checksum = checksum
        }
    }

    /// The service generation the checksums were computed at.
    public var generation: Int64
    public var layers: [Layer]

    public init(generation: Int64, layers: [Layer]) {
        self.generation = generation
        self.layers = layers
    }
}
