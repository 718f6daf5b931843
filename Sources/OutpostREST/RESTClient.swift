import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import OutpostCore

/// HTTP to ArcGIS REST services, the one way every Outpost client module talks to a server (the
/// sync task, geoprocessing, locators, routes, offline maps, remote jobs, tile sources).
///
/// A request carries the token as `Authorization: Bearer`, asks for JSON (`f=json`), encodes its
/// form one way, and is bounded by a timeout. What can go wrong comes back as two errors:
/// - `RemoteJobUnreachable` when the server could not be reached or a proxy in front of it
///   answered 502, 503 or 504 (a GET is tried again first, with back-off, per ``retries``,
///   while its timeout lasts);
/// - ``ArcGISError`` when the server answered with an error: the ArcGIS error object (any
///   status), or an answer that is not what a service answers.
///
/// Each module turns those into its own error where it has one (the sync task's `SyncError`,
/// an offline map's `OfflineMapError`).
public struct RESTClient: RESTTransport {
    /// The HTTP client requests go through.
    public let client: HTTPClient
    /// Sent as `Authorization: Bearer` with every request, when given.
    public let token: String?
    /// How long one request may take, its tries included.
    public let timeout: Duration
    /// How a GET that did not reach the server is tried again.
    public var retries: RetryPolicy

    /// A client over `client`, sending `token`, each request bounded by `timeout`.
    public init(client: HTTPClient = RESTClient.defaultClient, token: String? = nil, timeout: Duration = .seconds(120), retries: RetryPolicy = .standard) {
        self.client = client
        self.token = token
        self.timeout = timeout
        self.retries = retries
    }

    /// A process-wide client that accepts gzip-compressed answers (never shut down, like
    /// `HTTPClient.shared`).
    public static let defaultClient = HTTPClient(
        eventLoopGroupProvider: .singleton,
        configuration: HTTPClient.Configuration(decompression: .enabled(limit: .ratio(200))))

    /// How a request that did not reach the server is tried again.
    public struct RetryPolicy: Sendable, Hashable {
        /// Tries in all (1: never again).
        public var attempts: Int
        /// The wait before the second try; doubled before each further one.
        public var backoff: Duration

        /// `attempts` tries, waiting `backoff`, then twice as long, and so on.
        public init(attempts: Int, backoff: Duration) {
            self.attempts = max(1, attempts)
            self.backoff = backoff
        }

        /// Three tries, 250 ms then 500 ms apart: a dropped connection or a proxy's 502 during
        /// a restart does not fail a read.
        public static let standard = RetryPolicy(attempts: 3, backoff: .milliseconds(250))
        /// One try.
        public static let none = RetryPolicy(attempts: 1, backoff: .zero)
    }

    /// An answer: its status, headers and body.
    public struct Reply: Sendable {
        /// The HTTP status.
        public var status: Int
        /// The answer's headers.
        public var headers: HTTPHeaders
        /// The answer's body, whole.
        public var body: Data

        /// The body as JSON.
        /// - Throws: ``ArcGISError`` (the status as its code) when it is not JSON.
        public func json(from url: URL) throws -> JSONValue {
            do {
                return try JSONValue.parse(body)
            } catch {
                throw ArcGISError(code: status, "\(url.absoluteString) answered HTTP \(status) without JSON")
            }
        }

        /// The ArcGIS error object of the body, when it has one.
        public var arcGISError: ArcGISError? {
            (try? JSONValue.parse(body)).flatMap { ArcGISError(json: $0, status: status) }
        }

        /// What went wrong, for an error answer: the error object's message and first details,
        /// or the start of the body.
        public var errorMessage: String {
            guard let error = arcGISError else { return String(decoding: body.prefix(300), as: UTF8.self) }
            return error.details.isEmpty ? error.message : "\(error.message) (\(error.details.prefix(3).joined(separator: "; ")))"
        }
    }

    // MARK: - Requests

