import Foundation
import OutpostCore

/// What a replica geodatabase knows about its service: identity, sync model, per-layer cursors
/// and directions, the last acknowledged batch. Kept in `outpost_replica` (JSON) and
/// `outpost_layer_state` inside the GeoPackage, so it travels with the file.
public struct ReplicaState: Codable, Hashable, Sendable {
    /// Whether the replica syncs as a whole (one cursor) or layer by layer (a cursor each).
    public enum SyncModel: String, Codable, Hashable, Sendable { case perReplica, perLayer }
    /// Which way a layer's (or the attachments') edits move: both ways, up only, down only, or not at all.
    public enum Direction: String, Codable, Hashable, Sendable { case bidirectional, upload, download, none }

    /// A layer of the replica.
    public struct Layer: Codable, Hashable, Sendable {
        /// The layer's id on the service.
        public var id: Int
        /// The layer's table in the geodatabase.
        public var table: String
        /// Which way its edits move.
        public var direction: Direction
        /// Generation received up to (per-layer model; equals the replica's for per-replica).
        public var cursor: Int64
        /// The service generation at which the layer last matched the server's (checksums, with
        /// nothing pending); nil before the first verify, after a schema migration and after a
        /// layer is fetched again. The next verify compares only the features changed since.
        public var verifiedAt: Int64?
        /// The layer's checksum as last hashed whole, kept current through every write of server
        /// values since (``StoredChecksum``); nil when none is known.
        public var checksum: StoredChecksum?

        /// A layer state of these values.
        public init(id: Int, table: String, direction: Direction, cursor: Int64, verifiedAt: Int64? = nil, checksum: StoredChecksum? = nil) {
            self.id = id
            self.table = table
            self.direction = direction
            self.cursor = cursor
            self.verifiedAt = verifiedAt
            self.checksum = checksum
        }
    }

    /// A layer's whole checksum (``FeatureDigest``) as the replica holds it: hashed from every
    /// row once (when the replica was generated, or at a verify that hashed the layer), then kept
    /// current without reading the layer again. A download, a refetch, a conflict's server values
    /// (every write of server values, with capture silenced) adds the digests of the rows it
    /// wrote and takes out those of the rows it replaced, as SQLite's pre-update hook shows them
    /// (``GeodatabaseConnection/withChangeCaptureSilenced(_:)``). A local edit is captured, which
    /// moves `outpost_changes`' sequence past `changeSequence`: the checksum no longer holds, and
    /// the next verify hashes the layer again.
    public struct StoredChecksum: Codable, Hashable, Sendable {
        /// The XOR of the features' digests, 16 hexadecimal digits.
        public var value: String
        /// How many features it covers.
        public var count: Int
        /// The capture's sequence (the last change id ever given) when it held.
        public var changeSequence: Int64

        /// A stored checksum of these values.
        public init(value: String, count: Int, changeSequence: Int64) {
            self.value = value
            self.count = count
            self.changeSequence = changeSequence
        }

        /// The checksum an accumulator holds, stamped with `changeSequence`.
        public init(_ sum: FeatureDigest.Accumulator, changeSequence: Int64) {
            self.init(value: sum.hex, count: sum.count, changeSequence: changeSequence)
        }

        /// The checksum as an accumulator (nil for a value that is not 16 hexadecimal digits).
        public var accumulator: FeatureDigest.Accumulator? {
            UInt64(value, radix: 16).map { FeatureDigest.Accumulator(value: $0, count: count) }
        }
    }

    /// The replica's id on the service.
    public var replicaID: String
    /// The replica's name on the service.
    public var replicaName: String
    /// The FeatureServer URL it syncs with.
    public var serviceURL: String
    /// Whether the replica syncs as a whole or layer by layer.
    public var syncModel: SyncModel
    /// Generation received up to (per-replica model).
    public var cursor: Int64
    /// The replica's layers with their directions and cursors.
    public var layers: [Layer]
    /// The last upload batch the service acknowledged.
    public var lastAckedSeq: Int64
    /// Which way attachments sync.
    public var attachmentsDirection: Direction
    /// The service schema version the replica has.
    public var schemaVersion: Int
    /// When the replica was generated.
    public var createdAt: Date
    /// When it last synced.
    public var lastSyncAt: Date?
    /// Set once the replica is unregistered on the server: it can no longer sync.
    public var unregistered: Bool
    /// The upload batch encodings the service reads, as it last said (`json`, `binary`); nil:
    /// JSON only. Batches are sealed in binary when it is listed.
    public var batchEncodings: [String]?
    /// How many times server values were written into the replica's layers (each transaction
    /// that silenced capture to write them): a layer hashed before one is not stored as its
    /// ``StoredChecksum`` after it. Nil before the first.
    public var serverWrites: Int64?

