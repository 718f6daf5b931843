/// An invalid geometry, or bytes/JSON that do not decode to one.
///
/// Thrown by geometry initialisers and by every codec in OutpostCore. Match a kind with the code:
///
/// ```swift
/// do { _ = try WKB.decode(bytes) }
/// catch GeometryError.Code.truncated { … }
/// ```
public struct GeometryError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The kind of failure. New codes may be added; switch with a `default`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case truncated, invalidType, invalidCount, invalidCoordinate, invalidRing, mixedLayout
            case invalidEncoding, unsupported, nestingTooDeep, unsupportedProjection
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The input ended before the geometry did.
        public static let truncated = Code(.truncated)
        /// A type code or type name that is not a known geometry type.
        public static let invalidType = Code(.invalidType)
        /// An element count that is impossible for the input (negative, or more than the bytes left).
        public static let invalidCount = Code(.invalidCount)
        /// A coordinate that is not a finite number, or a position with the wrong number of ordinates.
        public static let invalidCoordinate = Code(.invalidCoordinate)
        /// A polygon ring that is not closed or has fewer than four positions.
        public static let invalidRing = Code(.invalidRing)
        /// Parts of one geometry that disagree on Z/M.
        public static let mixedLayout = Code(.mixedLayout)
        /// Bytes or JSON that are not in the expected encoding at all.
        public static let invalidEncoding = Code(.invalidEncoding)
        /// A valid encoding of something Outpost does not support (curves, extended GeoPackage binary).
        public static let unsupported = Code(.unsupported)
        /// Collections nested deeper than the codecs accept.
        public static let nestingTooDeep = Code(.nestingTooDeep)
        /// A conversion between two spatial references Outpost cannot project between.
        public static let unsupportedProjection = Code(.unsupportedProjection)

        public var description: String { base.rawValue }

        /// Lets `catch GeometryError.Code.truncated` match a thrown `GeometryError`.
        public static func ~= (code: Code, error: any Error) -> Bool {
            (error as? GeometryError)?.code == code
        }
    }

    /// What kind of failure it is.
    public var code: Code
    /// What is wrong, in words a user can act on.
    public var message: String
    /// Byte offset in the input where the problem was found, for binary codecs.
    public var offset: Int?

    /// An error of `code` with its message and, for a decoding error, the byte offset.
    public init(_ code: Code, _ message: String, offset: Int? = nil) {
        self.code = code
        self.message = message
        self.offset = offset
    }

    public var description: String {
        if let offset { return "\(message) (at byte \(offset))" }
        return message
    }
}
