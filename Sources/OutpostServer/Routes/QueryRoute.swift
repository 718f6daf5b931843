import Foundation
import Hummingbird
import OutpostCore
import OutpostStorage

extension ServiceRoutes {
    /// Rows read from the backend per page while streaming a query.
    static let pageSize = 500

    /// `/{layer}/query`: where, objectIds, geometry/geometryType/spatialRel/inSR, outFields,
    /// returnGeometry, returnIdsOnly, returnCountOnly, outSR, orderByFields, resultOffset,
    /// resultRecordCount; Esri JSON or GeoJSON, streamed.
    func query(_ id: Int) async throws -> Response {
        let format = try parameters.format(allowing: ["geojson"])
        let schema = try await backend.schema()
        let layer = try layer(id, in: schema)
        let layerSR = layer.spatialReference ?? schema.spatialReference
        let plan = try queryPlan(layer, schema: schema, geojson: format == "geojson")
        let query = plan.query, fields = plan.fields, outSR = plan.outSR, limit = plan.limit

        if try parameters.bool("returnCountOnly", default: false) {
            var all = query
            all.offset = 0
            return writing.json(["count": .integer(Int64(try await backend.count(layerID: id, query: all)))])
        }
        if try parameters.bool("returnIdsOnly", default: false) {
            let ids = try await backend.objectIDs(layerID: id, query: query)
            return writing.json(["objectIdFieldName": .string(layer.objectIDField), "objectIds": .array(ids.map { .integer($0) })])
        }

        let backend = self.backend
        let geojson = format == "geojson"
        let header = geojson ? "{\"type\":\"FeatureCollection\",\"features\":[" : esriHeader(layer, fields: fields, sr: outSR, returnGeometry: query.returnGeometry)
        let (base, targetSR) = (query, outSR)
        return writing.stream(contentType: geojson ? "application/geo+json; charset=utf-8" : "application/json; charset=utf-8") { out in
            out.append(header)
            var written = 0
            var exceeded = false
            var page = base
            let keyset = base.orderBy.isEmpty && base.offset == 0 && base.intersecting == nil
            // One page is read while the one before it is written: reading and encoding each
            // take about half the time, and they run on different threads.
            page.limit = min(Self.pageSize, limit + 1)
            var reading: Task<[Feature], any Error>?
            if page.limit! > 0 {
                let first = page
                reading = Task { try await backend.features(layerID: id, query: first) }
            }
            defer { reading?.cancel() }
            while let current = reading {
                let features = try await current.value
                reading = nil
                if features.count == page.limit! {
                    if keyset { page.afterObjectID = features.last?.objectID } else { page.offset += features.count }
                    page.limit = min(Self.pageSize, limit + 1 - written - features.count)
                    if page.limit! > 0 {
                        let next = page
                        reading = Task { try await backend.features(layerID: id, query: next) }
                    }
                }
                for var feature in features {
                    if written == limit {
                        exceeded = true
                        break
                    }
                    if let g = feature.geometry, targetSR != layerSR { feature.geometry = try WebMercator.convert(g, from: layerSR, to: targetSR) }
                    if written > 0 { out.append(",") }
                    if geojson {
                        out.write { FeatureJSON.writeGeoJSON(feature, fields: fields, includeGeometry: base.returnGeometry, to: &$0) }
                    } else {
                        try out.write { try FeatureJSON.writeEsri(feature, fields: fields, includeGeometry: base.returnGeometry, to: &$0) }
                    }
                    written += 1
                    try await out.flushIfNeeded()
                }
                if exceeded { break }
            }
            if geojson {
                out.append(exceeded ? "],\"properties\":{\"exceededTransferLimit\":true}}" : "]}")
            } else {
                out.append("],\"exceededTransferLimit\":\(exceeded)}")
            }
        }
    }

    /// What a query request asks, as the JSON route and the Services Directory page both run it.
    struct QueryPlan {
        var query: FeatureQuery
        var fields: [FieldDefinition]
        var outSR: SpatialReference
        /// How many features at most: `resultRecordCount` clamped to `maxRecordCount`.
        var limit: Int
    }

