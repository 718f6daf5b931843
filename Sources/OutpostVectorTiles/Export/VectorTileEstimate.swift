import Foundation
import OutpostCore
import OutpostStorage
import OutpostTiles

/// How many tiles an export of vector tiles would write and how large its file would be, told
/// from a sample of its tiles before any is written.
///
/// From a geodatabase the tree an export walks is sampled zoom by zoom: at each zoom at most
/// `sampleSize` of the tiles the export would visit are made (evenly spaced, each standing for
/// the ones passed over), and the next zoom's candidates are their children, as the export's
/// walk goes. A zoom with no more candidates than the sample is counted exactly; ``exact`` says
/// whether every zoom was. From a VectorTileServer with a tile map the tiles are counted from
/// the map (exactly) and their sizes sampled; without one, the grid over the area is sampled.
public struct VectorTileSizeEstimate: Sendable, Hashable {
    /// Tiles and their gzipped bytes per zoom.
    public struct Level: Sendable, Hashable {
        /// Tiles with features.
        public var tiles: Int
        /// Their bytes, gzipped.
        public var bytes: Int64
        /// The bytes of those whose content no tile before had (what a file that stores identical
        /// tiles once holds): the sample's share of repeated content carried over to the zoom.
        public var distinctBytes: Int64
    }

    /// Per zoom, the tiles and bytes the export would write.
    public var levels: [Int: Level]
    /// Whether every tile the export would write was made or fetched (so the figures are the
    /// export's own), rather than inferred from a sample.
    public var exact: Bool
    /// Tiles made or fetched for the estimate.
    public var sampled: Int

    /// Tiles over all zooms.
    public var tileCount: Int { levels.values.reduce(0) { $0 + $1.tiles } }
    /// Their bytes, gzipped.
    public var tileBytes: Int64 { levels.values.reduce(0) { $0 + $1.bytes } }
    /// The bytes of distinct tiles (identical tiles counted once).
    public var distinctTileBytes: Int64 { levels.values.reduce(0) { $0 + $1.distinctBytes } }

    /// The file's size in `format`: the tiles plus what the format adds (a package's bundles
    /// have a fixed index of 128×128 entries each, one bundle per tile of the zoom seven above;
    /// MBTiles adds about a 16th for SQLite's 64 KB pages and a page for each of its tables;
    /// PMTiles a few bytes of directory per tile). Every format keeps identical tiles once, so
    /// the distinct bytes count, and they are the least certain figure of a sampled estimate.
    public func fileSize(_ format: VectorTileFormat) -> Int64 {
        let tiles = Int64(tileCount)
        switch format {
        case .vtpk:
            let bundles = levels.reduce(Int64(0)) { sum, item in
                let (z, level) = item
                guard level.tiles > 0 else { return sum }
                let covering = z < 7 ? 1 : (levels[z - 7]?.tiles ?? level.tiles)
                return sum + Int64(max(1, min(covering, level.tiles)))
            }
            return distinctTileBytes + 4 * tiles + bundles * Int64(CompactBundle.fixedSize + 120) + 16_384
        case .mbtiles: return distinctTileBytes + distinctTileBytes / 16 + 40 * tiles + 6 * 65_536
        case .pmtiles: return distinctTileBytes + 8 * tiles + 16_511
        }
    }

    /// The estimate as JSON: per zoom (`levels`: zoom → `{tiles, bytes}`), totals, the file size
    /// for each format.
    public var json: JSONValue {
        var zooms: [String: JSONValue] = [:]
        for (z, l) in levels { zooms[String(z)] = ["tiles": .integer(Int64(l.tiles)), "bytes": .integer(l.bytes), "distinctBytes": .integer(l.distinctBytes)] }
        var sizes: [String: JSONValue] = [:]
        for f in VectorTileFormat.allCases { sizes[f.rawValue] = .integer(fileSize(f)) }
        return [
            "tileCount": .integer(Int64(tileCount)), "tileBytes": .integer(tileBytes), "distinctTileBytes": .integer(distinctTileBytes), "exact": .bool(exact), "sampled": .integer(Int64(sampled)),
            "levels": .object(zooms), "fileSize": .object(sizes),
        ]
    }

    /// The estimate `json` holds.
    public init(json: JSONValue) throws {
        guard let zooms = json["levels"]?.objectValue else { throw JobError(.invalidJSON, "an estimate has levels") }
        levels = [:]
        for (key, value) in zooms {
            guard let z = Int(key), let tiles = value["tiles"]?.integerValue, let bytes = value["bytes"]?.integerValue else {
                throw JobError(.invalidJSON, "an estimate's level \(key) has tiles and bytes")
            }
            levels[z] = Level(tiles: Int(tiles), bytes: bytes, distinctBytes: value["distinctBytes"]?.integerValue ?? bytes)
        }
        exact = json["exact"]?.boolValue ?? false
        sampled = Int(json["sampled"]?.integerValue ?? 0)
    }

