import Foundation
import OutpostCore

/// One tile of a cache: level of detail, row from the top, column from the left (ArcGIS
/// `level/row/col`, the same numbers as XYZ `z/y/x` in the Web Mercator scheme).
public struct TileKey: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The level of detail.
    public var level: Int
    /// The row, from the top.
    public var row: Int
    /// The column, from the left.
    public var col: Int

    /// The tile at this level, row and column.
    public init(level: Int, row: Int, col: Int) {
        self.level = level
        self.row = row
        self.col = col
    }

    public var description: String { "\(level)/\(row)/\(col)" }
}

/// A level of detail of a tiling scheme.
public struct LevelOfDetail: Hashable, Sendable, Codable {
    /// The level's number (0 the coarsest).
    public var level: Int
    /// Map units (metres) per pixel.
    public var resolution: Double
    /// The map scale (1:scale) at the scheme's DPI.
    public var scale: Double

    /// A level of these values.
    public init(level: Int, resolution: Double, scale: Double) {
        self.level = level
        self.resolution = resolution
        self.scale = scale
    }
}

/// A tile grid: origin at the top-left, square tiles, levels of detail (docs/tiles.md).
public struct TilingScheme: Hashable, Sendable, Codable {
    /// The grid's spatial reference.
    public var spatialReference: SpatialReference
    /// The x of the grid's top-left corner.
    public var originX: Double
    /// The y of the grid's top-left corner.
    public var originY: Double
    /// Tile width and height in pixels.
    public var tileSize: Int
    /// Dots per inch the scales assume.
    public var dpi: Int
    /// The levels of detail, coarsest first.
    public var lods: [LevelOfDetail]

    /// A scheme of these values.
    public init(spatialReference: SpatialReference, originX: Double, originY: Double, tileSize: Int, dpi: Int, lods: [LevelOfDetail]) {
        self.spatialReference = spatialReference
        self.originX = originX
        self.originY = originY
        self.tileSize = tileSize
        self.dpi = dpi
        self.lods = lods
    }

    /// Metres per inch, as ArcGIS computes scales (scale = resolution × dpi × 39.37).
    public static let inchesPerMetre = 39.37

    /// The ArcGIS Online / Google / OSM Web Mercator scheme: 256-pixel tiles, 96 dpi, levels 0–23,
    /// level 0 one tile of 156,543.033928 m per pixel, each level half the resolution of the last.
    public static let webMercator: TilingScheme = {
        let origin = WebMercator.originShift
        let lods = (0...23).map { level -> LevelOfDetail in
            let resolution = 156_543.033_928 / Double(1 << level)
            return LevelOfDetail(level: level, resolution: resolution, scale: resolution * 96 * inchesPerMetre)
        }
        return TilingScheme(spatialReference: .webMercator, originX: -origin, originY: origin, tileSize: 256, dpi: 96, lods: lods)
    }()

    /// The level of detail numbered `level`, if the scheme has it.
    public func lod(_ level: Int) -> LevelOfDetail? { lods.first { $0.level == level } }

    /// The number of tiles along each axis at `level` when the grid covers the whole world
    /// (Web Mercator: 2^level).
    func gridSize(_ lod: LevelOfDetail) -> Int {
        let span = 2 * abs(originX) / (lod.resolution * Double(tileSize))
        return max(1, Int(span.rounded()))
    }

    /// The envelope of a tile, in the scheme's spatial reference.
    public func envelope(of key: TileKey) -> Envelope? {
        guard let lod = lod(key.level) else { return nil }
        let span = lod.resolution * Double(tileSize)
        let xmin = originX + Double(key.col) * span, ymax = originY - Double(key.row) * span
        return Envelope(xmin: xmin, ymin: ymax - span, xmax: xmin + span, ymax: ymax)
    }

    /// The tiles at `level` that an envelope (in the scheme's spatial reference) touches. An edge
    /// exactly on a tile boundary does not pull in the next tile; the range is clamped to the grid.
    public func tileRange(level: Int, covering e: Envelope) -> TileRange? {
        guard let lod = lod(level), e.isValid else { return nil }
        let span = lod.resolution * Double(tileSize)
        let n = gridSize(lod)
        func clamp(_ v: Int) -> Int { min(max(v, 0), n - 1) }
        // Within a millionth of a tile of a boundary is on it (ArcGIS's rounded level-0
        // resolution leaves the grid a few micrometres off the projection's symmetry).
        func snap(_ v: Double) -> Double { abs(v - v.rounded()) < 1e-6 ? v.rounded() : v }
        let west = snap((e.xmin - originX) / span), east = snap((e.xmax - originX) / span)
        let north = snap((originY - e.ymax) / span), south = snap((originY - e.ymin) / span)
        guard east > 0, west < Double(n), south > 0, north < Double(n) else { return nil }
        let minCol = clamp(Int(west.rounded(.down))), maxCol = clamp(Int(east.rounded(.up)) - 1)
        let minRow = clamp(Int(north.rounded(.down))), maxRow = clamp(Int(south.rounded(.up)) - 1)
        return TileRange(level: level, minRow: minRow, maxRow: max(minRow, maxRow), minCol: minCol, maxCol: max(minCol, maxCol))
    }
}

/// A rectangle of tiles at one level.
public struct TileRange: Hashable, Sendable, Codable {
    /// The level.
    public var level: Int
    /// The first row.
    public var minRow: Int
    /// The last row (included).
    public var maxRow: Int
    /// The first column.
    public var minCol: Int
    /// The last column (included).
    public var maxCol: Int

    /// A range of these bounds.
    public init(level: Int, minRow: Int, maxRow: Int, minCol: Int, maxCol: Int) {
        self.level = level
        self.minRow = minRow
        self.maxRow = maxRow
        self.minCol = minCol
        self.maxCol = maxCol
    }

    /// How many tiles the range holds.
    public var count: Int { (maxRow - minRow + 1) * (maxCol - minCol + 1) }

    /// Whether `key` is in the range.
    public func contains(_ key: TileKey) -> Bool {
        key.level == level && (minRow...maxRow).contains(key.row) && (minCol...maxCol).contains(key.col)
    }

    /// The tiles row by row.
    public var keys: some Sequence<TileKey> {
        let level = level, cols = minCol...maxCol
        return (minRow...maxRow).lazy.flatMap { row in cols.lazy.map { col in TileKey(level: level, row: row, col: col) } }
    }

    /// The tiles in bundle order: bundle by bundle (128×128 blocks, row-major), and inside a
    /// bundle row by row. A bundle is finished before the next starts, so a writer streams.
    public func inBundleOrder(packetSize: Int = 128) -> some Sequence<TileKey> {
        let level = level, minRow = minRow, maxRow = maxRow, minCol = minCol, maxCol = maxCol
        let bundleRows = stride(from: minRow - minRow % packetSize, through: maxRow, by: packetSize)
        return bundleRows.lazy.flatMap { r0 in
            stride(from: minCol - minCol % packetSize, through: maxCol, by: packetSize).lazy.flatMap { c0 in
                (max(r0, minRow)...min(r0 + packetSize - 1, maxRow)).lazy.flatMap { row in
                    (max(c0, minCol)...min(c0 + packetSize - 1, maxCol)).lazy.map { col in TileKey(level: level, row: row, col: col) }
                }
            }
        }
    }
}
