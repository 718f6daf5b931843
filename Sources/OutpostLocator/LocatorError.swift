import Foundation

/// Why a locator could not be built, opened or searched.
public struct LocatorError: Error, Hashable, Sendable, CustomStringConvertible {
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

    public var code: Code
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}
