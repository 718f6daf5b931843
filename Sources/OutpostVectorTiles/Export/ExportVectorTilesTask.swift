import Foundation
import OutpostCore
import OutpostStorage
import OutpostTiles

/// Takes vector tiles offline (ArcGIS `ExportVectorTilesTask`): a geodatabase's layers made into
/// a vector tile package (with its style), PMTiles or MBTiles by a resumable job. Loadable:
/// `load()` opens the geodatabase and reads its layers, extent and the definition's zooms.
public final class ExportVectorTilesTask: LoadableForwarding, Sendable {
    /// The geodatabase whose layers are tiled.
    public let geodatabaseURL: URL
    /// The tile definition (every spatial layer at z0–14 when nil).
    public let definition: VectorTileDefinition?
    let environment: VectorTileJobEnvironment
    public let loadSupport: LoadableSupport
    private let loaded = LockedValue<(extent: Envelope?, definition: VectorTileDefinition, layers: [TileLayerInfo])?>(nil)

    /// A task for the layers of the geodatabase at `geodatabaseURL`, as `definition` says.
    public init(geodatabaseURL: URL, definition: VectorTileDefinition? = nil, environment: VectorTileJobEnvironment = VectorTileJobEnvironment()) {
        self.geodatabaseURL = geodatabaseURL
        self.definition = definition
        self.environment = environment
        let box = loaded
        loadSupport = LoadableSupport {
            let gdb: Geodatabase
            do { gdb = try Geodatabase.open(at: geodatabaseURL, readOnly: true) } catch { throw VectorTileError(.io, "cannot open \(geodatabaseURL.lastPathComponent): \(error)") }
            defer { try? gdb.close() }
            let generator = try VectorTileGenerator(geodatabase: gdb, definition: definition)
            box.set((try await generator.dataExtent(), generator.definition, generator.tileLayers))
        }
    }

    /// The layers' extent in Web Mercator (after loading; nil when every layer is empty).
    public var extent: Envelope? { loaded.get()?.extent }

    /// The tile layers (after loading).
    public var tileLayers: [TileLayerInfo] { loaded.get()?.layers ?? [] }

    /// Parameters for an area down to a scale (ArcGIS semantics: `maxScale` 0 is the
    /// definition's last zoom; otherwise the first 512-pixel level at least that fine).
    public func makeDefaultExportVectorTilesParameters(areaOfInterest: AreaOfInterest?, maxScale: Double) async throws -> ExportVectorTilesParameters {
        try await load()
        guard let d = loaded.get()?.definition else { throw VectorTileError(.io, "the task did not load") }
        var maxZoom = d.maxZoom
        if maxScale > 0 {
            let lods = VectorTilePackage.tilingScheme(maxLevel: 24).lods
            maxZoom = (lods.first { $0.scale <= maxScale * (1 + 1e-9) } ?? lods.last!).level
        }
        guard maxZoom >= d.minZoom else {
            throw VectorTileError(.invalidArea, "maxScale 1:\(Int(maxScale)) is coarser than the first zoom \(d.minZoom)")
        }
        let parameters = ExportVectorTilesParameters(areaOfInterest: areaOfInterest, maxZoom: maxZoom, definition: definition)
        _ = try parameters.area()
        return parameters
    }

    /// A job that exports `parameters` into `downloadFileURL` (`.vtpk`, `.pmtiles` or
    /// `.mbtiles`), by the task's definition when the parameters name none; with a `store`, it
    /// survives the process and resumes.
    public func makeExportVectorTilesJob(parameters: ExportVectorTilesParameters, downloadFileURL: URL, store: (any JobStore)? = nil) -> Job<ExportVectorTilesJob> {
        var parameters = parameters
        if parameters.definition == nil { parameters.definition = definition }
        return Job(ExportVectorTilesJob(geodatabaseURL: geodatabaseURL, parameters: parameters, downloadFileURL: downloadFileURL, environment: environment), store: store)
    }
}
