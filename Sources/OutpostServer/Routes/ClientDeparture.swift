import NIOCore

/// Long work done for one request stops when its client leaves, as nginx's 499 "client closed
/// request" does. Hummingbird does not cancel a handler whose client went away, and it allows
/// half-closed connections, so a client that gives up (a cancelled `execute`, seconds of
/// geodesic buffering) leaves a connection whose input has ended while the tool runs on for
/// nobody. ``Watch``, in every connection's pipeline, notes that moment; the responder puts the
/// request's channel in ``channel``, and ``cancelling(_:)`` runs work that ends, as a cancelled
/// Task does, when the moment comes or when the handler itself is cancelled. Only that call
/// looks the watch up, so other requests pay nothing for it.
///
/// A client that half-closes on purpose after its request (`nc -N`) still gets its answer from
/// routes that do not use ``cancelling(_:)``; the ones that do are long computations whose
/// clients wait with the connection open.
enum ClientDeparture {
    @TaskLocal static var channel: (any Channel)?

    static func cancelling<T: Sendable>(_ work: @escaping @Sendable () async throws -> T) async throws -> T {
        guard let departed = try await departure() else { return try await work() }
        let running = Task { try await work() }
        departed.whenComplete { _ in running.cancel() }
        return try await withTaskCancellationHandler { try await running.value } onCancel: { running.cancel() }
    }

    /// The moment the request's client left (its input ended or the connection closed), when a
    /// ``Watch`` is in its channel's pipeline.
    private static func departure() async throws -> EventLoopFuture<Void>? {
        guard let channel else { return nil }
        return try await channel.eventLoop.submit { () -> EventLoopFuture<Void>? in
            (try? channel.pipeline.syncOperations.handler(type: Watch.self))?.left.futureResult
        }.get()
    }

    /// Passes everything through; completes its connection's departure on input closed or
    /// inactive.
    final class Watch: ChannelInboundHandler, RemovableChannelHandler {
        typealias InboundIn = NIOAny
        fileprivate var left: EventLoopPromise<Void>!

        init() {}

        func handlerAdded(context: ChannelHandlerContext) {
            left = context.eventLoop.makePromise(of: Void.self)
        }

        func handlerRemoved(context: ChannelHandlerContext) {
            left.succeed()
        }

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if case ChannelEvent.inputClosed = event { left.succeed() }
            context.fireUserInboundEventTriggered(event)
        }

        func channelInactive(context: ChannelHandlerContext) {
            left.succeed()
            context.fireChannelInactive()
        }
    }
}
