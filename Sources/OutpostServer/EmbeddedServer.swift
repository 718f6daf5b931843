import Foundation
import Logging
import ServiceLifecycle

/// The Outpost server running inside an app's own process: started with one call, stopped with
/// another, with no other import than `OutpostServer`.
///
/// ```swift
/// let services = try await ServiceDirectory(loading: URL(fileURLWithPath: "services/"))
/// let server = try await EmbeddedServer.start(services: services)
/// print("serving \(server.url)")
/// // …
/// await server.stop()   // stops listening, lets requests in flight finish, closes the files
/// ```
///
/// It listens on `configuration.host` (loopback by default) at `configuration.port`, 0 for a free
/// port (read it from ``url``). It installs no signal handlers: the app decides when to stop.
/// Cancelling the Task that awaits `start(services:configuration:drain:)` before the server
/// listens stops it and throws `CancellationError`.
public final class EmbeddedServer: Sendable {
    /// `http://<host>:<port>` (`https` with TLS).
    public let url: URL
    /// The services it serves.
    public let services: ServiceDirectory
    private let group: ServiceGroup
    private let task: Task<Void, any Error>
    private let closesServices: Bool

    private init(url: URL, services: ServiceDirectory, group: ServiceGroup, task: Task<Void, any Error>, closesServices: Bool) {
        self.url = url
        self.services = services
        self.group = group
        self.task = task
        self.closesServices = closesServices
    }

    /// Starts the server and returns once it listens.
    ///
    /// - Parameters:
    ///   - drain: answers 503 to new requests, and lets syncs that had begun finish, for its
    ///     period when ``stop()`` is called (none by default: a stop lets only the requests in
    ///     flight finish).
    ///   - closesServices: whether ``stop()`` closes the services' files once the server stopped.
    /// - Parameter services: the services to serve.
    /// - Parameter configuration: the address (127.0.0.1 and a free port by default), TLS, tokens and
    ///   limits.
    /// - Throws: ``ServiceError`` when the TLS files cannot be read; the listener's error when the
    ///   address cannot be bound; `CancellationError` when the calling Task is cancelled first.
    public static func start(
        services: ServiceDirectory, configuration: ServerConfiguration = ServerConfiguration(port: 0), drain: ServerDrain? = nil,
        closesServices: Bool = true
    ) async throws -> EmbeddedServer {
        let (listening, announce) = AsyncStream<String>.makeStream()
        let app = try OutpostApplication.make(services: services, configuration: configuration, drain: drain ?? ServerDrain()) { url in
            announce.yield(url)
            announce.finish()
        }
        var members: [ServiceGroupConfiguration.ServiceConfiguration] = [.init(service: app)]
        if let drain { members.append(.init(service: drain)) }
        let group = ServiceGroup(configuration: .init(services: members, logger: Logger(label: "outpost.server")))
        // When the server cannot start, its run ends without announcing: the wait below ends too.
        let responder = app.responder
        let task = Task {
            defer {
                announce.finish()
                responder.serverStopped()
            }
            try await group.run()
        }
        var address: String?
        await withTaskCancellationHandler {
            for await url in listening { address = url }
        } onCancel: {
            Task { await group.triggerGracefulShutdown() }
        }
        guard let address, let url = URL(string: address), !Task.isCancelled else {
            await group.triggerGracefulShutdown()
            let outcome = await task.result
            if closesServices { await services.closeAll() }
            if case .failure(let error) = outcome { throw error }
            if Task.isCancelled { throw CancellationError() }
            throw ServiceError(500, "the server stopped before it listened")
        }
        return EmbeddedServer(url: url, services: services, group: group, task: task, closesServices: closesServices)
    }

    /// The FeatureServer endpoint of the service `name`.
    public func featureServiceURL(named name: String) -> URL {
        url.appendingPathComponent("arcgis/rest/services/\(name)/FeatureServer")
    }

    /// Stops accepting connections, lets the requests in flight finish (after the drain's
    /// period, when it has one), then closes the services' files. The stopped server keeps
    /// nothing of itself alive: an app may start and stop servers as often as it likes.
    /// Calling it again waits for the same stop.
    public func stop() async {
        await group.triggerGracefulShutdown()
        _ = try? await task.value
        if closesServices { await services.closeAll() }
    }

    /// Waits until the server stops (``stop()`` from elsewhere, or a failure, which it throws).
    public func waitUntilStopped() async throws {
        try await task.value
    }
}
