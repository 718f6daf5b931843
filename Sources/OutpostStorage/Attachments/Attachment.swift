import Foundation

/// An attachment (photo, document) of a feature, without its bytes.
public struct Attachment: Hashable, Sendable {
    /// The local attachment id (the media table's primary key).
    public var id: Int64
    /// The attachment's global id, the same on the replica and the service.
    public var globalID: String
    /// The object id of the feature it belongs to.
    public var featureObjectID: Int64
    /// The global id of that feature, on synced layers.
    public var featureGlobalID: String?
    /// The file name.
    public var name: String
    /// The MIME type (`image/jpeg`…).
    public var contentType: String
    /// The size of its content in bytes.
    public var size: Int64
    /// Free-text keywords, as ArcGIS keeps them.
    public var keywords: String?

    /// An attachment with every field given.
    public init(
        id: Int64, globalID: String, featureObjectID: Int64, featureGlobalID: String?, name: String, contentType: String, size: Int64, keywords: String? = nil
    ) {
        self.id = id
        self.globalID = globalID
        self.featureObjectID = featureObjectID
        self.featureGlobalID = featureGlobalID
        self.name = name
        self.contentType = contentType
        self.size = size
        self.keywords = keywords
    }
}
