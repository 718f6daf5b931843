import Foundation
import OutpostCore
import OutpostStorage

/// What to export (ArcGIS `ExportTileCacheParameters`): an area, the levels, and a cap.
public struct ExportTileCacheParameters: Sendable, Hashable {
    /// nil: the source's full extent.
    public var areaOfInterest: AreaOfInterest?
    /// The levels to export.
    public var levelIDs: [Int]
    /// The estimate refuses an export of more tiles (ArcGIS `maxExportTilesCount`, default 100,000).
    public var maxTileCount: Int
    /// Tiles fetched at once from the source.
    public var concurrency: Int
    /// Re-encode PNG tiles losslessly at zlib level 9 when that makes them smaller (ArcGIS REST
    /// `optimizeTilesForSize`); JPEG and other tiles are kept as the source sent them.
    public var optimizeTilesForSize: Bool
    /// 0–100, nil for the tiles as the source sent them (ArcGIS `compressionQuality`): opaque tiles
    /// are re-encoded as JPEG at this quality (unless a tile is already smaller as fetched), tiles
    /// with transparency stay PNG — the cache's format becomes `MIXED` (`JPEG` from a JPEG
    /// source). With `webp`, the WebP quality (default 75).
    public var compressionQuality: Double?
    /// Every tile re-encoded as WebP (lossy, with alpha where a tile has transparency): MBTiles
    /// outputs only, as Compact Cache bundles hold PNG and JPEG.
    public var webp: Bool

    /// Parameters of these values.
    public init(
        areaOfInterest: AreaOfInterest?, levelIDs: [Int], maxTileCount: Int = 100_000, concurrency: Int = 8, optimizeTilesForSize: Bool = false,
        compressionQuality: Double? = nil, webp: Bool = false
    ) {
        self.areaOfInterest = areaOfInterest
        self.levelIDs = levelIDs
        self.maxTileCount = maxTileCount
        self.concurrency = concurrency
        self.optimizeTilesForSize = optimizeTilesForSize
        self.compressionQuality = compressionQuality.map { min(100, max(0, $0)) }
        self.webp = webp
    }

    /// How fetched tiles are re-encoded, nil when they are kept as fetched.
    public var recoding: TileRecoding? {
        let quality = compressionQuality.flatMap { $0.isFinite ? Int($0.rounded()) : nil }
        if webp { return .webp(quality: quality ?? 75) }
        if let quality { return .mixed(quality: quality, pngLevel: optimizeTilesForSize ? 9 : 6) }
        return optimizeTilesForSize ? .optimizePNG(level: 9) : nil
    }

    var json: JSONValue {
        var out: [String: JSONValue] = [
            "levelIDs": .array(levelIDs.map { .integer(Int64($0)) }), "maxTileCount": .integer(Int64(maxTileCount)), "concurrency": .integer(Int64(concurrency)),
            "optimizeTilesForSize": .bool(optimizeTilesForSize),
        ]
        if let compressionQuality { out["compressionQuality"] = .number(compressionQuality) }
        if webp { out["webp"] = .bool(true) }
        switch areaOfInterest {
        case .envelope(let e, let sr)?:
            out["areaOfInterest"] = ["envelope": [.number(e.xmin), .number(e.ymin), .number(e.xmax), .number(e.ymax)], "wkid": .integer(Int64(sr.wkid))]
        case .polygon(let g, let sr)?:
            out["areaOfInterest"] = ["polygon": (try? JSONValue.parse(EsriJSON.encode(g))) ?? .null, "wkid": .integer(Int64(sr.wkid))]
        case nil:
            break
        }
        return .object(out)
    }

    init(json: JSONValue) throws {
        let levels = (json["levelIDs"]?.arrayValue ?? []).compactMap { $0.integerValue.map(Int.init) }
        var area: AreaOfInterest?
        if let aoi = json["areaOfInterest"], !aoi.isNull {
            let sr = SpatialReference(wkid: Int(aoi["wkid"]?.integerValue ?? 4326))
            if let e = aoi["envelope"]?.arrayValue?.compactMap(\.doubleValue), e.count == 4 {
                area = .envelope(Envelope(xmin: e[0], ymin: e[1], xmax: e[2], ymax: e[3]), sr)
            } else if let polygon = aoi["polygon"], !polygon.isNull {
                area = .polygon(try EsriJSON.decodeGeometry(polygon), sr)
            } else {
                throw TileCacheError(.invalidArea, "the area of interest needs an envelope or a polygon")
            }
        }
        self.init(
            areaOfInterest: area, levelIDs: levels, maxTileCount: Int(json["maxTileCount"]?.integerValue ?? 100_000),
            concurrency: Int(json["concurrency"]?.integerValue ?? 8), optimizeTilesForSize: json["optimizeTilesForSize"]?.boolValue ?? false,
            compressionQuality: json["compressionQuality"]?.doubleValue, webp: json["webp"]?.boolValue ?? false)
    }

