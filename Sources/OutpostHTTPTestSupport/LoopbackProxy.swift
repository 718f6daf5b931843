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
    }

    public typealias Rule = @Sendable (_ method: String, _ uri: String) -> Action
    /// Sees every exchange the server answered (also those whose answer is then dropped).
    public typealias Observer = @Sendable (_ method: String, _ uri: String, _ request: Data, _ status: Int, _ response: Data) -> Void

    private let channel: any Channel
    public let port: Int
    let upstream: URL
    /// Passes bodies through as they come (compressed stays compressed).
    static let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: HTTPClient.Configuration(decompression: .disabled))

    private init(channel: any Channel, port: Int, upstream: URL) {
        self.channel = channel
        self.port = port
        self.upstream = upstream
    }

    /// - Parameter upstream: `http://127.0.0.1:<port>` of the real server.
    public static func start(upstream: URL, observer: Observer? = nil, rule: @escaping Rule) async throws -> LoopbackProxy {
        let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 64)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.pipeline.configureHTTPServerPipeline().flatMap {
                    channel.pipeline.addHandler(ProxyHandler(upstream: upstream, rule: rule, observer: observer))
                }
            }
        let channel = try await bootstrap.bind(host: "127.0.0.1", port: 0).get()
        return LoopbackProxy(channel: channel, port: channel.localAddress?.port ?? 0, upstream: upstream)
    }

    /// `url` with the proxy's host and port in place of the server's.
    public func url(for url: URL) -> URL {
        var c = URLComponents(url: url, resolvingAgainstBaseURL: false)!
        c.host = "127.0.0.1"
        c.port = port
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
    let rule: LoopbackProxy.Rule
    let observer: LoopbackProxy.Observer?
    var head: HTTPRequestHead?
    var body = ByteBuffer()

    init(upstream: URL, rule: @escaping LoopbackProxy.Rule, observer: LoopbackProxy.Observer?) {
        self.upstream = upstream
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
            guard let head else { return }
            self.head = nil
            let action = rule(head.method.rawValue, head.uri)
            if case .dropRequest = action {
                context.close(promise: nil)
                return
            }
            var request = HTTPClientRequest(url: upstream.absoluteString + head.uri)
            request.method = head.method
            // An observer reads bodies, so answers come uncompressed then.
            let skipped = ["host", "content-length", "connection"] + (observer == nil ? [] : ["accept-encoding"])
            for h in head.headers where !skipped.contains(h.name.lowercased()) {
                request.headers.add(name: h.name, value: h.value)
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
                    guard let (status, headers, bytes) = reply, case .forward = action else {
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
