import NIOCore
import Synchronization

/// Long work done for one request stops when its client leaves, as nginx's 499 "client closed
/// request" does. Hummingbird does not cancel a handler whose client went away, and it allows
/// half-closed connections, so a client that gives up (a cancelled `execute`, seconds of
/// geodesic buffering) leaves a connection whose input has ended while the tool runs on for
/// nobody. ``Watch``, in every connection's pipeline, notes that moment; the responder puts it
/// in ``departed`` for the request, and ``cancelling(_:)`` runs work that ends, as a cancelled
/// Task does, when it comes or when the handler itself is cancelled.
///
/// A client that half-closes on purpose after its request (`nc -N`) still gets its answer from
/// routes that do not use ``cancelling(_:)``; the ones that do are long computations whose
/// clients wait with the connection open.
enum ClientDeparture {
    @TaskLocal static var departed: EventLoopFuture<Void>?

    static func cancelling<T: Sendable>(_ work: @escaping @Sendable () async throws -> T) async throws -> T {
        guard let departed else { return try await work() }
        let running = Task { try await work() }
        departed.whenComplete { _ in running.cancel() }
        return try await withTaskCancellationHandler { try await running.value } onCancel: { running.cancel() }
    }

    /// The moment `channel`'s client left (its input ended or the connection closed), when a
    /// ``Watch`` is in its pipeline.
    static func departure(of channel: any Channel) -> EventLoopFuture<Void>? {
        watched.withLock { $0[ObjectIdentifier(channel)] }
    }

    private static let watched = Mutex<[ObjectIdentifier: EventLoopFuture<Void>]>([:])

    /// Passes everything through; completes its connection's departure on input closed or
    /// inactive.
    final class Watch: ChannelInboundHandler, RemovableChannelHandler {
        typealias InboundIn = NIOAny
        private var left: EventLoopPromise<Void>?

        init() {}

        func handlerAdded(context: ChannelHandlerContext) {
            let promise = context.eventLoop.makePromise(of: Void.self)
            left = promise
            let id = ObjectIdentifier(context.channel)
            watched.withLock { $0[id] = promise.futureResult }
        }

        func handlerRemoved(context: ChannelHandlerContext) {
            let id = ObjectIdentifier(context.channel)
            watched.withLock { _ = $0.removeValue(forKey: id) }
            left?.succeed()
        }

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if case ChannelEvent.inputClosed = event { left?.succeed() }
            context.fireUserInboundEventTriggered(event)
        }

        func channelInactive(context: ChannelHandlerContext) {
            left?.succeed()
            context.fireChannelInactive()
        }
    }
}
