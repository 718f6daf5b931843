import Foundation
import OutpostCore

/// Why a locator could not be built, opened or searched: a code (``LocatorFailure``), a message,
/// the input at fault (``LocatorFailure/Input``) when one was.
public typealias LocatorError = CodedError<LocatorFailure>

/// What kind of failure a ``LocatorError`` is.
public enum LocatorFailure: String, FailureCode {
    /// No such file.
    case notFound
    /// Not a locator file, a newer layout, or damaged.
    case notALocator
    /// A request the locator cannot answer as asked (a field map naming no field, a layer
    /// that is not there, a location outside any spatial reference).
    case invalidInput
    /// The locator's service answered with an error.
    case service

    /// Which input of a search was wrong, when one was (a service answers with a 400 naming
    /// its parameter).
    public enum Input: String, Sendable, Hashable {
        /// The location searched near, or reverse geocoded.
        case location
        /// The area a search is kept to.
        case searchArea
        /// The spatial reference results are given in.
        case outputSpatialReference
        /// A suggestion's key.
        case magicKey
    }
}