    /// The selection this asks of a cache with `info`.
    func selection(_ info: TileCacheInfo) throws -> TileSelection {
        let area = areaOfInterest ?? .envelope(
            info.fullExtent ?? Envelope(xmin: info.scheme.originX, ymin: -info.scheme.originY, xmax: -info.scheme.originX, ymax: info.scheme.originY),
            info.scheme.spatialReference)
        if webp, !WebPCodec.isAvailable {
            throw TileCacheError(.unsupported, "WebP tiles cannot be written: no WebP codec is installed (SystemTileCodecs.install() in OutpostTileCodecs adds libwebp's)")
        }
        for level in levelIDs where !info.levels.contains(level) {
            throw TileCacheError(.invalidArea, "the source has levels \(info.minLevel)–\(info.maxLevel), not \(level)")
        }
        return try TileSelection(scheme: info.scheme, area: area, levels: levelIDs)
    }
}

/// Where tiles come from, as it goes into a job's JSON.
public enum TileSourceDescriptor: Sendable, Hashable {
    /// A MapServer URL or a `{z}/{x}/{y}` template.
    case http(String)
    /// A `.tpkx`, exploded cache folder or MBTiles file.
    case cache(URL)
    /// A geodatabase whose layers are drawn into tiles.
    case geodatabase(URL)

    /// A URL or a path: http(s) is a service or template, `.gpkg` a geodatabase to draw, anything
    /// else a cache on disk.
    public init(location: String) {
        if location.hasPrefix("http://") || location.hasPrefix("https://") {
            self = .http(location)
        } else if location.lowercased().hasSuffix(".gpkg") {
            self = .geodatabase(URL(fileURLWithPath: location))
        } else {
            self = .cache(URL(fileURLWithPath: location))
        }
    }

    var json: JSONValue {
        switch self {
        case .http(let url): ["url": .string(url)]
        case .cache(let file): ["cache": .string(file.path)]
        case .geodatabase(let file): ["geodatabase": .string(file.path)]
        }
    }

    init(json: JSONValue) throws {
        if let url = json["url"]?.stringValue {
            self = .http(url)
        } else if let path = json["cache"]?.stringValue {
            self = .cache(URL(fileURLWithPath: path))
        } else if let path = json["geodatabase"]?.stringValue {
            self = .geodatabase(URL(fileURLWithPath: path))
        } else {
            throw JobError(.invalidJSON, "a tile source needs url or cache")
        }
    }

    /// The source; a token for HTTP comes from the job environment (never from the job file).
    func makeSource(token: String?) throws -> any TileSource {
        switch self {
        case .http(let url): return try HTTPTileSource(url: url, token: token)
        case .cache(let file): return TileCacheSource(cache: TileCache(fileURL: file))
        case .geodatabase(let file):
            do {
                return GeodatabaseRenderSource(geodatabase: try Geodatabase.open(at: file, readOnly: true))
            } catch {
                throw TileCacheError(.source, "cannot open the geodatabase to draw: \(error)", file: file.path)
            }
        }
    }
}

/// What a rebuilt tile job cannot keep in its JSON: the source's token, and the source itself
/// when a test or an app supplies one directly.
public struct TileJobEnvironment: Sendable {
    /// The bearer token for a secured tile service.
    public var token: String?
    /// A source to read from instead of the one the job's JSON names.
    public var source: (any TileSource)?
    /// Fault points `tiles.beforeCheckpoint` and `tiles.afterCheckpoint` (crash tests).
    public var faults: FaultInjector
    /// The time between two durable checkpoints of an export while tiles are written that are
    /// not yet durable, whether more arrive or the source stalls (each costs two fsyncs and the
    /// job's JSON; a kill loses at most this much fetching). Default 500 ms (0: every 512 tiles).
    public var checkpointInterval: Duration

    /// An environment of these values; `checkpointInterval` nil is the default 500 ms.
    public init(token: String? = nil, source: (any TileSource)? = nil, faults: FaultInjector = FaultInjector(), checkpointInterval: Duration? = nil) {
        self.token = token
        self.source = source
        self.faults = faults
        self.checkpointInterval = checkpointInterval ?? .milliseconds(500)
    }
}

/// The estimate's answer (ArcGIS `EstimateTileCacheSizeResult`).
public struct EstimateTileCacheSizeResult: Sendable, Hashable {
    /// Tiles the export would write.
    public var tileCount: Int
    /// Estimated bytes of the output, from the average size of sampled tiles.
    public var fileSize: Int64
    /// Tiles per level.
    public var perLevel: [Int: Int]
}
