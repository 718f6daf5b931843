import Foundation
import OutpostCore
import OutpostStorage
import OutpostTiles

/// Takes vector tiles offline (ArcGIS `ExportVectorTilesTask`): a geodatabase's layers made into
/// tiles, or a VectorTileServer's tiles fetched, into a vector tile package (with its style),
/// PMTiles or MBTiles by a resumable job. Loadable: `load()` reads the source's zooms and extent
/// (the geodatabase's layers and the definition, or the service's description).
public final class ExportVectorTilesTask: LoadableForwarding, Sendable {
    /// Where the tiles come from.
    public let source: VectorTileExportSource
    /// The tile definition of a geodatabase source (every spatial layer at z0–14 when nil).
    public let definition: VectorTileDefinition?
    let environment: VectorTileJobEnvironment
    public let loadSupport: LoadableSupport
    private let loaded = Locked<(extent: Envelope?, minZoom: Int, maxZoom: Int, layers: [String])?>(nil)

    /// A task for the layers of the geodatabase at `geodatabaseURL`, as `definition` says.
    public convenience init(geodatabaseURL: URL, definition: VectorTileDefinition? = nil, environment: VectorTileJobEnvironment = VectorTileJobEnvironment()) {
        self.init(source: .geodatabase(geodatabaseURL), definition: definition, environment: environment)
    }

    /// A task for the tiles of the VectorTileServer at `url` (the environment's token sent).
    public convenience init(url: URL, environment: VectorTileJobEnvironment = VectorTileJobEnvironment()) {
        self.init(source: .service(url), definition: nil, environment: environment)
    }

    init(source: VectorTileExportSource, definition: VectorTileDefinition?, environment: VectorTileJobEnvironment) {
        self.source = source
        self.definition = definition
        self.environment = environment
        let box = loaded
        loadSupport = LoadableSupport {
            switch source {
            case .geodatabase(let url):
                let gdb = try VectorTileExportSource.open(url)
                defer { try? gdb.close() }
                let generator = try VectorTileGenerator(geodatabase: gdb, definition: definition)
                box.set((try await generator.dataExtent(), generator.definition.minZoom, generator.definition.maxZoom, generator.tileLayers.map(\.name)))
            case .service(let url):
                let http = try VectorTileExportSource.http(url, token: environment.token)
                let service = try await ServiceTiles(http, parameters: ExportVectorTilesParameters(), area: nil)
                let layers = try await service.description(name: "").vectorLayers["vector_layers"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
                box.set((service.info.fullExtent, service.minZoom, service.maxZoom, layers))
            }
        }
    }

    /// The source's extent in Web Mercator (after loading; nil when it has nothing).
    public var extent: Envelope? { loaded.get()?.extent }

    /// The tile layers' names (after loading; a service's as its style names them).
    public var tileLayerNames: [String] { loaded.get()?.layers ?? [] }

    /// Parameters for an area down to a scale (ArcGIS semantics: `maxScale` 0 is the source's
    /// last zoom; otherwise the first 512-pixel level at least that fine, a service's capped at
    /// its last).
    public func makeDefaultExportVectorTilesParameters(areaOfInterest: AreaOfInterest?, maxScale: Double) async throws -> ExportVectorTilesParameters {
        try await load()
        guard let info = loaded.get() else { throw VectorTileError(.io, "the task did not load") }
        var maxZoom = info.maxZoom
        if maxScale > 0 {
            let lods = VectorTilePackage.tilingScheme(maxLevel: 24).lods
            maxZoom = (lods.first { $0.scale <= maxScale * (1 + 1e-9) } ?? lods.last!).level
            // A service has no tiles finer than its own; a geodatabase's layers tile at any zoom.
            if case .service = source { maxZoom = min(maxZoom, info.maxZoom) }
        }
        guard maxZoom >= info.minZoom else {
            throw VectorTileError(.invalidArea, "maxScale 1:\(Int(maxScale)) is coarser than the first zoom \(info.minZoom)")
        }
        let parameters = ExportVectorTilesParameters(areaOfInterest: areaOfInterest, maxZoom: maxZoom, definition: definition)
        _ = try parameters.area()
        return parameters
    }

    /// A job that estimates the export of `parameters` (the tiles it would write, the file's size
    /// in each format) from at most `sampleSize` tiles a zoom, by the task's definition when the
    /// parameters name none.
    public func makeEstimateVectorTilesSizeJob(parameters: ExportVectorTilesParameters, sampleSize: Int = 64) -> Job<EstimateVectorTilesSizeJob> {
        var parameters = parameters
        if parameters.definition == nil { parameters.definition = definition }
        return Job(EstimateVectorTilesSizeJob(source: source, parameters: parameters, sampleSize: sampleSize, environment: environment))
    }

    /// A job that exports `parameters` into `downloadFileURL` (`.vtpk`, `.pmtiles` or
    /// `.mbtiles`), by the task's definition when the parameters name none; with a `store`, it
    /// survives the process and resumes.
    public func makeExportVectorTilesJob(parameters: ExportVectorTilesParameters, downloadFileURL: URL, store: (any JobStore)? = nil) -> Job<ExportVectorTilesJob> {
        var parameters = parameters
        if parameters.definition == nil { parameters.definition = definition }
        return Job(ExportVectorTilesJob(source: source, parameters: parameters, downloadFileURL: downloadFileURL, environment: environment), store: store)
    }
}
