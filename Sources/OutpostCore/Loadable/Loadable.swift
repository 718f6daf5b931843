import Foundation
import Synchronization

/// Where a ``Loadable`` resource is in loading (the ArcGIS `LoadStatus` values).
public enum LoadStatus: String, Sendable, Hashable, Codable {
    case notLoaded, loading, loaded, failed
}

/// A resource whose metadata loads asynchronously (a service's info, a tile cache's index).
///
/// The rules (ArcGIS Loadable semantics):
/// - concurrent and repeated ``load()`` calls share one attempt;
/// - ``load()`` on a failed resource returns the past error at once;
/// - ``retryLoad()`` reloads only a failed or not-loaded resource, and joins an attempt in progress;
/// - ``cancelLoad()`` fails the current attempt with `CancellationError` for every waiter;
/// - dependencies load first; a dependency's failure fails the dependent, and a retry retries it.
public protocol Loadable: AnyObject, Sendable {
    var loadStatus: LoadStatus { get }
    /// The current status, then every change.
    var loadStatusUpdates: AsyncStream<LoadStatus> { get }
    /// The error of the last failed attempt.
    var loadError: (any Error)? { get }
    func load() async throws
    func retryLoad() async throws
    func cancelLoad()
}

/// The Loadable rules, for a type to own and forward to.
///
/// ```swift
/// final class ServiceInfo: Loadable {
///     private let loader: LoadableSupport
///     init(url: URL) {
///         loader = LoadableSupport { try await fetch(url) }
///     }
///     var loadStatus: LoadStatus { loader.loadStatus }
///     func load() async throws { try await loader.load() }
///     …
/// }
/// ```
public final class LoadableSupport: Sendable {
    private struct State {
        var status: LoadStatus = .notLoaded
        var error: (any Error)?
        /// Increments with every attempt; a completion from an older (cancelled) attempt is ignored.
        var generation = 0
        var attempt: Task<Void, Never>?
        var waiters: [CheckedContinuation<Void, any Error>] = []
    }

    private let state = Mutex(State())
    private let updates = Broadcast<LoadStatus>(.notLoaded)
    private let loadWork: @Sendable () async throws -> Void
    private let dependencies: @Sendable () -> [any Loadable]

    /// - Parameters:
    ///   - dependencies: resources to load first (in order).
    ///   - load: the type's own loading work; it runs at most once per attempt.
    public init(
        dependencies: @escaping @Sendable () -> [any Loadable] = { [] },
        load: @escaping @Sendable () async throws -> Void
    ) {
        self.dependencies = dependencies
        self.loadWork = load
    }

    public var loadStatus: LoadStatus { state.withLock { $0.status } }
    public var loadStatusUpdates: AsyncStream<LoadStatus> { updates.subscribe() }
    public var loadError: (any Error)? { state.withLock { $0.error } }

    public func load() async throws { try await request(retry: false) }

    public func retryLoad() async throws { try await request(retry: true) }

    public func cancelLoad() {
        let (waiters, changed) = state.withLock { s -> ([CheckedContinuation<Void, any Error>], Bool) in
            guard s.status == .loading else { return ([], false) }
            s.attempt?.cancel()
            s.attempt = nil
            s.generation += 1
            s.status = .failed
            s.error = CancellationError()
            defer { s.waiters = [] }
            return (s.waiters, true)
        }
        if changed { updates.send(.failed) }
        for w in waiters { w.resume(throwing: CancellationError()) }
    }

    private func request(retry: Bool) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            enum Outcome {
                case done
                case failed(any Error)
                case wait
                case started
            }
            let outcome = state.withLock { s -> Outcome in
                switch s.status {
                case .loaded:
                    return .done
                case .failed where !retry:
                    return .failed(s.error ?? CancellationError())
                case .loading:
                    s.waiters.append(continuation)
                    return .wait
                case .notLoaded, .failed:
                    s.waiters.append(continuation)
                    s.status = .loading
                    s.error = nil
                    s.generation += 1
                    let generation = s.generation
                    s.attempt = Task { await self.attempt(generation: generation, retry: retry) }
                    return .started
                }
            }
            switch outcome {
            case .done: continuation.resume()
            case .failed(let error): continuation.resume(throwing: error)
            case .started: updates.send(.loading)
            case .wait: break
            }
        }
    }

    private func attempt(generation: Int, retry: Bool) async {
        var failure: (any Error)?
        do {
            for dependency in dependencies() {
                if retry { try await dependency.retryLoad() } else { try await dependency.load() }
            }
            try Task.checkCancellation()
            try await loadWork()
        } catch {
            failure = error
        }
        let waiters = state.withLock { s -> [CheckedContinuation<Void, any Error>]? in
            guard s.generation == generation else { return nil }  // cancelled meanwhile
            s.status = failure == nil ? .loaded : .failed
            s.error = failure
            s.attempt = nil
            defer { s.waiters = [] }
            return s.waiters
        }
        guard let waiters else { return }
        updates.send(failure == nil ? .loaded : .failed)
        for w in waiters {
            if let failure { w.resume(throwing: failure) } else { w.resume() }
        }
    }
}

/// A property that a loaded value fills unless the user set it first: values set before
/// loading override what loading finds.
public struct Overridable<Value: Sendable>: Sendable {
    private var assigned: Value?
    private var loaded: Value?

    public init() {}

    /// The user's value if one was set, else the loaded one.
    public var value: Value? { assigned ?? loaded }

    /// Sets the value; loading will not replace it.
    public mutating func set(_ value: Value?) { assigned = value }

    /// Called by loading code with what it found.
    public mutating func setLoaded(_ value: Value?) { loaded = value }
}

/// A Loadable that forwards every requirement to a ``LoadableSupport`` it owns.
///
/// ```swift
/// final class ServiceInfo: LoadableForwarding {
///     let loadSupport = LoadableSupport { … }
/// }
/// ```
public protocol LoadableForwarding: Loadable {
    var loadSupport: LoadableSupport { get }
}

extension LoadableForwarding {
    public var loadStatus: LoadStatus { loadSupport.loadStatus }
    public var loadStatusUpdates: AsyncStream<LoadStatus> { loadSupport.loadStatusUpdates }
    public var loadError: (any Error)? { loadSupport.loadError }
    public func load() async throws { try await loadSupport.load() }
    public func retryLoad() async throws { try await loadSupport.retryLoad() }
    public func cancelLoad() { loadSupport.cancelLoad() }
}

/// A value behind a lock (a Loadable's loaded state, a collector shared with a callback).
public final class LockedValue<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    public init(_ value: Value) { mutex = Mutex(value) }
    public func get() -> Value { mutex.withLock { $0 } }
    public func set(_ value: Value) { mutex.withLock { $0 = value } }
    public func update(_ body: (inout Value) -> Void) { mutex.withLock { body(&$0) } }
}
