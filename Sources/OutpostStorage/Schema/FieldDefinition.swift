import OutpostCore

/// One attribute field of a layer or table.
public struct FieldDefinition: Hashable, Sendable, Codable {
    /// The column name.
    public var name: String
    /// The name shown to people, when it differs.
    public var alias: String?
    /// The field type.
    public var type: FieldType
    /// Maximum characters for `String` fields (GeoPackage `TEXT(n)`); nil means unbounded.
    public var length: Int?
    /// Whether the field may be null.
    public var nullable: Bool
    /// Whether edits may set it.
    public var editable: Bool
    /// The value a new feature gets when an add leaves the field out.
    public var defaultValue: JSONValue?
    /// The coded values or range its values must be in.
    public var domain: DomainSpec?

    /// A field with the given properties.
    public init(
        name: String, type: FieldType, alias: String? = nil, length: Int? = nil, nullable: Bool = true,
        editable: Bool = true, defaultValue: JSONValue? = nil, domain: DomainSpec? = nil
    ) {
        self.name = name
        self.alias = alias
        self.type = type
        self.length = length
        self.nullable = nullable
        self.editable = editable
        self.defaultValue = defaultValue
        self.domain = domain
    }

    private enum CodingKeys: String, CodingKey {
        case name, alias, type, length, nullable, editable, defaultValue, domain
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        name = try c.decode(String.self, forKey: .name)
        alias = try c.decodeIfPresent(String.self, forKey: .alias)
        type = try c.decode(FieldType.self, forKey: .type)
        length = try c.decodeIfPresent(Int.self, forKey: .length)
        // OID and GlobalID are never null and never edited directly.
        let system = type == .oid || type == .globalID
        nullable = try c.decodeIfPresent(Bool.self, forKey: .nullable) ?? !system
        editable = try c.decodeIfPresent(Bool.self, forKey: .editable) ?? !system
        defaultValue = try c.decodeIfPresent(JSONValue.self, forKey: .defaultValue)
        domain = try c.decodeIfPresent(DomainSpec.self, forKey: .domain)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(name, forKey: .name)
        try c.encodeIfPresent(alias, forKey: .alias)
        try c.encode(type.rawValue, forKey: .type)
        try c.encodeIfPresent(length, forKey: .length)
        try c.encode(nullable, forKey: .nullable)
        try c.encode(editable, forKey: .editable)
        try c.encodeIfPresent(defaultValue, forKey: .defaultValue)
        try c.encodeIfPresent(domain, forKey: .domain)
    }
}
