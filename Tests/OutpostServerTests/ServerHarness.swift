import Foundation
import Hummingbird
import HummingbirdTesting
import NIOCore
import OutpostCore
import OutpostServer
import OutpostTestSupport
import OutpostServiceTestSupport

/// Runs requests against the server in process (Hummingbird's router test framework).
struct Client {
    let client: any TestClientProtocol

    struct Reply {
        var status: Int
        var headers: HTTPFields
        var body: ByteBuffer

        var text: String { String(buffer: body) }
        func json() throws -> JSONValue { try JSONValue.parse(Data(text.utf8)) }
        /// The ArcGIS error message, when the reply is an error.
        var errorMessage: String? { (try? json())?["error"]?["message"]?.stringValue }
        /// The ArcGIS error JSON's code (498/499 for tokens, else the HTTP status).
        var errorCode: JSONValue? { (try? json())?["error"]?["code"] }
    }

    func get(_ uri: String, headers: HTTPFields = [:]) async throws -> Reply {
        try await client.execute(uri: uri, method: .get, headers: headers) { Reply(status: Int($0.status.code), headers: $0.headers, body: $0.body) }
    }

    /// POSTs form fields (application/x-www-form-urlencoded), as ArcGIS clients do.
    func post(_ uri: String, _ form: [String: String], headers: HTTPFields = [:]) async throws -> Reply {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        let body = form.map { "\($0.key)=\($0.value.addingPercentEncoding(withAllowedCharacters: allowed)!)" }.joined(separator: "&")
        var h = headers
        h[.contentType] = "application/x-www-form-urlencoded"
        return try await client.execute(uri: uri, method: .post, headers: h, body: ByteBuffer(string: body)) {
            Reply(status: Int($0.status.code), headers: $0.headers, body: $0.body)
        }
    }

    func put(_ uri: String, json: Data, headers: HTTPFields = [:]) async throws -> Reply {
        var h = headers
        h[.contentType] = "application/json"
        return try await client.execute(uri: uri, method: .put, headers: h, body: ByteBuffer(bytes: json)) {
            Reply(status: Int($0.status.code), headers: $0.headers, body: $0.body)
        }
    }

    func delete(_ uri: String, headers: HTTPFields = [:]) async throws -> Reply {
        try await client.execute(uri: uri, method: .delete, headers: headers) { Reply(status: Int($0.status.code), headers: $0.headers, body: $0.body) }
    }

    func post(_ uri: String, body: ByteBuffer, contentType: String, headers: HTTPFields = [:]) async throws -> Reply {
        var h = headers
        h[.contentType] = contentType
        return try await client.execute(uri: uri, method: .post, headers: h, body: body) {
            Reply(status: Int($0.status.code), headers: $0.headers, body: $0.body)
        }
    }
}

/// A service on one backend with the server in front of it.
func withServer<T: Sendable>(
    _ kind: BackendKind, configuration: ServerConfiguration = ServerConfiguration(port: 0), drain: ServerDrain = ServerDrain(), maps: [URL] = [],
    _ body: @Sendable (Client, TestService) async throws -> T
) async throws -> T {
    let service = try await TestService.fieldInspection(kind)
    let app = try OutpostApplication.make(services: ServiceDirectory([service.backend], maps: maps), configuration: configuration, drain: drain)
    let result = try await app.test(.router) { client in try await body(Client(client: client), service) }
    try await service.backend.close()
    return result
}

let base = "/arcgis/rest/services/field_inspection/FeatureServer"

/// Query-string encoding for test URIs.
func q(_ text: String) -> String {
    var allowed = CharacterSet.alphanumerics
    allowed.insert(charactersIn: "-._~")
    return text.addingPercentEncoding(withAllowedCharacters: allowed)!
}
