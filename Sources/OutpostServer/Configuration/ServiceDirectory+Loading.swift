import Foundation
import OutpostCore
import OutpostLocator
import OutpostProtocol
import OutpostRouting
import OutpostSQLiteService
import OutpostStorage
import OutpostSyncService
import OutpostTiles
import OutpostVectorTiles

/// A service whose file could not be opened when the server started: the server serves the
/// others, lists it as unavailable and answers its requests with 503.
public struct UnavailableService: Sendable, Hashable {
    /// The name in URLs (the file's stem).
    public var name: String
    /// `FeatureServer`, `MapServer`, `GPServer`, `GeocodeServer`, `NAServer`, or `map` for a map
    /// definition.
    public var type: String
    /// The file's name.
    public var file: String
    /// Why it could not be opened.
    public var reason: String

    /// A record of these values.
    public init(name: String, type: String, file: String, reason: String) {
        self.name = name
        self.type = type
        self.file = file
        self.reason = reason
    }

    /// The startup log's line.
    public var logLine: String { "\(file) (\(type) \(name)) cannot be served: \(reason)" }
}

/// What a path holds for ``ServiceDirectory``, opened: service GeoPackages, tile caches (checked
/// to load), geoprocessing services, locators, networks and map definitions (checked to read),
/// and the files that could not be opened.
public struct ServiceFiles {
    /// Feature services (service GeoPackages or PostgreSQL schemas).
    public var backends: [any FeatureServiceBackend] = []
    /// Tile caches, for MapServers.
    public var tileCaches: [URL] = []
    /// Vector tile files (`.vtpk`, `.pmtiles`, MBTiles of `pbf`), for VectorTileServers.
    public var vectorTiles: [VectorTileArchive] = []
    /// Geoprocessing services.
    public var geoprocessing: [GeoprocessingService] = []
    /// Locators, for GeocodeServers.
    public var locators: [LocalLocator] = []
    /// Street networks, for NAServers.
    public var networks: [RoadNetwork] = []
    /// Map definitions.
    public var maps: [URL] = []
    /// Files that could not be opened (only when not `strict`).
    public var unavailable: [UnavailableService] = []

    /// Nothing opened yet.
    public init() {}
}

extension ServiceDirectory {
    /// Opens the services at `path`: one service GeoPackage, or every `.gpkg` in a directory.
    /// The service name is `name` (single file only) or the file's stem.
    public convenience init(loading path: URL, name: String? = nil) async throws {
        let found = try await Self.open(at: path, name: name)
        self.init(
            found.backends, tileCaches: found.tileCaches, vectorTiles: found.vectorTiles, geoprocessing: found.geoprocessing, locators: found.locators,
            networks: found.networks, maps: found.maps)
    }

