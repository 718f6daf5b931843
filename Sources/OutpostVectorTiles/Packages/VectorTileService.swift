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
    /// Whether ``tileMap()`` gives one.
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
/// versions are removed when the first tile of a newer one is kept.
///
/// ```swift
/// let tiles = LayerVectorTiles(name: "helsinki", geodatabase: gdb, cacheDirectory: dir) { try await backend.generation() }
/// let gzipped = try await tiles.tile(TileKey(level: 14, row: 4743, col: 9326))
/// ```
public struct LayerVectorTiles: VectorTileService {
    /// The service's name.
    public let name: String
    /// What the tiles hold.
    public let generator: VectorTileGenerator
    /// Where kept tiles live: `v<version>/<z>/<y>/<x>.pbf.gz` (an empty file: no tile there).
    public let cacheDirectory: URL
    private let version: @Sendable () async throws -> Int64

    /// Tiles of `geodatabase`'s layers by `definition` (every spatial layer, z0–14 when nil),
    /// kept under `cacheDirectory` per `version` (a number that changes whenever the data does).
    /// - Throws: ``VectorTileError`` `invalidDefinition` when the definition does not fit the data.
    public init(
        name: String, geodatabase: Geodatabase, definition: VectorTileDefinition? = nil, cacheDirectory: URL,
        version: @escaping @Sendable () async throws -> Int64
    ) throws {
        self.name = name
        generator = try VectorTileGenerator(geodatabase: geodatabase, definition: definition)
        self.cacheDirectory = cacheDirectory
        self.version = version
    }

    /// From the layers' first zoom to the definition's last.
    public func zooms() async throws -> ClosedRange<Int> {
        let levels = generator.tileLayers
        let low = levels.map(\.minZoom).min() ?? generator.definition.minZoom
        return low...max(low, generator.definition.maxZoom)
    }

    /// The layers' extent now.
    public func extent() async throws -> Envelope? { try await generator.dataExtent() }

    /// The kept tile of the data's current version, else the tile made now (and kept).
    public func tile(_ key: TileKey) async throws -> [UInt8]? {
        let zooms = try await zooms()
        guard zooms.contains(key.level), key.row >= 0, key.col >= 0, key.row < 1 << key.level, key.col < 1 << key.level else { return nil }
        let version = try await version()
        let folder = cacheDirectory.appendingPathComponent("v\(version)")
        let file = folder.appendingPathComponent("\(key.level)/\(key.row)/\(key.col).pbf.gz")
        if let kept = FileManager.default.contents(atPath: file.path) { return kept.isEmpty ? nil : [UInt8](kept) }
        let made = try await generator.tile(key)
        keep(made ?? [], at: file, versionFolder: folder)
        return made
    }

    /// Writes the tile beside its name and renames it (a reader never sees half a tile); the
    /// first tile of a version removes the older versions' folders.
    private func keep(_ bytes: [UInt8], at file: URL, versionFolder: URL) {
        let fm = FileManager.default
        if !fm.fileExists(atPath: versionFolder.path) {
            for old in (try? fm.contentsOfDirectory(atPath: cacheDirectory.path)) ?? [] where old.hasPrefix("v") && old != versionFolder.lastPathComponent {
                try? fm.removeItem(at: cacheDirectory.appendingPathComponent(old))
            }
        }
        try? fm.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
        let temporary = file.appendingPathExtension("\(UUID().uuidString.prefix(8)).partial")
        guard fm.createFile(atPath: temporary.path, contents: Data(bytes)) else { return }
        if rename(temporary.path, file.path) != 0 { try? fm.removeItem(at: temporary) }
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
