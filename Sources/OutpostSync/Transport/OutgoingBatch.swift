import Foundation
import NIOCore
import OutpostCore

/// A batch sent while the replica seals it (docs/sync.md, "Framed batches"): the seal hands each
/// finished frame to ``body`` as it writes it, and the request goes out with the first. The last
/// frame and the end mark wait until the batch is stored (``release()``), so the server can
/// commit only a batch the replica can send again byte for byte; when the seal fails instead
/// (``fail(_:)``), the body breaks off and the server applies nothing.
final class OutgoingBatch: Sendable {
    /// What the request needs to know when the first bytes are ready.
    struct Start: Sendable {
        let seq: Int64
        let batchID: String
        /// No captured changes remain after this batch.
        let last: Bool
        /// The most edits it holds (its head's announcement).
        let edits: Int
    }

    private struct State {
        var start: Start?
        /// Whether the seal decided (to stream, or not: then ``started()`` answers nil).
        var decided = false
        var waiter: CheckedContinuation<Start?, Never>?
        /// The stored body, and where its bytes not yet sent begin.
        var sealed: (body: Data, unsentFrom: Int)?
    }

    private let state = Locked(State())
    let body: AsyncThrowingStream<ByteBuffer, any Error>
    private let continuation: AsyncThrowingStream<ByteBuffer, any Error>.Continuation

    init() {
        (body, continuation) = AsyncThrowingStream.makeStream(of: ByteBuffer.self)
    }

    /// The seal streams this batch; `send` follows with its bytes.
    func begin(_ start: Start) {
        let waiter = state.withLock { s -> CheckedContinuation<Start?, Never>? in
            guard !s.decided else { return nil }
            s.decided = true
            s.start = start
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume(returning: start)
    }

    func send(_ bytes: ArraySlice<UInt8>) {
        continuation.yield(ByteBuffer(bytes: bytes))
    }

    /// The batch as stored: its tail goes at ``release()``.
    func sealed(body: Data, unsentFrom: Int) {
        state.withLock { $0.sealed = (body, unsentFrom) }
    }

    /// Sends the rest of the stored batch and ends the body (after the seal committed).
    func release() {
        if let (body, from) = state.withLock({ $0.sealed }) {
            if from < body.count { continuation.yield(ByteBuffer(bytes: body[(body.startIndex + from)...])) }
            continuation.finish()
        } else {
            continuation.finish(throwing: CancellationError())
        }
    }

    /// Breaks the body off (the seal failed, or the process stops): the server rolls back.
    /// Also ends the wait of ``started()`` when the seal never began streaming.
    func fail(_ error: any Error) {
        continuation.finish(throwing: error)
        decideNotStreamed()
    }

    /// The seal finished without streaming (nothing to send, or a batch that cannot stream).
    func decideNotStreamed() {
        let waiter = state.withLock { s -> CheckedContinuation<Start?, Never>? in
            guard !s.decided else { return nil }
            s.decided = true
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume(returning: nil)
    }

    /// Waits until the seal decided; the start when it streams, nil when it does not.
    func started() async -> Start? {
        await withCheckedContinuation { c in
            let now = state.withLock { s -> (Bool, Start?) in
                if s.decided { return (true, s.start) }
                s.waiter = c
                return (false, nil)
            }
            if now.0 { c.resume(returning: now.1) }
        }
    }

    /// The stored body (once sealed).
    var storedBody: Data? { state.withLock { $0.sealed?.body } }
}
