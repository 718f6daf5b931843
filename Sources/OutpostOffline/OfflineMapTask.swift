import Foundation
import OutpostCore
import OutpostProtocol
import OutpostStorage
import OutpostSync
import OutpostTiles

/// Takes a map offline in one job (the SDK's `OfflineMapTask`): a replica per feature service of
/// its operational layers, the basemap as a `.tpkx`, copies of its locator and network files,
/// written as an offline map folder that appears only when complete.
///
/// ```swift
/// let task = OfflineMapTask(url: URL(string: "http://host/arcgis/rest/maps/field-crews.json")!)
/// let parameters = try await task.makeDefaultGenerateOfflineMapParameters(areaOfInterest: area, minScale: 0, maxScale: 5_000)
/// let job = try await task.makeGenerateOfflineMapJob(parameters: parameters, downloadDirectory: folder)
/// try job.start()
/// let offlineMap = try await job.output     // offlineMap.layerErrors lists what could not go offline
/// ```
///
/// Loadable: `load()` reads the map definition (from a URL or a file).
public final class OfflineMapTask: LoadableForwarding, Sendable {
    /// Where the map definition comes from (a URL or a path), when it was not given directly.
    public let source: String?
    let token: String?
    public let loadSupport: LoadableSupport
    private let loaded = Locked<MapDefinition?>(nil)

    /// A task for a map definition in hand.
    public init(map: MapDefinition, token: String? = nil) {
        source = nil
        self.token = token
        loaded.set(map)
        loadSupport = LoadableSupport {}
    }

    /// A task for the map definition at `url` (`…/arcgis/rest/maps/<name>.json` or a file).
    /// - Parameter servicesURL: the base of the map's relative service URLs, for a file that
    ///   has none (a served map has its URLs made absolute by the server).
    /// - Parameter url: the map definition: `…/arcgis/rest/maps/<name>.json` or a file URL.
    /// - Parameter token: sent as a bearer token to the map's services when they are secured.
    public init(url: URL, token: String? = nil, servicesURL: String? = nil) {
        source = url.isFileURL ? url.path : url.absoluteString
        self.token = token
        let box = loaded
        loadSupport = LoadableSupport {
            var map = try await Self.read(url, token: token)
            if let servicesURL { map = map.resolvingURLs(against: servicesURL) }
            box.set(map)
        }
    }

    static func read(_ url: URL, token: String?) async throws -> MapDefinition {
        let data: Data
        if url.isFileURL {
            do {
                data = try Data(contentsOf: url)
            } catch {
                throw OfflineMapError(.invalidMap, "cannot read the map definition \(url.path): \(error.localizedDescription)")
            }
        } else {
            data = (try await OfflineHTTP(token: token).json(url)).jsonData
        }
        do {
            return try MapDefinition.decode(data)
        } catch let error as MapDefinition.Invalid {
            throw OfflineMapError(.invalidMap, error.description)
        }
    }

    /// The map definition, once loaded.
    public var map: MapDefinition? { loaded.get() }

    private func loadedMap() async throws -> MapDefinition {
        try await load()
        guard let map else { throw OfflineMapError(.invalidMap, "the map definition did not load") }
        return map
    }

    /// The preplanned areas the map names.
    public var preplannedAreas: [MapDefinition.PreplannedArea] { map?.preplannedAreas ?? [] }

    /// Every layer with its where clause, the basemap between `minScale` and `maxScale` (0: its
    /// coarsest or finest level) over the area, attachments on, read-only layers as replicas that
    /// download.
    public func makeDefaultGenerateOfflineMapParameters(
        areaOfInterest: Envelope, spatialReference: SpatialReference = .wgs84, minScale: Double = 0, maxScale: Double = 0
    ) async throws -> GenerateOfflineMapParameters {
        let map = try await loadedMap()
        guard areaOfInterest.isValid, areaOfInterest.width > 0, areaOfInterest.height > 0 else {
            throw OfflineMapError(.invalidParameters, "the area of interest is empty or inverted")
        }
        guard !map.operationalLayers.isEmpty || map.basemap != nil else { throw OfflineMapError(.invalidMap, "the map has no layers and no basemap") }
        var parameters = GenerateOfflineMapParameters(
            areaOfInterest: MapDefinition.Extent(areaOfInterest, spatialReference: spatialReference), minScale: minScale, maxScale: maxScale)
        if let basemap = map.basemap {
            let tiles = ExportTileCacheTask(source: TileSourceDescriptor(location: try map.absolute(basemap.url)), token: token)
            do {
                let export = try await tiles.makeDefaultExportTileCacheParameters(
                    areaOfInterest: .envelope(areaOfInterest, spatialReference), minScale: minScale, maxScale: maxScale)
                parameters.basemapLevels = export.levelIDs
            } catch let error as TileCacheError {
                throw OfflineMapError(.service, "the basemap \(basemap.title): \(error)")
            }
        } else {
            parameters.includeBasemap = false
        }
        return parameters
    }

    /// The parameters of a preplanned area the map names (for `outpost offline prepare`).
    public func makeDefaultGenerateOfflineMapParameters(preplannedArea id: String) async throws -> GenerateOfflineMapParameters {
        let map = try await loadedMap()
        guard let area = map.preplannedAreas?.first(where: { $0.id == id }) else {
            let known = (map.preplannedAreas ?? []).map(\.id)
            throw OfflineMapError(.invalidParameters, "the map has no preplanned area \(id)" + (known.isEmpty ? "" : " (it has \(known.joined(separator: ", ")))"))
        }
        var parameters = try await makeDefaultGenerateOfflineMapParameters(
            areaOfInterest: area.extent.envelope, spatialReference: area.extent.wkid, minScale: area.minScale ?? 0, maxScale: area.maxScale ?? 0)
        parameters.preplannedArea = id
        return parameters
    }

    /// A job that writes the offline map into `downloadDirectory` (which must not exist or be
    /// empty; the map is built beside it and moved into place when complete).
    public func makeGenerateOfflineMapJob(
        parameters: GenerateOfflineMapParameters, downloadDirectory: URL, faults: FaultInjector = FaultInjector(), store: (any JobStore)? = nil
    ) async throws -> Job<GenerateOfflineMapJob> {
        let map = try await loadedMap()
        return Job(
            GenerateOfflineMapJob(
                map: map, source: source, offlineParameters: parameters, downloadDirectory: downloadDirectory,
                environment: OfflineJobEnvironment(token: token, faults: faults)),
            store: store)
    }
}
