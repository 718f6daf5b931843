import Foundation
import GRDB
import OutpostCore

extension FeatureTable {
    /// Features matching `query`, collected into an array. Use ``forEach(matching:in:_:)`` to stream
    /// large results without holding them.
    public func features(matching query: FeatureQuery = .all) async throws -> [Feature] {
        try await geodatabase.read { conn in
            var out: [Feature] = []
            try self.forEach(matching: query, in: conn) { out.append($0) }
            return out
        }
    }

    /// The feature with `objectID`, or nil.
    public func feature(objectID: Int64) async throws -> Feature? {
        try await features(matching: FeatureQuery(objectIDs: [objectID])).first
    }

    /// The feature with `globalID`, or nil.
    public func feature(globalID: String) async throws -> Feature? {
        var q = FeatureQuery()
        q.globalIDs = [globalID]
        return try await features(matching: q).first
    }

    /// Number of features matching `query` (paging is ignored, as ArcGIS `returnCountOnly` does).
    public func count(matching query: FeatureQuery = .all) async throws -> Int {
        try await geodatabase.read { conn in try self.count(matching: query, in: conn) }
    }

    /// Object ids matching `query`, in query order.
    public func objectIDs(matching query: FeatureQuery = .all) async throws -> [Int64] {
        try await geodatabase.read { conn in try self.objectIDs(matching: query, in: conn) }
    }

    /// Streams the features matching `query` to `body`, one row at a time: memory stays flat
    /// whatever the layer size. Runs inside `conn`'s read or write.
    public func forEach(
        matching query: FeatureQuery, in conn: GeodatabaseConnection, _ body: (Feature) throws -> Void
    ) throws {
        try forEach(matching: query, in: conn, unreadable: nil, body)
    }

    /// Streams the features matching `query` as ``forEach(matching:in:_:)`` does, except that a
    /// row that cannot be decoded (another writer's degenerate geometry, say: a ring of three
    /// positions) goes to `unreadable` with its object id and the error, and the run carries on.
    /// For readers that must get past damaged rows, as a tile generator does; nil stops at the
    /// first, as the plain form.
    public func forEach(
        matching query: FeatureQuery, in conn: GeodatabaseConnection, unreadable: ((Int64?, any Error) -> Void)?, _ body: (Feature) throws -> Void
    ) throws {
        guard let shape = query.intersecting else {
            let fields = try selectColumns(outFields: query.outFields, returnGeometry: query.returnGeometry)
            let (filter, arguments) = try filterSQL(query, conn)
            var sql = "SELECT \(selectList(fields, returnGeometry: query.returnGeometry)) FROM \(quoted(name))\(filter)"
            sql += try orderSQL(query)
            var args = arguments
            sql += pagingSQL(query, &args)
            let objectIDField = definition.objectIDField
            try conn.withReadStatement(sql) { statement in
                let cursor = try Row.fetchCursor(statement, arguments: StatementArguments(args))
                while let row = try cursor.next() {
                    let feature: Feature
                    do {
                        feature = try decodeFeature(row, fields: fields, returnGeometry: query.returnGeometry)
                    } catch {
                        guard let unreadable else { throw error }
                        unreadable(row[objectIDField] as Int64?, error)
                        continue
                    }
                    try body(feature)
                }
            }
            return
        }
        // An exact spatial filter runs on the geometries, so paging follows it, in Swift.
        var candidates = query
        candidates.intersecting = nil
        let envelope = intersectionEnvelope(query, shape)
        guard envelope.isValid else { return }  // nothing can intersect
        candidates.envelope = envelope
        candidates.returnGeometry = true
        candidates.offset = 0
        candidates.limit = nil
        var skipped = 0, delivered = 0
        try forEach(matching: candidates, in: conn, unreadable: unreadable) { feature in
            guard let g = feature.geometry, GeometryRelations.intersects(g, shape) else { return }
            if skipped < query.offset {
                skipped += 1
                return
            }
            if let limit = query.limit, delivered >= limit { return }
            delivered += 1
            var f = feature
            if !query.returnGeometry { f.geometry = nil }
            try body(f)
        }
    }

    /// The candidate envelope for an exact filter: the shape's, narrowed by the query's own.
    func intersectionEnvelope(_ query: FeatureQuery, _ shape: Geometry) -> Envelope {
        let bounds = shape.envelope ?? Envelope(xmin: 0, ymin: 0, xmax: -1, ymax: -1)
        guard let e = query.envelope else { return bounds }
        return Envelope(xmin: max(e.xmin, bounds.xmin), ymin: max(e.ymin, bounds.ymin), xmax: min(e.xmax, bounds.xmax), ymax: min(e.ymax, bounds.ymax))
    }

