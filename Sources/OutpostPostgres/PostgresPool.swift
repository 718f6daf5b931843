import Foundation
import Logging
import PostgresNIO
import _ConnectionPoolModule
import OutpostSyncService
import OutpostCore

/// One connection pool for the services (or job records) of a database opened together; its
/// connections stop when the last user is closed.
///
/// With several servers listed (a primary and its standbys) the pool follows the primary: it
/// looks once a second, and at once after a failure that may mean the database moved
/// (``suspect()``), whether the server it uses still takes writes; when another listed server
/// does (a standby was promoted), new requests go there. Requests already waiting on the old
/// server end with its connection errors, which callers answer as "unavailable, try again".
final class PostgresPool: Sendable {
    /// Every server of the database.
    let location: PostgresLocation
    private let maximumConnections: Int?
    private struct Current {
        var client: PostgresClient
        var runner: Task<Void, Never>
        var server: PostgresLocation.Server
    }
    private let current: Locked<Current>
    private let users = Locked(0)
    /// Whether a look for the primary is under way, and when the last began.
    private let looking = Locked<(active: Bool, last: ContinuousClock.Instant?)>((false, nil))
    private let watcher = Locked<Task<Void, Never>?>(nil)
    private let logger = Logger(label: "outpost.postgres")

    /// A pool on the primary of `location` (its first server when none answers as one yet).
    static func connect(_ location: PostgresLocation, maximumConnections: Int? = nil) async -> PostgresPool {
        let primary = await location.primary()
        return PostgresPool(location, on: primary?.servers[0] ?? location.servers[0], maximumConnections: maximumConnections)
    }

    private init(_ location: PostgresLocation, on server: PostgresLocation.Server, maximumConnections: Int?) {
        self.location = location
        self.maximumConnections = maximumConnections
        let client = Self.client(location.on(server), maximumConnections: maximumConnections)
        current = Locked(Current(client: client, runner: Task { await client.run() }, server: server))
        guard location.servers.count > 1 else { return }
        watcher.withLock {
            $0 = Task { [weak self] in
                while !Task.isCancelled {
                    try? await Task.sleep(for: .seconds(1))
                    guard let self else { return }
                    await self.follow()
                }
            }
        }
    }

    private static func client(_ location: PostgresLocation, maximumConnections: Int?) -> PostgresClient {
        var configuration = location.configuration
        if let maximumConnections { configuration.options.maximumConnections = maximumConnections }
        return PostgresClient(configuration: configuration)
    }

    /// The pool's client now (on the primary as last seen).
    var client: PostgresClient { current.withLock { $0.client } }

    /// The server requests go to now.
    var server: PostgresLocation.Server { current.withLock { $0.server } }

    /// A request failed in a way that may mean the primary moved: look now (at most one look
    /// at a time, and one a second).
    func suspect() {
        guard location.servers.count > 1 else { return }
        Task { await follow() }
    }

    /// Looks for the primary and moves the pool there when it is another server than the one
    /// in use.
    func follow() async {
        let now = ContinuousClock.now
        let go = looking.withLock { state -> Bool in
            guard !state.active, state.last.map({ now - $0 >= .seconds(1) }) ?? true else { return false }
            state = (true, now)
            return true
        }
        guard go else { return }
        defer { looking.withLock { $0.active = false } }
        let using = server
        // The server in use first: while it still takes writes nothing moves.
        var order = location.servers.filter { $0 == using }
        order += location.servers.filter { $0 != using }
        var probe = location
        probe.servers = order
        guard let primary = await probe.primary(within: .seconds(2))?.servers[0], primary != using else { return }
        let client = Self.client(location.on(primary), maximumConnections: maximumConnections)
        let old = current.withLock { current -> Current in
            let old = current
            current = Current(client: client, runner: Task { await client.run() }, server: primary)
            return old
        }
        logger.warning("PostgreSQL primary moved from \(using) to \(primary); new requests go there")
        // Requests waiting on the old server end with its own errors; its pool stops later.
        Task {
            try? await Task.sleep(for: .seconds(60))
            old.runner.cancel()
        }
    }

    func retain() { users.withLock { $0 += 1 } }

    func release() {
        if users.withLock({ users in
            users -= 1
            return users == 0
        }) {
            shutdown()
        }
    }

    private func shutdown() {
        watcher.withLock { $0?.cancel() }
        current.withLock { $0.runner.cancel() }
    }

    deinit { shutdown() }
}

extension PostgresPool {
    /// A failure of a request on this pool as the service says it; one that may mean the
    /// primary moved (the server unreachable, read-only) sets the pool looking.
    func failure(_ error: PSQLError) -> SyncServiceError {
        let failure = PostgresServiceBackend.serviceError(error, location)
        if failure.code == .unavailable { suspect() }
        return failure
    }

    /// The pool gave up on a request (no connection could be made, it was shut down after the
    /// primary moved): the database is unavailable for now.
    func failure(_ error: ConnectionPoolError) -> SyncServiceError {
        suspect()
        return SyncServiceError(.unavailable, "PostgreSQL at \(location) is unavailable (\(error)); try again shortly")
    }
}

extension PostgresPool {
    /// Runs `body`, answering ``SyncServiceError`` `unavailable` once `timeout` has passed
    /// whether or not `body` has ended: a query waiting for a connection to a server that is
    /// gone may not heed cancellation, and the request must not wait with it. `body` is then
    /// cancelled and ends on its own (at the latest when its pool stops); the pool looks for
    /// the primary.
    func within<T: Sendable>(_ timeout: Duration, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        if let answer = try await Self.answer(within: timeout, body) { return answer }
        suspect()
        throw SyncServiceError(.unavailable, "PostgreSQL at \(location) did not answer within \(timeout); try again shortly")
    }

    /// `body`'s answer, or nil once `limit` has passed whether or not `body` has ended (it is
    /// then cancelled, and ends on its own).
    static func answer<T: Sendable>(within limit: Duration, _ body: @escaping @Sendable () async throws -> T) async throws -> T? {
        let race = Race<T?>()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T?, any Error>) in
                race.pending.withLock { $0 = continuation }
                let running = Task { do { race.finish(.success(try await body())) } catch { race.finish(.failure(error)) } }
                race.work.withLock { $0 = running }
                let timer = Task {
                    try? await Task.sleep(for: limit)
                    guard race.pending.withLock({ $0 != nil }) else { return }
                    running.cancel()
                    race.finish(.success(nil))
                }
                // An answer in time stops the timer (no task sleeps on for every request).
                race.timer.withLock { $0 = timer }
                if race.pending.withLock({ $0 == nil }) { timer.cancel() }
            }
        } onCancel: {
            race.work.withLock { $0?.cancel() }
        }
    }
}

/// A request racing its time limit: whichever ends first answers.
private final class Race<T: Sendable>: Sendable {
    let pending = Locked<CheckedContinuation<T, any Error>?>(nil)
    let work = Locked<Task<Void, Never>?>(nil)
    let timer = Locked<Task<Void, Never>?>(nil)

    func finish(_ result: Result<T, any Error>) {
        pending.withLock { continuation in
            continuation?.resume(with: result)
            continuation = nil
        }
        timer.withLock { $0?.cancel() }
    }
}