    /// A replica state of these values.
    public init(
        replicaID: String, replicaName: String, serviceURL: String, syncModel: SyncModel, cursor: Int64, layers: [Layer],
        lastAckedSeq: Int64 = 0, attachmentsDirection: Direction = .none, schemaVersion: Int = 1, createdAt: Date = Date(),
        lastSyncAt: Date? = nil, unregistered: Bool = false, batchEncodings: [String]? = nil
    ) {
        self.batchEncodings = batchEncodings
        self.replicaID = replicaID
        self.replicaName = replicaName
        self.serviceURL = serviceURL
        self.syncModel = syncModel
        self.cursor = cursor
        self.layers = layers
        self.lastAckedSeq = lastAckedSeq
        self.attachmentsDirection = attachmentsDirection
        self.schemaVersion = schemaVersion
        self.createdAt = createdAt
        self.lastSyncAt = lastSyncAt
        self.unregistered = unregistered
    }

    /// The cursor a layer downloads from.
    public func cursor(forLayer id: Int) -> Int64 {
        syncModel == .perLayer ? (layers.first { $0.id == id }?.cursor ?? 0) : cursor
    }
}

/// A sealed upload batch as the replica keeps it until the server acknowledges it.
public struct StoredBatch: Hashable, Sendable {
    /// The batch's sequence number in the replica (1, 2, …).
    public var seq: Int64
    /// The batch's id (a UUID) sent with it.
    public var batchID: String
    /// The SHA-256 of `body`, hexadecimal.
    public var hash: String
    /// The exact bytes sent (and resent).
    public var body: Data
    /// The highest `outpost_changes.change_id` the batch includes.
    public var coversChangeID: Int64
    /// The tables whose change rows (up to `coversChangeID`) the batch carries.
    public var tables: [String]
    /// When it was sealed (ISO 8601).
    public var sealedAt: String

    /// A stored batch of these values.
    public init(seq: Int64, batchID: String, hash: String, body: Data, coversChangeID: Int64, tables: [String], sealedAt: String = "") {
        self.seq = seq
        self.batchID = batchID
        self.hash = hash
        self.body = body
        self.coversChangeID = coversChangeID
        self.tables = tables
        self.sealedAt = sealedAt
    }
}

/// An edit the server refused (or that a rolled-back upload could not apply), kept visible
/// until the user deals with it.
public struct RejectedEdit: Hashable, Sendable, Codable {
    /// The layer the edit was for.
    public var layer: String
    /// The feature's global id.
    public var globalID: String
    /// `add`, `update` or `delete`.
    public var operation: String
    /// Why the server refused it.
    public var reason: String
    /// The upload batch that carried it.
    public var seq: Int64
    /// true while the edit is still pending (a rolled-back batch): it will be sent again.
    public var pending: Bool
    /// When the refusal was recorded (ISO 8601).
    public var at: String
    /// The edit as it was uploaded (the batch edit JSON), so the values are never lost.
    public var edit: String?

    /// A rejected edit of these values.
    public init(layer: String, globalID: String, operation: String, reason: String, seq: Int64, pending: Bool, at: String = "", edit: String? = nil) {
        self.layer = layer
        self.globalID = globalID
        self.operation = operation
        self.reason = reason
        self.seq = seq
        self.pending = pending
        self.at = at
        self.edit = edit
    }
}

/// A conflict the server resolved for one of this replica's edits, mirrored into the replica
/// (the record is the server's JSON: columns, base, ours, theirs, policy, winner).
public struct SyncConflict: Hashable, Sendable {
    /// The replica's own id of the record (what `outpost conflicts resolve` takes).
    public var id: Int64?
    /// The server's id of the conflict record.
    public var serverID: Int64?
    /// The table of the feature.
    public var table: String
    /// The feature's global id.
    public var globalID: String
    /// The kind of conflict, as ConflictRecord names it (`updateUpdate`, `updateDelete`, `deleteUpdate`,
    /// `schemaDropped`).
    public var kind: String
    /// The server's conflict record, JSON.
    public var record: String
    /// When the server recorded it (ISO 8601).
    public var at: String
    /// `open` (a manual conflict waiting for a decision), `resolved`, or nil (settled by a rule).
    public var state: String?
    /// How it was resolved here: `ours`, `theirs` or `values`.
    public var resolution: String?

    /// A conflict of these values.
    public init(
        id: Int64? = nil, serverID: Int64?, table: String, globalID: String, kind: String, record: String, at: String = "", state: String? = nil,
        resolution: String? = nil
    ) {
        self.id = id
        self.state = state
        self.resolution = resolution
        self.serverID = serverID
        self.table = table
        self.globalID = globalID
        self.kind = kind
        self.record = record
        self.at = at
    }
}
