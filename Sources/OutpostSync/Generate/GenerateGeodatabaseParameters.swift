import Foundation
import OutpostCore

/// What to take offline: the area, the layers with their filters, the sync model.
///
/// Made by ``GeodatabaseSyncTask/makeDefaultGenerateGeodatabaseParameters(extent:spatialReference:)``
/// (every layer, filtered by the extent) and adjusted as needed.
public struct GenerateGeodatabaseParameters: Sendable, Hashable {
    /// How the replica tracks what it has synced.
    public enum SyncModel: String, Sendable, Hashable, Codable {
        /// One generation for the whole geodatabase (ArcGIS perReplica).
        case geodatabase
        /// A generation and a direction per layer (ArcGIS perLayer).
        case layer
        /// A one-off copy that cannot sync.
        case none
    }

    /// Which features of a layer the replica starts with.
    public enum QueryOption: String, Sendable, Hashable, Codable {
        /// Every feature of the layer.
        case all
        /// No features: an upload-only layer starts empty.
        case none
        /// The features that meet the where clause and (with `useGeometry`) the area.
        case useFilter
    }

    /// Which way attachments sync.
    public enum AttachmentSyncDirection: String, Sendable, Hashable, Codable {
        /// No attachments sync; only the replica's new attachments go up; or they go both ways.
        case none, upload, bidirectional
    }

    /// What to take of one layer.
    public struct LayerOption: Sendable, Hashable, Codable {
        /// The layer's id in the service.
        public var layerID: Int
        /// A SQL where clause the features must meet (empty: all).
        public var whereClause: String
        /// Whether the features must also meet the extent.
        public var useGeometry: Bool
        /// Which features the replica starts with.
        public var queryOption: QueryOption

        /// The options of layer `layerID`: by default the features in the extent.
        public init(layerID: Int, whereClause: String = "", useGeometry: Bool = true, queryOption: QueryOption = .useFilter) {
            self.layerID = layerID
            self.whereClause = whereClause
            self.useGeometry = useGeometry
            self.queryOption = queryOption
        }
    }

    /// The area: an envelope or (for an irregular area of interest) a polygon, in
    /// `spatialReference`.
    public var extent: Geometry?
    /// The spatial reference of `extent`.
    public var spatialReference: SpatialReference
    /// The layers to take, each with its filter (layers not listed stay on the service).
    public var layerOptions: [LayerOption]
    /// Whether the replica syncs as a whole or layer by layer, or not at all.
    public var syncModel: SyncModel
    /// Whether the features' attachments are downloaded with them.
    public var returnAttachments: Bool
    /// Which way attachments sync afterwards.
    public var attachmentSyncDirection: AttachmentSyncDirection
    /// The replica's name on the server.
    public var replicaName: String

    /// Parameters for the given area and layers; see each property.
    public init(
        extent: Geometry? = nil, spatialReference: SpatialReference = .wgs84, layerOptions: [LayerOption] = [], syncModel: SyncModel = .geodatabase,
        returnAttachments: Bool = false, attachmentSyncDirection: AttachmentSyncDirection = .none, replicaName: String = "outpost replica"
    ) {
        self.extent = extent
        self.spatialReference = spatialReference
        self.layerOptions = layerOptions
        self.syncModel = syncModel
        self.returnAttachments = returnAttachments
        self.attachmentSyncDirection = attachmentSyncDirection
        self.replicaName = replicaName
    }

    /// The createReplica form fields (async, GeoPackage result).
    func formFields() throws -> [(String, String)] {
        var queries: [String: JSONValue] = [:]
        for option in layerOptions {
            queries[String(option.layerID)] = [
                "queryOption": .string(option.queryOption.rawValue), "where": .string(option.whereClause), "useGeometry": .bool(option.useGeometry),
            ]
        }
        var fields: [(String, String)] = [
            ("replicaName", replicaName),
            ("layers", layerOptions.map { String($0.layerID) }.joined(separator: ",")),
            ("layerQueries", JSONValue.object(queries).jsonString),
            ("syncModel", ["geodatabase": "perReplica", "layer": "perLayer", "none": "none"][syncModel.rawValue]!),
            ("returnAttachments", String(returnAttachments)),
            ("attachmentsSyncDirection", attachmentSyncDirection.rawValue),
            ("async", "true"), ("dataFormat", "sqlite"), ("transportType", "esriTransportTypeUrl"),
        ]
        if let extent {
            fields.append(("geometry", try EsriJSON.encode(extent, spatialReference: spatialReference)))
            fields.append(("geometryType", EsriJSON.geometryTypeName(for: extent.type) ?? "esriGeometryPolygon"))
            fields.append(("inSR", String(spatialReference.wkid)))
        }
        return fields
    }

    // MARK: - JSON (job parameters)

    var json: JSONValue {
        get throws {
            [
                "extent": try extent.map { try JSONValue.parse(try EsriJSON.encode($0)) } ?? .null,
                "spatialReference": .integer(Int64(spatialReference.wkid)),
                "layerOptions": try JSONValue.parse(JSONEncoder().encode(layerOptions)),
                "syncModel": .string(syncModel.rawValue), "returnAttachments": .bool(returnAttachments),
                "attachmentSyncDirection": .string(attachmentSyncDirection.rawValue), "replicaName": .string(replicaName),
            ]
        }
    }

    init(json: JSONValue) throws {
        self.init()
        if let e = json["extent"], !e.isNull { extent = try EsriJSON.decodeGeometry(e) }
        spatialReference = SpatialReference(wkid: Int(json["spatialReference"]?.integerValue ?? 4326))
        layerOptions = try JSONDecoder().decode([LayerOption].self, from: (json["layerOptions"] ?? []).jsonData)
        syncModel = json["syncModel"]?.stringValue.flatMap(SyncModel.init(rawValue:)) ?? .geodatabase
        returnAttachments = json["returnAttachments"]?.boolValue ?? false
        attachmentSyncDirection = json["attachmentSyncDirection"]?.stringValue.flatMap(AttachmentSyncDirection.init(rawValue:)) ?? .none
        replicaName = json["replicaName"]?.stringValue ?? "outpost replica"
    }
}
