import Foundation
import OutpostLocator
import OutpostRouting
import OutpostSyncService
import OutpostTiles
import OutpostVectorTiles
import OutpostCore

/// A map definition a server serves.
public struct ServedMap: Sendable {
    /// Its name in `/arcgis/rest/maps/<name>.json`.
    public var name: String
    /// Its file.
    public var file: URL
    /// The folder of its preplanned areas' packages, `<area id>/` each.
    public var packages: URL
    /// Whether a site published it (`outpost site publish`): its packages came with it.
    public var published: Bool
}

/// The services a server hosts, by name (case-insensitive).
public final class ServiceDirectory: Sendable {
    private let backends: [String: any FeatureServiceBackend]
    /// Tiled map services (`…/MapServer`), by name: tile caches on disk.
    private let tileCaches: [String: (name: String, cache: TileCache)]

    /// Vector tile services (`…/VectorTileServer`), by name: vector tile files on disk.
    private let vectorTiles: [String: VectorTileArchive]

    /// Geoprocessing services (`…/GPServer`), by name.
    private let geoprocessing: [String: GeoprocessingService]
    /// Locators (`…/GeocodeServer`), by name; a site's published ones come and go while it runs.
    private let locators: Locked<[String: LocalLocator]>
    /// Street networks (`…/NAServer`), by name (the file's stem); likewise.
    private let networks: Locked<[String: (name: String, network: RoadNetwork)]>
    /// Map definitions (`/arcgis/rest/maps/<name>.json`), by name (the file's name before
    /// `.map.json`, or the name a site published it under), with the folder of their preplanned
    /// areas' packages; a site's published ones come and go while it runs.
    private let maps: Locked<[String: ServedMap]>
    /// Services whose files could not be opened at start (see
    /// ``open(at:name:faults:strict:geoprocessingJobs:geoprocessingLease:geoprocessingDirectory:)``).
    public let unavailable: [UnavailableService]

    /// A directory of these services (names are matched without regard to case).
    public init(
        _ backends: [any FeatureServiceBackend], tileCaches: [URL] = [], vectorTiles: [VectorTileArchive] = [], geoprocessing: [GeoprocessingService] = [],
        locators: [LocalLocator] = [], networks: [RoadNetwork] = [], maps: [URL] = [], unavailable: [UnavailableService] = []
    ) {
        self.unavailable = unavailable
        self.vectorTiles = Dictionary(vectorTiles.map { ($0.name.lowercased(), $0) }, uniquingKeysWith: { first, _ in first })
        self.maps = Locked(
            Dictionary(
                maps.map { url in
                    let name = String(url.lastPathComponent.dropLast(".map.json".count))
                    let packages = url.deletingLastPathComponent().appendingPathComponent("\(name).preplanned")
                    return (name.lowercased(), ServedMap(name: name, file: url, packages: packages, published: false))
                }, uniquingKeysWith: { first, _ in first }))
        self.networks = Locked(
            Dictionary(
                networks.map { network in
                    let name = network.url.deletingPathExtension().lastPathComponent
                    return (name.lowercased(), (name, network))
                }, uniquingKeysWith: { first, _ in first }))
        self.geoprocessing = Dictionary(geoprocessing.map { ($0.name.lowercased(), $0) }, uniquingKeysWith: { first, _ in first })
        self.locators = Locked(Dictionary(locators.map { ($0.info.name.lowercased(), $0) }, uniquingKeysWith: { first, _ in first }))
        var map: [String: any FeatureServiceBackend] = [:]
        for b in backends { map[b.name.lowercased()] = b }
        self.backends = map
        var caches: [String: (String, TileCache)] = [:]
        for url in tileCaches {
            let name = url.deletingPathExtension().lastPathComponent
            caches[name.lowercased()] = (name, TileCache(fileURL: url))
        }
        self.tileCaches = caches
    }

    /// The names of the feature services.
    public var names: [String] { backends.values.map(\.name).sorted() }

    /// The names of the tiled map services.
    public var mapServiceNames: [String] { tileCaches.values.map(\.name).sorted() }

    /// The names of the vector tile services.
    public var vectorTileServiceNames: [String] { vectorTiles.values.map(\.name).sorted() }

    /// The vector tiles behind `name`'s VectorTileServer, in any case.
    public func vectorTiles(named name: String) -> VectorTileArchive? { vectorTiles[name.lowercased()] }

