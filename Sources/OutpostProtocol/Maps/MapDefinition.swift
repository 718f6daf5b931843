import Foundation
import OutpostCore

/// A map: what a crew sees and takes offline (Schemas/map.schema.json, format version 1).
///
/// Online, the layers are services by URL (a URL without a scheme is relative to
/// ``servicesURL``, which `outpost serve` fills in for the maps it serves). An offline map's
/// `map.json` is the same document with each layer's ``MapDefinition/OperationalLayer/file``
/// and the ``offline`` section filled in.
///
/// ```json
/// {"formatVersion": 1, "title": "Field crews",
///  "operationalLayers": [{"id": "points", "title": "Inspection points", "url": "field_inspection/FeatureServer/0"}],
///  "basemap": {"title": "Natural Earth", "url": "natural_earth/MapServer"}}
/// ```
public struct MapDefinition: Codable, Hashable, Sendable {
    /// The format version this build writes (and the newest it reads).
    public static let currentFormatVersion = 1

    /// An extent with its spatial reference (Esri JSON envelope shape).
    public struct Extent: Codable, Hashable, Sendable {
        /// The least x.
        public var xmin: Double
        /// The least y.
        public var ymin: Double
        /// The greatest x.
        public var xmax: Double
        /// The greatest y.
        public var ymax: Double
        /// The extent's spatial reference (WGS 84 when absent).
        public var spatialReference: SpatialReference?

        /// The extent of `envelope` in `spatialReference`.
        public init(_ envelope: Envelope, spatialReference: SpatialReference = .wgs84) {
            (xmin, ymin, xmax, ymax) = (envelope.xmin, envelope.ymin, envelope.xmax, envelope.ymax)
            self.spatialReference = spatialReference
        }

        /// The extent as an envelope (without its spatial reference).
        public var envelope: Envelope { Envelope(xmin: xmin, ymin: ymin, xmax: xmax, ymax: ymax) }
        /// The extent's spatial reference, WGS 84 when none is given.
        public var wkid: SpatialReference { spatialReference ?? .wgs84 }
    }

    /// A feature layer or table of a feature service.
    public struct OperationalLayer: Codable, Hashable, Sendable {
        /// Unique within the map (per-layer options and errors name it).
        public var id: String
        /// The layer's name as people see it.
        public var title: String
        /// `…/FeatureServer/<layer id>`.
        public var url: String
        /// Only these features (SQL where clause), online and offline.
        public var `where`: String?
        /// Whether the layer is drawn (true when absent).
        public var visible: Bool?
        /// Offline only: the geodatabase holding the layer, relative to the offline map's folder.
        public var file: String?
        /// Offline only: the table in ``file``.
        public var table: String?

        /// A layer of these values.
        public init(id: String, title: String, url: String, where: String? = nil, visible: Bool? = nil, file: String? = nil, table: String? = nil) {
            self.id = id
            self.title = title
            self.url = url
            self.where = `where`
            self.visible = visible
            self.file = file
            self.table = table
        }
    }

    /// A service the map uses besides its feature layers, by URL, with its local copy offline
    /// (``file``): the basemap (a MapServer, a `{z}/{x}/{y}` template or a tile cache; offline a
    /// `.tpkx`), a locator or street network (served by Outpost: offline its `.locator` or
    /// `.network` file), or a geoprocessing service (online only).
    public struct Reference: Codable, Hashable, Sendable {
        /// The service's name as people see it.
        public var title: String
        /// The service's URL (relative to ``MapDefinition/servicesURL`` when it has no scheme).
        public var url: String
        /// Offline only: the local copy, relative to the offline map's folder.
        public var file: String?

        /// A reference of these values.
        public init(title: String, url: String, file: String? = nil) {
            self.title = title
            self.url = url
            self.file = file
        }
    }

    /// The map's basemap: a MapServer, a `{z}/{x}/{y}` template or a tile cache.
    public typealias Basemap = Reference
    /// A locator, street network or geoprocessing service the map uses.
    public typealias TaskReference = Reference

    /// An area the server prepares ahead (`outpost offline prepare`), for crews to download.
    public struct PreplannedArea: Codable, Hashable, Sendable {
        /// The area's id (what `outpost offline prepare` and a download name).
        public var id: String
        /// The area's name as people see it.
        public var title: String
        /// The area covered.
        public var extent: Extent
        /// 0: the basemap's coarsest level.
        public var minScale: Double?
        /// 0: the basemap's finest level.
        public var maxScale: Double?

        /// An area of these values.
        public init(id: String, title: String, extent: Extent, minScale: Double? = nil, maxScale: Double? = nil) {
            self.id = id
            self.title = title
            self.extent = extent
            self.minScale = minScale
            self.maxScale = maxScale
        }
    }

