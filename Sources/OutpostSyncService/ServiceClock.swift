import Foundation

/// Where a service's stores and job records read the time: replicas' creation and last sync,
/// job updates, result retention. One definition instead of one per store; ``system`` reads the
/// wall clock, and a test may hand a store or a job store a clock of its own.
public struct ServiceClock: Sendable {
    /// The time now.
    public var now: @Sendable () -> Date

    /// A clock reading `now`.
    public init(now: @escaping @Sendable () -> Date) { self.now = now }

    /// The wall clock.
    public static let system = ServiceClock { Date() }

    /// The time now in milliseconds since 1970 (how replica and job records store it).
    public func milliseconds() -> Int64 { Int64(now().timeIntervalSince1970 * 1000) }
}
