import Foundation
import Logging
import OutpostServer
import ServiceLifecycle

/// The feature service running in this process on 127.0.0.1 (a free port), reached over real
/// HTTP, for tests that need a server but not a separate process.
public final class LiveService: Sendable {
    public let service: TestService
    /// `http://127.0.0.1:<port>`.
    public let baseURL: URL
    private let task: Task<Void, any Error>
    private let group: ServiceGroup

    private init(service: TestService, baseURL: URL, task: Task<Void, any Error>, group: ServiceGroup) {
        self.service = service
        self.baseURL = baseURL
        self.task = task
        self.group = group
    }

    public static func start(_ service: TestService, configuration: ServerConfiguration = ServerConfiguration(port: 0)) async throws -> LiveService {
        var configuration = configuration
        configuration.port = 0
        let (stream, continuation) = AsyncStream<String>.makeStream()
        let app = try OutpostApplication.make(services: ServiceDirectory([service.backend]), configuration: configuration) { url in
            continuation.yield(url)
            continuation.finish()
        }
        let group = ServiceGroup(configuration: .init(services: [app], logger: Logger(label: "outpost.test")))
        let task = Task { try await group.run() }
        for await url in stream {
            return LiveService(service: service, baseURL: URL(string: url)!, task: task, group: group)
        }
        task.cancel()
        throw CancellationError()
    }

    /// `…/arcgis/rest/services/<name>/FeatureServer`.
    public var featureServerURL: URL {
        baseURL.appendingPathComponent("arcgis/rest/services/\(service.backend.name)/FeatureServer")
    }

    /// Stops accepting connections and waits for requests in flight.
    public func stop() async {
        await group.triggerGracefulShutdown()
        _ = try? await task.value
    }
}
