import Foundation
import OutpostCore
import OutpostStorage

/// What goes into vector tiles made from a geodatabase: which layers under which names, which
/// fields, at which zooms, and how tiles are cut (JSON; `Schemas/vector-tile-definition.schema.json`).
///
/// ```json
/// {"layers": [{"source": "streets", "name": "roads", "fields": ["name", "highway"], "minZoom": 10},
///             {"source": "addresses", "fields": ["number"], "minZoom": 15}],
///  "maxZoom": 16}
/// ```
public struct VectorTileDefinition: Codable, Hashable, Sendable {
    /// A layer of the tiles, made from a layer of the geodatabase.
    public struct Layer: Codable, Hashable, Sendable {
        /// The geodatabase layer's (table's) name.
        public var source: String
        /// The tile layer's name (the source's unless given).
        public var name: String?
        /// The fields carried as attributes (all but the object id, global id and blobs unless given).
        public var fields: [String]?
        /// The first zoom the layer appears at (the definition's unless given).
        public var minZoom: Int?
        /// The last zoom it appears at (the definition's unless given; deeper tiles overzoom).
        public var maxZoom: Int?
        /// For a layer of points: below the definition's last zoom, the points within squares of
        /// about this many pixels (of a 256-pixel tile; 1–256) are drawn as one point at their mean
        /// position, with the attributes of the one ranked first and their count as
        /// `point_count`, instead of being thinned. Nil (the default) thins.
        public var clusterDistance: Int?

        /// A layer from `source`, under `name`, with these fields and zooms (the definition's when
        /// nil), clustered when `clusterDistance` is given.
        public init(source: String, name: String? = nil, fields: [String]? = nil, minZoom: Int? = nil, maxZoom: Int? = nil, clusterDistance: Int? = nil) {
            self.source = source
            self.name = name
            self.fields = fields
            self.minZoom = minZoom
            self.maxZoom = maxZoom
            self.clusterDistance = clusterDistance
        }

        /// The tile layer's name: `name`, else the source's.
        public var tileLayerName: String { name ?? source }
    }

    /// The tile layers, in drawing order.
    public var layers: [Layer]
    /// The first zoom made (0 by default).
    public var minZoom: Int
    /// The last zoom made (14 by default); clients draw deeper zooms from it.
    public var maxZoom: Int
    /// Grid size across a tile (4096: twelve bits of detail).
    public var extent: Int
    /// Grid units drawn beyond each edge, so strokes and labels do not stop at tile seams (80:
    /// five pixels of a 256-pixel tile).
    public var buffer: Int
    /// The most bytes a tile may take, gzipped; features are dropped (the least visible first)
    /// until it fits. 500 KB, as tippecanoe.
    public var maxTileBytes: Int
    /// How far (grid units) simplified lines and rings may stray from the originals.
    public var simplification: Double
    /// Below `maxZoom`, points thin out by this factor per zoom (2.5, as tippecanoe); 1 keeps all.
    public var pointDropRate: Double
    /// Whether each feature carries its object id as the tile feature's id (false by default, as
    /// tippecanoe: ids hardly compress and made central Helsinki's tiles a quarter larger; a
    /// client that keeps per-feature state, MapLibre's `feature-state`, wants them).
    public var featureIDs: Bool

    /// A definition of these layers and settings (defaults as the properties say).
    public init(
        layers: [Layer], minZoom: Int = 0, maxZoom: Int = 14, extent: Int = 4096, buffer: Int = 80, maxTileBytes: Int = 500_000,
        simplification: Double = 1, pointDropRate: Double = 2.5, featureIDs: Bool = false
    ) {
        self.layers = layers
        self.minZoom = minZoom
        self.maxZoom = maxZoom
        self.extent = extent
        self.buffer = buffer
        self.maxTileBytes = maxTileBytes
        self.simplification = simplification
        self.pointDropRate = pointDropRate
        self.featureIDs = featureIDs
    }

    enum CodingKeys: String, CodingKey {
        case layers, minZoom, maxZoom, extent, buffer, maxTileBytes, simplification, pointDropRate, featureIDs
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let defaults = VectorTileDefinition(layers: [])
        self.init(
            layers: try c.decode([Layer].self, forKey: .layers),
            minZoom: try c.decodeIfPresent(Int.self, forKey: .minZoom) ?? defaults.minZoom,
            maxZoom: try c.decodeIfPresent(Int.self, forKey: .maxZoom) ?? defaults.maxZoom,
            extent: try c.decodeIfPresent(Int.self, forKey: .extent) ?? defaults.extent,
            buffer: try c.decodeIfPresent(Int.self, forKey: .buffer) ?? defaults.buffer,
            maxTileBytes: try c.decodeIfPresent(Int.self, forKey: .maxTileBytes) ?? defaults.maxTileBytes,
            simplification: try c.decodeIfPresent(Double.self, forKey: .simplification) ?? defaults.simplification,
            pointDropRate: try c.decodeIfPresent(Double.self, forKey: .pointDropRate) ?? defaults.pointDropRate,
            featureIDs: try c.decodeIfPresent(Bool.self, forKey: .featureIDs) ?? defaults.featureIDs)
    }

    /// Every spatial layer of `schema` with all its attribute fields, at the default zooms.
    public static func whole(_ schema: ServiceSchema, maxZoom: Int = 14) -> VectorTileDefinition {
        VectorTileDefinition(layers: schema.layers.filter(\.isSpatial).map { Layer(source: $0.name) }, maxZoom: maxZoom)
    }

