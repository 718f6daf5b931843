import OutpostCore

/// One page of a layer's change feed (`GET …/replicas/{replica}/changes`): the features changed
/// in `since < generation ≤ upto`, each as its current state within the replica's filter.
public struct ChangePage: Codable, Hashable, Sendable {
    /// The service layer the page is for.
    public var layerId: Int
    /// The generation the window starts after.
    public var since: Int64
    /// The generation the window ends at (included).
    public var upto: Int64
    /// The changes on this page, in global-id order.
    public var changes: [FeedChange]
    /// Pass as `after` to get the next page; nil on the last page.
    public var next: String?
    /// On a first page asked with `count=N` that is not also the last (a last page holds the
    /// whole window): the change-log rows of the layer in the window,
    /// counted no further than N + 1 (an upper bound of the changes the feed holds, its own
    /// echoes included), so a client knows before reading on how large the download is.
    public var windowRows: Int?
    /// The largest `count` a server takes (each first page counts up to one past it).
    public static let maxCount = 1_000_000

    /// A page of these values.
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
    /// Whether the feature is present in the replica's scope or has left it.
    public enum Kind: String, Codable, Hashable, Sendable {
        /// Present, with its full row; gone (deleted, or out of the filter).
        case upsert, leave
    }

    /// Whether the feature is present or has left.
    public var kind: Kind
    /// The feature's global id.
    public var globalId: String
    /// The generation of its last change.
    public var generation: Int64
    /// upsert: every attribute (dates in epoch ms), the object id excluded.
    public var attributes: [String: JSONValue]?
    /// upsert: Esri JSON geometry or null.
    public var geometry: JSONValue?
    /// upsert: true when the feature was added in the window (an ArcGIS "add" rather than "update").
    public var inserted: Bool?
    /// upsert: the feature's attachments now (replicas that download attachments).
    public var attachments: [AttachmentInfo]?
    /// upsert, in a page of the stored form (``ChangePage/storedContentType``): the feature's
    /// values as the service stores them, in place of `attributes` and `geometry`. Only the
    /// binary encoding carries it; a reader that needs the JSON form makes it from the values.
    public var stored: FeedRow?

    private enum CodingKeys: String, CodingKey {
        case kind, globalId, generation, attributes, geometry, inserted, attachments
    }

    /// A change of these values.
    public init(kind: Kind, globalId: String, generation: Int64, attributes: [String: JSONValue]? = nil, geometry: JSONValue? = nil, inserted: Bool? = nil) {
        self.kind = kind
        self.globalId = globalId
        self.generation = generation
        self.attributes = attributes
        self.geometry = geometry
        self.inserted = inserted
    }
}

/// The columns of the stored form of a change page (``FeedRow``), named and typed as the
/// service's layer defines them: every field but the object id and the global id fields, whose
/// value is the change's global id. Shared by the rows of a page, not copied into each.
public final class FeedColumns: Hashable, Sendable {
    /// The fields' names, in the order of a row's values.
    public let names: [String]
    /// The fields' types (`FieldType` raw values: "String", "Date", …), aligned with `names`.
    public let types: [String]
    /// The global id fields (each holds the change's global id).
    public let globalIDFields: [String]
    /// Whether the layer has a geometry column (a row's geometry is then a GeoPackage blob or nil).
    public let spatial: Bool

    /// Columns of these names and types.
    public init(names: [String], types: [String], globalIDFields: [String], spatial: Bool) {
        precondition(names.count == types.count, "a column without a type")
        self.names = names
        self.types = types
        self.globalIDFields = globalIDFields
        self.spatial = spatial
    }

    /// The same columns: the same object, or the same names, types, global id fields and geometry.
    public static func == (a: FeedColumns, b: FeedColumns) -> Bool {
        a === b || (a.names == b.names && a.types == b.types && a.globalIDFields == b.globalIDFields && a.spatial == b.spatial)
    }

    /// Hashes what `==` compares.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(names)
        hasher.combine(types)
        hasher.combine(globalIDFields)
        hasher.combine(spatial)
    }
}

/// A feature's values as the service stores them (the stored form of a change page): each
/// column's value in its SQLite storage class, and the geometry as its GeoPackage blob.
public struct FeedRow: Hashable, Sendable {
    /// What the values are.
    public var columns: FeedColumns
    /// One value per column, aligned with `columns.names`.
    public var values: [StoredValue]
    /// The geometry as a GeoPackage binary blob; nil for none (and in a table without geometry).
    public var geometry: [UInt8]?

