import Foundation
import Synchronization

/// Hands every value to each current subscriber's AsyncStream. Each subscription starts with the
/// latest value, so a late observer sees the present state first.
final class Broadcast<Value: Sendable>: Sendable {
    private struct State {
        var latest: Value
        var subscribers: [UUID: AsyncStream<Value>.Continuation] = [:]
        var finished = false
    }

    private let state: Mutex<State>

    init(_ initial: Value) {
        state = Mutex(State(latest: initial))
    }

    var latest: Value { state.withLock { $0.latest } }

    func subscribe() -> AsyncStream<Value> {
        let (stream, continuation) = AsyncStream<Value>.makeStream(bufferingPolicy: .unbounded)
        let id = UUID()
        let finished = state.withLock { s -> Bool in
            continuation.yield(s.latest)
            if !s.finished { s.subscribers[id] = continuation }
            return s.finished
        }
        if finished {
            continuation.finish()
        } else {
            continuation.onTermination = { [weak self] _ in
                self?.state.withLock { _ = $0.subscribers.removeValue(forKey: id) }
            }
        }
        return stream
    }

    /// Values sent from different threads reach every subscriber in one order: yielding happens
    /// under the lock (a yield only queues the value; no subscriber code runs here).
    func send(_ value: Value) {
        state.withLock { s in
            s.latest = value
            for c in s.subscribers.values { c.yield(value) }
        }
    }

    func finish() {
        let subscribers = state.withLock { s -> [AsyncStream<Value>.Continuation] in
            s.finished = true
            defer { s.subscribers = [:] }
            return Array(s.subscribers.values)
        }
        for c in subscribers { c.finish() }
    }
}
