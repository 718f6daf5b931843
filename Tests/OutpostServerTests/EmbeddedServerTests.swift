import Foundation
import OutpostServer
import OutpostStorage
import OutpostServiceTestSupport
import OutpostTestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The server in an app's own process, through ``EmbeddedServer`` alone: start, serve over real
/// HTTP, stop cleanly; a taken port and a cancelled start are errors the caller sees.
@Suite("Embedded server")
struct EmbeddedServerTests {
    @Test(.scaledTimeLimit(minutes: 1))
    func startsServesAndStops() async throws {
        let service = try await TestService.fieldInspection(.sqlite)
        let server = try await EmbeddedServer.start(services: ServiceDirectory([service.backend]))
        #expect(server.url.scheme == "http" && server.url.host == "127.0.0.1" && server.url.port != 0)
        let query = server.featureServiceURL(named: "field_inspection").appendingPathComponent("0/query")
        var components = URLComponents(url: query, resolvingAgainstBaseURL: false)!
        components.queryItems = [.init(name: "where", value: "1=1"), .init(name: "returnCountOnly", value: "true"), .init(name: "f", value: "json")]
        let session = URLSession(configuration: .ephemeral)
        let (body, response) = try await session.data(from: components.url!)
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        let count = try JSONSerialization.jsonObject(with: body) as? [String: Any]
        #expect((count?["count"] as? Int ?? 0) > 0, "\(String(decoding: body, as: UTF8.self))")

        await server.stop()
        // Stopped: nothing listens there any more, and the service's file was closed.
        await #expect(throws: (any Error).self) { _ = try await session.data(from: components.url!) }
        try await server.waitUntilStopped()
        await server.stop()  // a second stop waits for the same one
        withExtendedLifetime(service) {}
    }

    /// An app that starts and stops servers keeps none of them: each held its routes, its
    /// services and its jobs in a cycle (1.2 MB a server in the property runs, 6.4 GB over
    /// 5,530 of them).
    @Test(.scaledTimeLimit(minutes: 1))
    func aStoppedServerLetsGoOfItsServices() async throws {
        let service = try await TestService.fieldInspection(.sqlite)
        weak var directory: ServiceDirectory?
        do {
            let services = ServiceDirectory([service.backend])
            directory = services
            let server = try await EmbeddedServer.start(services: services, closesServices: false)
            let info = server.featureServiceURL(named: "field_inspection").appending(queryItems: [.init(name: "f", value: "json")])
            let (_, response) = try await URLSession(configuration: .ephemeral).data(from: info)
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
            await server.stop()
        }
        #expect(directory == nil, "the stopped server still holds its services")
        try await service.backend.close()
    }

    @Test(.scaledTimeLimit(minutes: 1))
    func aTakenPortIsAnErrorNotAHang() async throws {
        let service = try await TestService.fieldInspection(.sqlite)
        let first = try await EmbeddedServer.start(services: ServiceDirectory([service.backend]), closesServices: false)
        let taken = try #require(first.url.port)
        await #expect(throws: (any Error).self) {
            _ = try await EmbeddedServer.start(services: ServiceDirectory([service.backend]), configuration: ServerConfiguration(port: taken), closesServices: false)
        }
        await first.stop()
        try await service.backend.close()
    }

    @Test(.scaledTimeLimit(minutes: 1))
    func aStartWhoseTaskIsCancelledStopsTheServer() async throws {
        let service = try await TestService.fieldInspection(.sqlite)
        let starting = Task {
            // Cancelled before it starts: the server may come up, but the start stops it.
            withUnsafeCurrentTask { $0?.cancel() }
            return try await EmbeddedServer.start(services: ServiceDirectory([service.backend]), closesServices: false)
        }
        await #expect(throws: CancellationError.self) { _ = try await starting.value }
        // The service is still the test's, and usable.
        #expect(try await service.backend.count(layerID: 0, query: FeatureQuery()) > 0)
        try await service.backend.close()
    }
}
