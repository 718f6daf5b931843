import Foundation
import OutpostCore
import OutpostHTTPTestSupport
import OutpostREST
import Testing

/// The REST client against a real server on 127.0.0.1: what it sends, and how each kind of
/// answer comes back.
@Suite("The ArcGIS REST client")
struct RESTClientTests {
    /// The requests a server took.
    final class Seen: Sendable {
        private let requests = Locked<[LoopbackHTTPServer.Request]>([])
        func withLock<T>(_ body: (inout [LoopbackHTTPServer.Request]) -> T) -> T { requests.withLock { body(&$0) } }
    }

    /// A server answering `answer` for each request (given it and how many came so far).
    static func serve(_ answer: @escaping @Sendable (LoopbackHTTPServer.Request, Int) -> LoopbackHTTPServer.Response?) async throws
        -> (LoopbackHTTPServer, Seen)
    {
        let seen = Seen()
        let server = try await LoopbackHTTPServer.start { request in
            let count = seen.withLock { $0.append(request); return $0.count }
            return answer(request, count)
        }
        return (server, seen)
    }

    @Test func aGetAsksForJSONWithTheTokenAndAFormIsEncodedOneWay() async throws {
        let (server, seen) = try await Self.serve { _, _ in .json(#"{"ok":true}"#) }
        defer { Task { try? await server.stop() } }
        let client = RESTClient(token: "t0k3n")
        let url = server.baseURL.appendingPathComponent("arcgis/rest/services/x/GPServer")
        #expect(try await client.get(url)["ok"] == true)
        #expect(try await client.post(url, form: [("a b", "1+1=2&c"), ("where", "name = 'ö'")])["ok"] == true)
        let (get, post) = seen.withLock { ($0[0], $0[1]) }
        #expect(get.method == "GET" && get.query["f"] == "json")
        #expect(get.headers.contains { $0.0.lowercased() == "authorization" && $0.1 == "Bearer t0k3n" })
        // Names and values percent-encoded alike; the server reads back what was sent.
        #expect(String(decoding: post.body, as: UTF8.self) == "a%20b=1%2B1%3D2%26c&where=name%20%3D%20%27%C3%B6%27&f=json")
        #expect(RESTClient.formEncoded([("k~", "v-._~")]) == "k~=v-._~")
        // A query value with `+` is not read as a space.
        #expect(RESTClient.url(url, query: [("q", "a+b")]).query == "q=a%2Bb")
    }

    @Test func anArcGISErrorIsOneTypedErrorWhateverItsStatus() async throws {
        let (server, _) = try await Self.serve { request, _ in
            switch request.path {
            case "/ok200": .json(#"{"error":{"code":498,"message":"Invalid Token","details":["expired"]}}"#)
            case "/status400": .json(#"{"error":{"code":400,"message":"Unable to complete operation.","details":[]}}"#, status: 400)
            case "/html": LoopbackHTTPServer.Response(status: 200, body: Data("<html>".utf8), contentType: "text/html")
            default: .json(#"{"unexpected":true}"#, status: 404)
            }
        }
        defer { Task { try? await server.stop() } }
        let client = RESTClient()
        func failure(_ path: String) async -> ArcGISError? {
            do {
                _ = try await client.get(server.baseURL.appendingPathComponent(path))
                return nil
            } catch {
                return error as? ArcGISError
            }
        }
        #expect(await failure("ok200") == ArcGISError(code: 498, "Invalid Token", details: ["expired"]))
        #expect(await failure("status400")?.code == 400)
        #expect(await failure("html")?.message.contains("without JSON") == true)
        #expect(await failure("other")?.code == 404)
    }

    @Test func aReadIsTriedAgainAfterAProxysBadGatewayAndAWriteIsNot() async throws {
        let (server, seen) = try await Self.serve { request, count in
            count == 1 || request.method == "POST" ? .json("{}", status: 502) : .json(#"{"answer":42}"#)
        }
        defer { Task { try? await server.stop() } }
        let client = RESTClient(retries: .init(attempts: 3, backoff: .milliseconds(10)))
        #expect(try await client.get(server.baseURL)["answer"] == 42)
        #expect(seen.withLock { $0.count } == 2)
        await #expect(throws: RemoteJobUnreachable.self) { _ = try await client.post(server.baseURL, form: [("a", "1")]) }
        #expect(seen.withLock { $0.count } == 3, "a POST is sent once")
        // With no retries, the first 502 is the answer.
        let once = RESTClient(retries: .none)
        let (flaky, asked) = try await Self.serve { _, count in count == 1 ? .json("{}", status: 503) : .json("{}") }
        defer { Task { try? await flaky.stop() } }
        await #expect(throws: RemoteJobUnreachable.self) { _ = try await once.get(flaky.baseURL) }
        #expect(asked.withLock { $0.count } == 1)
    }

    @Test func aServerThatDoesNotAnswerIsUnreachableAndNotAskedAgainPastTheTimeout() async throws {
        // Nothing listens on port 1: the connection is refused.
        let refused = URL(string: "http://127.0.0.1:1/arcgis/rest/info")!
        let client = RESTClient(timeout: .seconds(1), retries: .init(attempts: 3, backoff: .milliseconds(10)))
        let error = await #expect(throws: RemoteJobUnreachable.self) { _ = try await client.get(refused) }
        #expect(error?.description.contains("cannot reach 127.0.0.1:1") == true, "\(String(describing: error))")
        // A server that takes the request and never answers uses up the timeout: one try.
        let (silent, asked) = try await LoopbackHTTPServer.startSilent()
        defer { Task { try? await silent.stop() } }
        await #expect(throws: RemoteJobUnreachable.self) { _ = try await client.get(silent.baseURL) }
        #expect(asked() == 1)
    }

    @Test func aDownloadContinuesWhereThePartialFileEnds() async throws {
        let content = Data((0..<100_000).map { UInt8($0 % 251) })
        let (server, seen) = try await Self.serve { request, _ in
            guard let range = request.headers.first(where: { $0.0.lowercased() == "range" })?.1,
                let from = Int(range.dropFirst(6).prefix { $0 != "-" })
            else { return LoopbackHTTPServer.Response(body: content, contentType: "application/octet-stream") }
            return LoopbackHTTPServer.Response(status: 206, body: content.suffix(from: from), contentType: "application/octet-stream")
        }
        defer { Task { try? await server.stop() } }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("rest-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let file = folder.appendingPathComponent("package.tpkx")
        try content.prefix(30_000).write(to: file)
        let held = Locked<Int64>(0)
        try await RESTClient().download(server.baseURL.appendingPathComponent("file"), to: file, resume: true) { received, _ in held.withLock { $0 = received } }
        #expect(try Data(contentsOf: file) == content)
        #expect(held.withLock { $0 } == 100_000)
        #expect(seen.withLock { $0.first?.headers.contains { $0.0.lowercased() == "range" && $0.1 == "bytes=30000-" } } == true)
        // A missing file is an ArcGIS error with the status, not a file of its error page.
        let (missing, _) = try await Self.serve { _, _ in .json(#"{"error":{"code":404,"message":"file gone"}}"#, status: 404) }
        defer { Task { try? await missing.stop() } }
        let other = folder.appendingPathComponent("other")
        await #expect(throws: ArcGISError(code: 404, "file gone")) { try await RESTClient().download(missing.baseURL, to: other) }
        #expect(!FileManager.default.fileExists(atPath: other.path) && !FileManager.default.fileExists(atPath: other.path + ".part"))
    }
}
