import Foundation
import Hummingbird
import Logging
import NIOCore

/// Builds and runs the Outpost feature service.
///
/// ```swift
/// let services = try ServiceDirectory(loading: URL(fileURLWithPath: "services/"))
/// let app = OutpostApplication.make(services: services, configuration: ServerConfiguration(port: 0)) { url in
///     print("listening on \(url)")
/// }
/// try await app.runService()   // stops gracefully on SIGINT/SIGTERM
/// ```
public enum OutpostApplication {
    public static func make(
        services: ServiceDirectory, configuration: ServerConfiguration,
        onListening: @escaping @Sendable (String) async -> Void = { _ in }
    ) -> Application<FeatureServerResponder> {
        var logger = Logger(label: "outpost.server")
        logger.logLevel = ProcessInfo.processInfo.environment["LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .warning
        let host = configuration.host
        return Application(
            responder: FeatureServerResponder(services: services, configuration: configuration),
            configuration: .init(address: .hostname(host, port: configuration.port), serverName: "Outpost"),
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? configuration.port
                await onListening("http://\(host):\(port)")
            },
            logger: logger)
    }
}

extension ServiceDirectory {
    /// Opens the services at `path`: one service GeoPackage, or every `.gpkg` in a directory.
    /// The service name is `name` (single file only) or the file's stem.
    public convenience init(loading path: URL, name: String? = nil) throws {
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
            guard !files.isEmpty || !caches.isEmpty else { throw ServiceError(404, "\(path.path) holds no service .gpkg files or tile caches") }
            self.init(try files.map { try SQLiteServiceBackend(url: $0) }, tileCaches: caches)
        } else if ["tpkx", "mbtiles"].contains(path.pathExtension.lowercased()) {
            self.init([], tileCaches: [path])
        } else {
            self.init([try SQLiteServiceBackend(url: path, name: name)])
        }
    }
}
