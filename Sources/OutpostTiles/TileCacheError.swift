import Foundation

/// What went wrong with a tile cache or an export, naming the file and tile when there is one.
public struct TileCacheError: Error, CustomStringConvertible, Sendable {
    public enum Code: String, Sendable {
        /// The area of interest or the level list cannot be used.
        case invalidArea
        /// The export would exceed the maximum tile count.
        case tooManyTiles
        /// A file is not a tile cache Outpost reads (or is damaged).
        case corrupt
        /// The format is a tile cache Outpost does not read (a deflated package, Compact Cache V1).
        case unsupported
        /// A tile source failed.
        case source
        /// Reading or writing a file failed.
        case io
    }

    /// What kind of failure it is.
    public var code: Code
    /// What went wrong, for a person.
    public var message: String
    /// The file concerned, when there is one.
    public var file: String?
    /// The tile concerned, when there is one.
    public var tile: TileKey?

    /// An error of this code and message.
    public init(_ code: Code, _ message: String, file: String? = nil, tile: TileKey? = nil) {
        self.code = code
        self.message = message
        self.file = file
        self.tile = tile
    }

    public var description: String {
        var text = message
        if let file { text += " (\(file)" + (tile.map { ", tile \($0)" } ?? "") + ")" } else if let tile { text += " (tile \(tile))" }
        return text
    }
}