    /// A request to `url` with the token and, when given, these headers.
    public func request(_ method: HTTPMethod, _ url: URL, accept: String? = "application/json", headers: [(String, String)] = []) -> HTTPClientRequest {
        var request = HTTPClientRequest(url: url.absoluteString)
        request.method = method
        if let accept { request.headers.add(name: "Accept", value: accept) }
        if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        return request
    }

    /// Sends `request` and hands back the response with its body unread.
    ///
    /// ``timeout`` bounds the whole: a GET that a proxy refused (502/503/504) or whose
    /// connection broke is sent again after the policy's back-off while time remains. (The
    /// HTTP client itself keeps trying to connect until that deadline, so a server that is not
    /// there has used it up and is not asked again.)
    /// - Throws: `RemoteJobUnreachable` for a network failure or a proxy's 502/503/504,
    ///   `CancellationError` when cancelled.
    public func execute(_ request: HTTPClientRequest, url: URL) async throws -> HTTPClientResponse {
        let attempts = request.method == .GET || request.method == .HEAD ? retries.attempts : 1
        let deadline = NIODeadline.now() + Self.timeAmount(timeout)
        var wait = retries.backoff
        for attempt in 1...attempts {
            do {
                let response = try await client.execute(request, deadline: deadline)
                if [502, 503, 504].contains(response.status.code) {
                    throw RemoteJobUnreachable("\(Self.host(url)) answered HTTP \(response.status.code)")
                }
                return response
            } catch is CancellationError {
                throw CancellationError()
            } catch {
                let failure = error as? RemoteJobUnreachable ?? RemoteJobUnreachable("cannot reach \(Self.host(url)) (\(error))")
                guard attempt < attempts, NIODeadline.now() + Self.timeAmount(wait) < deadline else { throw failure }
                try await Task.sleep(for: wait)
                wait *= 2
            }
        }
        preconditionFailure("the loop returns or throws")
    }

    /// Sends a request and collects its answer (up to `limit` bytes), whatever its status.
    /// - Parameters:
    ///   - method: the HTTP method.
    ///   - url: where to (its query as given: nothing is added).
    ///   - body: the request's body, sent as `contentType` (JSON unless said).
    ///   - stream: a body sent as it is made (chunked), in place of `body`.
    ///   - contentType: the body's type.
    ///   - accept: the `Accept` header.
    ///   - headers: more headers (`Range`, `Accept-Encoding`).
    ///   - limit: the most bytes of answer taken.
    public func send(
        _ method: HTTPMethod, _ url: URL, body: Data? = nil, stream: AsyncThrowingStream<ByteBuffer, any Error>? = nil, contentType: String? = nil,
        accept: String = "application/json", headers: [(String, String)] = [], limit: Int = 256 << 20
    ) async throws -> Reply {
        var request = request(method, url, accept: accept, headers: headers)
        if let body {
            request.headers.add(name: "Content-Type", value: contentType ?? "application/json")
            request.body = .bytes(ByteBuffer(bytes: body))
        } else if let stream {
            request.headers.add(name: "Content-Type", value: contentType ?? "application/octet-stream")
            request.body = .stream(stream, length: .unknown)
        }
        let response = try await execute(request, url: url)
        var buffer: ByteBuffer
        do {
            buffer = try await response.body.collect(upTo: limit)
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            throw RemoteJobUnreachable("the answer from \(Self.host(url)) broke off (\(error))")
        }
        return Reply(status: Int(response.status.code), headers: response.headers, body: Data(buffer.readBytes(length: buffer.readableBytes) ?? []))
    }

