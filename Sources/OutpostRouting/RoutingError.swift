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

    /// Which input of a solve was wrong, when one was (a service answers with a 400 naming its
    /// parameter).
    public enum Input: String, Sendable, Hashable {
        case stops
        case barriers
        /// The spatial reference results are given in.
        case outputSpatialReference
    }

    public var code: Code
    public var message: String
    /// The input at fault, for an `invalidInput` error about one.
    public var input: Input?

    public init(_ code: Code, _ message: String, input: Input? = nil) {
        self.code = code
        self.message = message
        self.input = input
    }

    public var description: String { message }
}
