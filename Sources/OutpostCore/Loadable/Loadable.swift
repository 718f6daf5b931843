import Foundation

/// Where a ``Loadable`` resource is in loading (the ArcGIS `LoadStatus` values).
public enum LoadStatus: String, Sendable, Hashable, Codable {
    /// Not loaded yet, loading, loaded, or failed (``Loadable/loadError`` says why).
    case notLoaded, loading, loaded, failed
}

/// A resource whose metadata loads asynchronously (a service's info, a tile cache's index).
///
/// The rules (ArcGIS Loadable semantics):
/// - concurrent and repeated ``load()`` calls share one attempt;
/// - ``load()`` on a failed resource returns the past error at once;
/// - ``retryLoad()`` reloads only a failed or not-loaded resource, and joins an attempt in progress;
/// - ``cancelLoad()`` fails the current attempt with `CancellationError` for every waiter;
/// - a caller whose Task is cancelled leaves with `CancellationError` at once; the attempt goes on
///   for the others and is cancelled when its last caller leaves (back to `notLoaded`: the next
///   `load()` starts again);
/// - dependencies load first; a dependency's failure fails the dependent, and a retry retries it.
public protocol Loadable: AnyObject, Sendable {
    /// Where loading is.
    var loadStatus: LoadStatus { get }
    /// The current status, then every change.
    var loadStatusUpdates: AsyncStream<LoadStatus> { get }
    /// The error of the last failed attempt.
    var loadError: (any Error)? { get }
    /// Loads the resource, or joins the load under way; throws the load's error.
    func load() async throws
    /// Loads again after a failure (or joins the load under way).
    func retryLoad() async throws
    /// Stops the load under way for every caller.
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
///
/// Cancellation is the caller's, as Swift apps expect: a caller whose Task is cancelled gets
/// `CancellationError` at once. The attempt goes on while any other caller still awaits it,
/// and is cancelled when its last caller leaves: the status goes back to `notLoaded`, so the
/// next ``load()`` starts again. ``cancelLoad()`` is the ArcGIS one: the attempt fails with
/// `CancellationError` for every caller, and ``retryLoad()`` starts again.
public final class LoadableSupport: Sendable {
    private struct Attempt {
        let generation: Int
        let outcome = SharedOutcome<Void>()
        var task: Task<Void, Never>?
    }

    private struct State {
        var status: LoadStatus = .notLoaded
        var error: (any Error)?
        /// Increments with every attempt; a completion from an older (cancelled) attempt is ignored.
        var generation = 0
        var attempt: Attempt?
    }

    /// What an attempt whose callers all left settles with: a caller that joined it in that
    /// moment, not cancelled itself, starts a new one.
    private struct Abandoned: Error {}

    private let state = Locked(State())
    private let updates = Broadcast<LoadStatus>(.notLoaded)
    private let loadWork: @Sendable () async throws -> Void
    private let dependencies: @Sendable () -> [any Loadable]

    /// - Parameters:
    ///   - dependencies: resources to load first (in order).
    ///   - load: the type's own loading work; it runs at most once per attempt.
    public init(
        /// Loading support for a type whose load is `load`, after its `dependencies`.
        dependencies: @escaping @Sendable () -> [any Loadable] = { [] },
        load: @escaping @Sendable () async throws -> Void
    ) {
        self.dependencies = dependencies
        self.loadWork = load
    }

    /// Where loading is.
    public var loadStatus: LoadStatus { state.withLock { $0.status } }
    /// The current status, then every change; it ends once the resource is loaded (it changes no
    /// more then).
    public var loadStatusUpdates: AsyncStream<LoadStatus> { updates.subscribe() }
    /// Why the last load failed.
    public var loadError: (any Error)? { state.withLock { $0.error } }

    /// Loads, or joins the load under way; see ``Loadable/load()``.
    public func load() async throws { try await request(retry: false) }

    /// Loads again after a failure; see ``Loadable/retryLoad()``.
    public func retryLoad() async throws { try await request(retry: true) }

    /// Fails the current attempt with `CancellationError` for every caller (the status is
    /// `failed`; ``retryLoad()`` starts again).
    public func cancelLoad() {
        let cancelled = state.withLock { s -> Attempt? in
            guard s.status == .loading, let attempt = s.attempt else { return nil }
            attempt.task?.cancel()
            s.attempt = nil
            s.generation += 1
            s.status = .failed
            s.error = CancellationError()
            updates.send(.failed)
            return attempt
        }
        guard let cancelled else { return }
        cancelled.outcome.settle(.failure(CancellationError()))
    }

    private func request(retry: Bool) async throws {
        while true {
            try Task.checkCancellation()
            let attempt = try state.withLock { s -> Attempt? in
                switch s.status {
                case .loaded:
                    return nil
                case .failed where !retry:
                    throw s.error ?? CancellationError()
                case .loading:
                    return s.attempt
                case .notLoaded, .failed:
                    s.status = .loading
                    s.error = nil
                    s.generation += 1
                    var attempt = Attempt(generation: s.generation)
                    let generation = s.generation
                    // Published before the attempt can finish, so observers see the changes in order.
                    updates.send(.loading)
                    attempt.task = Task { await self.attempt(generation: generation, retry: retry) }
                    s.attempt = attempt
                    return attempt
                }
            }
            guard let attempt else { return }
            do {
                try await attempt.outcome.value { remaining in
                    if remaining == 0 { self.abandon(attempt.generation) }
                }
                return
            } catch is Abandoned {
                continue
            }
        }
    }

    /// The last caller of attempt `generation` left: the attempt is cancelled and the resource
    /// is not loaded again until asked.
    private func abandon(_ generation: Int) {
        let abandoned = state.withLock { s -> Attempt? in
            guard let attempt = s.attempt, attempt.generation == generation, attempt.outcome.waiting == 0 else { return nil }
            attempt.task?.cancel()
            s.attempt = nil
            s.generation += 1
            s.status = .notLoaded
            s.error = nil
            updates.send(.notLoaded)
            return attempt
        }
        guard let abandoned else { return }
        abandoned.outcome.settle(.failure(Abandoned()))
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
        let finished = state.withLock { s -> Attempt? in
            guard s.generation == generation, let attempt = s.attempt else { return nil }  // cancelled meanwhile
            s.status = failure == nil ? .loaded : .failed
            s.error = failure
            s.attempt = nil
            updates.send(s.status)
            return attempt
        }
        guard let finished else { return }
        // Loaded is final: observers' streams end.
        if failure == nil { updates.finish() }
        finished.outcome.settle(failure.map { .failure($0) } ?? .success(()))
    }
}

/// A property that a loaded value fills unless the user set it first: values set before
/// loading override what loading finds.
public struct Overridable<Value: Sendable>: Sendable {
    private var assigned: Value?
    private var loaded: Value?

    /// No value yet.
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
    /// The load state and the closure that loads.
    var loadSupport: LoadableSupport { get }
}

extension LoadableForwarding {
    /// Where loading is.
    public var loadStatus: LoadStatus { loadSupport.loadStatus }
    public var loadStatusUpdates: AsyncStream<LoadStatus> { loadSupport.loadStatusUpdates }
    public var loadError: (any Error)? { loadSupport.loadError }
    /// Loads, or joins the load under way.
    public func load() async throws { try await loadSupport.load() }
    /// Loads again after a failure.
    public func retryLoad() async throws { try await loadSupport.retryLoad() }
    /// Stops the load under way for every caller.
    public func cancelLoad() { loadSupport.cancelLoad() }
}
