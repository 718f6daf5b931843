import Foundation
import OutpostCore

#if canImport(Glibc)
    import Glibc
#endif

/// Named fault points between the durable steps of sync, on both sides, so tests can prove that
/// a crash or an error at any of them leaves nothing lost or duplicated (docs/sync.md, invariant I10).
///
/// Points are armed in code (`injector.arm("client.afterSend", .fail)`) or from a specification
/// `point:action[,point:action]` where action is `fail`, `kill` (SIGKILL of the process itself,
/// for the crash tests) or `stop` (SIGSTOP, for tests of two processes racing). An armed point fires once. Libraries never arm points on their own: the
/// default everywhere is an injector with none, and only a debug build of `outpost` reads
/// `OUTPOST_FAULT` (docs/sync.md, "Fault points").
public final class FaultInjector: Sendable {
    /// What an armed point does when reached.
    public enum Action: String, Sendable {
        /// Throw an error, as if the step failed.
        case fail
        /// Kill the process on the spot (SIGKILL), as a crash or the OS would.
        case kill
        /// Stop the process (SIGSTOP) until a test continues it (SIGCONT), to hold it between two
        /// steps while another process acts.
        case stop
    }

    /// The error an armed `fail` point throws.
    public struct InjectedFault: Error, CustomStringConvertible, Sendable {
        /// The point that fired.
        public var point: String
        public var description: String { "injected fault at \(point)" }
    }

    private let armed: Locked<[String: Action]>
    private let reached: Locked<[String]>
    private let hooks: Locked<[String: @Sendable () -> Void]>

    /// An injector with `points` armed (none by default).
    public init(_ points: [String: Action] = [:]) {
        armed = Locked(points)
        reached = Locked([])
        hooks = Locked([:])
    }

    /// Runs `body` once when `point` is next reached (to act between two steps, say to edit
    /// while a sync runs).
    public func onReach(_ point: String, _ body: @escaping @Sendable () -> Void) {
        hooks.withLock { $0[point] = body }
    }

    /// The points of a specification `point:action[,point:action]` (entries that do not parse
    /// are left out).
    public convenience init(specification: String) {
        var points: [String: Action] = [:]
        for item in specification.split(separator: ",") {
            let parts = item.split(separator: ":")
            if parts.count == 2, let action = Action(rawValue: String(parts[1])) { points[String(parts[0])] = action }
        }
        self.init(points)
    }

    /// Arms `point`: the next time it is reached, `action` happens.
    public func arm(_ point: String, _ action: Action = .fail) {
        armed.withLock { $0[point] = action }
    }

    /// Disarms `point` if it has not fired (a test's fault that the run did not reach).
    public func disarm(_ point: String) {
        _ = armed.withLock { $0.removeValue(forKey: point) }
    }

    /// Every point passed so far, in order (armed or not).
    public var trace: [String] { reached.withLock { $0 } }

    /// Called by sync code at each fault point.
    public func check(_ point: String) throws {
        reached.withLock {
            // A long-running server passes points forever: keep the latest only.
            if $0.count >= 10_000 { $0.removeFirst(5_000) }
            $0.append(point)
        }
        if let hook = hooks.withLock({ $0.removeValue(forKey: point) }) { hook() }
        guard let action = armed.withLock({ $0.removeValue(forKey: point) }) else { return }
        switch action {
        case .fail: throw InjectedFault(point: point)
        case .kill: kill(getpid(), SIGKILL)
        case .stop: kill(getpid(), SIGSTOP)
        }
    }
}
