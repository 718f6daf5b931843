import Foundation
import OutpostCore

/// Work a server starts before the request that will want it arrives, held by that request's
/// key until it comes: taken once, a newer start under the same key replacing (and cancelling)
/// the older, entries dropped when older than `lifetime` and the oldest first when more than
/// `capacity` are held. ``ChecksumsAhead`` and ``PagesAhead`` keep their work here.
final class TasksAhead<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    let lifetime: Duration
    let capacity: Int

    private struct Entry {
        var started: ContinuousClock.Instant
        /// Order of starting (clock readings may tie).
        var order: UInt64
        var task: Task<Value, any Error>
    }

    private let entries = Locked<(held: [Key: Entry], started: UInt64)>(([:], 0))

    init(lifetime: Duration, capacity: Int) {
        self.lifetime = lifetime
        self.capacity = capacity
    }

    /// Starts `make` for the request `key` will name.
    func start(_ key: Key, _ make: @escaping @Sendable () async throws -> Value) {
        let now = ContinuousClock.now
        let task = Task { try await make() }
        let dropped = entries.withLock { state -> [Entry] in
            state.started += 1
            var dropped = state.held.filter { now - $0.value.started > lifetime }.map(\.key).compactMap { state.held.removeValue(forKey: $0) }
            if let old = state.held.updateValue(Entry(started: now, order: state.started, task: task), forKey: key) { dropped.append(old) }
            while state.held.count > capacity, let oldest = state.held.min(by: { $0.value.order < $1.value.order }) {
                state.held.removeValue(forKey: oldest.key)
                dropped.append(oldest.value)
            }
            return dropped
        }
        for entry in dropped { entry.task.cancel() }
    }

    /// The work started for `key`, removed from the store; nil when none was started or it is
    /// older than ``lifetime`` (then cancelled).
    func take(_ key: Key) -> Task<Value, any Error>? {
        guard let entry = entries.withLock({ $0.held.removeValue(forKey: key) }) else { return nil }
        guard ContinuousClock.now - entry.started <= lifetime else {
            entry.task.cancel()
            return nil
        }
        return entry.task
    }

    /// How many entries are held (for tests).
    var count: Int { entries.withLock { $0.held.count } }
}