    /// GETs `url` with `query` and `f=json` (POSTs `form` and `f=json` when a form is given) and
    /// returns the answer's JSON.
    /// - Throws: ``ArcGISError`` for an error answer, `RemoteJobUnreachable` when the server
    ///   cannot be reached.
    public func json(_ url: URL, query: [(String, String)] = [], form: [(String, String)]? = nil) async throws -> JSONValue {
        let reply: Reply
        if let form {
            let fields = form.contains { $0.0 == "f" } ? form : form + [("f", "json")]
            reply = try await send(
                .POST, Self.url(url, query: query), body: Data(Self.formEncoded(fields).utf8), contentType: "application/x-www-form-urlencoded")
        } else {
            reply = try await send(.GET, Self.withJSONFormat(Self.url(url, query: query)))
        }
        return try Self.checked(reply, url: url)
    }

    /// An answer's JSON, when it is a service's answer and not an error.
    public static func checked(_ reply: Reply, url: URL) throws -> JSONValue {
        let json = try reply.json(from: url)
        // ArcGIS servers also answer errors with HTTP 200 and an error object.
        if let error = ArcGISError(json: json, status: reply.status) { throw error }
        guard (200..<300).contains(reply.status) else { throw ArcGISError(code: reply.status, "HTTP \(reply.status) from \(url.absoluteString)") }
        return json
    }

    // MARK: - RESTTransport

    public func get(_ url: URL) async throws -> JSONValue { try await json(url) }

    public func post(_ url: URL, form: [(String, String)]) async throws -> JSONValue { try await json(url, form: form) }

    /// `uploads/upload` and the like: `file` as the multipart part `file`, with `f=json`.
    public func upload(_ url: URL, file: URL) async throws -> JSONValue {
        let boundary = "outpost-\(UUID().uuidString)"
        let body = MultipartForm.body(
            fields: [("f", "json")], file: MultipartForm.File(field: "file", filename: file.lastPathComponent, data: try Data(contentsOf: file)), boundary: boundary)
        return try Self.checked(try await send(.POST, url, body: body, contentType: "multipart/form-data; boundary=\(boundary)"), url: url)
    }

    /// Downloads `url` into `destination` through a partial file renamed when whole.
    public func download(_ url: URL, to destination: URL) async throws {
        let partial = destination.appendingPathExtension("part")
        try? FileManager.default.removeItem(at: partial)
        do {
            try await download(url, to: partial, progress: { _, _ in })
        } catch let broken as BodyInterrupted {
            try? FileManager.default.removeItem(at: partial)
            throw RemoteJobUnreachable("the download from \(Self.host(url)) broke off after \(broken.received) bytes (\(broken.reason))")
        }
        try? FileManager.default.removeItem(at: destination)
        try FileManager.default.moveItem(at: partial, to: destination)
    }

