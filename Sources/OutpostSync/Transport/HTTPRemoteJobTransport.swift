import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import OutpostCore
import OutpostStorage

/// Follows server-side jobs (async createReplica, exportTiles) over HTTP.
///
/// Failures to reach the server (refused or dropped connections, timeouts, 502/503/504 from a
/// proxy) are `RemoteJobUnreachable`, which `RemoteJob` tolerates for its connection-loss
/// window; any other answer that is not job status JSON fails the job.
public struct HTTPRemoteJobTransport: RemoteJobTransport {
    let client: HTTPClient
    let timeout: TimeAmount
    let token: String?

    /// A transport that polls remote jobs over HTTP.
    /// - Parameters:
    ///   - client: the HTTP client (the process-wide shared one by default).
    ///   - timeout: per request.
    ///   - token: sent as `Authorization: Bearer` when the service needs one.
    public init(client: HTTPClient = .shared, timeout: Duration = .seconds(30), token: String? = nil) {
        self.client = client
        self.timeout = .nanoseconds(Int64(timeout.components.seconds) * 1_000_000_000 + timeout.components.attoseconds / 1_000_000_000)
        self.token = token
    }

    public func status(at url: URL) async throws -> JSONValue {
        let body = try await send(url: Self.withJSONFormat(url), method: .GET)
        do {
            return try JSONValue.parse(body)
        } catch {
            throw JobError(.remoteFailed, "the job status at \(url.absoluteString) is not JSON")
        }
    }

    public func cancel(at url: URL) async throws {
        _ = try await send(url: Self.withJSONFormat(url), method: .POST)
    }

    private func send(url: URL, method: HTTPMethod) async throws -> Data {
        var request = HTTPClientRequest(url: url.absoluteString)
        request.method = method
        request.headers.add(name: "Accept", value: "application/json")
        if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
        let response: HTTPClientResponse
        var buffer: ByteBuffer
        do {
            response = try await client.execute(request, timeout: timeout)
            buffer = try await response.body.collect(upTo: 16 << 20)
        } catch let error as CancellationError {
            throw error
        } catch {
            throw RemoteJobUnreachable("\(url.host ?? "server"): \(error)")
        }
        switch response.status.code {
        case 200..<300:
            return Data(buffer.readBytes(length: buffer.readableBytes) ?? [])
        case 502, 503, 504:
            throw RemoteJobUnreachable("\(url.host ?? "server") answered HTTP \(response.status.code)")
        default:
            let text = buffer.readString(length: min(buffer.readableBytes, 300)) ?? ""
            throw JobError(.remoteFailed, "HTTP \(response.status.code) from \(url.absoluteString): \(text)")
        }
    }

    /// ArcGIS endpoints answer HTML unless asked for JSON.
    static func withJSONFormat(_ url: URL) -> URL {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return url }
        var items = components.queryItems ?? []
        if !items.contains(where: { $0.name == "f" }) { items.append(URLQueryItem(name: "f", value: "json")) }
        components.queryItems = items
        return components.url ?? url
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
