import OutpostCore

/// An attachment's identity, owner, metadata and content hash, as batches and the change feed
/// carry it. The bytes travel separately, by hash (`…/blobs/{sha256}` up, `…/attachments/{globalId}`
/// down), in resumable chunks.
public struct AttachmentInfo: Codable, Hashable, Sendable {
    /// The attachment's global id, the same on every copy.
    public var globalId: String
    /// The file name.
    public var name: String
    /// The MIME type.
    public var contentType: String
    /// The content's length in bytes.
    public var size: Int64
    /// Lower-case hex SHA-256 of the bytes.
    public var sha256: String
    /// Free-text keywords, when given.
    public var keywords: String?

    /// Attachment metadata of these values.
    public init(globalId: String, name: String, contentType: String, size: Int64, sha256: String, keywords: String? = nil) {
        self.globalId = globalId
        self.name = name
        self.contentType = contentType
        self.size = size
        self.sha256 = sha256
        self.keywords = keywords
    }
}

/// One attachment edit of a batch: a new attachment of a feature (its bytes uploaded first, by
/// hash) or a deleted one.
public struct AttachmentEdit: Codable, Hashable, Sendable {
    /// Whether an attachment is added or deleted.
    public enum Operation: String, Codable, Hashable, Sendable {
        /// A new attachment; a deleted one.
        case insert, delete
    }

    /// Whether the attachment is added or deleted.
    public var op: Operation
    /// The service layer of the feature.
    public var layerId: Int
    /// The feature's global id.
    public var featureGlobalId: String?
    /// insert: the attachment (its global id is the attachment's identity everywhere).
    public var attachment: AttachmentInfo?
    /// delete: the attachment's global id.
    public var globalId: String

    /// An attachment edit of these values.
    public init(op: Operation, layerId: Int, featureGlobalId: String?, attachment: AttachmentInfo?, globalId: String) {
        self.op = op
        self.layerId = layerId
        self.featureGlobalId = featureGlobalId
        self.attachment = attachment
        self.globalId = globalId
    }
}

/// How far an upload of some content has come (`GET/PUT …/blobs/{sha256}`).
public struct BlobStatus: Codable, Hashable, Sendable {
    /// The content's hash (lower-case hex SHA-256), which names the upload.
    public var sha256: String
    /// Bytes received so far; the next chunk starts here.
    public var received: Int64
    /// True once every byte arrived and the hash matched.
    public var complete: Bool

    /// A status of these values.
    public init(sha256: String, received: Int64, complete: Bool) {
        self.sha256 = sha256
        self.received = received
        self.complete = complete
    }
}
