import Foundation

/// Why a network could not be built, opened or routed on.
public struct RoutingError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What kind of failure it is.
    public enum Code: String, Sendable, Hashable {
        /// No such file.
        case notFound
        /// Not a network file, a newer layout, or damaged.
        case notANetwork
        /// A request the network cannot answer as asked (too few stops, a stop too far from any street, a bad
        /// spatial reference).
        case invalidInput
        /// No path joins two stops.
        case noRoute
        /// An NAServer could not be reached or answered with an error.
        case service
    }

    /// Which input of a solve was wrong, when one was (a service answers with a 400 naming its
    /// parameter).
    public enum Input: String, Sendable, Hashable {
        /// The stops.
        case stops
        /// The barriers.
        case barriers
        /// The spatial reference results are given in.
        case outputSpatialReference
    }

    /// What kind of failure it is.
    public var code: Code
    /// What went wrong, for a person.
    public var message: String
    /// The input at fault, for an `invalidInput` error about one.
    public var input: Input?

    /// An error of this code and message.
    public init(_ code: Code, _ message: String, input: Input? = nil) {
        self.code = code
        self.message = message
        self.input = input
    }

    public var description: String { message }
}
