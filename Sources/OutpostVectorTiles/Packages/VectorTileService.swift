import Foundation
import OutpostCore
import OutpostStorage
import OutpostTiles

/// What a VectorTileServer answers from: its zooms and extent, each tile gzipped, a style and,
/// when it has one, the tile map. ``VectorTileArchive`` serves a file's tiles;
/// ``LayerVectorTiles`` makes them from a geodatabase's layers on request.
public protocol VectorTileService: Sendable {
    /// The service's name.
    var name: String { get }
    /// The zooms with tiles.
    func zooms() async throws -> ClosedRange<Int>
    /// The tiles' extent in Web Mercator, when known.
    func extent() async throws -> Envelope?
    /// The tile at `key` (XYZ rows), gzipped; nil when there is none.
    func tile(_ key: TileKey) async throws -> [UInt8]?
    /// The style, its one source `sourceValue` (a Mapbox GL source object).
    func style(with sourceValue: JSONValue) async throws -> JSONValue
    /// The tile map (`{"index": …}`), or nil when the service has none.
    func tileMap() async throws -> String?
    /// Whether ``tileMap()`` gives one, known without building it (a file's map walks every key).
    var hasTileMap: Bool { get }
}

extension VectorTileService {
    /// The service's description in ArcGIS's shape (see ``VectorTilePackage``), without the
    /// `tileMap` member when there is no tile map.
    public func serviceDescription() async throws -> JSONValue {
        let z = try await zooms()
        var out = VectorTilePackage.serviceDescription(name: name, minZoom: z.lowerBound, maxZoom: z.upperBound, extent: try await extent()).objectValue ?? [:]
        if !hasTileMap {
            out["tileMap"] = nil
            out["capabilities"] = "TilesOnly"
        }
        return .object(out)
    }
}

extension VectorTileArchive: VectorTileService {
    /// The file's zooms.
    public func zooms() async throws -> ClosedRange<Int> { minZoom...max(minZoom, maxZoom) }
    /// The file's bounds.
    public func extent() async throws -> Envelope? { bounds }
    /// A file of tiles always has a tile map.
    public var hasTileMap: Bool { true }
}

/// A feature service's layers as vector tiles made on request: the first request for a tile
/// makes it from the geodatabase (``VectorTileGenerator``) and keeps it on disk under the data's
/// version, so later requests read the file until an edit changes the version; tiles of older
/// versions are removed when the first tile of a newer one is kept. One value serves a service
/// for as long as it runs: what its generator learned of the source (polygons checked and
/// repaired) is kept until the version changes, and then learned again from the new data.
///
/// ```swift
/// let tiles = try LayerVectorTiles(name: "helsinki", geodatabase: gdb, cacheDirectory: dir) { try await backend.generation() }
/// let gzipped = try await tiles.tile(TileKey(level: 14, row: 4743, col: 9326))
/// ```
public final class LayerVectorTiles: VectorTileService {
    /// The service's name.
    public let name: String
    /// Where kept tiles live: `v<version>/<z>/<y>/<x>.pbf.gz` (an empty file: no tile there).
    public var cacheDirectory: URL { cache.directory }
    private let cache: VersionedTiles
    private let geodatabase: Geodatabase
    private let definition: VectorTileDefinition?
    private let version: @Sendable () async throws -> Int64
    /// The generator and the data version it was made for (nil until the first tile).
    private let current: Locked<(version: Int64?, generator: VectorTileGenerator)>

    /// Tiles of `geodatabase`'s layers by `definition` (every spatial layer, z0–14 when nil),
    /// kept under `cacheDirectory` per `version` (a number that changes whenever the data does).
    /// - Throws: ``VectorTileError`` `invalidDefinition` when the definition does not fit the data.
    public init(
        name: String, geodatabase: Geodatabase, definition: VectorTileDefinition? = nil, cacheDirectory: URL,
        version: @escaping @Sendable () async throws -> Int64
    ) throws {
        self.name = name
        self.geodatabase = geodatabase
        self.definition = definition
        cache = VersionedTiles(directory: cacheDirectory, prefix: "v", fileExtension: "pbf.gz")
        self.version = version
        current = Locked((nil, try VectorTileGenerator(geodatabase: geodatabase, definition: definition)))
    }

    /// What the tiles hold now.
    public var generator: VectorTileGenerator { current.withLock { $0.generator } }

    /// The generator for the data's `version`: the one in hand when it was made for it (or
    /// for none yet), else a new one (the schema may have changed, and repaired polygons may
    /// have been edited).
    private func generator(for version: Int64) throws -> VectorTileGenerator {
        let kept = current.withLock { state -> VectorTileGenerator? in
            if state.version == nil { state.version = version }
            return state.version == version ? state.generator : nil
        }
        if let kept { return kept }
        let made = try VectorTileGenerator(geodatabase: geodatabase, definition: definition)
        current.withLock { $0 = (version, made) }
        return made
    }

    /// From the layers' first zoom to the definition's last.
    public func zooms() async throws -> ClosedRange<Int> {
        let generator = generator
        let low = generator.tileLayers.map(\.minZoom).min() ?? generator.definition.minZoom
        return low...max(low, generator.definition.maxZoom)
    }

    /// The layers' extent now.
    public func extent() async throws -> Envelope? { try await generator.dataExtent() }

    /// The kept tile of the data's current version, else the tile made now (and kept).
    public func tile(_ key: TileKey) async throws -> [UInt8]? {
        let zooms = try await zooms()
        guard zooms.contains(key.level), key.row >= 0, key.col >= 0, key.row < 1 << key.level, key.col < 1 << key.level else { return nil }
        let version = try await version()
        if let kept = cache.kept(key, version: version) { return kept.isEmpty ? nil : kept }
        let made = try await generator(for: version).tile(key)
        cache.keep(made ?? [], for: key, version: version)
        return made
    }

    /// Each layer drawn in the MapServer's colours.
    public func style(with sourceValue: JSONValue) async throws -> JSONValue {
        VectorTileStyle.make(generator, name: name, source: sourceValue)
    }

    /// None: tiles are made on request.
    public func tileMap() async throws -> String? { nil }
    /// False: tiles are made on request.
    public var hasTileMap: Bool { false }
}
