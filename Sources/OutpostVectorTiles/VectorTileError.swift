import Foundation
import OutpostCore

/// Why vector tiles could not be made, read or written.
public struct VectorTileError: Error, CustomStringConvertible, Sendable, Equatable {
    /// The kinds of failure.
    public enum Code: String, Sendable {
        /// Tile bytes that are not a Mapbox Vector Tile (or are damaged).
        case corrupt
        /// A tile definition that cannot be used (an unknown layer or field, zooms out of range).
        case invalidDefinition
        /// The area or the levels asked for cannot be used.
        case invalidArea
        /// The source cannot be read.
        case source
        /// Reading or writing a file failed.
        case io
    }

    /// What kind of failure it is.
    public var code: Code
    /// What went wrong, for a person.
    public var message: String

    /// An error of this code and message.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}
