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
import OutpostTileCodecs

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
    /// Makes the server application for `services`, not yet listening.
    /// - Throws: ``ServiceError`` (500) when the TLS certificate or key cannot be read.
    /// - Parameter drain: run it in the same service group after the application to answer 503
    ///   to new requests while a graceful shutdown lets the ones in flight finish.
    /// - Parameter services: the services to serve.
    /// - Parameter configuration: the address, TLS, tokens, limits and logging.
    /// - Parameter onListening: called with the base URL once the server listens (with the port chosen when
    ///   the configuration asks for port 0).
    public static func make(
        services: ServiceDirectory, configuration: ServerConfiguration, drain: ServerDrain = ServerDrain(),
        onListening: @escaping @Sendable (String) async -> Void = { _ in }
    ) throws -> Application<FeatureServerResponder> {
        // Tile services and exports read and write JPEG and WebP.
        SystemTileCodecs.install()
        // Vector tiles made from the services' layers repair invalid polygons with GEOS.
        GEOSPolygonRepair.install()
        var logger = Logger(label: "outpost.server")
        logger.logLevel = configuration.logLevel
        let host = configuration.host
        let tls = try configuration.tls.map(Self.tlsConfiguration)
        let scheme = tls == nil ? "http" : "https"
        return Application(
            responder: FeatureServerResponder(services: services, configuration: configuration, drain: drain.state),
            server: try tls.map {
                try .http2Upgrade(tlsConfiguration: $0, configuration: .init(streamConfiguration: .init(additionalChannelHandlers: [ClientDeparture.Watch()])))
            }
                ?? .http1(configuration: .init(additionalChannelHandlers: [ClientDeparture.Watch()])),
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
