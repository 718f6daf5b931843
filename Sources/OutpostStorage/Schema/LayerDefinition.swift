import OutpostCore

/// A feature layer (with a geometry type) or a table (without) of a service.
public struct LayerDefinition: Hashable, Sendable, Codable {
    /// The layer id in service URLs (`/FeatureServer/{id}`), unique across layers and tables.
    public var id: Int
    /// The table name in the geodatabase: lower case `[a-z][a-z0-9_]*`.
    public var name: String
    /// The name shown to people, when it differs.
    public var title: String?
    /// What the layer holds, in words.
    public var description: String?
    /// nil for a non-spatial table.
    public var geometryType: LayerGeometryType?
    /// Whether geometries have Z.
    public var hasZ: Bool
    /// Whether geometries have M.
    public var hasM: Bool
    /// nil means the service's spatial reference.
    public var spatialReference: SpatialReference?
    /// Whether edits are captured and synced (the table then has a global id).
    public var sync: Bool
    /// Whether features may have attachments.
    public var hasAttachments: Bool
    /// The field that names a feature in lists and pop-ups.
    public var displayField: String?
    /// The fields, the object id and global id among them.
    public var fields: [FieldDefinition]
    /// How sync conflicts on this layer are resolved (nil: ``ConflictPolicy/default``).
    public var conflictPolicy: ConflictPolicy?

    /// The policy in force.
    public var conflicts: ConflictPolicy { conflictPolicy ?? .default }

    /// The name of the geometry column in every Outpost feature table.
    public static let defaultGeometryColumn = "geom"

    /// The geometry column of a GeoPackage written by another tool ("geometry", "shape", …);
    /// nil for Outpost's own tables, which use ``defaultGeometryColumn``.
    public var geometryColumnName: String?

    /// The geometry column's name.
    public var geometryColumn: String { geometryColumnName ?? Self.defaultGeometryColumn }

    /// A layer with the given properties.
    public init(
        id: Int, name: String, geometryType: GeometryType?, fields: [FieldDefinition], hasZ: Bool = false,
        hasM: Bool = false, spatialReference: SpatialReference? = nil, sync: Bool = true,
        hasAttachments: Bool = false, title: String? = nil, description: String? = nil, displayField: String? = nil,
        conflictPolicy: ConflictPolicy? = nil
    ) {
        self.conflictPolicy = conflictPolicy
        self.id = id
        self.name = name
        self.geometryType = geometryType.map(LayerGeometryType.init)
        self.fields = fields
        self.hasZ = hasZ
        self.hasM = hasM
        self.spatialReference = spatialReference
        self.sync = sync
        self.hasAttachments = hasAttachments
        self.title = title
        self.description = description
        self.displayField = displayField
    }

    private enum CodingKeys: String, CodingKey {
        case id, name, title, description, geometryType, hasZ, hasM, spatialReference, sync, hasAttachments
        case displayField, fields, conflictPolicy
        case geometryColumnName = "geometryColumn"
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        id = try c.decode(Int.self, forKey: .id)
        name = try c.decode(String.self, forKey: .name)
        title = try c.decodeIfPresent(String.self, forKey: .title)
        description = try c.decodeIfPresent(String.self, forKey: .description)
        geometryType = try c.decodeIfPresent(LayerGeometryType.self, forKey: .geometryType)
        hasZ = try c.decodeIfPresent(Bool.self, forKey: .hasZ) ?? false
        hasM = try c.decodeIfPresent(Bool.self, forKey: .hasM) ?? false
        spatialReference = try c.decodeIfPresent(SpatialReference.self, forKey: .spatialReference)
        sync = try c.decodeIfPresent(Bool.self, forKey: .sync) ?? true
        hasAttachments = try c.decodeIfPresent(Bool.self, forKey: .hasAttachments) ?? false
        displayField = try c.decodeIfPresent(String.self, forKey: .displayField)
        fields = try c.decode([FieldDefinition].self, forKey: .fields)
        geometryColumnName = try c.decodeIfPresent(String.self, forKey: .geometryColumnName)
        conflictPolicy = try c.decodeIfPresent(ConflictPolicy.self, forKey: .conflictPolicy)
    }

    /// Whether the layer has geometry (a table has none).
    public var isSpatial: Bool { geometryType != nil }
    /// The ordinates its geometries have.
    public var layout: CoordinateLayout { CoordinateLayout(hasZ: hasZ, hasM: hasM) }

    /// The OID field (the table's INTEGER PRIMARY KEY).
    public var objectIDField: String { fields.first { $0.type == .oid }?.name ?? "objectid" }
    /// The GlobalID field, when the layer has one.
    public var globalIDField: String? { fields.first { $0.type == .globalID }?.name }

    /// The field with that name, ignoring case.
    public func field(named name: String) -> FieldDefinition? {
        fields.first { $0.name == name } ?? fields.first { $0.name.lowercased() == name.lowercased() }
    }
}

/// Finds fields of a list by name as ``LayerDefinition/field(named:)`` does (the name as given
/// first, then in any case; the first field of a name wins), from two tables made once: what an
/// edit path looks up for every value of every edit, without scanning or lower-casing the list.
public struct FieldLookup: Sendable {
    private let exact: [String: Int]
    private let lowercased: [String: Int]

    /// The lookup of `fields`.
    public init(_ fields: [FieldDefinition]) {
        var exact: [String: Int] = [:], lowercased: [String: Int] = [:]
        for (i, field) in fields.enumerated() {
            if exact[field.name] == nil { exact[field.name] = i }
            let lower = field.name.lowercased()
            if lowercased[lower] == nil { lowercased[lower] = i }
        }
        self.exact = exact
        self.lowercased = lowercased
    }

    /// The index in the list of the field called `name`.
    public func index(of name: String) -> Int? {
        exact[name] ?? lowercased[name.lowercased()]
    }
}
