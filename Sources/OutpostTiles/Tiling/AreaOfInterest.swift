import Foundation
import OutpostCore

/// Where to take tiles: an envelope, or a polygon whose tiles outside it are skipped (as ArcGIS
/// does for a polygon `areaOfInterest`). Coordinates in `spatialReference` (4326 or 3857).
public enum AreaOfInterest: Hashable, Sendable {
    /// Every tile that meets the envelope.
    case envelope(Envelope, SpatialReference)
    /// The tiles that meet the polygon (or multipolygon).
    case polygon(Geometry, SpatialReference)

    /// The area in the scheme's spatial reference; latitudes beyond Web Mercator's limit are cut.
    func projected(to scheme: TilingScheme) throws -> (envelope: Envelope, shape: Geometry?) {
        switch self {
        case .envelope(let e, let sr):
            return (try WebMercator.convert(Self.clamped(e, sr), from: sr, to: scheme.spatialReference), nil)
        case .polygon(let g, let sr):
            guard g.type == .polygon || g.type == .multiPolygon else {
                throw TileCacheError(.invalidArea, "an area of interest must be a polygon or an envelope, not a \(g.type.geoJSONName)")
            }
            let clampedGeometry = sr.wkid == 4326 ? try g.mapPositions { p in
                Position(x: p.x, y: min(max(p.y, -WebMercator.maxLatitude), WebMercator.maxLatitude), z: p.z, m: p.m)
            } : g
            let shape = try WebMercator.convert(clampedGeometry, from: sr, to: scheme.spatialReference)
            guard let e = shape.envelope else { throw TileCacheError(.invalidArea, "the area of interest is empty") }
            return (e, shape)
        }
    }

    private static func clamped(_ e: Envelope, _ sr: SpatialReference) -> Envelope {
        guard sr.wkid == 4326 else { return e }
        let m = WebMercator.maxLatitude
        return Envelope(xmin: max(e.xmin, -180), ymin: max(e.ymin, -m), xmax: min(e.xmax, 180), ymax: min(e.ymax, m))
    }
}

/// The tiles of an area at a set of levels, with the polygon filter applied tile by tile.
public struct TileSelection: Sendable {
    /// The tile grid.
    public let scheme: TilingScheme
    /// The levels selected.
    public let levels: [Int]
    /// The envelope's tiles, one range per level.
    public let ranges: [TileRange]
    /// The polygon in the scheme's spatial reference (nil: every tile of the ranges).
    let shape: Geometry?

    /// The tiles of `area` at `levels` of `scheme`.
    /// - Throws: ``TileCacheError`` (`invalidArea`) for no levels, a level the scheme lacks, or an unusable
    /// area.
    public init(scheme: TilingScheme, area: AreaOfInterest, levels: [Int]) throws {
        guard !levels.isEmpty else { throw TileCacheError(.invalidArea, "give at least one level") }
        for level in levels where scheme.lod(level) == nil {
            throw TileCacheError(.invalidArea, "the tiling scheme has no level \(level) (it has \(scheme.lods.first?.level ?? 0)–\(scheme.lods.last?.level ?? 0))")
        }
        let (envelope, shape) = try area.projected(to: scheme)
        self.scheme = scheme
        self.levels = levels.sorted()
        self.ranges = self.levels.compactMap { scheme.tileRange(level: $0, covering: envelope) }
        self.shape = shape
    }

    /// Whether a tile of the ranges is wanted (inside the polygon, when there is one).
    public func wants(_ key: TileKey) -> Bool {
        guard let shape else { return true }
        guard let e = scheme.envelope(of: key) else { return false }
        return GeometryRelations.intersects(e, shape)
    }

    /// The wanted tiles, level by level, in bundle order.
    public var tiles: some Sequence<TileKey> {
        ranges.lazy.flatMap { $0.inBundleOrder() }.filter { self.wants($0) }
    }

    /// Tiles per level (exact: the polygon test runs per tile, one level at a time, nothing kept).
    public func counts() -> [(level: Int, tiles: Int)] {
        ranges.map { range in
            guard shape != nil else { return (range.level, range.count) }
            return (range.level, range.inBundleOrder().reduce(0) { $0 + (wants($1) ? 1 : 0) })
        }
    }

    /// How many tiles the selection holds (the polygon filter applied).
    public var tileCount: Int { counts().reduce(0) { $0 + $1.tiles } }
}