    /// How many features match, inside a transaction.
    public func count(matching query: FeatureQuery, in conn: GeodatabaseConnection) throws -> Int {
        if query.intersecting != nil {
            var all = query
            all.offset = 0
            all.limit = nil
            all.outFields = [definition.objectIDField]
            var n = 0
            try forEach(matching: all, in: conn) { _ in n += 1 }
            return n
        }
        let (filter, arguments) = try filterSQL(query, conn)
        return try Int.fetchOne(conn.db, sql: "SELECT count(*) FROM \(quoted(name))\(filter)", arguments: StatementArguments(arguments)) ?? 0
    }

    /// Whether any feature matches (the query's paging aside), inside a transaction: SQLite
    /// stops at the first row found.
    public func containsFeatures(matching query: FeatureQuery, in conn: GeodatabaseConnection) throws -> Bool {
        if query.intersecting != nil {
            var first = query
            first.offset = 0
            first.limit = 1
            return try !objectIDs(matching: first, in: conn).isEmpty
        }
        let (filter, arguments) = try filterSQL(query, conn)
        return try conn.withReadStatement("SELECT EXISTS (SELECT 1 FROM \(quoted(name))\(filter))") {
            try Bool.fetchOne($0, arguments: StatementArguments(arguments)) ?? false
        }
    }

    /// The object ids of the features that match, in object id order.
    public func objectIDs(matching query: FeatureQuery, in conn: GeodatabaseConnection) throws -> [Int64] {
        if query.intersecting != nil {
            var ids = query
            ids.outFields = [definition.objectIDField]
            var out: [Int64] = []
            try forEach(matching: ids, in: conn) { out.append($0.objectID!) }
            return out
        }
        let (filter, arguments) = try filterSQL(query, conn)
        var args = arguments
        var sql = "SELECT \(quoted(definition.objectIDField)) FROM \(quoted(name))\(filter)"
        sql += try orderSQL(query)
        sql += pagingSQL(query, &args)
        return try conn.withReadStatement(sql) { try Int64.fetchAll($0, arguments: StatementArguments(args)) }
    }

    /// The exact bounding box of all geometries (from each blob's header), nil when empty.
    public func extent(in conn: GeodatabaseConnection) throws -> Envelope? {
        guard definition.isSpatial else { return nil }
        let g = quoted(definition.geometryColumn)
        let row = try Row.fetchOne(
            conn.db, sql: "SELECT min(ST_MinX(\(g))), min(ST_MinY(\(g))), max(ST_MaxX(\(g))), max(ST_MaxY(\(g))) FROM \(quoted(name))")
        guard let row, let xmin = row[0] as Double?, let ymin = row[1] as Double?, let xmax = row[2] as Double?,
            let ymax = row[3] as Double?
        else { return nil }
        return Envelope(xmin: xmin, ymin: ymin, xmax: xmax, ymax: ymax)
    }

    /// The envelope of every geometry in the table (nil when it has none).
    public func extent() async throws -> Envelope? {
        try await geodatabase.read { conn in try self.extent(in: conn) }
    }

    // MARK: - SQL

    var rtreeName: String { "rtree_\(name)_\(definition.geometryColumn)" }

    func hasSpatialIndex(_ db: Database) throws -> Bool {
        try db.tableExists(rtreeName)
    }

    /// A statement selecting `columns` (quoted) of the rows `query` filters, its field list,
    /// paging and order ignored, for a caller that steps it through the C API (`purpose` ends
    /// the error's message: what the rows were read for).
    func rowsStatement(selecting columns: [String], filteredBy query: FeatureQuery, _ conn: GeodatabaseConnection, purpose: String) throws -> Statement {
        var candidates = query
        candidates.outFields = nil
        candidates.offset = 0
        candidates.limit = nil
        candidates.orderBy = []
        let (filter, arguments) = try filterSQL(candidates, conn)
        do {
            let statement = try conn.db.makeStatement(sql: "SELECT \(columns.joined(separator: ", ")) FROM \(quoted(name))\(filter)")
            try statement.setArguments(StatementArguments(arguments))
            return statement
        } catch {
            throw StorageError.from(error, "cannot read \(name)\(purpose)")
        }
    }

