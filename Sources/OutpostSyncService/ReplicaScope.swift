import Foundation
import OutpostCore
import OutpostProtocol
import OutpostStorage

/// Which features of each layer a replica holds.
public struct ReplicaScope: Sendable {
    let geometry: Geometry?
    let serviceSR: SpatialReference

    /// The scope a replica request asks for.
    public init(request: ReplicaRequest, schema: ServiceSchema) {
        geometry = request.geometry
        serviceSR = schema.spatialReference
    }

    /// The scope of a registered replica.
    public init(info: ReplicaInfo, schema: ServiceSchema) {
        geometry = info.geometry.flatMap { try? EsriJSON.decodeGeometry($0) }
        serviceSR = schema.spatialReference
    }

    /// The query selecting the layer's features in scope, or nil when it holds none.
    public func query(_ info: ReplicaInfo.Layer, layer: LayerDefinition) -> FeatureQuery? {
        switch info.queryOption {
        case "none": return nil
        case "all": return FeatureQuery()
        default:
            var q = FeatureQuery(where: info.where)
            if info.useGeometry, let geometry, layer.isSpatial {
                let layerSR = layer.spatialReference ?? serviceSR
                q.intersecting = (try? WebMercator.convert(geometry, from: serviceSR, to: layerSR)) ?? geometry
            }
            return q
        }
    }

    /// Layer `id` as the replica holds it and as the schema defines it.
    /// - Throws: `SyncServiceError` (`notFound`) when the replica or the service has no such layer.
    public static func layer(_ id: Int, of info: ReplicaInfo, schema: ServiceSchema) throws -> (ReplicaInfo.Layer, LayerDefinition) {
        guard let layerInfo = info.layers.first(where: { $0.id == id }), let layer = schema.layer(id: id) else {
            throw SyncServiceError.notFound("layer \(id) in replica \(info.replicaID)")
        }
        return (layerInfo, layer)
    }
}

/// Feature attributes as sync JSON (dates in epoch ms), the OID left out.
public enum ReplicaRows {
    /// The feature's attributes but the object id, as sync JSON.
    public static func attributes(_ feature: Feature, fields: [FieldDefinition]) -> [String: JSONValue] {
        var out: [String: JSONValue] = [:]
        out.reserveCapacity(fields.count)
        for index in fields.indices {
            switch fields[index].type {
            case .oid: continue
            case .globalID: out[fields[index].name] = feature.globalID.map { .string($0) } ?? .null
            default: out[fields[index].name] = (feature.attributes[fields[index].name] ?? .null).jsonValue
            }
        }
        return out
    }

    /// A feature as the change feed sends it: all its values, the geometry as Esri JSON.
    public static func upsert(_ feature: Feature, fields: [FieldDefinition], generation: Int64, inserted: Bool? = nil) throws -> FeedChange {
        let row = try syncRow(feature, fields: fields)
        return FeedChange(kind: .upsert, globalId: row.globalID, generation: generation, attributes: row.attributes, geometry: row.geometry, inserted: inserted)
    }

    /// A feature's values as a sync exchange carries them (what `FeatureTable/forEachSyncRow(matching:in:_:)`
    /// reads straight from a stored row).
    public static func syncRow(_ feature: Feature, fields: [FieldDefinition]) throws -> FeatureTable.SyncRow {
        FeatureTable.SyncRow(
            globalID: feature.globalID!, attributes: attributes(feature, fields: fields),
            geometry: try feature.geometry.map { try EsriJSON.value($0) } ?? .null)
    }

    /// The columns of `table`'s rows in the stored form: its `storedFields`, in the order
    /// `FeatureTable.forEachStoredRow(matching:in:_:)` gives their values.
    public static func storedColumns(of table: FeatureTable) -> FeedColumns {
        let fields = table.storedFields
        return FeedColumns(
            names: fields.map(\.name), types: fields.map(\.type.rawValue),
            globalIDFields: table.definition.fields.filter { $0.type == .globalID }.map(\.name), spatial: table.definition.isSpatial)
    }

    /// A feature's values as a tombstone keeps them: Esri JSON `{"attributes", "geometry"}`.
    public static func tombstoneJSON(_ feature: Feature, _ layer: LayerDefinition) throws -> String {
        var row: [String: JSONValue] = ["attributes": .object(attributes(feature, fields: layer.fields.filter { $0.type != .oid }))]
        if layer.isSpatial { row["geometry"] = try feature.geometry.map { try EsriJSON.value($0) } ?? .null }
        return JSONValue.object(row).jsonString
    }
}
