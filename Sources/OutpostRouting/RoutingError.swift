import Foundation
import OutpostCore

/// Why a network could not be built, opened or routed on: a code (``RoutingFailure``), a
/// message, the input at fault (``RoutingFailure/Input``) when one was.
public typealias RoutingError = CodedError<RoutingFailure>

/// What kind of failure a ``RoutingError`` is.
public enum RoutingFailure: String, FailureCode {
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
}