    /// The feature service called `name`, in any case.
    public func backend(named name: String) -> (any FeatureServiceBackend)? { backends[name.lowercased()] }

    /// The names of the geoprocessing services.
    public var geoprocessingNames: [String] { geoprocessing.values.map(\.name).sorted() }

    /// The geoprocessing service called `name`, in any case.
    public func geoprocessingService(named name: String) -> GeoprocessingService? { geoprocessing[name.lowercased()] }

    /// The names of the locators.
    public var locatorNames: [String] { locators.withLock { $0.values.map(\.info.name) }.sorted() }

    /// The locator called `name`, in any case.
    public func locator(named name: String) -> LocalLocator? { locators.withLock { $0[name.lowercased()] } }

    /// The names of the network analysis services.
    public var networkNames: [String] { networks.withLock { $0.values.map(\.name) }.sorted() }

    /// The street network called `name`, in any case.
    public func network(named name: String) -> RoadNetwork? { networks.withLock { $0[name.lowercased()]?.network } }

    /// The file of network `name`.
    public func networkFile(named name: String) -> URL? { networks.withLock { $0[name.lowercased()]?.network.url } }

    /// Serves `locator` from now on (a file a site published while this server runs); false,
    /// and nothing changed, when a locator of its name is served already.
    public func add(locator: LocalLocator) -> Bool {
        locators.withLock { all in
            let key = locator.info.name.lowercased()
            guard all[key] == nil else { return false }
            all[key] = locator
            return true
        }
    }

    /// Serves `network` as `name` from now on; false, and nothing changed, when a network of
    /// that name is served already.
    public func add(network: RoadNetwork, name: String) -> Bool {
        networks.withLock { all in
            guard all[name.lowercased()] == nil else { return false }
            all[name.lowercased()] = (name, network)
            return true
        }
    }

    /// Stops serving the locator `name` (a site withdrew it); requests already answering keep it.
    public func removeLocator(named name: String) { _ = locators.withLock { $0.removeValue(forKey: name.lowercased()) } }

    /// Stops serving the network `name`.
    public func removeNetwork(named name: String) { _ = networks.withLock { $0.removeValue(forKey: name.lowercased()) } }

    /// The names of the map definitions.
    public var mapNames: [String] { maps.withLock { $0.values.map(\.name) }.sorted() }

    /// The file of map definition `name`.
    public func mapFile(named name: String) -> URL? { maps.withLock { $0[name.lowercased()]?.file } }

    /// Map definition `name`: its file, the folder of its preplanned areas' packages, and whether
    /// a site published it (its packages came with it; nothing prepares them here).
    public func map(named name: String) -> ServedMap? { maps.withLock { $0[name.lowercased()] } }

    /// Serves the map definition at `file` as `name`, its areas' packages in `packages`, from now
    /// on (a map a site published while this server runs); false, and nothing changed, when a map
    /// of that name is served already.
    public func add(map file: URL, name: String, packages: URL) -> Bool {
        maps.withLock { all in
            guard all[name.lowercased()] == nil else { return false }
            all[name.lowercased()] = ServedMap(name: name, file: file, packages: packages, published: true)
            return true
        }
    }

    /// Stops serving the map `name` (a site withdrew it).
    public func removeMap(named name: String) { _ = maps.withLock { $0.removeValue(forKey: name.lowercased()) } }

    /// The tile cache behind `name`'s MapServer, loaded.
    public func tileCache(named name: String) async throws -> TileCache? {
        guard let entry = tileCaches[name.lowercased()] else { return nil }
        try await entry.cache.load()
        return entry.cache
    }

    /// What to answer for a service of one of `types` (`FeatureServer`, `MapServer`, … or
    /// `map`) named `name` that is not served: 503 when its file could not be opened at start,
    /// else 404.
    public func notServed(_ name: String, types: Set<String>, described what: String) -> ServiceError {
        guard let broken = unavailable.first(where: { types.contains($0.type) && $0.name.caseInsensitiveCompare(name) == .orderedSame }) else {
            return .notFound(what)
        }
        return ServiceError(503, "\(what) is unavailable: its file \(broken.file) could not be opened when the server started (see its log)")
    }

    /// Closes every feature service's backend.
    public func closeAll() async {
        for b in backends.values { try? await b.close() }
        for g in geoprocessing.values { await g.close() }
    }
}
