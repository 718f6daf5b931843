import AsyncHTTPClient
import Foundation
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import NIOPosix

/// An HTTP proxy on 127.0.0.1 in front of a real server that can lose messages on purpose:
/// drop a request before the server sees it, or forward it and drop the server's response after
/// the server has acted on it (the "lost acknowledgement" every exactly-once claim must survive).
public final class LoopbackProxy: Sendable {
    public enum Action: Sendable {
        case forward
        /// Close the connection without forwarding.
        case dropRequest
        /// Forward, wait for the server's full answer, then close without passing it on.
        case dropResponse
        /// Answer this JSON with this status without forwarding (a server that acts otherwise).
        case answer(status: Int, json: String)
        /// Forward after waiting this long (a slow link).
        case delay(Duration)
    }

    public typealias Rule = @Sendable (_ method: String, _ uri: String) -> Action
    /// Sees every exchange the server answered (also those whose answer is then dropped).
    public typealias Observer = @Sendable (_ method: String, _ uri: String, _ request: Data, _ status: Int, _ response: Data) -> Void

    /// What the proxy tells the server about the address clients used.
    public enum Forwarding: Sendable {
        /// Nothing: the server sees only the Host the proxy connected with (its own address).
        case none
        /// `X-Forwarded-Host`, `X-Forwarded-Proto`, and `X-Forwarded-Prefix` under a prefix.
        case xForwarded
        /// RFC 7239 `Forwarded: host=…;proto=…`.
        case forwarded
    }

    private let channel: any Channel
    public let port: Int
    let upstream: URL
    /// The path the proxy serves the server under (`/gis`), or empty.
    public let prefix: String
    /// Passes bodies through as they come (compressed stays compressed).
    static let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: HTTPClient.Configuration(decompression: .disabled))

    private init(channel: any Channel, port: Int, upstream: URL, prefix: String) {
        self.channel = channel
        self.port = port
        self.upstream = upstream
        self.prefix = prefix
    }

    /// - Parameter upstream: `http://127.0.0.1:<port>` of the real server.
    /// - Parameter prefix: serve the server under this path (`/gis`): requests outside it are 404,
    ///   the prefix is taken off before forwarding.
    /// - Parameter port: the port to listen on (0: a free one).
    public static func start(
        upstream: URL, prefix: String = "", forwarding: Forwarding = .none, observer: Observer? = nil, port: Int = 0, rule: @escaping Rule
    ) async throws -> LoopbackProxy {
        let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 64)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.pipeline.configureHTTPServerPipeline().flatMap {
                    channel.pipeline.addHandler(ProxyHandler(upstream: upstream, prefix: prefix, forwarding: forwarding, rule: rule, observer: observer))
                }
            }
        let channel = try await bootstrap.bind(host: "127.0.0.1", port: port).get()
        return LoopbackProxy(channel: channel, port: channel.localAddress?.port ?? 0, upstream: upstream, prefix: prefix)
    }

    /// `url` as a client reaches it through the proxy: the proxy's host and port, under its prefix.
    public func url(for url: URL) -> URL {
        var c = URLComponents(url: url, resolvingAgainstBaseURL: false)!
        c.host = "127.0.0.1"
        c.port = port
        c.path = prefix + c.path
        return c.url!
    }

    public func stop() async throws {
        try await channel.close()
    }
}

private final class ProxyHandler: ChannelInboundHandler, @unchecked Sendable {
    // @unchecked: NIO calls a handler only on its channel's event loop; the forwarding task hops
    // back to it before touching the channel.
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    let upstream: URL
    let prefix: String
    let forwarding: LoopbackProxy.Forwarding
    let rule: LoopbackProxy.Rule
    let observer: LoopbackProxy.Observer?
    var head: HTTPRequestHead?
    var body = ByteBuffer()

