import Foundation
import Hummingbird
import HummingbirdHTTP2
import HummingbirdTLS
import Logging
import NIOCore
import NIOSSL
import OutpostLocator
import OutpostRouting
import OutpostStorage

/// Builds and runs the Outpost feature service.
///
/// ```swift
/// let services = try await ServiceDirectory(loading: URL(fileURLWithPath: "services/"))
/// let app = try OutpostApplication.make(services: services, configuration: ServerConfiguration(port: 0)) { url in
///     print("listening on \(url)")
/// }
/// try await app.runService()   // stops gracefully on SIGINT/SIGTERM
/// ```
public enum OutpostApplication {
    /// - Throws: ``ServiceError`` (500) when the TLS certificate or key cannot be read.
    /// - Parameter drain: run it in the same service group after the application to answer 503
    ///   to new requests while a graceful shutdown lets the ones in flight finish.
    public static func make(
        services: ServiceDirectory, configuration: ServerConfiguration, drain: ServerDrain = ServerDrain(),
        onListening: @escaping @Sendable (String) async -> Void = { _ in }
    ) throws -> Application<FeatureServerResponder> {
        var logger = Logger(label: "outpost.server")
        logger.logLevel = configuration.logLevel
        let host = configuration.host
        let tls = try configuration.tls.map(Self.tlsConfiguration)
        let scheme = tls == nil ? "http" : "https"
        return Application(
            responder: FeatureServerResponder(services: services, configuration: configuration, drain: drain.state),
            server: try tls.map { try .http2Upgrade(tlsConfiguration: $0) } ?? .http1(),
            configuration: .init(address: .hostname(host, port: configuration.port), serverName: "Outpost"),
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? configuration.port
                await onListening("\(scheme)://\(host):\(port)")
            },
            logger: logger)
    }

    /// TLS 1.2 and later with the certificate chain and key of `files`; ALPN offers h2 and
    /// http/1.1.
    static func tlsConfiguration(_ files: TLSFiles) throws -> TLSConfiguration {
        let chain: [NIOSSLCertificate]
        let key: NIOSSLPrivateKey
        do {
            chain = try NIOSSLCertificate.fromPEMFile(files.certificateChain.path)
        } catch {
            throw ServiceError(500, "cannot read the TLS certificate chain \(files.certificateChain.path): \(error)")
        }
        do {
            key = try NIOSSLPrivateKey(file: files.privateKey.path, format: .pem)
        } catch {
            throw ServiceError(500, "cannot read the TLS private key \(files.privateKey.path): \(error)")
        }
        guard !chain.isEmpty else { throw ServiceError(500, "\(files.certificateChain.path) holds no certificate") }
        var tls = TLSConfiguration.makeServerConfiguration(certificateChain: chain.map { .certificate($0) }, privateKey: .privateKey(key))
        tls.minimumTLSVersion = .tlsv12
        return tls
    }
}

extension ServiceDirectory {
    /// Opens the services at `path`: one service GeoPackage, or every `.gpkg` in a directory.
    /// The service name is `name` (single file only) or the file's stem.
    public convenience init(loading path: URL, name: String? = nil) async throws {
        let found = try Self.files(at: path, name: name)
        var geoprocessing: [GeoprocessingService] = []
        for url in found.geoprocessing { geoprocessing.append(try await GeoprocessingService(contentsOf: url)) }
        let locators = try found.locators.map { url in
            do {
                return try LocalLocator(url: url)
            } catch {
                throw ServiceError(500, "\(url.lastPathComponent): \(error)")
            }
        }
        let networks = try found.networks.map { url in
            do {
                return try RoadNetwork(url: url)
            } catch {
                throw ServiceError(500, "\(url.lastPathComponent): \(error)")
            }
        }
        self.init(found.backends, tileCaches: found.tileCaches, geoprocessing: geoprocessing, locators: locators, networks: networks, maps: found.maps)
    }

    /// The services of a path: a service GeoPackage, a tile cache, or a directory of them.
    /// - Parameter faults: fault points for tests, shared by the services.
    public static func files(
        at path: URL, name: String? = nil, faults: FaultInjector = FaultInjector()
    ) throws -> ServiceFiles {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path.path, isDirectory: &isDirectory) else {
            throw ServiceError(404, "\(path.path) does not exist")
        }
        if isDirectory.boolValue {
            let entries = try FileManager.default.contentsOfDirectory(at: path, includingPropertiesForKeys: nil).sorted { $0.path < $1.path }
            let files = entries.filter { $0.pathExtension.lowercased() == "gpkg" }
            // Tile caches beside them are tiled map services: .tpkx, .mbtiles, exploded folders.
            let caches = entries.filter {
                ["tpkx", "mbtiles"].contains($0.pathExtension.lowercased())
                    || FileManager.default.fileExists(atPath: $0.appendingPathComponent("conf.xml").path)
            }
            // Geoprocessing services: <name>.gp.json.
            let gp = entries.filter { $0.lastPathComponent.lowercased().hasSuffix(".gp.json") }
            // Locators: <name>.locator, served as …/<name>/GeocodeServer.
            let locators = entries.filter { $0.pathExtension.lowercased() == "locator" }
            // Street networks: <name>.network, served as …/<name>/NAServer.
            let networks = entries.filter { $0.pathExtension.lowercased() == "network" }
            // Map definitions: <name>.map.json, served as /arcgis/rest/maps/<name>.json.
            let maps = entries.filter { $0.lastPathComponent.lowercased().hasSuffix(".map.json") }
            guard !files.isEmpty || !caches.isEmpty || !gp.isEmpty || !locators.isEmpty || !networks.isEmpty else {
                throw ServiceError(404, "\(path.path) holds no service .gpkg files, tile caches, .gp.json geoprocessing services, .locator or .network files")
            }
            return ServiceFiles(
                backends: try files.map { try SQLiteServiceBackend(url: $0, faults: faults) }, tileCaches: caches, geoprocessing: gp, locators: locators,
                networks: networks, maps: maps)
        } else if ["tpkx", "mbtiles"].contains(path.pathExtension.lowercased()) {
            return ServiceFiles(tileCaches: [path])
        } else if path.lastPathComponent.lowercased().hasSuffix(".gp.json") {
            return ServiceFiles(geoprocessing: [path])
        } else if path.pathExtension.lowercased() == "locator" {
            return ServiceFiles(locators: [path])
        } else if path.pathExtension.lowercased() == "network" {
            return ServiceFiles(networks: [path])
        } else {
            return ServiceFiles(backends: [try SQLiteServiceBackend(url: path, name: name, faults: faults)])
        }
    }

    /// Services from several places (files and a database): two with one name are refused.
    public convenience init(
        checking backends: [any FeatureServiceBackend], tileCaches: [URL] = [], geoprocessing: [GeoprocessingService] = [], locators: [LocalLocator] = [],
        networks: [RoadNetwork] = [], maps: [URL] = []
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
        self.init(backends, tileCaches: tileCaches, geoprocessing: geoprocessing, locators: locators, networks: networks, maps: maps)
    }
}

/// What a path holds for ``ServiceDirectory``: service GeoPackages (opened), and the files of
/// tile caches, geoprocessing services, locators, networks and map definitions.
public struct ServiceFiles {
    public var backends: [any FeatureServiceBackend] = []
    public var tileCaches: [URL] = []
    public var geoprocessing: [URL] = []
    public var locators: [URL] = []
    public var networks: [URL] = []
    public var maps: [URL] = []
}
