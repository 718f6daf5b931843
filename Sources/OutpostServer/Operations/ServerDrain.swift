import Foundation
import ServiceLifecycle
import OutpostCore

/// A server's drain (docs/cli.md, "Drain"): once a graceful shutdown begins (SIGTERM, SIGINT)
/// the server keeps listening; syncs that had begun — a replica whose batch was admitted or
/// whose download pages were under way — may finish, while every other new request gets 503
/// with `Retry-After`; the process exits when no such sync is left or the drain period ends.
///
/// A sync is a run of requests under `…/replicas/{id}/` with no end message, so one is taken as
/// over once its replica has asked nothing for ``idle`` (its client finished, or is gone), or
/// for ``idleAfterVerify`` once it asked for checksums after its feed (a sync's last step; a
/// layer refetched after a mismatch follows at once). Checksums asked with the upload, ahead of
/// the feed, end nothing.
final class DrainState: Sendable {
    /// A sync with no request for this long is over.
    static let idle: Duration = .seconds(15)
    /// … and this long after its verify's checksums were answered.
    static let idleAfterVerify: Duration = .seconds(1)

    private struct Sync {
        /// When it stops counting as under way.
        var until: ContinuousClock.Instant
        /// Whether its feed (or a refetch) was asked: checksums after that are its verify.
        var downloading: Bool
    }

    private struct State {
        var draining = false
        /// Syncs under way, by "service/replica".
        var syncs: [String: Sync] = [:]
    }
    private let state = Locked(State())
    /// What runs once the syncs under way have ended, before the drain's end.
    private let endings = Locked<[@Sendable (ContinuousClock.Instant) async -> Void]>([])

    /// Adds work the drain waits for once the syncs under way have ended: it is given the
    /// drain's deadline (the server's jobs finish by then, or are handed to another host).
    func atEnd(_ work: @escaping @Sendable (ContinuousClock.Instant) async -> Void) {
        endings.withLock { $0.append(work) }
    }

    /// Runs the work added with ``atEnd(_:)``, all at once.
    func end(by deadline: ContinuousClock.Instant) async {
        let all = endings.withLock { $0 }
        await withTaskGroup(of: Void.self) { group in
            for work in all { group.addTask { await work(deadline) } }
        }
    }

    var isDraining: Bool { state.withLock { $0.draining } }
    func startDraining() { state.withLock { $0.draining = true } }

    /// What a sync request is to the drain.
    enum SyncStep {
        /// A batch upload: the sync has begun (or goes on).
        case uploads
        /// A feed page or a layer's refetch: likewise.
        case downloads
        /// Checksums: the verify, after the feed; asked ahead with the upload otherwise.
        case verifies
        /// Anything else under the replica (its info, a stored batch result): admitted while its
        /// sync is under way, but begins none.
        case continues
    }

    /// Whether a request of `replica`'s sync (nil: a request of the service's sync API naming no
    /// replica, such as an attachment's bytes) may be answered now, noting it as part of a sync
    /// under way when it is one. Before the drain everything is answered.
    func admits(service: String, replica: String?, step: SyncStep, now: ContinuousClock.Instant = .now) -> Bool {
        state.withLock { s in
            s.syncs = s.syncs.filter { $0.value.until > now }
            let prefix = service.lowercased() + "/"
            guard let replica else {
                return !s.draining || s.syncs.keys.contains { $0.hasPrefix(prefix) }
            }
            let key = prefix + Self.normalized(replica)
            let known = s.syncs[key]
            guard !s.draining || known != nil else { return false }
            let soon = now + Self.idleAfterVerify, later = now + Self.idle
            switch step {
            case .uploads: s.syncs[key] = Sync(until: max(known?.until ?? later, later), downloading: false)
            case .downloads: s.syncs[key] = Sync(until: max(known?.until ?? later, later), downloading: true)
            case .verifies:
                if let known { s.syncs[key]?.until = known.downloading ? soon : max(known.until, soon) }
            case .continues:
                if let known { s.syncs[key]?.until = max(known.until, soon) }
            }
            return true
        }
    }

    /// The syncs under way now.
    func syncsUnderWay(now: ContinuousClock.Instant = .now) -> Int {
        state.withLock { s in s.syncs.values.filter { $0.until > now }.count }
    }

    /// A replica id as one key whatever its braces and case.
    static func normalized(_ replica: String) -> String {
        replica.trimmingCharacters(in: CharacterSet(charactersIn: "{}")).lowercased()
    }
}

/// Runs a server's drain when its service group shuts down gracefully. Run it in the group after
/// the application (`ServiceGroup(services: [app, drain])`): a group shuts its services down in
/// reverse order, so the drain runs while the server still listens, and the server stops
/// listening (and waits for the requests in flight) only once the drain has ended.
public struct ServerDrain: Service {
    let state = DrainState()
    /// The longest the drain waits for syncs under way.
    public let period: Duration

    /// A drain that waits at most `period`.
    /// - Parameter period: the longest the drain waits for syncs under way once shutdown begins.
    public init(period: Duration = .seconds(30)) {
        self.period = period
    }

    /// Waits for the group's graceful shutdown, then answers 503 to new work while the syncs
    /// under way and the server's jobs finish, for at most ``period``; a site's host then hands
    /// the jobs it still runs to the other hosts.
    public func run() async throws {
        try? await gracefulShutdown()
        state.startDraining()
        let deadline = ContinuousClock.now + period
        while state.syncsUnderWay() > 0, ContinuousClock.now < deadline, !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(50))
        }
        // The server's jobs: finished by the deadline, or handed back.
        await state.end(by: deadline)
    }
}