    init(upstream: URL, prefix: String, forwarding: LoopbackProxy.Forwarding, rule: @escaping LoopbackProxy.Rule, observer: LoopbackProxy.Observer?) {
        self.upstream = upstream
        self.prefix = prefix
        self.forwarding = forwarding
        self.rule = rule
        self.observer = observer
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let h):
            head = h
            body = ByteBuffer()
        case .body(var buffer):
            body.writeBuffer(&buffer)
        case .end:
            guard var head else { return }
            self.head = nil
            guard head.uri.hasPrefix(prefix + "/") else {
                let empty = HTTPHeaders([("Content-Length", "0")])
                context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: .notFound, headers: empty))), promise: nil)
                context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
                return
            }
            head.uri = String(head.uri.dropFirst(prefix.count))
            let action = rule(head.method.rawValue, head.uri)
            if case .dropRequest = action {
                context.close(promise: nil)
                return
            }
            if case .answer(let status, let json) = action {
                let headers = HTTPHeaders([("Content-Type", "application/json"), ("Content-Length", String(json.utf8.count))])
                context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: HTTPResponseStatus(statusCode: status), headers: headers))), promise: nil)
                context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: json)))), promise: nil)
                context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
                return
            }
            var request = HTTPClientRequest(url: upstream.absoluteString + head.uri)
            request.method = head.method
            // An observer reads bodies, so answers come uncompressed then.
            let skipped = ["host", "content-length", "connection"] + (observer == nil ? [] : ["accept-encoding"])
            for h in head.headers where !skipped.contains(h.name.lowercased()) {
                request.headers.add(name: h.name, value: h.value)
            }
            // The Host the server sees is its own; what the client used travels in these.
            let publicHost = "127.0.0.1:\(context.channel.localAddress?.port ?? 0)"
            switch forwarding {
            case .none: break
            case .xForwarded:
                request.headers.add(name: "X-Forwarded-Host", value: publicHost)
                request.headers.add(name: "X-Forwarded-Proto", value: "http")
                if !prefix.isEmpty { request.headers.add(name: "X-Forwarded-Prefix", value: prefix) }
            case .forwarded:
                request.headers.add(name: "Forwarded", value: "for=127.0.0.1;proto=http;host=\"\(publicHost)\"")
            }
            if body.readableBytes > 0 { request.body = .bytes(body) }
            let loop = NIOLoopBound(context, eventLoop: context.eventLoop)
            let version = head.version
            let wrap = NIOLoopBound(self, eventLoop: context.eventLoop)
            let observer = self.observer
            let sent = Data(buffer: body)
            let method = head.method.rawValue, uri = head.uri
            Task {
                let reply: (HTTPResponseStatus, HTTPHeaders, ByteBuffer)?
                if case .delay(let wait) = action { try? await Task.sleep(for: wait) }
                do {
                    let response = try await LoopbackProxy.client.execute(request, timeout: .seconds(120))
                    let bytes = try await response.body.collect(upTo: 512 << 20)
                    reply = (response.status, response.headers, bytes)
                    observer?(method, uri, sent, Int(response.status.code), Data(buffer: bytes))
                } catch {
                    reply = nil
                }
                loop.eventLoop.execute {
                    let context = loop.value
                    let passesAnswer = switch action {
                        case .forward, .delay: true
                        default: false
                    }
                    guard let (status, headers, bytes) = reply, passesAnswer else {
                        context.close(promise: nil)
                        return
                    }
                    var out = HTTPHeaders()
                    for h in headers where !["content-length", "transfer-encoding", "connection"].contains(h.name.lowercased()) {
                        out.add(name: h.name, value: h.value)
                    }
                    out.add(name: "Content-Length", value: String(bytes.readableBytes))
                    let handler = wrap.value
                    context.write(handler.wrapOutboundOut(.head(HTTPResponseHead(version: version, status: status, headers: out))), promise: nil)
                    context.write(handler.wrapOutboundOut(.body(.byteBuffer(bytes))), promise: nil)
                    context.writeAndFlush(handler.wrapOutboundOut(.end(nil)), promise: nil)
                }
            }
        }
    }
}
