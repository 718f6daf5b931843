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
    public var geometry: Geometry?

    public init(
        objectID: Int64? = nil, globalID: String? = nil, attributes: [String: FieldValue] = [:],
        geometry: Geometry? = nil
    ) {
        self.objectID = objectID
        self.globalID = globalID
        self.attributes = attributes
        self.geometry = geometry
    }

    public subscript(field: String) -> FieldValue? {
        get { attributes[field] }
        set { attributes[field] = newValue }
    }
}
