import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import OutpostCore
import OutpostSync

/// The few HTTP requests an offline map makes besides those of the sync and tile tasks: map
/// definitions and service descriptions (JSON), and files downloaded with resume.
struct OfflineHTTP: Sendable {
    var token: String?
    var client: HTTPClient = ServiceConnection.defaultClient
    var timeout: TimeAmount = .seconds(120)

    private func request(_ url: URL) -> HTTPClientRequest {
        var request = HTTPClientRequest(url: url.absoluteString)
        if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
        return request
    }

    /// GET with `f=json`; an ArcGIS error answer (any status) is an error.
    func json(_ url: URL, query: [(String, String)] = []) async throws -> JSONValue {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false) else {
            throw OfflineMapError(.invalidMap, "\(url.absoluteString) is not a URL")
        }
        components.queryItems = (components.queryItems ?? []) + (query + [("f", "json")]).map { URLQueryItem(name: $0.0, value: $0.1) }
        components.percentEncodedQuery = components.percentEncodedQuery?.replacingOccurrences(of: "+", with: "%2B")
        let target = components.url ?? url
        let body: Data
        let status: UInt
        do {
            let response = try await client.execute(request(target), timeout: timeout)
            var buffer = try await response.body.collect(upTo: 64 << 20)
            body = Data(buffer.readBytes(length: buffer.readableBytes) ?? [])
            status = response.status.code
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            throw OfflineMapError(.service, "cannot reach \(url.host ?? "the server") for \(url.path) (\(error))")
        }
        guard let json = try? JSONValue.parse(body) else {
            throw OfflineMapError(.service, "\(url.path) answered HTTP \(status) without JSON")
        }
        if let error = json["error"], !error.isNull {
            let details = error["details"]?.arrayValue?.compactMap(\.stringValue) ?? []
            throw OfflineMapError(
                .service, "\(url.path): \(error["message"]?.stringValue ?? "error")" + (details.isEmpty ? "" : " (\(details.joined(separator: "; ")))"))
        }
        guard (200..<300).contains(status) else { throw OfflineMapError(.service, "\(url.path) answered HTTP \(status)") }
        return json
    }

    /// Downloads `url` into `file`, continuing a partial file where it ends (HTTP Range) when
    /// the server allows; reports bytes held so far. `validator` is the `ETag` the partial file's
    /// bytes came with: sent as `If-Range`, so a file that changed on the server comes back whole
    /// rather than spliced; `tagged` hears the `ETag` of each answer before its bytes are written.
    func download(
        _ url: URL, to file: URL, validator: String? = nil, tagged: (String?) -> Void = { _ in }, progress: @Sendable (Int64, Int64?) -> Void
    ) async throws {
        let had = (try? FileManager.default.attributesOfItem(atPath: file.path)[.size] as? Int64) ?? 0
        var request = request(url)
        if had > 0 {
            request.headers.add(name: "Range", value: "bytes=\(had)-")
            if let validator { request.headers.add(name: "If-Range", value: validator) }
        }
        let response: HTTPClientResponse
        do {
            response = try await client.execute(request, timeout: timeout)
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            throw OfflineMapError(.service, "cannot reach \(url.host ?? "the server") for \(url.path) (\(error))")
        }
        let start: Int64
        let total: Int64?
        let length = response.headers["Content-Length"].first.flatMap { Int64($0) }
        if [200, 206].contains(response.status.code) { tagged(response.headers["ETag"].first) }
        switch response.status.code {
        case 206:
            start = had
            total = length.map { $0 + had }
        case 200:
            start = 0
            total = length
            guard FileManager.default.createFile(atPath: file.path, contents: nil) else { throw OfflineMapError(.service, "cannot write \(file.path)") }
        case 416 where had > 0:
            // The file is already whole.
            progress(had, had)
            return
        default:
            var buffer = try await response.body.collect(upTo: 1 << 20)
            let text = buffer.readString(length: min(buffer.readableBytes, 300)) ?? ""
            throw OfflineMapError(.service, "\(url.path) answered HTTP \(response.status.code): \(text)")
        }
        guard let handle = FileHandle(forWritingAtPath: file.path) else { throw OfflineMapError(.service, "cannot write \(file.path)") }
        defer { try? handle.close() }
        try handle.seekToEnd()
        let received: Int64
        do {
            received = try await response.streamBody(to: handle, from: start) { progress($0, total) }
        } catch let broken as BodyInterrupted {
            try? handle.synchronize()
            throw OfflineMapError(.service, "the download of \(url.path) broke off after \(broken.received) bytes; it continues from there (\(broken.reason))")
        }
        try handle.synchronize()
        if let total, received != total {
            throw OfflineMapError(.service, "the download of \(url.path) ended after \(received) of \(total) bytes; it continues from there")
        }
    }
}
