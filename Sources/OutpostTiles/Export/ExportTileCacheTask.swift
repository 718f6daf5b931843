import Foundation
import Synchronization
import OutpostCore

/// Takes tiles offline (ArcGIS `ExportTileCacheTask`): from a tiled map service, a URL template or
/// a cache on disk, into a `.tpkx`, an exploded cache or MBTiles. Loadable: `load()` reads the
/// source's tiling scheme and levels.
public final class ExportTileCacheTask: LoadableForwarding, Sendable {
    /// Where the tiles come from.
    public let source: TileSourceDescriptor
    let environment: TileJobEnvironment
    public let loadSupport: LoadableSupport
    private let loaded = Locked<TileCacheInfo?>(nil)

    /// A task for the tiles at `url`.
    /// - Parameter url: a MapServer URL, a `{z}/{x}/{y}` template, or a file URL of a cache.
    /// - Parameter token: sent as a bearer token to a secured tile service.
    public convenience init(url: URL, token: String? = nil) {
        self.init(source: url.isFileURL ? .cache(url) : .http(url.absoluteString.removingPercentEncoding ?? url.absoluteString), token: token)
    }

    /// A task for `source`, or for `tileSource` when one is given (an app's own source, a test's).
    public init(source: TileSourceDescriptor, token: String? = nil, tileSource: (any TileSource)? = nil) {
        self.source = source
        self.environment = TileJobEnvironment(token: token, source: tileSource)
        let box = loaded, environment = environment
        loadSupport = LoadableSupport {
            let made = try environment.source ?? source.makeSource(token: environment.token)
            box.set(try await made.cacheInfo())
        }
    }

    /// The source's tiling scheme, levels and extent (after loading).
    public var tileCacheInfo: TileCacheInfo? { loaded.get() }

    /// Parameters for an area between two scales (ArcGIS semantics: 0 means the source's coarsest
    /// or finest level; a scale between levels takes the coarser level for `minScale` and the
    /// finer for `maxScale`).
    public func makeDefaultExportTileCacheParameters(areaOfInterest: AreaOfInterest?, minScale: Double, maxScale: Double) async throws -> ExportTileCacheParameters {
        try await load()
        guard let info = tileCacheInfo else { throw TileCacheError(.source, "the source did not load") }
        let lods = info.scheme.lods.filter { info.levels.contains($0.level) }.sorted { $0.scale > $1.scale }
        guard let coarsest = lods.first, let finest = lods.last else { throw TileCacheError(.source, "the source has no levels") }
        let first = minScale <= 0 ? coarsest : (lods.last { $0.scale >= minScale * (1 - 1e-9) } ?? coarsest)
        let last = maxScale <= 0 ? finest : (lods.first { $0.scale <= maxScale * (1 + 1e-9) } ?? finest)
        guard first.level <= last.level else {
            throw TileCacheError(.invalidArea, "minScale 1:\(Int(minScale)) is finer than maxScale 1:\(Int(maxScale))")
        }
        return ExportTileCacheParameters(areaOfInterest: areaOfInterest, levelIDs: Array(first.level...last.level))
    }

    /// A job that counts the tiles of `parameters` and estimates the export's size.
    public func makeEstimateTileCacheSizeJob(parameters: ExportTileCacheParameters) -> Job<EstimateTileCacheSizeJob> {
        Job(EstimateTileCacheSizeJob(source: source, parameters: parameters, environment: environment))
    }

    /// A job that exports the tiles of `parameters` into `downloadFileURL`; with a `store`, it survives the
    /// process and resumes.
    public func makeExportTileCacheJob(parameters: ExportTileCacheParameters, downloadFileURL: URL, store: (any JobStore)? = nil) -> Job<ExportTileCacheJob> {
        Job(ExportTileCacheJob(source: source, parameters: parameters, downloadFileURL: downloadFileURL, environment: environment), store: store)
    }
}

extension JobRegistry {
    /// Registers the tile job types (export, estimate) with what they need besides their JSON.
    public mutating func withTileJobs(_ environment: TileJobEnvironment = TileJobEnvironment()) {
        self.environment[TileJobEnvironment.self] = environment
        register(ExportTileCacheJob.self)
        register(EstimateTileCacheSizeJob.self)
    }
}