    /// Opens the services of a path: a service GeoPackage, a tile cache, a geoprocessing
    /// service, a locator or network file, or a directory of them (with map definitions).
    /// - Parameters:
    ///   - faults: fault points for tests, shared by the services.
    ///   - strict: a file that cannot be opened fails the whole (``ServiceError`` 500 naming the
    ///     file); otherwise it is left out and listed in ``ServiceFiles/unavailable``, and the
    ///     others are served (one damaged file does not stop every service).
    ///   - geoprocessingJobs: where each geoprocessing service (by name) keeps its job records
    ///     (nil: a SQLite file in its jobs directory); a site gives a store in PostgreSQL.
    ///   - geoprocessingLease: how long a geoprocessing job stays with a host that stopped
    ///     renewing it before another host of a site takes it over.
    ///   - geoprocessingDirectory: a geoprocessing service's uploads and job outputs directory
    ///     by its name (nil: `<name>.gp-jobs/` beside its file); a site gives one in its site
    ///     directory.
    /// - Parameter path: a file of one of those kinds, or a directory of them.
    /// - Parameter name: the service name for a single file (default: its name without extension).
    /// - Throws: ``ServiceError`` 404 when the path does not exist or holds no service files.
    public static func open(
        at path: URL, name: String? = nil, faults: FaultInjector = FaultInjector(), strict: Bool = true,
        geoprocessingJobs: (@Sendable (String) -> any GPJobRecordStore)? = nil, geoprocessingLease: Duration = .seconds(30),
        geoprocessingDirectory: (@Sendable (String) -> URL)? = nil
    ) async throws -> ServiceFiles {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path.path, isDirectory: &isDirectory) else {
            throw ServiceError(404, "\(path.path) does not exist")
        }
        var entries = [path]
        if isDirectory.boolValue {
            entries = try FileManager.default.contentsOfDirectory(at: path, includingPropertiesForKeys: nil).sorted { $0.path < $1.path }
        }
        var files = ServiceFiles()
        func attempt(_ url: URL, _ type: String, name serviceName: String, _ body: () async throws -> Void) async throws {
            do {
                try await body()
            } catch {
                let reason = (error as? ServiceError)?.message ?? (error as? SyncServiceError)?.message ?? "\(error)"
                if strict { throw ServiceError(500, "\(url.lastPathComponent): \(reason)") }
                files.unavailable.append(UnavailableService(name: serviceName, type: type, file: url.lastPathComponent, reason: reason))
            }
        }
        for url in entries {
            let file = url.lastPathComponent.lowercased(), stem = url.deletingPathExtension().lastPathComponent
            if file.hasSuffix(".gpkg") || !isDirectory.boolValue && Kind(url) == nil {
                let serviceName = isDirectory.boolValue ? stem : name ?? stem
                try await attempt(url, "FeatureServer", name: serviceName) {
                    files.backends.append(try SQLiteServiceBackend(url: url, name: isDirectory.boolValue ? nil : name, faults: faults))
                }
                continue
            }
            switch Kind(url) {
            case .tileCache?:
                try await attempt(url, "MapServer", name: stem) {
                    try await TileCache(fileURL: url).load()
                    files.tileCaches.append(url)
                }
            case .vectorTiles?:
                try await attempt(url, "VectorTileServer", name: stem) {
                    do {
                        files.vectorTiles.append(try await VectorTileArchive(url: url))
                    } catch let error as VectorTileError {
                        throw ServiceError(500, error.message)
                    }
                }
            case .geoprocessing?:
                let serviceName = String(url.lastPathComponent.dropLast(".gp.json".count))
                try await attempt(url, "GPServer", name: serviceName) {
                    files.geoprocessing.append(try await GeoprocessingService(
                            contentsOf: url, jobsDirectory: geoprocessingDirectory?(serviceName), jobs: geoprocessingJobs?(serviceName), lease: geoprocessingLease))
                }
            case .locator?:
                try await attempt(url, "GeocodeServer", name: stem) { files.locators.append(try LocalLocator(url: url)) }
            case .network?:
                try await attempt(url, "NAServer", name: stem) { files.networks.append(try await runBlocking { try RoadNetwork(url: url) }) }
            case .map?:
                // A map definition that does not read is found now, not at the first request.
                try await attempt(url, "map", name: String(url.lastPathComponent.dropLast(".map.json".count))) {
                    _ = try MapDefinition.decode(try Data(contentsOf: url))
                    files.maps.append(url)
                }
            case nil:
                continue
            }
        }
        let served = files.backends.count + files.tileCaches.count + files.vectorTiles.count + files.geoprocessing.count + files.locators.count + files.networks.count
        guard served + files.unavailable.filter({ $0.type != "map" }).count > 0 else {
            throw ServiceError(404, "\(path.path) holds no service .gpkg files, tile caches, vector tiles, .gp.json geoprocessing services, .locator or .network files")
        }
        return files
    }

    /// The kinds of service files besides service GeoPackages, by their names.
    private enum Kind {
        /// `.tpkx`, `.mbtiles` or an exploded cache folder (`conf.xml` inside): a MapServer.
        case tileCache
        /// `.vtpk`, `.pmtiles`, or `.mbtiles` of vector tiles: a VectorTileServer.
        case vectorTiles
        /// `<name>.gp.json`: a GPServer.
        case geoprocessing
        /// `<name>.locator`: a GeocodeServer.
        case locator
        /// `<name>.network`: an NAServer.
        case network
        /// `<name>.map.json`: a map definition.
        case map

        init?(_ url: URL) {
            let file = url.lastPathComponent.lowercased()
            switch url.pathExtension.lowercased() {
            case "tpkx": self = .tileCache
            case "vtpk", "pmtiles": self = .vectorTiles
            case "mbtiles": self = VectorTileArchive.holdsVectorTiles(mbtiles: url) ? .vectorTiles : .tileCache
            case "locator": self = .locator
            case "network": self = .network
            default:
                if file.hasSuffix(".gp.json") {
                    self = .geoprocessing
                } else if file.hasSuffix(".map.json") {
                    self = .map
                } else if FileManager.default.fileExists(atPath: url.appendingPathComponent("conf.xml").path) {
                    self = .tileCache
                } else {
                    return nil
                }
            }
        }
    }

    /// The services `files` holds (from
    /// ``open(at:name:faults:strict:geoprocessingJobs:geoprocessingLease:geoprocessingDirectory:)``, perhaps with a
    /// database's added): two with one name are refused.
    public convenience init(checking files: ServiceFiles) throws {
        try self.init(
            checking: files.backends, tileCaches: files.tileCaches, vectorTiles: files.vectorTiles, geoprocessing: files.geoprocessing,
            locators: files.locators, networks: files.networks, maps: files.maps, unavailable: files.unavailable)
    }

    /// Services from several places (files and a database): two with one name are refused.
    public convenience init(
        checking backends: [any FeatureServiceBackend], tileCaches: [URL] = [], vectorTiles: [VectorTileArchive] = [], geoprocessing: [GeoprocessingService] = [],
        locators: [LocalLocator] = [], networks: [RoadNetwork] = [], maps: [URL] = [], unavailable: [UnavailableService] = []
    ) throws {
        var seen = Set<String>()
        for b in backends where !seen.insert(b.name.lowercased()).inserted {
            throw ServiceError(409, "two services are named \(b.name); serve them from separate processes or rename one")
        }
        var gpSeen = Set<String>()
        for g in geoprocessing where !gpSeen.insert(g.name.lowercased()).inserted {
            throw ServiceError(409, "two geoprocessing services are named \(g.name)")
        }
        var locatorSeen = Set<String>()
        for l in locators where !locatorSeen.insert(l.info.name.lowercased()).inserted {
            throw ServiceError(409, "two locators are named \(l.info.name)")
        }
        var networkSeen = Set<String>()
        for n in networks where !networkSeen.insert(n.url.deletingPathExtension().lastPathComponent.lowercased()).inserted {
            throw ServiceError(409, "two networks are named \(n.url.deletingPathExtension().lastPathComponent)")
        }
        var vectorSeen = Set<String>()
        for v in vectorTiles where !vectorSeen.insert(v.name.lowercased()).inserted {
            throw ServiceError(409, "two vector tile files are named \(v.name)")
        }
        self.init(
            backends, tileCaches: tileCaches, vectorTiles: vectorTiles, geoprocessing: geoprocessing, locators: locators, networks: networks, maps: maps,
            unavailable: unavailable)
    }
}
