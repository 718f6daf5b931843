import Foundation
import OutpostCore
import OutpostProtocol
import OutpostStorage

/// Where a feature service keeps its data: the routes speak only to this, so the SQLite default
/// and the PostgreSQL/PostGIS backend serve the same endpoints.
///
/// Every method is safe to call concurrently: reads run in parallel, edits are serialised, and
/// each committed batch of edits gets the next service-wide generation, logged per feature with
/// the changed columns (what sync downloads from).
public protocol FeatureServiceBackend: Sendable {
    /// The service name in URLs.
    var name: String { get }
    /// The service's layers, fields, domains and spatial reference.
    func schema() async throws -> ServiceSchema
    /// The bounding box of a layer's geometries, nil when it has none.
    func extent(layerID: Int) async throws -> Envelope?
    /// How many features of the layer match `query`.
    func count(layerID: Int, query: FeatureQuery) async throws -> Int
    /// The object ids of the layer's features matching `query`, ascending.
    func objectIDs(layerID: Int, query: FeatureQuery) async throws -> [Int64]
    /// One page of matching features: callers set `query.limit` (and page on with
    /// `query.afterObjectID` or `query.offset`), so a large result is read a page at a time and
    /// never sits whole in memory.
    func features(layerID: Int, query: FeatureQuery) async throws -> [Feature]
    /// Applies adds, updates and deletes in one transaction under one new generation.
    /// With `rollbackOnFailure`, an invalid edit throws (nothing applied); without it, each edit
    /// succeeds or fails on its own.
    func applyEdits(layerID: Int, edits: EditRequest, rollbackOnFailure: Bool) async throws -> ApplyEditsResponse
    /// The attachments of feature `objectID`.
    func attachments(layerID: Int, objectID: Int64) async throws -> [Attachment]
    /// Up to `length` bytes of an attachment from `offset` (empty at the end).
    func attachmentBytes(layerID: Int, attachmentID: Int64, offset: Int64, length: Int) async throws -> Data
    /// Adds an attachment to feature `objectID` under a new generation.
    func addAttachment(layerID: Int, objectID: Int64, name: String, contentType: String, data: Data) async throws -> Attachment
    /// Deletes attachments of feature `objectID`, each with its result.
    func deleteAttachments(layerID: Int, objectID: Int64, attachmentIDs: [Int64]) async throws -> [EditResult]
    /// The latest committed generation.
    func generation() async throws -> Int64
    /// Closes the backend's files or connections; nothing may be called after.
    func close() async throws
}

/// The edits of one applyEdits request. Updates and deletes name features by object id, or by
/// global id when the request said `useGlobalIds`.
public struct EditRequest: Sendable {
    /// Features to add.
    public var adds: [Feature]
    /// Features to change, by object id or global id.
    public var updates: [Feature]
    /// Features to delete, by object id or global id.
    public var deletes: [Feature]

    /// A request of these edits.
    public init(adds: [Feature] = [], updates: [Feature] = [], deletes: [Feature] = []) {
        self.adds = adds
        self.updates = updates
        self.deletes = deletes
    }

    /// Whether the request holds no edit.
    public var isEmpty: Bool { adds.isEmpty && updates.isEmpty && deletes.isEmpty }
}
