import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import OutpostCore
import OutpostREST
import OutpostStorage

/// Follows server-side jobs (async createReplica, exportTiles) over HTTP.
///
/// Failures to reach the server (refused or dropped connections, timeouts, 502/503/504 from a
/// proxy) are `RemoteJobUnreachable`, which `RemoteJob` tolerates for its connection-loss
/// window; any other answer that is not job status JSON fails the job.
public struct HTTPRemoteJobTransport: RemoteJobTransport {
    /// The requests' client; a poll that fails is not tried again here (`RemoteJob` rides out
    /// an outage for its window).
    let rest: RESTClient

    /// A transport that polls remote jobs over HTTP.
    /// - Parameters:
    ///   - client: the HTTP client (the process-wide shared one by default).
    ///   - timeout: per request.
    ///   - token: sent as `Authorization: Bearer` when the service needs one.
    public init(client: HTTPClient = .shared, timeout: Duration = .seconds(30), token: String? = nil) {
        rest = RESTClient(client: client, token: token, timeout: timeout, retries: .none)
    }

    public func status(at url: URL) async throws -> JSONValue {
        let reply = try await send(url: url, method: .GET)
        do {
            return try JSONValue.parse(reply.body)
        } catch {
            throw JobError(.remoteFailed, "the job status at \(url.absoluteString) is not JSON")
        }
    }

    public func cancel(at url: URL) async throws {
        _ = try await send(url: url, method: .POST)
    }

    /// ArcGIS endpoints answer HTML unless asked for JSON (`f=json`); network failures stay
    /// `RemoteJobUnreachable`, another answer outside 2xx fails the job.
    private func send(url: URL, method: HTTPMethod) async throws -> RESTClient.Reply {
        let reply = try await rest.send(method, RESTClient.withJSONFormat(url), limit: 16 << 20)
        guard (200..<300).contains(reply.status) else {
            throw JobError(.remoteFailed, "HTTP \(reply.status) from \(RESTClient.withJSONFormat(url).absoluteString): \(String(decoding: reply.body.prefix(300), as: UTF8.self))")
        }
        return reply
    }
}

extension JobRegistry {
    /// The standard jobs plus those that talk to servers, with `transport` for them.
    public static func withNetworkJobs(transport: any RemoteJobTransport = HTTPRemoteJobTransport()) -> JobRegistry {
        var registry = JobRegistry.standard
        registry.environment[(any RemoteJobTransport).self] = transport
        registry.register(CopyFileJob.self)
        registry.register(RemoteJob.self)
        return registry
    }
}
