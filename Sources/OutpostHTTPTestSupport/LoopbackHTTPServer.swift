import Foundation
import Synchronization
import NIOCore
import NIOHTTP1
import NIOPosix

/// A scriptable HTTP server on 127.0.0.1 and a free port, for testing clients against real
/// sockets: the handler answers each request, returns nil to drop the connection without a
/// response (what a flaky field link or a restarting server does), or ``Response/held`` to keep
/// the connection open and never answer (a stalled link).
public final class LoopbackHTTPServer: Sendable {
    public struct Request: Sendable {
        public var method: String
        public var uri: String
        public var path: String
        public var query: [String: String]
        public var headers: [(String, String)]
        public var body: Data
    }

    public struct Response: Sendable {
        public var status: Int
        public var body: Data
        public var contentType: String
        /// No answer at all: the connection stays open until the client or the server closes it.
        public var isHeld = false

        public init(status: Int = 200, body: Data, contentType: String = "application/json") {
            self.status = status
            self.body = body
            self.contentType = contentType
        }

        /// The request is never answered.
        public static var held: Response {
            var response = Response(body: Data())
            response.isHeld = true
            return response
        }

        public static func json(_ text: String, status: Int = 200) -> Response {
            Response(status: status, body: Data(text.utf8))
        }
    }

    public typealias Handler = @Sendable (Request) -> Response?

    private let channel: any Channel
    private let heldClosed: HeldClosed
    public let port: Int

    public var baseURL: URL { URL(string: "http://127.0.0.1:\(port)")! }

    /// How many connections holding an unanswered request (``Response/held``) the client has
    /// closed: a client that cancels such a request closes its connection.
    public var heldConnectionsClosed: Int { heldClosed.count.load(ordering: .relaxed) }

    private init(channel: any Channel, heldClosed: HeldClosed, port: Int) {
        self.channel = channel
        self.heldClosed = heldClosed
        self.port = port
    }

    /// A server that takes every request and never answers (a peer gone silent), and how many
    /// requests it has taken so far.
    public static func startSilent() async throws -> (server: LoopbackHTTPServer, asked: @Sendable () -> Int) {
        let asked = Atomic<Int>(0)
        let server = try await start { _ in
            asked.add(1, ordering: .relaxed)
            return .held
        }
        return (server, { asked.load(ordering: .relaxed) })
    }

    /// Starts listening; stop with ``stop()``.
    public static func start(handler: @escaping Handler) async throws -> LoopbackHTTPServer {
        let heldClosed = HeldClosed()
        let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 64)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.pipeline.configureHTTPServerPipeline().flatMap {
                    channel.pipeline.addHandler(ScriptedHandler(handler: handler, heldClosed: heldClosed))
                }
            }
        let channel = try await bootstrap.bind(host: "127.0.0.1", port: 0).get()
        return LoopbackHTTPServer(channel: channel, heldClosed: heldClosed, port: channel.localAddress?.port ?? 0)
    }

    public func stop() async throws {
        try await channel.close()
    }
}

private final class HeldClosed: Sendable {
    let count = Atomic<Int>(0)
}

private final class ScriptedHandler: ChannelInboundHandler, @unchecked Sendable {
    // @unchecked: NIO calls a handler only on its channel's event loop.
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    let handler: LoopbackHTTPServer.Handler
    let heldClosed: HeldClosed
    var head: HTTPRequestHead?
    var body = Data()
    /// A request on this connection is held unanswered.
    var holding = false

    init(handler: @escaping LoopbackHTTPServer.Handler, heldClosed: HeldClosed) {
        self.handler = handler
        self.heldClosed = heldClosed
    }

    func channelInactive(context: ChannelHandlerContext) {
        if holding { heldClosed.count.add(1, ordering: .relaxed) }
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let h):
            head = h
            body = Data()
        case .body(var buffer):
            body.append(contentsOf: buffer.readBytes(length: buffer.readableBytes) ?? [])
        case .end:
            guard let head else { return }
            let components = URLComponents(string: head.uri)
            var query: [String: String] = [:]
            for item in components?.queryItems ?? [] { query[item.name] = item.value ?? "" }
            if head.method == .POST,
                head.headers["Content-Type"].first?.contains("application/x-www-form-urlencoded") == true,
                let text = String(data: body, encoding: .utf8)
            {
                for item in URLComponents(string: "?" + text)?.queryItems ?? [] { query[item.name] = item.value ?? "" }
            }
            let request = LoopbackHTTPServer.Request(
                method: head.method.rawValue, uri: head.uri, path: components?.path ?? head.uri, query: query,
                headers: head.headers.map { ($0.name, $0.value) }, body: body)
            guard let response = handler(request) else {
                context.close(promise: nil)
                return
            }
            if response.isHeld {
                self.head = nil
                holding = true
                return
            }
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: response.contentType)
            headers.add(name: "Content-Length", value: String(response.body.count))
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: .init(statusCode: response.status), headers: headers))), promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: response.body)))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            self.head = nil
        }
    }
}
