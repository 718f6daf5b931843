import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import OutpostCore
import OutpostProtocol

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
    let client: HTTPClient
    let token: String?
    let timeout: TimeAmount

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
        self.client = client
        self.token = token
        self.timeout = .nanoseconds(Int64(timeout.components.seconds) * 1_000_000_000 + timeout.components.attoseconds / 1_000_000_000)
    }

    /// A process-wide client that accepts gzip-compressed answers (never shut down, like
    /// `HTTPClient.shared`).
    public static let defaultClient = HTTPClient(
        eventLoopGroupProvider: .singleton,
        configuration: HTTPClient.Configuration(decompression: .enabled(limit: .ratio(200))))

    /// The service name in URLs.
    public var serviceName: String { featureServerURL.deletingLastPathComponent().lastPathComponent }

    /// An answer: status and body.
    struct Reply: Sendable {
        var status: Int
        var body: Data

        func json() throws -> JSONValue {
            do {
                return try JSONValue.parse(body)
            } catch {
                throw SyncError(.invalidResponse, "the server's answer is not JSON (HTTP \(status))")
            }
        }

        /// The ArcGIS error message of an error answer.
        var errorMessage: String {
            guard let json = try? JSONValue.parse(body), let error = json["error"] else {
                return String(decoding: body.prefix(300), as: UTF8.self)
            }
            let message = error["message"]?.stringValue ?? "error"
            let details = error["details"]?.arrayValue?.compactMap(\.stringValue) ?? []
            return details.isEmpty ? message : "\(message) (\(details.prefix(3).joined(separator: "; ")))"
        }
    }

    func url(_ base: URL, _ path: String, query: [(String, String)] = []) -> URL {
        var components = URLComponents(url: path.isEmpty ? base : base.appendingPathComponent(path), resolvingAgainstBaseURL: false)!
        if !query.isEmpty { components.queryItems = query.map { URLQueryItem(name: $0.0, value: $0.1) } }
        // `+` in a query value would be read as a space by form decoding.
        components.percentEncodedQuery = components.percentEncodedQuery?.replacingOccurrences(of: "+", with: "%2B")
        return components.url!
    }

    /// Sends a request and collects the answer (up to `limit` bytes).
    /// - Parameter stream: a body sent as it is made (chunked), in place of `body`.
    func send(
        _ method: HTTPMethod, _ url: URL, body: Data? = nil, stream: AsyncThrowingStream<ByteBuffer, any Error>? = nil, contentType: String? = nil,
        accept: String = "application/json", range: String? = nil, limit: Int = 256 << 20
    ) async throws -> Reply {
        var request = HTTPClientRequest(url: url.absoluteString)
        request.method = method
        request.headers.add(name: "Accept", value: accept)
        if let range { request.headers.add(name: "Range", value: range) }
        request.headers.add(name: "Accept-Encoding", value: "gzip")
        if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
        if let body {
            request.headers.add(name: "Content-Type", value: contentType ?? "application/json")
            request.body = .bytes(ByteBuffer(bytes: body))
        } else if let stream {
            request.headers.add(name: "Content-Type", value: contentType ?? "application/octet-stream")
            request.body = .stream(stream, length: .unknown)
        }
        do {
            let response = try await client.execute(request, timeout: timeout)
            var buffer = try await response.body.collect(upTo: limit)
            let data = Data(buffer.readBytes(length: buffer.readableBytes) ?? [])
            let status = Int(response.status.code)
            if [502, 503, 504].contains(status) {
                throw SyncError(.unreachable, "\(url.host ?? "the server") answered HTTP \(status)", status: status)
            }
            return Reply(status: status, body: data)
        } catch let error as SyncError {
            throw error
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            throw SyncError(.unreachable, "cannot reach \(url.host ?? "the server"):\(url.port.map(String.init) ?? "") (\(error))")
        }
    }

    /// GET/POST that must succeed with JSON.
    func json(_ method: HTTPMethod, _ url: URL, form: [(String, String)]? = nil) async throws -> JSONValue {
        var body: Data?
        if let form { body = Data(Self.formEncoded(form + [("f", "json")]).utf8) }
        let target = form == nil ? self.url(url, "", query: [("f", "json")]) : url
        let reply = try await send(method, target, body: body, contentType: form == nil ? nil : "application/x-www-form-urlencoded")
        guard (200..<300).contains(reply.status) else { throw Self.failure(reply, url: url) }
        let json = try reply.json()
        // ArcGIS reports some errors with HTTP 200 and an error object.
        if let error = json["error"], !error.isNull { throw Self.failure(Reply(status: Int(error["code"]?.integerValue ?? 500), body: reply.body), url: url) }
        return json
    }

    static func failure(_ reply: Reply, url: URL) -> SyncError {
        let message = reply.errorMessage
        switch reply.status {
        case 404 where message.lowercased().contains("replica"):
            return SyncError(.notRegistered, "the replica is not registered on \(url.host ?? "the service"): \(message)", status: 404)
        case 409: return SyncError(.ledgerConflict, message, status: 409)
        default: return SyncError(.server, "HTTP \(reply.status) from \(url.path): \(message)", status: reply.status)
        }
    }

    static func formEncoded(_ fields: [(String, String)]) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return fields.map { "\($0.0)=\($0.1.addingPercentEncoding(withAllowedCharacters: allowed) ?? "")" }.joined(separator: "&")
    }

    /// Streams a file to disk (`to` is overwritten), reporting bytes received.
    func download(_ url: URL, to file: URL, progress: @Sendable (Int64, Int64?) -> Void) async throws {
        var request = HTTPClientRequest(url: url.absoluteString)
        if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
        guard FileManager.default.createFile(atPath: file.path, contents: nil), let handle = FileHandle(forWritingAtPath: file.path) else {
            throw SyncError(.unsupported, "cannot write \(file.path)")
        }
        defer { try? handle.close() }
        let response: HTTPClientResponse
        do {
            response = try await client.execute(request, timeout: timeout)
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            throw SyncError(.unreachable, "cannot reach \(url.host ?? "the server") (\(error))")
        }
        guard response.status.code == 200 else {
            var buffer = try await response.body.collect(upTo: 1 << 20)
            throw Self.failure(Reply(status: Int(response.status.code), body: Data(buffer.readBytes(length: buffer.readableBytes) ?? [])), url: url)
        }
        let total = response.headers["Content-Length"].first.flatMap { Int64($0) }
        let received: Int64
        do {
            received = try await response.streamBody(to: handle) { progress($0, total) }
        } catch let broken as BodyInterrupted {
            throw SyncError(.unreachable, "the download from \(url.host ?? "the server") broke off after \(broken.received) bytes (\(broken.reason))")
        }
        try handle.synchronize()
        if let total, received != total {
            throw SyncError(.unreachable, "the download from \(url.host ?? "the server") ended after \(received) of \(total) bytes")
        }
    }
}
