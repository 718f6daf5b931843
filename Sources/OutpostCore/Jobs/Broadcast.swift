import Foundation

/// Hands every value to each current subscriber's AsyncStream. Each subscription starts with the
/// latest value, so a late observer sees the present state first.
///
/// No lock is held while a value is yielded, and a subscription's end takes none. Yielding can
/// resume the task waiting on the stream, which takes that task's status lock; cancelling a task
/// holds its status lock while the stream's termination handler runs. A lock held across the
/// first and taken in the second deadlocks the two threads: a job's last status sent while its
/// observer was cancelled hung the `outpost` commands that way (both stacks seen in gdb).
///
/// Values sent from different threads still reach every subscriber in one order: a send queues
/// its value under the lock, and one sender at a time (the drainer) yields the queue, in order,
/// outside it. A subscriber gets the values sent after the latest one it started with.
/// Subscribers whose streams ended are dropped when a yield reports it.
final class Broadcast<Value: Sendable>: Sendable {
    private struct Subscriber {
        var continuation: AsyncStream<Value>.Continuation
        /// The number of the value it started with: it gets later ones only.
        var since: UInt64
    }

    private struct State {
        var latest: Value
        /// How many values were sent; `latest` is the last of them.
        var sent: UInt64 = 0
        /// Values sent and not yet yielded, with their numbers.
        var pending: [(number: UInt64, value: Value)] = []
        /// Whether a sender is yielding `pending`.
        var draining = false
        var subscribers: [UUID: Subscriber] = [:]
        /// No more values: streams end once `pending` is yielded.
        var finished = false

        /// The subscribers' continuations, none left behind.
        mutating func takeSubscribers() -> [AsyncStream<Value>.Continuation] {
            defer { subscribers = [:] }
            return subscribers.values.map(\.continuation)
        }
    }

    private let state: Locked<State>

    init(_ initial: Value) {
        state = Locked(State(latest: initial))
    }

    var latest: Value { state.withLock { $0.latest } }

    func subscribe() -> AsyncStream<Value> {
        let (stream, continuation) = AsyncStream<Value>.makeStream(bufferingPolicy: .unbounded)
        let finished = state.withLock { s -> Bool in
            // A stream no one awaits yet: the yield only buffers.
            continuation.yield(s.latest)
            if !s.finished { s.subscribers[UUID()] = Subscriber(continuation: continuation, since: s.sent) }
            return s.finished
        }
        if finished { continuation.finish() }
        return stream
    }

    func send(_ value: Value) {
        let drains = state.withLock { s -> Bool in
            guard !s.finished else { return false }
            s.latest = value
            s.sent += 1
            s.pending.append((s.sent, value))
            guard !s.draining else { return false }
            s.draining = true
            return true
        }
        if drains { drain() }
    }

    func finish() {
        let ending = state.withLock { s -> [AsyncStream<Value>.Continuation] in
            guard !s.finished else { return [] }
            s.finished = true
            // The drainer ends the streams after the values still queued.
            return s.draining ? [] : s.takeSubscribers()
        }
        for c in ending { c.finish() }
    }

    /// Yields the queued values in order, outside the lock, until none is left.
    private func drain() {
        while true {
            let next = state.withLock { s -> (values: [(number: UInt64, value: Value)], to: [UUID: Subscriber], ending: [AsyncStream<Value>.Continuation])? in
                guard s.pending.isEmpty else {
                    defer { s.pending = [] }
                    return (s.pending, s.subscribers, [])
                }
                s.draining = false
                return s.finished ? ([], [:], s.takeSubscribers()) : nil
            }
            guard let next else { return }
            if next.values.isEmpty {
                for c in next.ending { c.finish() }
                return
            }
            var ended: [UUID] = []
            for (number, value) in next.values {
                for (id, subscriber) in next.to where subscriber.since < number {
                    if case .terminated = subscriber.continuation.yield(value) { ended.append(id) }
                }
            }
            if !ended.isEmpty { state.withLock { s in for id in ended { s.subscribers[id] = nil } } }
        }
    }
}