    /// Downloads `url` into `file`, a chunk at a time, reporting the bytes held so far and the
    /// whole size when known. With `resume`, a partial `file` continues where it ends (HTTP
    /// Range) when the server allows: `validator` is the `ETag` its bytes came with, sent as
    /// `If-Range` so a file that changed on the server comes back whole rather than spliced;
    /// `tagged` hears the `ETag` of the answer before its bytes are written.
    /// - Throws: ``ArcGISError`` for an answer other than the file, `RemoteJobUnreachable` when
    ///   the server cannot be reached, ``BodyInterrupted`` when the body stops before its end
    ///   (the bytes that came stay in `file`).
    public func download(
        _ url: URL, to file: URL, resume: Bool = false, validator: String? = nil, tagged: (String?) -> Void = { _ in },
        progress: @Sendable (Int64, Int64?) -> Void
    ) async throws {
        let had = resume ? (try? FileManager.default.attributesOfItem(atPath: file.path)[.size] as? Int64) ?? 0 : 0
        var headers: [(String, String)] = []
        if had > 0 {
            headers.append(("Range", "bytes=\(had)-"))
            if let validator { headers.append(("If-Range", validator)) }
        }
        let response = try await execute(request(.GET, url, accept: nil, headers: headers), url: url)
        let length = response.headers["Content-Length"].first.flatMap { Int64($0) }
        let start: Int64, total: Int64?
        switch response.status.code {
        case 206:
            (start, total) = (had, length.map { $0 + had })
        case 200:
            (start, total) = (0, length)
        case 416 where had > 0:
            // The file is already whole.
            progress(had, had)
            return
        default:
            var buffer = try await response.body.collect(upTo: 1 << 20)
            let reply = Reply(status: Int(response.status.code), headers: response.headers, body: Data(buffer.readBytes(length: buffer.readableBytes) ?? []))
            throw reply.arcGISError ?? ArcGISError(code: reply.status, "\(url.path) answered HTTP \(reply.status): \(reply.errorMessage)")
        }
        tagged(response.headers["ETag"].first)
        if start == 0 {
            guard FileManager.default.createFile(atPath: file.path, contents: nil) else { throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: file.path]) }
        }
        guard let handle = FileHandle(forWritingAtPath: file.path) else { throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: file.path]) }
        defer { try? handle.close() }
        try handle.seekToEnd()
        let received: Int64
        do {
            received = try await response.streamBody(to: handle, from: start) { progress($0, total) }
        } catch let broken as BodyInterrupted {
            try? handle.synchronize()
            throw broken
        }
        try handle.synchronize()
        if let total, received != total {
            throw BodyInterrupted(received: received, reason: "the answer ended after \(received) of \(total) bytes")
        }
    }

    // MARK: - URLs and forms

    /// `url` with `query` added to its own; `+` in a value is sent as `%2B` (form decoding
    /// would read it as a space).
    public static func url(_ url: URL, query: [(String, String)]) -> URL {
        guard !query.isEmpty, var components = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return url }
        components.queryItems = (components.queryItems ?? []) + query.map { URLQueryItem(name: $0.0, value: $0.1) }
        components.percentEncodedQuery = components.percentEncodedQuery?.replacingOccurrences(of: "+", with: "%2B")
        return components.url ?? url
    }

    /// `url` asking for JSON (`f=json`) unless it names a format: ArcGIS endpoints answer HTML
    /// otherwise.
    public static func withJSONFormat(_ url: URL) -> URL {
        guard let components = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return url }
        if (components.queryItems ?? []).contains(where: { $0.name == "f" }) { return url }
        return Self.url(url, query: [("f", "json")])
    }

    /// A form body (`application/x-www-form-urlencoded`): names and values percent-encoded
    /// alike, everything but letters, digits and `-._~`.
    public static func formEncoded(_ fields: [(String, String)]) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return fields.map { "\($0.0.addingPercentEncoding(withAllowedCharacters: allowed) ?? $0.0)=\($0.1.addingPercentEncoding(withAllowedCharacters: allowed) ?? "")" }
            .joined(separator: "&")
    }

    /// The host (and port) a message names.
    static func host(_ url: URL) -> String {
        (url.host ?? "the server") + (url.port.map { ":\($0)" } ?? "")
    }

    static func timeAmount(_ duration: Duration) -> TimeAmount {
        .nanoseconds(Int64(duration.components.seconds) * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000)
    }
}

/// How a task reaches an ArcGIS REST service: JSON answers, uploads and downloads. ``RESTClient``
/// is the one over HTTP; a test may hand in its own.
///
/// Network failures are `RemoteJobUnreachable` (a polling job rides them out for a while);
/// error answers, which will not get better, are ``ArcGISError``.
public protocol RESTTransport: Sendable {
    /// GETs `url` (with `f=json`) and returns its JSON.
    func get(_ url: URL) async throws -> JSONValue
    /// POSTs `form` to `url` (with `f=json`) and returns the answer's JSON.
    func post(_ url: URL, form: [(String, String)]) async throws -> JSONValue
    /// `uploads/upload`: the file as multipart part `file`.
    func upload(_ url: URL, file: URL) async throws -> JSONValue
    /// A file into `destination`.
    func download(_ url: URL, to destination: URL) async throws
}
