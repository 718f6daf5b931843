import OutpostCore

/// What to fetch from a layer: the ArcGIS `query` parameters that storage evaluates.
///
/// ```swift
/// var q = FeatureQuery(where: "status = 'open' AND condition >= 3")
/// q.envelope = Envelope(xmin: -122.7, ymin: 45.5, xmax: -122.6, ymax: 45.6)
/// q.orderBy = [.init("inspected_at", ascending: false)]
/// q.limit = 100
/// ```
public struct FeatureQuery: Hashable, Sendable {
    /// An SQL-92 where clause (see ``WhereClause``); nil or `1=1` for all.
    public var whereClause: String?
    /// Only these object ids.
    public var objectIDs: [Int64]?
    /// Only object ids greater than this one (keyset paging in object-id order).
    public var afterObjectID: Int64?
    /// Only object ids up to this one, itself included (with ``afterObjectID``, a range).
    public var throughObjectID: Int64?
    /// Only these global ids.
    public var globalIDs: [String]?
    /// Only global ids greater than this one (keyset paging in global-id order, with
    /// `orderBy` on the global id field).
    public var afterGlobalID: String?
    /// Only features whose envelope intersects this one (in the layer's spatial reference),
    /// answered from the R-tree index.
    public var envelope: Envelope?
    /// Only features whose geometry intersects this one exactly (in the layer's spatial
    /// reference); the R-tree finds candidates by its envelope first.
    public var intersecting: Geometry?
    /// Field names to return; nil for all. The object id and global id always come back.
    public var outFields: [String]?
    /// Whether features come back with their geometry.
    public var returnGeometry: Bool
    /// The order of the features, by field; empty for object id order.
    public var orderBy: [SortField]
    /// Rows to skip (ArcGIS `resultOffset`).
    public var offset: Int
    /// Most rows to return (ArcGIS `resultRecordCount`); nil for no limit.
    public var limit: Int?
    /// Only a fixed share of the rows, chosen by object id (nil for all): what a map thins
    /// dense points to at small scales, decided in SQL before any row is read.
    public var sample: Sample?

    /// A share of a layer's rows that stays the same from one query to the next: the rows
    /// whose ``rank(_:salt:)`` is below ``share``. A smaller share's rows are among a larger
    /// one's (with the same salt), so a map zoomed in only ever adds points.
    public struct Sample: Hashable, Sendable {
        /// The share kept, 0…1.
        public var share: Double
        /// Varies the choice (say, per layer) without changing its size.
        public var salt: Int64

        /// The rows of rank under `share`, ranks salted by `salt`.
        public init(share: Double, salt: Int64 = 0) {
            self.share = share
            self.salt = salt
        }

        /// The rank of `objectID` in 0..<1: a hash (splitmix64) of the id and salt, spread
        /// evenly whatever the ids. The SQL function `outpost_sample_rank` gives the same.
        public static func rank(_ objectID: Int64, salt: Int64 = 0) -> Double {
            var x = UInt64(bitPattern: objectID) &+ UInt64(bitPattern: salt) &* 0x9E37_79B9_7F4A_7C15
            x = (x ^ (x >> 30)) &* 0xBF58_476D_1CE4_E5B9
            x = (x ^ (x >> 27)) &* 0x94D0_49BB_1331_11EB
            x ^= x >> 31
            return Double(x >> 11) / Double(1 << 53)
        }
    }

    /// One field of the order.
    public struct SortField: Hashable, Sendable {
        /// The field's name.
        public var field: String
        /// Whether smaller values come first.
        public var ascending: Bool
        /// An order by `field`.
        public init(_ field: String, ascending: Bool = true) {
            self.field = field
            self.ascending = ascending
        }
    }

    /// A query; every condition given must hold. See each property.
    public init(
        where whereClause: String? = nil, objectIDs: [Int64]? = nil, envelope: Envelope? = nil,
        outFields: [String]? = nil, returnGeometry: Bool = true, orderBy: [SortField] = [], offset: Int = 0,
        limit: Int? = nil
    ) {
        self.whereClause = whereClause
        self.objectIDs = objectIDs
        self.envelope = envelope
        self.outFields = outFields
        self.returnGeometry = returnGeometry
        self.orderBy = orderBy
        self.offset = offset
        self.limit = limit
    }

    /// Everything.
    public static let all = FeatureQuery()

    /// True when the query keeps every feature of a layer: no where clause (or `1=1`), no ids,
    /// no area. Paging, order and the fields returned do not count.
    public var selectsEveryFeature: Bool {
        let clause = whereClause?.trimmingCharacters(in: .whitespaces)
        return (clause == nil || clause == "" || clause == "1=1") && objectIDs == nil && afterObjectID == nil && throughObjectID == nil && globalIDs == nil
            && afterGlobalID == nil && envelope == nil && intersecting == nil
    }
}

extension LayerDefinition {
    /// The fields a query with `outFields` returns (nil or `*` for all), the object id first and
    /// the global id always included.
    /// - Throws: ``StorageError/Code/invalidQuery`` for a field the layer does not have.
    public func selectedFields(outFields: [String]?) throws -> [FieldDefinition] {
        var selected: [FieldDefinition] = []
        // Every name is checked, also beside a `*`: a list never carries something that is not a field.
        for name in outFields ?? [] where name != "*" {
            guard let f = field(named: name) else {
                throw StorageError(.invalidQuery, "unknown out field \"\(shortened(name))\"", table: self.name)
            }
            if !selected.contains(f) { selected.append(f) }
        }
        if let outFields, !outFields.contains("*") {
            for system in fields where system.type == .oid || system.type == .globalID {
                if !selected.contains(system) { selected.append(system) }
            }
        } else {
            selected = fields
        }
        return selected.sorted { ($0.type == .oid ? 0 : 1) < ($1.type == .oid ? 0 : 1) }
    }

    /// The `ORDER BY` terms of a query (quoted field, ascending), the object id last unless the
    /// query orders by it, so paging is stable.
    /// - Throws: ``StorageError/Code/invalidQuery`` for a field the layer does not have.
    public func orderTerms(_ query: FeatureQuery) throws -> [(field: FieldDefinition, ascending: Bool)] {
        var terms: [(field: FieldDefinition, ascending: Bool)] = []
        for sort in query.orderBy {
            guard let f = field(named: sort.field) else {
                throw StorageError(.invalidQuery, "unknown order-by field \"\(shortened(sort.field))\"", table: name)
            }
            terms.append((f, sort.ascending))
        }
        if !terms.contains(where: { $0.field.type == .oid }), let oid = field(named: objectIDField) {
            terms.append((oid, true))
        }
        return terms
    }
}