    /// What an offline map's `map.json` adds: where it came from and what it holds.
    public struct Offline: Codable, Hashable, Sendable {
        /// A geodatabase the offline map holds, and the service it syncs with.
        public struct Replica: Codable, Hashable, Sendable {
            /// The geodatabase, relative to the offline map's folder.
            public var file: String
            /// The FeatureServer it came from.
            public var serviceUrl: String
            /// The service layer ids it holds.
            public var layers: [Int]
            /// A snapshot cannot sync; a replica can (both ways, or download only when read-only).
            public var snapshot: Bool
            /// Whether the replica only downloads (its layers are not editable).
            public var readOnly: Bool

            /// A replica entry of these values.
            public init(file: String, serviceUrl: String, layers: [Int], snapshot: Bool, readOnly: Bool) {
                self.file = file
                self.serviceUrl = serviceUrl
                self.layers = layers
                self.snapshot = snapshot
                self.readOnly = readOnly
            }
        }

        /// A layer (by its id in the map, or "basemap", or a task's title) that could not be taken offline.
        public struct LayerError: Codable, Hashable, Sendable {
            /// The layer's id, `basemap`, or the task's title.
            public var layer: String
            /// Why it could not be taken offline.
            public var message: String

            /// An error of this layer and message.
            public init(layer: String, message: String) {
                self.layer = layer
                self.message = message
            }
        }

        /// When the offline map was made.
        public var generatedAt: Date
        /// The map definition's URL or path.
        public var source: String?
        /// The area taken offline.
        public var areaOfInterest: Extent
        /// The coarsest scale of the basemap taken (0: the basemap's coarsest level).
        public var minScale: Double
        /// The finest scale of the basemap taken (0: the basemap's finest level).
        public var maxScale: Double
        /// The preplanned area this map was made from, if any.
        public var preplannedArea: String?
        /// The geodatabases it holds.
        public var replicas: [Replica]
        /// The layers that could not be taken offline.
        public var layerErrors: [LayerError]

        /// An offline section of these values.
        public init(
            generatedAt: Date, source: String?, areaOfInterest: Extent, minScale: Double, maxScale: Double, preplannedArea: String? = nil, replicas: [Replica],
            layerErrors: [LayerError]
        ) {
            self.generatedAt = generatedAt
            self.source = source
            self.areaOfInterest = areaOfInterest
            self.minScale = minScale
            self.maxScale = maxScale
            self.preplannedArea = preplannedArea
            self.replicas = replicas
            self.layerErrors = layerErrors
        }
    }

    /// The document's format version (``currentFormatVersion`` when written here).
    public var formatVersion: Int
    /// The map's title.
    public var title: String
    /// What the map is for.
    public var description: String?
    /// Where the map opens.
    public var initialExtent: Extent?
    /// The base of relative service URLs (`…/arcgis/rest/services/`).
    public var servicesURL: String?
    /// The feature layers and tables, in drawing order (the first at the bottom).
    public var operationalLayers: [OperationalLayer]
    /// The basemap, if the map has one.
    public var basemap: Basemap?
    /// Locators the map searches with.
    public var locators: [TaskReference]?
    /// Street networks the map routes on.
    public var networks: [TaskReference]?
    /// Geoprocessing services the map uses (online only).
    public var geoprocessing: [TaskReference]?
    /// Areas the server prepares for crews to download.
    public var preplannedAreas: [PreplannedArea]?
    /// What an offline copy of the map holds (only in an offline map's `map.json`).
    public var offline: Offline?

    enum CodingKeys: String, CodingKey {
        case formatVersion, title, description, initialExtent, servicesURL = "servicesUrl", operationalLayers, basemap, locators, networks, geoprocessing,
            preplannedAreas, offline
    }

    /// A map definition of the current format version.
    public init(
        title: String, description: String? = nil, initialExtent: Extent? = nil, servicesURL: String? = nil, operationalLayers: [OperationalLayer],
        basemap: Basemap? = nil, locators: [TaskReference]? = nil, networks: [TaskReference]? = nil, geoprocessing: [TaskReference]? = nil,
        preplannedAreas: [PreplannedArea]? = nil
    ) {
        self.formatVersion = Self.currentFormatVersion
        self.title = title
        self.description = description
        self.initialExtent = initialExtent
        self.servicesURL = servicesURL
        self.operationalLayers = operationalLayers
        self.basemap = basemap
        self.locators = locators
        self.networks = networks
        self.geoprocessing = geoprocessing
        self.preplannedAreas = preplannedAreas
    }

