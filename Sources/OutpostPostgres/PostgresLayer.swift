import Foundation
import OutpostCore
import OutpostStorage
import PostgresNIO

/// One layer's table in PostgreSQL and the SQL that reads and writes it. Every value a request
/// supplies is bound (`$n`), never spliced; names come from the validated service schema.
struct PostgresLayer: Sendable {
    let definition: LayerDefinition
    let validator: FeatureValidator
    /// `"service"."layer"`.
    let table: String
    let srid: Int

    init(_ layer: LayerDefinition, service: String, schema: ServiceSchema) {
        definition = layer
        validator = FeatureValidator(layer: layer, schema: schema)
        table = "\(PostgresServiceStore.quoted(service)).\(PostgresServiceStore.quoted(layer.name))"
        srid = (layer.spatialReference ?? schema.spatialReference).wkid
    }

    static func q(_ name: String) -> String { PostgresServiceStore.quoted(name) }

    var pk: String { Self.q(definition.objectIDField) }
    var geometryColumn: String { Self.q(definition.geometryColumn) }

    // MARK: - Reading

    /// The select list for `fields` (and the geometry as WKB last).
    func selectList(_ fields: [FieldDefinition], returnGeometry: Bool) -> String {
        var columns = fields.map { Self.q($0.name) }
        if returnGeometry && definition.isSpatial { columns.append("ST_AsBinary(\(geometryColumn))") }
        return columns.joined(separator: ", ")
    }

    /// Every column, for reading a whole feature.
    var allColumns: String { selectList(definition.fields, returnGeometry: true) }

    func decode(_ row: PostgresRow, fields: [FieldDefinition], returnGeometry: Bool) throws -> Feature {
        let cells = row.makeRandomAccess()
        var feature = Feature()
        for (index, field) in fields.enumerated() {
            let value = try Self.value(cells[index], field.type)
            switch field.type {
            case .oid: feature.objectID = value.integerValue
            case .globalID: feature.globalID = value.stringValue
            default: feature.attributes[field.name] = value
            }
        }
        if returnGeometry && definition.isSpatial, var bytes = cells[fields.count].bytes {
            do {
                feature.geometry = try WKB.decode(bytes.readBytes(length: bytes.readableBytes) ?? [])
            } catch {
                throw StorageError(.corrupt, "a geometry of \(definition.name) cannot be decoded: \(error)", table: definition.name, cause: error as? GeometryError)
            }
        }
        return feature
    }

    /// A whole feature as `allColumns` selects it.
    func decodeAll(_ row: PostgresRow) throws -> Feature { try decode(row, fields: definition.fields, returnGeometry: true) }

    static func value(_ cell: PostgresCell, _ type: FieldType) throws -> FieldValue {
        guard cell.bytes != nil else { return .null }
        switch type {
        case .oid, .smallInteger, .integer, .bigInteger: return .integer(try cell.decode(Int64.self))
        case .double, .single: return .double(try cell.decode(Double.self))
        case .string, .globalID, .guid: return .string(try cell.decode(String.self))
        case .date, .dateOnly: return .date(try cell.decode(Date.self))
        case .blob:
            var buffer = try cell.decode(ByteBuffer.self)
            return .blob(buffer.readBytes(length: buffer.readableBytes) ?? [])
        }
    }

    /// ` WHERE …` (or empty), binding every value into `binds`.
    func filter(_ query: FeatureQuery, _ binds: inout PostgresBindings) throws -> String {
        var clauses: [String] = []
        if let text = query.whereClause?.trimmingCharacters(in: .whitespacesAndNewlines), !text.isEmpty {
            let clause = try WhereClause(text, layer: definition)
            let (sql, arguments) = clause.sql(dialect: .postgres, firstParameter: binds.count + 1)
            for argument in arguments { try Self.bind(argument, &binds) }
            clauses.append(sql)
        }
        if let ids = query.objectIDs {
            binds.append(ids)
            clauses.append("\(pk) = ANY($\(binds.count))")
        }
        if let after = query.afterObjectID {
            binds.append(after)
            clauses.append("\(pk) > $\(binds.count)")
        }
        if let through = query.throughObjectID {
            binds.append(through)
            clauses.append("\(pk) <= $\(binds.count)")
        }
        if query.afterGlobalID != nil || query.globalIDs != nil {
            guard let field = definition.globalIDField else {
                throw StorageError(.invalidQuery, "\(definition.name) has no global ids", table: definition.name)
            }
            if let after = query.afterGlobalID {
                binds.append(after)
                clauses.append("\(Self.q(field)) COLLATE \"C\" > $\(binds.count)")
            }
            if let gids = query.globalIDs {
                binds.append(gids.map { GlobalID.normalized($0) ?? $0 })
                clauses.append("\(Self.q(field)) = ANY($\(binds.count))")
            }
        }
        if let e = query.envelope {
            guard definition.isSpatial else {
                throw StorageError(.invalidQuery, "\(definition.name) is a table without geometry; it cannot be filtered by an envelope", table: definition.name)
            }
            guard e.isValid else { throw StorageError(.invalidQuery, "the envelope is not valid (min > max or not finite)", table: definition.name) }
            for v in [e.xmin, e.ymin, e.xmax, e.ymax] { binds.append(v) }
            let n = binds.count
            // `&&` finds candidates through the GiST index (its boxes are rounded outward); the
            // exact bounds settle them, as the GeoPackage's R-tree and blob headers do.
            clauses.append(
                "\(geometryColumn) && ST_MakeEnvelope($\(n - 3), $\(n - 2), $\(n - 1), $\(n), \(srid)) "
                    + "AND ST_XMin(\(geometryColumn)::box3d) <= $\(n - 1) AND ST_XMax(\(geometryColumn)::box3d) >= $\(n - 3) "
                    + "AND ST_YMin(\(geometryColumn)::box3d) <= $\(n) AND ST_YMax(\(geometryColumn)::box3d) >= $\(n - 2)")
        }
        if let shape = query.intersecting {
            guard definition.isSpatial else {
                throw StorageError(.invalidQuery, "\(definition.name) is a table without geometry; it cannot be filtered by a geometry", table: definition.name)
            }
            binds.append(ByteBuffer(bytes: WKB.encode(shape)))
            let g = "ST_GeomFromWKB($\(binds.count), \(srid))"
            clauses.append("\(geometryColumn) && \(g) AND ST_Intersects(\(geometryColumn), \(g))")
        }
        return clauses.isEmpty ? "" : " WHERE " + clauses.joined(separator: " AND ")
    }

