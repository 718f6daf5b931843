import Foundation
import OutpostCore
import OutpostProtocol
import OutpostStorage

/// What every backend writes into a new replica file alike.
public enum ReplicaFile {
    /// The replica's layers and tables, synced (with change capture) unless the model is `none`.
    public static func clientSchema(_ schema: ServiceSchema, _ request: ReplicaRequest) -> ServiceSchema {
        var clientSchema = schema
        let ids = Set(request.layers.map(\.id))
        let synced = request.syncModel != .none
        clientSchema.layers = schema.layers.filter { ids.contains($0.id) }.map { var l = $0; l.sync = synced && l.globalIDField != nil; return l }
        clientSchema.tables = schema.tables.filter { ids.contains($0.id) }.map { var l = $0; l.sync = synced && l.globalIDField != nil; return l }
        return clientSchema
    }

    /// The replica state a GeoPackage replica starts from.
    public static func state(_ request: ReplicaRequest, schema: ServiceSchema, replicaID: String, serviceURL: String, generation: Int64) -> ReplicaState {
        ReplicaState(
            replicaID: replicaID, replicaName: request.name, serviceURL: serviceURL,
            syncModel: request.syncModel == .perLayer ? .perLayer : .perReplica, cursor: generation,
            layers: request.layers.compactMap { l in
                schema.layer(id: l.id).map {
                    ReplicaState.Layer(id: l.id, table: $0.name, direction: ReplicaState.Direction(rawValue: l.syncDirection.rawValue) ?? .bidirectional, cursor: generation)
                }
            },
            attachmentsDirection: ReplicaState.Direction(rawValue: request.attachmentsSyncDirection.rawValue) ?? .none,
            schemaVersion: schema.schemaVersion, batchEncodings: UploadBatch.acceptedEncodings)
    }

    /// The ArcGIS JSON replica up to its `layers` array (open).
    public static func jsonHeader(_ request: ReplicaRequest, replicaID: String, generation: Int64) -> String {
        var out = "{\"replicaName\":\(JSONValue.string(request.name).jsonString),\"replicaID\":\"\(replicaID)\","
        if request.syncModel == .perLayer {
            out += "\"layerServerGens\":[" + request.layers.map { "{\"id\":\($0.id),\"serverGen\":\(generation)}" }.joined(separator: ",") + "],"
        } else {
            out += "\"replicaServerGen\":\(generation),"
        }
        return out + "\"syncModel\":\"\(request.syncModel.rawValue)\",\"layers\":["
    }

    /// An attachment of a JSON replica: whole with its `url`, or (not `byURL`) open after
    /// `"data":"` for the caller to write the base64 content and close with `"}`.
    public static func jsonAttachment(_ a: Attachment, layerID: Int, serviceURL: String, byURL: Bool) -> String {
        let head = "{\"id\":\(a.id),\"globalId\":\(JSONValue.string(a.globalID).jsonString),\"parentGlobalId\":\((a.featureGlobalID.map { JSONValue.string($0) } ?? .null).jsonString)"
            + ",\"name\":\(JSONValue.string(a.name).jsonString),\"contentType\":\(JSONValue.string(a.contentType).jsonString),\"size\":\(a.size)"
        guard byURL else { return head + ",\"data\":\"" }
        return head + ",\"url\":\(JSONValue.string("\(serviceURL)/\(layerID)/\(a.featureObjectID)/attachments/\(a.id)").jsonString)}"
    }
}
