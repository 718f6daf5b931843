import Foundation

/// Where logic reads the time of day: jobs (when a snapshot was saved, when a message was
/// logged, how long a server has been out of reach), ledgers, tokens, conflict time stamps.
/// The one place the wall clock is read; a test hands in a clock of its own instead of sleeping
/// to make time pass.
public struct WallClock: Sendable {
    /// The time now.
    public var now: @Sendable () -> Date

    /// A clock reading `now`.
    public init(now: @escaping @Sendable () -> Date) { self.now = now }

    /// The wall clock.
    public static let system = WallClock { Date() }

    /// The time now in milliseconds since 1970 (how replica and job records store it).
    public func milliseconds() -> Int64 { Int64(now().timeIntervalSince1970 * 1000) }
}

/// Durations as job records and job parameters keep them.
extension Duration {
    /// The duration in whole milliseconds, rounded toward zero (as job records and job
    /// parameters keep times).
    public var wholeMilliseconds: Int64 { components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000 }
}