    /// A row of these values.
    public init(columns: FeedColumns, values: [StoredValue], geometry: [UInt8]?) {
        precondition(values.count == columns.names.count, "a row's values do not match its columns")
        self.columns = columns
        self.values = values
        self.geometry = geometry
    }
}

// The feed's hot path reads and writes changes through `JSONValue` directly (see ``WireJSON``):
// the Codable conformance above gives the same JSON.
extension FeedChange {
    /// A change from its parsed JSON, checked like the Codable decoding.
    public init(json: JSONValue) throws {
        let o = try WireJSON(json, "a change")
        guard let kind = Kind(rawValue: try o.string("kind")) else { throw WireJSON.invalid("a change has an unknown kind") }
        self.init(kind: kind, globalId: try o.string("globalId"), generation: try o.integer("generation"), attributes: try o.optionalObject("attributes"),
            geometry: o.absent("geometry") ? nil : o.object["geometry"])
        if !o.absent("inserted") { inserted = try o.bool("inserted") }
        if !o.absent("attachments") { attachments = try JSONValueDecoder().decode([AttachmentInfo].self, from: o.object["attachments"]!) }
    }

    /// The change as JSON (what the Codable encoding gives). A change of the stored form is made
    /// JSON by its reader first: its values are not written here.
    public var json: JSONValue {
        assert(stored == nil || attributes != nil, "a change of the stored form written as JSON")
        var o: [String: JSONValue] = ["kind": .string(kind.rawValue), "globalId": .string(globalId), "generation": .integer(generation)]
        if let attributes { o["attributes"] = .object(attributes) }
        if let geometry { o["geometry"] = geometry }
        if let inserted { o["inserted"] = .bool(inserted) }
        // Attachment lists are rare and short: the generic encoder writes them.
        if let attachments { o["attachments"] = (try? JSONValueEncoder().encode(attachments)) ?? .null }
        return .object(o)
    }
}

extension ChangePage {
    /// A page from its parsed JSON (see ``FeedChange/init(json:)``).
    public init(json: JSONValue) throws {
        let o = try WireJSON(json, "a change page")
        self.init(
            layerId: Int(try o.integer("layerId")), since: try o.integer("since"), upto: try o.integer("upto"),
            changes: try o.array("changes").map(FeedChange.init(json:)), next: try o.optionalString("next"))
        if !o.absent("windowRows") { windowRows = Int(try o.integer("windowRows")) }
    }

    /// The page as JSON (what the Codable encoding gives).
    public var json: JSONValue {
        var o: [String: JSONValue] = [
            "layerId": .integer(Int64(layerId)), "since": .integer(since), "upto": .integer(upto), "changes": .array(changes.map(\.json)),
        ]
        if let next { o["next"] = .string(next) }
        if let windowRows { o["windowRows"] = .integer(Int64(windowRows)) }
        return .object(o)
    }
}

/// Per-layer content checksums of a replica's scope (`GET …/replicas/{replica}/checksums`).
public struct ReplicaChecksums: Codable, Hashable, Sendable {
    /// A layer's checksum.
    public struct Layer: Codable, Hashable, Sendable {
        /// The service layer id.
        public var id: Int
        /// How many features the checksum covers.
        public var count: Int
        /// The XOR of the features' digests (`FeatureDigest`), 16 hexadecimal digits.
        public var checksum: String
        /// Set when asked for the changes since a generation and the window was small: then
        /// `count` and `checksum` cover only the features in `globalIds` (every feature of the
        /// layer changed in `since < generation ≤` the answer's generation) that are in the
        /// replica's scope now.
        public var since: Int64?
        /// The features a windowed checksum covers (see `since`).
        public var globalIds: [String]?

        /// A layer checksum of these values.
        public init(id: Int, count: Int, checksum: String, since: Int64? = nil, globalIds: [String]? = nil) {
            self.id = id
            self.count = count
            self.checksum = checksum
            self.since = since
            self.globalIds = globalIds
        }
    }

    /// The most features a windowed checksum lists; a larger window gets the whole layer's.
    public static let maxWindowFeatures = 10_000
    /// The most change-log rows a server reads to list a window's features (rows, not features,
    /// so that a window of a million others' changes is not sorted to find that it is too large).
    public static let maxWindowRows = 40_000

    /// The service generation the checksums were computed at.
    public var generation: Int64
    /// A checksum per layer of the replica.
    public var layers: [Layer]

    /// Checksums of these values.
    public init(generation: Int64, layers: [Layer]) {
        self.generation = generation
        self.layers = layers
    }
}