    init(levels: [Int: Level], exact: Bool, sampled: Int) {
        self.levels = levels
        self.exact = exact
        self.sampled = sampled
    }

    /// What the tiles sampled at one zoom held; `seen` (hashes of the contents met at any zoom)
    /// tells repeats.
    struct Tally {
        var present = 0, bytes = 0, distinct = 0

        mutating func add(_ tile: [UInt8], seen: inout Set<Int>) {
            present += 1
            bytes += tile.count
            var h = Hasher()
            h.combine(tile)
            if seen.insert(h.finalize()).inserted { distinct += tile.count }
        }

        /// The zoom's figures: `tiles` tiles, the bytes scaled from the sample's mean.
        func level(tiles: Double, bytes scaledBytes: Double) -> Level {
            let share = bytes > 0 ? Double(distinct) / Double(bytes) : 1
            return Level(tiles: Int(tiles.rounded()), bytes: Int64(scaledBytes.rounded()), distinctBytes: Int64((scaledBytes * share).rounded()))
        }
    }

    /// `count` items evenly spaced over `n` (all of them when `n` is no more).
    static func evenly(_ n: Int, count: Int) -> [Int] {
        n <= count ? Array(0..<n) : (0..<count).map { $0 * n / count + n / (2 * count) }
    }
}

extension VectorTileGenerator {
    /// Estimates the export of `area` (Web Mercator; the data's extent when nil) by making at most
    /// `sampleSize` tiles per zoom (see ``VectorTileSizeEstimate``).
    /// - Throws: ``VectorTileError`` `invalidArea` for an area outside the world; `CancellationError`.
    public func estimate(area: Envelope? = nil, sampleSize: Int = 64) async throws -> VectorTileSizeEstimate {
        var wanted = area
        if wanted == nil { wanted = try await dataExtent() }
        guard let area = wanted else { return VectorTileSizeEstimate(levels: [:], exact: true, sampled: 0) }
        try Self.checkInWorld(area)
        let d = definition
        let sampleSize = max(1, sampleSize)
        return try await geodatabase.read { conn in
            let gzip = GzipCompressor()
            var levels: [Int: VectorTileSizeEstimate.Level] = [:]
            var exact = true, sampled = 0
            var seen = Set<Int>()
            // Candidates at this zoom, each standing for `weight` tiles the export would visit.
            var candidates = TilingScheme.webMercator.tileRange(level: d.minZoom, covering: area).map { Array($0.keys) } ?? []
            var weight = 1.0
            for z in d.minZoom...d.maxZoom where !candidates.isEmpty {
                let picked = VectorTileSizeEstimate.evenly(candidates.count, count: sampleSize)
                if picked.count < candidates.count {
                    exact = false
                    weight *= Double(candidates.count) / Double(picked.count)
                }
                var tally = VectorTileSizeEstimate.Tally()
                var next: [TileKey] = []
                for i in picked {
                    try Task.checkCancellation()
                    let key = candidates[i]
                    let made = try make(key, in: conn, gzip: gzip)
                    sampled += 1
                    if let b = made.bytes { tally.add(b, seen: &seen) }
                    guard made.touched, z < d.maxZoom else { continue }
                    for dr in 0..<2 {
                        for dc in 0..<2 {
                            let child = TileKey(level: z + 1, row: key.row * 2 + dr, col: key.col * 2 + dc)
                            if Self.envelope(of: child).intersects(area) { next.append(child) }
                        }
                    }
                }
                levels[z] = tally.level(tiles: Double(tally.present) * weight, bytes: Double(tally.bytes) * weight)
                candidates = next
            }
            return VectorTileSizeEstimate(levels: levels, exact: exact, sampled: sampled)
        }
    }

    /// - Throws: ``VectorTileError`` `invalidArea` unless `area` overlaps the Web Mercator world.
    static func checkInWorld(_ area: Envelope) throws {
        guard area.isValid, area.xmax > -halfWorld, area.xmin < halfWorld, area.ymax > -halfWorld, area.ymin < halfWorld else {
            throw VectorTileError(.invalidArea, "the area lies outside the Web Mercator world")
        }
    }
}