    /// ` ORDER BY …`: text in byte order and nulls first ascending, as SQLite sorts, so both
    /// backends page the same way.
    func order(_ query: FeatureQuery) throws -> String {
        " ORDER BY "
            + (try definition.orderTerms(query)).map { term in
                let textual = [.string, .globalID, .guid].contains(term.field.type)
                // Object ids are never null: plain ASC/DESC lets the primary key's index serve.
                let nulls = term.field.type == .oid ? "" : term.ascending ? " NULLS FIRST" : " NULLS LAST"
                return "\(Self.q(term.field.name))\(textual ? " COLLATE \"C\"" : "") \(term.ascending ? "ASC" : "DESC")\(nulls)"
            }.joined(separator: ", ")
    }

    func paging(_ query: FeatureQuery, _ binds: inout PostgresBindings) throws -> String {
        var sql = ""
        if let limit = query.limit {
            binds.append(Int64(max(limit, 0)))
            sql += " LIMIT $\(binds.count)"
        }
        if query.offset > 0 {
            binds.append(Int64(query.offset))
            sql += " OFFSET $\(binds.count)"
        }
        return sql
    }

    // MARK: - Binding

    /// A where clause's literal. Text goes untyped so PostgreSQL reads it as the type of what it
    /// is compared with (a date, a timestamp, text).
    static func bind(_ literal: SQLLiteral, _ binds: inout PostgresBindings) throws {
        switch literal {
        case .null: binds.appendNull()
        case .integer(let i): binds.append(i)
        case .double(let d): binds.append(d)
        case .text(let s): try binds.append(UntypedText(value: s))
        case .blob(let b): binds.append(ByteBuffer(bytes: b))
        }
    }

    /// A field value with the PostgreSQL type of its column.
    static func bind(_ value: FieldValue, _ type: FieldType, _ binds: inout PostgresBindings) throws {
        switch (type, value) {
        case (_, .null): binds.appendNull()
        case (.smallInteger, .integer(let i)): binds.append(Int16(truncatingIfNeeded: i))
        case (.integer, .integer(let i)): binds.append(Int32(truncatingIfNeeded: i))
        case (.double, .integer(let i)), (.single, .integer(let i)): binds.append(Double(i))
        case (_, .integer(let i)): binds.append(i)
        case (_, .double(let d)): binds.append(d)
        case (_, .string(let s)): binds.append(s)
        case (_, .date(let d)): binds.append(d)
        case (_, .blob(let b)): binds.append(ByteBuffer(bytes: b))
        }
    }

    /// A geometry as the argument of `ST_GeomFromWKB($n, srid)`, or null.
    func bind(_ geometry: Geometry?, _ binds: inout PostgresBindings) -> String {
        if let geometry { binds.append(ByteBuffer(bytes: WKB.encode(geometry))) } else { binds.appendNull() }
        return "ST_GeomFromWKB($\(binds.count), \(srid))"
    }

    /// Binds a checked row's values; returns the SQL expression of each.
    func bind(_ row: FeatureValidator.Row, _ binds: inout PostgresBindings) throws -> [String] {
        var expressions: [String] = []
        for (i, value) in row.values.enumerated() {
            if row.writesGeometry && i == row.values.count - 1 {
                expressions.append(bind(row.geometry, &binds))
            } else {
                try Self.bind(value, row.types[i], &binds)
                expressions.append("$\(binds.count)")
            }
        }
        return expressions
    }
}

/// Text sent without a type: PostgreSQL infers it from where it is used.
struct UntypedText: PostgresEncodable {
    var value: String
    static var psqlType: PostgresDataType { PostgresDataType(0) }
    static var psqlFormat: PostgresFormat { .text }
    func encode<E: PostgresJSONEncoder>(into buffer: inout ByteBuffer, context: PostgresEncodingContext<E>) {
        buffer.writeString(value)
    }
}
