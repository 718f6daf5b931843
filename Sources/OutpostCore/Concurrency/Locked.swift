#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A value behind a POSIX mutex: the lock every Outpost module uses for state shared between
/// threads.
///
/// Its `withLock` has the shape of the standard library's `Synchronization.Mutex` (the value
/// handed in `inout sending`, the result `sending`), so call sites are checked by the compiler
/// the same way. It is not that `Mutex` because ThreadSanitizer cannot see it: on Linux the
/// standard library's lock waits on a futex, which the sanitizer does not intercept, so every
/// two `withLock` calls from different threads were reported as a race on the guarded value
/// (`scripts/sanitize thread` stopped at the first one, in `Broadcast.send`). A
/// `pthread_mutex_t` is intercepted, so the sanitizer sees the ordering the lock gives and
/// reports only accesses made outside it. Uncontended, it costs a few nanoseconds more a call.
///
/// ```swift
/// let seen = Locked<Set<String>>([])
/// let isNew = seen.withLock { $0.insert(id).inserted }
/// ```
public final class Locked<Value: ~Copyable>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let storage: UnsafeMutablePointer<Value>

    /// A lock guarding `initial`.
    public init(_ initial: consuming sending Value) {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        let status = pthread_mutex_init(mutex, nil)
        precondition(status == 0, "pthread_mutex_init failed (\(status))")
        storage = .allocate(capacity: 1)
        storage.initialize(to: initial)
    }

    deinit {
        storage.deinitialize(count: 1)
        storage.deallocate()
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    /// Runs `body` with the value, holding the lock; other threads wait for it.
    public func withLock<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&storage.pointee)
    }
}

extension Locked where Value: Sendable {
    /// The value now.
    public func get() -> Value { withLock { $0 } }
    /// Replaces the value.
    public func set(_ value: Value) { withLock { $0 = value } }
    /// Changes the value in place, under the lock.
    public func update(_ body: (inout Value) -> Void) { withLock { body(&$0) } }
}

/// The earlier name of ``Locked``.
@available(*, deprecated, renamed: "Locked")
public typealias LockedValue = Locked