extension ServiceTiles {
    /// Estimates the export by the service's tile map (its tiles counted, at most `sampleSize`
    /// of each zoom fetched for their sizes) or, without one, a sample of the grid per zoom.
    func estimate(sampleSize: Int) async throws -> VectorTileSizeEstimate {
        let (keys, mapped) = try await mappedKeys()
        var byLevel: [Int: [TileKey]] = [:]
        for k in keys { byLevel[k.level, default: []].append(k) }
        var levels: [Int: VectorTileSizeEstimate.Level] = [:]
        var exact = true, sampled = 0
        var seen = Set<Int>()
        for (z, all) in byLevel.sorted(by: { $0.key < $1.key }) {
            let picked = VectorTileSizeEstimate.evenly(all.count, count: max(1, sampleSize))
            var tally = VectorTileSizeEstimate.Tally()
            for i in picked {
                try Task.checkCancellation()
                let tile: [UInt8]?
                do { tile = try await http.tile(all[i]) } catch let error as TileCacheError { throw VectorTileError(.io, error.message) }
                sampled += 1
                guard let tile, !tile.isEmpty else { continue }
                tally.add(tile.starts(with: [0x1F, 0x8B]) ? tile : VectorTileCompression.gzip(tile), seen: &seen)
            }
            if picked.count < all.count { exact = false }
            let scale = Double(all.count) / Double(picked.count)
            // A mapped tile exists; its size is the sample's mean. Unmapped, the share present too.
            let count = mapped ? Double(all.count) : Double(tally.present) * scale
            let mean = tally.present > 0 ? Double(tally.bytes) / Double(tally.present) : 0
            levels[z] = tally.level(tiles: count, bytes: mean * count)
        }
        return VectorTileSizeEstimate(levels: levels, exact: exact, sampled: sampled)
    }
}

/// Estimates an export of vector tiles as a job (one step, `estimate`; its progress counts the
/// zooms): the tiles it would write and the file's size in each format
/// (``VectorTileSizeEstimate``), nothing written.
public struct EstimateVectorTilesSizeJob: JobDefinition {
    public static let jobType = "outpost.estimateVectorTilesSize"

    /// Where the tiles come from.
    public var source: VectorTileExportSource
    /// The area, zooms and definition of the export estimated.
    public var exportParameters: ExportVectorTilesParameters
    /// Tiles made or fetched per zoom at most.
    public var sampleSize: Int
    let environment: VectorTileJobEnvironment

    /// An estimate of the export of `parameters` from `source`, sampling `sampleSize` tiles a zoom.
    public init(
        source: VectorTileExportSource, parameters: ExportVectorTilesParameters, sampleSize: Int = 64, environment: VectorTileJobEnvironment = VectorTileJobEnvironment()
    ) {
        self.source = source
        self.exportParameters = parameters
        self.sampleSize = sampleSize
        self.environment = environment
    }

    public var parameters: JSONValue { ["source": source.json, "export": exportParameters.json, "sampleSize": .integer(Int64(sampleSize))] }

    public init(parameters: JSONValue, environment: JobEnvironment) throws {
        guard let export = parameters["export"], let source = parameters["source"] else { throw JobError(.invalidJSON, "an estimate needs source and export") }
        self.init(
            source: try VectorTileExportSource(json: source), parameters: try ExportVectorTilesParameters(json: export),
            sampleSize: Int(parameters["sampleSize"]?.integerValue ?? 64), environment: environment[VectorTileJobEnvironment.self] ?? VectorTileJobEnvironment())
    }

    public var stepNames: [String] { ["estimate"] }

    public func run(step: Int, context: JobContext) async throws {
        let area = try exportParameters.area()
        let estimate: VectorTileSizeEstimate
        switch source {
        case .geodatabase(let url):
            let gdb = try VectorTileExportSource.open(url)
            defer { try? gdb.close() }
            let generator = try VectorTileGenerator(geodatabase: gdb, definition: exportParameters.resolvedDefinition(gdb.schema))
            estimate = try await generator.estimate(area: area, sampleSize: sampleSize)
        case .service(let url):
            let http = try VectorTileExportSource.http(url, token: environment.token)
            estimate = try await ServiceTiles(http, parameters: exportParameters, area: area).estimate(sampleSize: sampleSize)
        }
        context.record("estimate", estimate.json)
        context.log("about \(estimate.tileCount) tiles, \(estimate.tileBytes) bytes of tiles\(estimate.exact ? " (every tile made)" : "") from \(estimate.sampled) made")
    }

    public func output(context: JobContext) async throws -> VectorTileSizeEstimate {
        guard let json = context.recorded("estimate") else { throw VectorTileError(.corrupt, "the estimate job has no record of its estimate") }
        return try VectorTileSizeEstimate(json: json)
    }
}