    /// Reads and checks the query parameters (each failure a 400 naming its parameter).
    func queryPlan(_ layer: LayerDefinition, schema: ServiceSchema, geojson: Bool = false) throws -> QueryPlan {
        let layerSR = layer.spatialReference ?? schema.spatialReference
        var query = FeatureQuery()
        if let text = parameters["where"] {
            do {
                _ = try WhereClause(text, layer: layer)
            } catch let error as StorageError {
                throw ServiceError.badParameter("where", error.message)
            }
            query.whereClause = text
        }
        query.objectIDs = try parameters.integers("objectIds")
        try spatialFilter(into: &query, layer: layer, layerSR: layerSR)

        let fields = try outFields(layer)
        query.outFields = fields.map(\.name)
        query.returnGeometry = try parameters.bool("returnGeometry", default: true) && layer.isSpatial
        query.orderBy = try orderBy(layer)
        query.offset = try parameters.int("resultOffset") ?? 0
        let requested = try parameters.int("resultRecordCount")
        let maxRecords = min(schema.maxRecordCount, configuration.maxRecordCount ?? Int.max)
        var outSR = try parameters.spatialReference("outSR") ?? layerSR
        if geojson { outSR = .wgs84 }  // RFC 7946 coordinates are WGS 84
        if outSR != layerSR, (try? WebMercator.convert(Envelope(xmin: 0, ymin: 0, xmax: 1, ymax: 1), from: layerSR, to: outSR)) == nil {
            throw ServiceError.badParameter("outSR", "cannot project from \(layerSR) to \(outSR); use 4326 or 3857")
        }
        // ArcGIS clamps a larger resultRecordCount to maxRecordCount and says so.
        return QueryPlan(query: query, fields: fields, outSR: outSR, limit: min(requested ?? maxRecords, maxRecords))
    }

    private func esriHeader(_ layer: LayerDefinition, fields: [FieldDefinition], sr: SpatialReference, returnGeometry: Bool) -> String {
        var out = "{\"objectIdFieldName\":"
        JSONValue.writeString(layer.objectIDField, to: &out)
        out += ",\"globalIdFieldName\":"
        JSONValue.writeString(layer.globalIDField ?? "", to: &out)
        if layer.isSpatial {
            out += ",\"geometryType\":\"\(layer.geometryType?.esriName ?? "")\",\"spatialReference\":"
            EsriJSON.writeSpatialReference(sr, to: &out)
            if layer.hasZ { out += ",\"hasZ\":true" }
            if layer.hasM { out += ",\"hasM\":true" }
        }
        out += ",\"fields\":"
        JSONValue.array(fields.map { f in
            var info: [String: JSONValue] = ["name": .string(f.name), "type": .string(f.type.esriName), "alias": .string(f.alias ?? f.name)]
            if let length = f.length { info["length"] = .integer(Int64(length)) }
            return .object(info)
        }).write(to: &out)
        out += ",\"features\":["
        return out
    }

    /// `*` (or absent) for every field; otherwise the named fields plus the object id. Every
    /// entry of the list is checked, also beside a `*` (ArcGIS answers "Invalid field" there too).
    private func outFields(_ layer: LayerDefinition) throws -> [FieldDefinition] {
        guard let text = parameters["outFields"] else { return layer.fields }
        var fields: [FieldDefinition] = []
        var all = false
        for name in text.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) where !name.isEmpty {
            if name == "*" {
                all = true
                continue
            }
            guard let field = layer.field(named: name) else {
                throw ServiceError.badParameter("outFields", "Invalid field \"\(name.prefix(60))\": \(layer.name) has no such field")
            }
            if !fields.contains(field) { fields.append(field) }
        }
        if all { return layer.fields }
        if let oid = layer.fields.first(where: { $0.type == .oid }), !fields.contains(oid) { fields.insert(oid, at: 0) }
        return fields
    }

    /// `orderByFields=name DESC, condition`.
    private func orderBy(_ layer: LayerDefinition) throws -> [FeatureQuery.SortField] {
        guard let text = parameters["orderByFields"] else { return [] }
        return try text.split(separator: ",").map { item in
            let words = item.split(separator: " ").map(String.init)
            guard (1...2).contains(words.count), let field = layer.field(named: words[0]) else {
                throw ServiceError.badParameter("orderByFields", "\"\(item.prefix(60))\" is not \"<field> [ASC|DESC]\"")
            }
            let direction = words.count == 2 ? words[1].uppercased() : "ASC"
            guard direction == "ASC" || direction == "DESC" else {
                throw ServiceError.badParameter("orderByFields", "the direction must be ASC or DESC, not \"\(words[1].prefix(20))\"")
            }
            return FeatureQuery.SortField(field.name, ascending: direction == "ASC")
        }
    }

    /// `geometry` with `geometryType`, `inSR` and `spatialRel`.
    private func spatialFilter(into query: inout FeatureQuery, layer: LayerDefinition, layerSR: SpatialReference) throws {
        guard parameters["geometry"] != nil else { return }
        guard layer.isSpatial else { throw ServiceError.badParameter("geometry", "\(layer.name) is a table without geometry") }
        guard let geometry = try parameters.filterGeometry(in: layerSR) else { return }
        switch parameters["spatialRel"] ?? "esriSpatialRelIntersects" {
        case "esriSpatialRelIntersects":
            query.intersecting = geometry
        case "esriSpatialRelEnvelopeIntersects":
            query.envelope = geometry.envelope
        case let other:
            throw ServiceError.badParameter("spatialRel", "\"\(other.prefix(40))\" is not supported (use esriSpatialRelIntersects or esriSpatialRelEnvelopeIntersects)")
        }
    }
}
