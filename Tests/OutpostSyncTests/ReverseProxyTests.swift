import Foundation
import OutpostCore
import OutpostHTTPTestSupport
import OutpostServer
import OutpostServiceTestSupport
import OutpostStorage
import OutpostTestSupport
import Testing

@testable import OutpostSync

/// Behind a reverse proxy that connects to the server with the server's own Host: every URL the
/// server writes is the public one (from `Forwarded`, `X-Forwarded-*` or `--public-url`), so a
/// replica is created, downloaded and synced through the proxy and records the proxy's address.
@Suite("Behind a reverse proxy")
struct ReverseProxyTests {
    final class Seen: Sendable {
        let exchanges = Locked<[(method: String, uri: String, status: Int, response: String)]>([])
        func observe(_ method: String, _ uri: String, _ request: Data, _ status: Int, _ response: Data) {
            exchanges.withLock { $0.append((method, uri, status, String(decoding: response, as: UTF8.self))) }
        }
    }

    enum Setup: String, CaseIterable, CustomStringConvertible {
        /// X-Forwarded-Host/-Proto/-Prefix, the proxy serving the server under /gis.
        case xForwardedUnderAPrefix
        /// RFC 7239 Forwarded.
        case forwarded
        /// A proxy that says nothing; the server is told its public address (--public-url).
        case configuredPublicURL
        var description: String { rawValue }
    }

    @Test(.scaledTimeLimit(minutes: 2), arguments: Setup.allCases, BackendKind.syncing)
    func replicasAreMadeAndSyncedThroughTheProxy(setup: Setup, kind: BackendKind) async throws {
        let seen = Seen()
        let prefix = setup == .xForwardedUnderAPrefix ? "/gis" : ""
        let service = try await TestService.fieldInspection(kind)
        let forwarding: LoopbackProxy.Forwarding = setup == .xForwardedUnderAPrefix ? .xForwarded : setup == .forwarded ? .forwarded : .none
        // With --public-url the proxy's port must be known before the server starts: a free
        // port is found first and the proxy listens on it after; the port can be taken in
        // between (by the server itself, or a test running alongside), so that is tried again.
        var attempt = 0
        var started: (LiveService, LoopbackProxy)?
        while started == nil {
            var configuration = ServerConfiguration(port: 0)
            var proxyPort = 0
            if setup == .configuredPublicURL {
                let placeholder = try await LoopbackProxy.start(upstream: URL(string: "http://127.0.0.1:9")!) { _, _ in .forward }
                proxyPort = placeholder.port
                try await placeholder.stop()
                configuration.publicURL = URL(string: "http://127.0.0.1:\(proxyPort)")
            }
            let live = try await LiveService.start(service, configuration: configuration)
            do {
                let proxy = try await LoopbackProxy.start(upstream: live.baseURL, prefix: prefix, forwarding: forwarding, observer: seen.observe, port: proxyPort) { _, _ in .forward }
                started = (live, proxy)
            } catch where attempt < 5 && proxyPort != 0 {
                await live.stop()
                attempt += 1
            }
        }
        let (live, proxy) = started!
        let publicBase = "http://127.0.0.1:\(proxy.port)\(prefix)"
        let url = proxy.url(for: live.featureServerURL)
        #expect(url.absoluteString == "\(publicBase)/arcgis/rest/services/field_inspection/FeatureServer")

        let directory = TemporaryDirectory("outpost-proxy")
        let task = try GeodatabaseSyncTask(url: url)
        var parameters = try await task.makeDefaultGenerateGeodatabaseParameters(extent: nil)
        parameters.layerOptions = [.init(layerID: 0)]
        let generate = task.makeGenerateGeodatabaseJob(parameters: parameters, downloadFileURL: directory.file("crew.gpkg"))
        try generate.start()
        let replica = try await generate.output
        let state = try #require(try await replica.read { try $0.replicaState() })
        #expect(state.serviceURL == url.absoluteString, "the replica syncs through the address the client used")

        // The server's answers name the public address only: job status, result file.
        let answers = seen.exchanges.withLock { $0 }.map(\.response).joined(separator: "\n")
        #expect(answers.contains("\"statusUrl\":\"\(publicBase)/arcgis/rest/services/field_inspection/FeatureServer/jobs/"), "\(answers.prefix(600))")
        #expect(answers.contains("\(publicBase)/arcgis/rest/services/field_inspection/FeatureServer/replicafiles/"))
        #expect(!answers.contains(live.baseURL.absoluteString), "no answer names the server's own address")

        let points = try replica.table(named: "inspection_points")
        var feature = try #require(try await points.feature(objectID: 1))
        feature.attributes = ["notes": .string("through the proxy")]
        try await points.update([feature])
        let sync = try GeodatabaseSyncTask(url: URL(string: state.serviceURL)!).makeSyncGeodatabaseJob(parameters: SyncGeodatabaseParameters(), geodatabase: replica)
        try sync.start()
        let results = try await sync.output
        #expect(results.allSatisfy { $0.checksumMatches == true })
        #expect(seen.exchanges.withLock { $0 }.contains { $0.method == "PUT" && $0.uri.contains("/batches/") && $0.status == 200 })
        #expect(try await service.backend.features(layerID: 0, query: FeatureQuery(objectIDs: [1])).first?.attributes["notes"] == .string("through the proxy"))
        try replica.close()
        try await proxy.stop()
        await live.stop()
        try await service.backend.close()
    }
}
