import Foundation

/// Why a locator could not be built, opened or searched.
public struct LocatorError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What kind of failure it is.
    public enum Code: String, Sendable, Hashable {
        /// No such file.
        case notFound
        /// Not a locator file, a newer layout, or damaged.
        case notALocator
        /// A request the locator cannot answer as asked (a field map naming no field, a layer
        /// that is not there, a location outside any spatial reference).
        case invalidInput
        /// The locator's service answered with an error.
        case service
    }

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
