import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import OutpostCore

/// A GPServer answered with the ArcGIS error JSON, or not as a GPServer answers.
public struct GeoprocessingError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The HTTP status (or the error JSON's code).
    public var code: Int
    /// What went wrong, for a person.
    public var message: String
    /// More lines about it (may be empty).
    public var details: [String]

    /// An error of this code and message.
    public init(code: Int, _ message: String, details: [String] = []) {
        self.code = code
        self.message = message
        self.details = details
    }

    public var description: String { details.isEmpty ? message : "\(message) (\(details.joined(separator: "; ")))" }
}

/// How a ``GeoprocessingTask`` reaches its service. Network failures are
/// `RemoteJobUnreachable` (a polling job rides them out for a while); answers that will not
/// get better are ``GeoprocessingError``.
public protocol GPTransport: Sendable {
    /// GETs `url` (with `f=json`) and returns its JSON.
    func get(_ url: URL) async throws -> JSONValue
    /// POSTs `form` to `url` (with `f=json`) and returns the answer's JSON.
    func post(_ url: URL, form: [(String, String)]) async throws -> JSONValue
    /// `uploads/upload`: the file as multipart part `file`.
    func upload(_ url: URL, file: URL) async throws -> JSONValue
    /// An output file (`…/GPServer/files/…`) into `destination`.
    func download(_ url: URL, to destination: URL) async throws
}

/// ``GPTransport`` over HTTP (AsyncHTTPClient), with an optional token.
public struct HTTPGPTransport: GPTransport {
    let client: HTTPClient
    let token: String?
    let timeout: TimeAmount

    /// A transport over `client`, sending `token` as a bearer token; `timeout` bounds each request.
    public init(client: HTTPClient = .shared, token: String? = nil, timeout: Duration = .seconds(120)) {
        self.client = client
        self.token = token
        self.timeout = .nanoseconds(Int64(timeout.components.seconds) * 1_000_000_000 + timeout.components.attoseconds / 1_000_000_000)
    }

    public func get(_ url: URL) async throws -> JSONValue {
        try await send(Self.json(url), method: .GET, body: nil, contentType: nil)
    }

    public func post(_ url: URL, form: [(String, String)]) async throws -> JSONValue {
        let fields = (form.contains { $0.0 == "f" } ? form : form + [("f", "json")])
        return try await send(url, method: .POST, body: Data(Self.formEncoded(fields).utf8), contentType: "application/x-www-form-urlencoded")
    }

    public func upload(_ url: URL, file: URL) async throws -> JSONValue {
        let boundary = "outpost-\(UUID().uuidString)"
        let name = file.lastPathComponent.replacingOccurrences(of: "\"", with: "_")
        var body = Data("--\(boundary)\r\nContent-Disposition: form-data; name=\"f\"\r\n\r\njson\r\n".utf8)
        body += Data("--\(boundary)\r\nContent-Disposition: form-data; name=\"file\"; filename=\"\(name)\"\r\nContent-Type: application/octet-stream\r\n\r\n".utf8)
        body += try Data(contentsOf: file)
        body += Data("\r\n--\(boundary)--\r\n".utf8)
        return try await send(url, method: .POST, body: body, contentType: "multipart/form-data; boundary=\(boundary)")
    }

    public func download(_ url: URL, to destination: URL) async throws {
        var request = HTTPClientRequest(url: url.absoluteString)
        if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
        let response: HTTPClientResponse
        do {
            response = try await client.execute(request, timeout: timeout)
        } catch let error as CancellationError {
            throw error
        } catch {
            throw RemoteJobUnreachable("\(url.host ?? "server"): \(error)")
        }
        guard response.status.code == 200 else { throw GeoprocessingError(code: Int(response.status.code), "HTTP \(response.status.code) from \(url.absoluteString)") }
        // Streamed to a partial file, renamed when complete.
        let partial = destination.appendingPathExtension("part")
        _ = FileManager.default.createFile(atPath: partial.path, contents: nil)
        let handle = try FileHandle(forWritingTo: partial)
        do {
            for try await var chunk in response.body {
                if let bytes = chunk.readBytes(length: chunk.readableBytes) { try handle.write(contentsOf: bytes) }
            }
            try handle.close()
        } catch {
            try? handle.close()
            try? FileManager.default.removeItem(at: partial)
            throw RemoteJobUnreachable("\(url.host ?? "server"): \(error)")
        }
        try? FileManager.default.removeItem(at: destination)
        try FileManager.default.moveItem(at: partial, to: destination)
    }

    private func send(_ url: URL, method: HTTPMethod, body: Data?, contentType: String?) async throws -> JSONValue {
        var request = HTTPClientRequest(url: url.absoluteString)
        request.method = method
        request.headers.add(name: "Accept", value: "application/json")
        if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
        if let contentType { request.headers.add(name: "Content-Type", value: contentType) }
        if let body { request.body = .bytes(ByteBuffer(bytes: body)) }
        let response: HTTPClientResponse
        var buffer: ByteBuffer
        do {
            response = try await client.execute(request, timeout: timeout)
            buffer = try await response.body.collect(upTo: 512 << 20)
        } catch let error as CancellationError {
            throw error
        } catch {
            throw RemoteJobUnreachable("\(url.host ?? "server"): \(error)")
        }
        let code = Int(response.status.code)
        if [502, 503, 504].contains(code) { throw RemoteJobUnreachable("\(url.host ?? "server") answered HTTP \(code)") }
        let bytes = buffer.readBytes(length: buffer.readableBytes) ?? []
        guard let json = try? JSONValue.parse(Data(bytes)) else {
            throw GeoprocessingError(code: code, "\(url.absoluteString) answered HTTP \(code) without JSON")
        }
        // ArcGIS servers also answer errors with HTTP 200 and an error object.
        if let error = json["error"], !error.isNull {
            throw GeoprocessingError(
                code: Int(error["code"]?.integerValue ?? Int64(code)), error["message"]?.stringValue ?? "error",
                details: error["details"]?.arrayValue?.compactMap(\.stringValue) ?? [])
        }
        guard (200..<300).contains(code) else { throw GeoprocessingError(code: code, "HTTP \(code) from \(url.absoluteString)") }
        return json
    }

    static func json(_ url: URL) -> URL {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return url }
        var items = components.queryItems ?? []
        if !items.contains(where: { $0.name == "f" }) { items.append(URLQueryItem(name: "f", value: "json")) }
        components.queryItems = items
        return components.url ?? url
    }

    static func formEncoded(_ fields: [(String, String)]) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return fields.map { "\($0.0.addingPercentEncoding(withAllowedCharacters: allowed)!)=\($0.1.addingPercentEncoding(withAllowedCharacters: allowed)!)" }
            .joined(separator: "&")
    }
}