    /// Why a map definition cannot be used.
    public struct Invalid: Error, CustomStringConvertible, Sendable {
        public var description: String
    }

    /// Reads and checks a map definition.
    /// - Throws: ``Invalid`` for JSON that is not a map definition of a version this Outpost reads.
    public static func decode(_ data: Data) throws -> MapDefinition {
        let json: JSONValue
        do {
            json = try JSONValue.parse(data)
        } catch {
            throw Invalid(description: "the map definition is not JSON: \(error)")
        }
        guard let version = json["formatVersion"]?.integerValue else { throw Invalid(description: "the map definition has no formatVersion") }
        guard version == Int64(currentFormatVersion) else {
            throw Invalid(description: "the map definition is format version \(version); this Outpost reads version \(currentFormatVersion)")
        }
        let map: MapDefinition
        do {
            let decoder = JSONDecoder()
            decoder.dateDecodingStrategy = .iso8601
            map = try decoder.decode(MapDefinition.self, from: data)
        } catch let DecodingError.keyNotFound(key, context) {
            throw Invalid(description: "the map definition lacks \(Self.path(context.codingPath + [key]))")
        } catch let DecodingError.typeMismatch(_, context) {
            throw Invalid(description: "the map definition's \(Self.path(context.codingPath)) has the wrong type")
        } catch let DecodingError.valueNotFound(_, context) {
            throw Invalid(description: "the map definition's \(Self.path(context.codingPath)) is null")
        } catch {
            throw Invalid(description: "the map definition cannot be read: \(error)")
        }
        try map.check()
        return map
    }

    private static func path(_ keys: [any CodingKey]) -> String {
        keys.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined().trimmingCharacters(in: CharacterSet(charactersIn: "."))
    }

    /// The JSON, keys sorted (Schemas/map.schema.json).
    public func encoded() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        return try encoder.encode(self)
    }

    private func check() throws {
        var seen = Set<String>()
        for layer in operationalLayers {
            guard !layer.id.isEmpty else { throw Invalid(description: "an operational layer has an empty id") }
            guard seen.insert(layer.id).inserted else { throw Invalid(description: "two operational layers have the id \(layer.id)") }
        }
        var areas = Set<String>()
        for area in preplannedAreas ?? [] {
            guard area.id.range(of: "^[A-Za-z0-9_-]+$", options: .regularExpression) != nil else {
                throw Invalid(description: "preplanned area id \"\(area.id)\" may hold letters, digits, _ and - only")
            }
            guard areas.insert(area.id).inserted else { throw Invalid(description: "two preplanned areas have the id \(area.id)") }
            guard area.extent.envelope.isValid else { throw Invalid(description: "preplanned area \(area.id) has an invalid extent") }
        }
    }

    /// `url` made absolute: as it is when it has a scheme, else appended to ``servicesURL``
    /// (a string, as a tile template's braces are not URL characters).
    /// - Throws: ``Invalid`` for a relative URL in a map without `servicesUrl`.
    public func absolute(_ url: String) throws -> String {
        if url.contains("://") { return url }
        guard let base = servicesURL, base.contains("://") else {
            throw Invalid(description: "\(url) is relative and the map has no servicesUrl to resolve it against")
        }
        let trimmed = url.drop { $0 == "/" }
        return (base.hasSuffix("/") ? base : base + "/") + trimmed
    }

    /// ``absolute(_:)`` as a URL.
    public func resolve(_ url: String) throws -> URL {
        let text = try absolute(url)
        guard let resolved = URL(string: text) else { throw Invalid(description: "\(text) is not a URL") }
        return resolved
    }

    /// The same map with every service URL absolute (relative ones against `servicesURL`).
    public func resolvingURLs(against servicesURL: String) -> MapDefinition {
        var map = self
        map.servicesURL = servicesURL
        let base = map
        return map.mappingServiceURLs { (try? base.absolute($0)) ?? $0 }
    }

    /// The same map with `transform` applied to every service URL it names: layers, basemap,
    /// tasks, and an offline map's replicas.
    public func mappingServiceURLs(_ transform: (String) -> String) -> MapDefinition {
        var map = self
        func references(_ list: [Reference]?) -> [Reference]? { list?.map { var r = $0; r.url = transform(r.url); return r } }
        map.operationalLayers = operationalLayers.map { var l = $0; l.url = transform(l.url); return l }
        map.basemap = basemap.map { var b = $0; b.url = transform(b.url); return b }
        map.locators = references(locators)
        map.networks = references(networks)
        map.geoprocessing = references(geoprocessing)
        map.offline?.replicas = (offline?.replicas ?? []).map { var r = $0; r.serviceUrl = transform(r.serviceUrl); return r }
        return map
    }
}