    /// Reads a definition file.
    /// - Throws: ``VectorTileError`` `invalidDefinition` naming what is wrong.
    public static func read(_ url: URL) throws -> VectorTileDefinition {
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            throw VectorTileError(.io, "cannot read \(url.path): \(error.localizedDescription)")
        }
        do {
            return try JSONDecoder().decode(VectorTileDefinition.self, from: data)
        } catch let DecodingError.keyNotFound(key, context) {
            throw VectorTileError(.invalidDefinition, "\(url.lastPathComponent): \(path(context.codingPath + [key])) is missing")
        } catch let DecodingError.typeMismatch(_, context) {
            throw VectorTileError(.invalidDefinition, "\(url.lastPathComponent): \(path(context.codingPath)) has the wrong type")
        } catch {
            throw VectorTileError(.invalidDefinition, "\(url.lastPathComponent) is not a vector tile definition (JSON): \(error)")
        }
    }

    private static func path(_ keys: [any CodingKey]) -> String {
        keys.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined().trimmingCharacters(in: CharacterSet(charactersIn: "."))
    }

    /// The definition checked against the geodatabase it will read: the layers resolved, each
    /// with its fields and zooms.
    /// - Throws: ``VectorTileError`` `invalidDefinition` for an unknown layer or field, a layer
    ///   without geometry or in a spatial reference other than 4326 or 3857, zooms outside
    ///   0…24 or reversed, a size limit under 1 KB, two layers under one name, or a cluster
    ///   distance outside 1…256, on a layer other than points, or beside a `point_count` field.
    func resolved(against schema: ServiceSchema) throws -> [ResolvedLayer] {
        func bad(_ why: String) -> VectorTileError { VectorTileError(.invalidDefinition, why) }
        guard (0...24).contains(minZoom), (0...24).contains(maxZoom), minZoom <= maxZoom else { throw bad("zooms \(minZoom)…\(maxZoom): they must lie in 0…24, the first not past the last") }
        guard (256...65_536).contains(extent) else { throw bad("extent \(extent): from 256 to 65536") }
        guard (0...extent).contains(buffer) else { throw bad("buffer \(buffer): from 0 to the extent") }
        guard maxTileBytes >= 1_024 else { throw bad("maxTileBytes \(maxTileBytes): at least 1024") }
        guard simplification >= 0, simplification.isFinite, pointDropRate >= 1, pointDropRate.isFinite else { throw bad("simplification must be 0 or more and pointDropRate 1 or more") }
        guard !layers.isEmpty else { throw bad("the definition names no layers") }
        var names = Set<String>()
        return try layers.map { l in
            guard let layer = schema.layer(named: l.source) else {
                throw bad("no layer \(l.source) in the geodatabase (it has \(schema.layers.map(\.name).joined(separator: ", ")))")
            }
            guard layer.isSpatial, let type = layer.geometryType?.type else { throw bad("layer \(l.source) has no geometry") }
            let sr = layer.spatialReference ?? schema.spatialReference
            guard sr.isGeographic || sr.isWebMercator else { throw bad("layer \(l.source) is in \(sr); vector tiles are made from layers in EPSG:4326 or EPSG:3857") }
            guard names.insert(l.tileLayerName).inserted else { throw bad("two layers are named \(l.tileLayerName)") }
            let attributes = layer.fields.filter { $0.type != .oid && $0.type != .globalID && $0.type != .blob }
            var fields = attributes.map(\.name)
            if let wanted = l.fields {
                for f in wanted where layer.field(named: f) == nil { throw bad("layer \(l.source) has no field \(f)") }
                fields = wanted
            }
            let lmin = l.minZoom ?? minZoom, lmax = l.maxZoom ?? maxZoom
            guard (0...24).contains(lmin), (0...24).contains(lmax), lmin <= lmax else { throw bad("layer \(l.source): zooms \(lmin)…\(lmax)") }
            var cells: Int?
            if let distance = l.clusterDistance {
                guard (1...256).contains(distance) else { throw bad("layer \(l.source): clusterDistance \(distance): from 1 to 256 pixels") }
                guard type == .point else { throw bad("layer \(l.source) holds \(type)s; only points are clustered") }
                guard !fields.contains(VectorTileGenerator.pointCountField) else {
                    throw bad("layer \(l.source) has a field \(VectorTileGenerator.pointCountField), which clustering adds; leave it out of fields")
                }
                cells = max(1, 256 / distance)
            }
            return ResolvedLayer(
                source: layer, name: l.tileLayerName, fields: fields, minZoom: lmin, maxZoom: lmax, spatialReference: sr, geometryType: type, clusterCells: cells)
        }
    }
}

/// A definition's layer checked against the geodatabase.
struct ResolvedLayer: Sendable {
    var source: LayerDefinition
    var name: String
    var fields: [String]
    var minZoom: Int
    var maxZoom: Int
    var spatialReference: SpatialReference
    var geometryType: GeometryType
    /// Squares across a tile that points are clustered in (nil: not clustered).
    var clusterCells: Int?

    var isPoints: Bool { geometryType == .point || geometryType == .multiPoint }
    var isPolygons: Bool { geometryType == .polygon || geometryType == .multiPolygon }
}
