import OutpostCore

/// A row of a layer or table: its ids, attribute values and geometry.
public struct Feature: Hashable, Sendable {
    /// The local object id (the table's INTEGER PRIMARY KEY); nil before the feature is added.
    public var objectID: Int64?
    /// The global id that identifies the feature across replicas; nil before it is added
    /// (one is generated) or on tables that are not synced.
    public var globalID: String?
    /// Values by field name. Fields left out of an add get their default (or null); fields left
    /// out of an update keep their value.
    public var attributes: [String: FieldValue]
    /// The feature's shape, in the layer's spatial reference (nil for a table's row).
    public var geometry: Geometry?

    /// A feature; object id and global id are assigned when it is added.
    public init(
        objectID: Int64? = nil, globalID: String? = nil, attributes: [String: FieldValue] = [:],
        geometry: Geometry? = nil
    ) {
        self.objectID = objectID
        self.globalID = globalID
        self.attributes = attributes
        self.geometry = geometry
    }

    /// The value of a field as the feature holds it (nil when it has none); setting it sets the attribute.
    public subscript(field: String) -> FieldValue? {
        get { attributes[field] }
        set { attributes[field] = newValue }
    }
}
