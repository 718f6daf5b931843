import Foundation
import OutpostServer

/// The feature service running in this process on 127.0.0.1 (a free port), reached over real
/// HTTP, for tests that need a server but not a separate process.
public final class LiveService: Sendable {
    public let service: TestService
    /// `http://127.0.0.1:<port>`.
    public var baseURL: URL { server.url }
    private let server: EmbeddedServer

    private init(service: TestService, server: EmbeddedServer) {
        self.service = service
        self.server = server
    }

    public static func start(_ service: TestService, configuration: ServerConfiguration = ServerConfiguration(port: 0)) async throws -> LiveService {
        var configuration = configuration
        configuration.port = 0
        // The test's service outlives the server: the test closes it.
        let server = try await EmbeddedServer.start(services: ServiceDirectory([service.backend]), configuration: configuration, closesServices: false)
        return LiveService(service: service, server: server)
    }

    /// `…/arcgis/rest/services/<name>/FeatureServer`.
    public var featureServerURL: URL {
        baseURL.appendingPathComponent("arcgis/rest/services/\(service.backend.name)/FeatureServer")
    }

    /// Stops accepting connections and waits for requests in flight.
    public func stop() async {
        await server.stop()
    }
}
