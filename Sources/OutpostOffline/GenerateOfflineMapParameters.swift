import Foundation
import OutpostCore
import OutpostProtocol

/// What to take offline from a map (the SDK's `GenerateOfflineMapParameters`): the area, the
/// basemap's levels, and per-layer overrides.
///
/// Made by ``OfflineMapTask/makeDefaultGenerateOfflineMapParameters(areaOfInterest:spatialReference:minScale:maxScale:)``
/// and adjusted:
///
/// ```swift
/// var parameters = try await task.makeDefaultGenerateOfflineMapParameters(areaOfInterest: area, minScale: 0, maxScale: 5_000)
/// parameters.override("pipelines") { $0.skip = true }
/// parameters.override("inspection_points") { $0.where = "status <> 'closed'" }
/// ```
public struct GenerateOfflineMapParameters: Codable, Hashable, Sendable {
    /// How one operational layer (by its id in the map) goes offline.
    public struct LayerOverride: Codable, Hashable, Sendable {
        /// The layer's id in the map.
        public var layer: String
        /// Leave the layer out.
        public var skip: Bool
        /// Only these features (replaces the map's where clause for the layer).
        public var `where`: String?
        /// Attachments with the features (a replica carries them per service: on when any of its
        /// layers asks).
        public var includeAttachments: Bool?
        /// The table and no features (an editable layer the crew only adds to).
        public var schemaOnly: Bool

        /// The override of layer `layer`; see each property.
        public init(layer: String, skip: Bool = false, where: String? = nil, includeAttachments: Bool? = nil, schemaOnly: Bool = false) {
            self.layer = layer
            self.skip = skip
            self.where = `where`
            self.includeAttachments = includeAttachments
            self.schemaOnly = schemaOnly
        }
    }

    /// How layers of a service that takes no edits go offline.
    public enum ReadOnlyLayers: String, Codable, Hashable, Sendable {
        /// A replica that downloads the service's changes at each sync.
        case syncable
        /// A copy that never syncs (smaller bookkeeping, no registration on the server).
        case snapshot
    }

    /// The area to take offline, with its spatial reference.
    public var areaOfInterest: MapDefinition.Extent
    /// The coarsest scale of the basemap (0: its coarsest level).
    public var minScale: Double
    /// The finest scale of the basemap (0: its finest level).
    public var maxScale: Double
    /// Whether the basemap goes offline as a tile package.
    public var includeBasemap: Bool
    /// The basemap levels exported (from the scales, when the parameters were made).
    public var basemapLevels: [Int]
    /// The basemap export is refused above this many tiles.
    public var maxTileCount: Int
    /// Per-layer changes to the defaults (leave out, filter, attachments, schema only).
    public var layerOverrides: [LayerOverride]
    /// Attachments with the features (the default for layers without an override).
    public var includeAttachments: Bool
    /// Editable layers go offline as empty tables (the SDK's `returnSchemaOnlyForEditableLayers`).
    public var returnSchemaOnlyForEditableLayers: Bool
    /// How layers of services that take no edits go offline.
    public var readOnlyLayers: ReadOnlyLayers
    /// A layer, basemap or task that fails is reported in the offline map's `layerErrors` and
    /// the rest is kept; false fails the job instead.
    public var continueOnErrors: Bool
    /// Locator and network files the map names are copied into the offline map.
    public var includeTasks: Bool
    /// The preplanned area these parameters were made for, if any.
    public var preplannedArea: String?

    /// Parameters with the given values; see each property.
    public init(
        areaOfInterest: MapDefinition.Extent, minScale: Double = 0, maxScale: Double = 0, includeBasemap: Bool = true, basemapLevels: [Int] = [],
        maxTileCount: Int = 100_000, layerOverrides: [LayerOverride] = [], includeAttachments: Bool = true, returnSchemaOnlyForEditableLayers: Bool = false,
        readOnlyLayers: ReadOnlyLayers = .syncable, continueOnErrors: Bool = true, includeTasks: Bool = true, preplannedArea: String? = nil
    ) {
        self.areaOfInterest = areaOfInterest
        self.minScale = minScale
        self.maxScale = maxScale
        self.includeBasemap = includeBasemap
        self.basemapLevels = basemapLevels
        self.maxTileCount = maxTileCount
        self.layerOverrides = layerOverrides
        self.includeAttachments = includeAttachments
        self.returnSchemaOnlyForEditableLayers = returnSchemaOnlyForEditableLayers
        self.readOnlyLayers = readOnlyLayers
        self.continueOnErrors = continueOnErrors
        self.includeTasks = includeTasks
        self.preplannedArea = preplannedArea
    }

    /// The override of `layer` (a default one when none was set).
    public func override(for layer: String) -> LayerOverride {
        layerOverrides.first { $0.layer == layer } ?? LayerOverride(layer: layer)
    }

    /// Changes the override of `layer`, adding it when there is none.
    public mutating func override(_ layer: String, _ change: (inout LayerOverride) -> Void) {
        var entry = override(for: layer)
        change(&entry)
        layerOverrides.removeAll { $0.layer == layer }
        layerOverrides.append(entry)
    }
}
