import Foundation

/// Why a network could not be built, opened or routed on.
public struct RoutingError: Error, Hashable, Sendable, CustomStringConvertible {
    public enum Code: String, Sendable, Hashable {
        case notFound
        /// Not a network file, a newer layout, or damaged.
        case notANetwork
        case invalidInput
        /// No path joins two stops.
        case noRoute
        /// An NAServer could not be reached or answered with an error.
        case service
    }

    public var code: Code
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}
