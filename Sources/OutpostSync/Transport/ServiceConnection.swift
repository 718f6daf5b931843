import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import OutpostCore
import OutpostProtocol
import OutpostREST

/// HTTP to one feature service: its ArcGIS REST FeatureServer URL and, derived from it, the
/// native sync API (`…/outpost/v1/services/<name>`).
///
/// Network failures (refused or dropped connections, timeouts, 502/503/504) are
/// ``SyncError/Code/unreachable``; an ArcGIS error answer becomes ``SyncError`` with its status
/// and message.
public struct ServiceConnection: Sendable {
    /// The FeatureServer's ArcGIS REST URL.
    public let featureServerURL: URL
    /// `scheme://host:port[/prefix]/outpost/v1/services/<name>`.
    public let nativeURL: URL
    /// The requests' client: the token, the timeout. A request that fails to reach the server
    /// is not tried again here: the sync job resumes from what the server acknowledged.
    let rest: RESTClient

    /// A connection to the feature service at `featureServerURL`, with its native sync endpoint beside it.
    /// - Throws: ``SyncError/Code/unsupported`` when the URL is not `…/rest/services/<name>/FeatureServer`.
    public init(featureServerURL: URL, token: String? = nil, client: HTTPClient = ServiceConnection.defaultClient, timeout: Duration = .seconds(120)) throws {
        var path = featureServerURL.path
        while path.hasSuffix("/") { path.removeLast() }
        let parts = path.split(separator: "/").map(String.init)
        guard parts.count >= 4, parts.last == "FeatureServer", let servicesIndex = parts.lastIndex(of: "services"),
            servicesIndex >= 2, parts[servicesIndex - 1] == "rest", servicesIndex + 2 == parts.count - 1 || servicesIndex + 1 < parts.count - 1
        else {
            throw SyncError(.unsupported, "\(featureServerURL.absoluteString) is not a FeatureServer URL (…/rest/services/<name>/FeatureServer)")
        }
        let name = parts[parts.count - 2]
        let prefix = parts[..<(servicesIndex - 1)].dropLast(parts[servicesIndex - 2] == "arcgis" ? 1 : 0)
        var components = URLComponents(url: featureServerURL, resolvingAgainstBaseURL: false)!
        components.query = nil
        components.path = "/" + (Array(prefix) + NativeSyncRoute.servicePrefix + [name]).joined(separator: "/")
        components.percentEncodedQuery = nil
        self.nativeURL = components.url!
        components.path = "/" + parts.joined(separator: "/")
        self.featureServerURL = components.url!
        self.rest = RESTClient(client: client, token: token, timeout: timeout, retries: .none)
    }

    /// A process-wide client that accepts gzip-compressed answers (`RESTClient.defaultClient`).
    public static var defaultClient: HTTPClient { RESTClient.defaultClient }

    /// The service name in URLs.
    public var serviceName: String { featureServerURL.deletingLastPathComponent().lastPathComponent }

    /// An answer: status, headers and body.
    typealias Reply = RESTClient.Reply

    func url(_ base: URL, _ path: String, query: [(String, String)] = []) -> URL {
        RESTClient.url(path.isEmpty ? base : base.appendingPathComponent(path), query: query)
    }

    /// Sends a request and collects the answer (up to `limit` bytes).
    /// - Parameter stream: a body sent as it is made (chunked), in place of `body`.
    func send(
        _ method: HTTPMethod, _ url: URL, body: Data? = nil, stream: AsyncThrowingStream<ByteBuffer, any Error>? = nil, contentType: String? = nil,
        accept: String = "application/json", range: String? = nil, limit: Int = 256 << 20
    ) async throws -> Reply {
        do {
            return try await rest.send(
                method, url, body: body, stream: stream, contentType: contentType, accept: accept,
                headers: [("Accept-Encoding", "gzip")] + (range.map { [("Range", $0)] } ?? []), limit: limit)
        } catch let failure as RemoteJobUnreachable {
            throw SyncError(.unreachable, failure.description, status: Self.proxyStatus(failure))
        }
    }

    /// The status of a proxy's 502/503/504 named in an unreachable failure.
    private static func proxyStatus(_ failure: RemoteJobUnreachable) -> Int? {
        [502, 503, 504].first { failure.description.hasSuffix("answered HTTP \($0)") }
    }

    /// GET/POST that must succeed with JSON.
    func json(_ method: HTTPMethod, _ url: URL, form: [(String, String)]? = nil) async throws -> JSONValue {
        var body: Data?
        if let form { body = Data(RESTClient.formEncoded(form + [("f", "json")]).utf8) }
        let target = form == nil ? self.url(url, "", query: [("f", "json")]) : url
        let reply = try await send(method, target, body: body, contentType: form == nil ? nil : "application/x-www-form-urlencoded")
        guard (200..<300).contains(reply.status) else { throw Self.failure(reply, url: url) }
        let json = try reply.syncJSON()
        // ArcGIS reports some errors with HTTP 200 and an error object.
        if let error = ArcGISError(json: json, status: 500) { throw Self.failure(status: error.code, message: reply.errorMessage, url: url) }
        return json
    }

    static func failure(_ reply: Reply, url: URL) -> SyncError {
        failure(status: reply.status, message: reply.errorMessage, url: url)
    }

    static func failure(status: Int, message: String, url: URL) -> SyncError {
        switch status {
        case 404 where message.lowercased().contains("replica"):
            return SyncError(.notRegistered, "the replica is not registered on \(url.host ?? "the service"): \(message)", status: 404)
        case 409: return SyncError(.ledgerConflict, message, status: 409)
        default: return SyncError(.server, "HTTP \(status) from \(url.path): \(message)", status: status)
        }
    }

    /// Streams a file to disk (`to` is overwritten), reporting bytes received.
    func download(_ url: URL, to file: URL, progress: @Sendable (Int64, Int64?) -> Void) async throws {
        do {
            try await rest.download(url, to: file, progress: progress)
        } catch let failure as RemoteJobUnreachable {
            throw SyncError(.unreachable, failure.description)
        } catch let broken as BodyInterrupted {
            throw SyncError(.unreachable, "the download from \(url.host ?? "the server") broke off after \(broken.received) bytes (\(broken.reason))")
        } catch let error as ArcGISError {
            throw Self.failure(status: error.code, message: error.description, url: url)
        } catch let error as CocoaError {
            throw SyncError(.unsupported, "cannot write \(file.path) (\(error.localizedDescription))")
        }
    }
}

extension RESTClient.Reply {
    /// The body as JSON, for the sync client.
    /// - Throws: ``SyncError/Code/invalidResponse`` when it is not JSON.
    func syncJSON() throws -> JSONValue {
        do {
            return try JSONValue.parse(body)
        } catch {
            throw SyncError(.invalidResponse, "the server's answer is not JSON (HTTP \(status))")
        }
    }
}