    /// ` WHERE …` (or empty) and its arguments. Every user value is bound, never spliced.
    func filterSQL(_ query: FeatureQuery, _ conn: GeodatabaseConnection) throws -> (String, [DatabaseValue]) {
        var clauses: [String] = []
        var arguments: [DatabaseValue] = []
        var sampleTaken = false
        let pk = quoted(definition.objectIDField)
        if let text = query.whereClause?.trimmingCharacters(in: .whitespacesAndNewlines), !text.isEmpty {
            let clause = try WhereClause(text, layer: definition)
            let (sql, args) = clause.sql()
            clauses.append(sql)
            arguments += args.map(\.databaseValue)
        }
        if let ids = query.objectIDs {
            clauses.append("\(pk) IN (SELECT value FROM json_each(?))")
            arguments.append(("[" + ids.map(String.init).joined(separator: ",") + "]").databaseValue)
        }
        if let after = query.afterObjectID {
            clauses.append("\(pk) > ?")
            arguments.append(after.databaseValue)
        }
        if let through = query.throughObjectID {
            clauses.append("\(pk) <= ?")
            arguments.append(through.databaseValue)
        }
        if let after = query.afterGlobalID {
            guard let field = definition.globalIDField else {
                throw StorageError(.invalidQuery, "\(name) has no global ids", table: name)
            }
            clauses.append("\(quoted(field)) > ?")
            arguments.append(after.databaseValue)
        }
        if let gids = query.globalIDs {
            guard let field = definition.globalIDField else {
                throw StorageError(.invalidQuery, "\(name) has no global ids", table: name)
            }
            let normalized = gids.map { GlobalID.normalized($0) ?? $0 }
            clauses.append("\(quoted(field)) IN (SELECT value FROM json_each(?))")
            arguments.append(JSONValue.arrayText(normalized).databaseValue)
        }
        if let e = query.envelope {
            guard definition.isSpatial else {
                throw StorageError(.invalidQuery, "\(name) is a table without geometry; it cannot be filtered by an envelope", table: name)
            }
            guard e.isValid else { throw StorageError(.invalidQuery, "the envelope is not valid (min > max or not finite)", table: name) }
            let g = quoted(definition.geometryColumn)
            // The R-tree stores bounds as 32-bit floats rounded outward: it finds candidates, and
            // the exact bounds from each blob's header settle them.
            // (Not while the index is stale inside ``GeodatabaseConnection/maintainingSpatialIndex(of:_:)``.)
            // Features named by id are found by their keys: the R-tree would make SQLite walk
            // every candidate in the envelope (a replica's area) to keep the few named.
            if query.objectIDs == nil, query.globalIDs == nil, !conn.spatialIndexIsStale(name), try hasSpatialIndex(conn.db) {
                // A sample is taken from the index's ids, before any row of the table is read.
                let sampled = query.sample != nil ? " AND outpost_sample_rank(id, ?) < ?" : ""
                clauses.append("\(pk) IN (SELECT id FROM \(quoted(rtreeName)) WHERE minx <= ? AND maxx >= ? AND miny <= ? AND maxy >= ?\(sampled))")
                arguments += [e.xmax, e.xmin, e.ymax, e.ymin].map(\.databaseValue)
                if let sample = query.sample {
                    arguments += [sample.salt.databaseValue, sample.share.databaseValue]
                    sampleTaken = true
                }
            }
            clauses.append("(ST_MinX(\(g)) <= ? AND ST_MaxX(\(g)) >= ? AND ST_MinY(\(g)) <= ? AND ST_MaxY(\(g)) >= ?)")
            arguments += [e.xmax, e.xmin, e.ymax, e.ymin].map(\.databaseValue)
        }
        if let sample = query.sample, !sampleTaken {
            clauses.append("outpost_sample_rank(\(pk), ?) < ?")
            arguments += [sample.salt.databaseValue, sample.share.databaseValue]
        }
        return (clauses.isEmpty ? "" : " WHERE " + clauses.joined(separator: " AND "), arguments)
    }

    func orderSQL(_ query: FeatureQuery) throws -> String {
        " ORDER BY " + (try definition.orderTerms(query)).map { "\(quoted($0.field.name)) \($0.ascending ? "ASC" : "DESC")" }.joined(separator: ", ")
    }

    func pagingSQL(_ query: FeatureQuery, _ arguments: inout [DatabaseValue]) -> String {
        guard query.limit != nil || query.offset > 0 else { return "" }
        arguments.append(Int64(max(query.limit ?? -1, -1)).databaseValue)
        arguments.append(Int64(max(query.offset, 0)).databaseValue)
        return " LIMIT ? OFFSET ?"
    }
}

extension SQLLiteral {
    var databaseValue: DatabaseValue {
        switch self {
        case .null: .null
        case .integer(let i): i.databaseValue
        case .double(let d): d.databaseValue
        case .text(let s): s.databaseValue
        case .blob(let b): Data(b).databaseValue
        }
    }
}
