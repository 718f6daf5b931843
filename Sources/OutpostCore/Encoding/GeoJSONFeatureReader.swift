import Foundation

/// Reads the features of a GeoJSON FeatureCollection one at a time.
///
/// Over a memory-mapped file (`init(contentsOf:)`, in OutpostStorage) only the bytes of the
/// current feature are parsed, so a collection of millions of features is read with the memory
/// of one. The reader finds the
/// top-level `"features"` array by scanning tokens (strings and nesting are tracked, so a
/// `"features"` inside a property does not confuse it).
///
/// ```swift
/// var reader = try GeoJSONFeatureReader(contentsOf: url)
/// while let feature = try reader.next() { … }
/// ```
public struct GeoJSONFeatureReader: ~Copyable {
    private let data: Data
    private var cursor: Int
    private var finished = false
    /// 1-based index of the feature returned last (for error messages).
    public private(set) var featureIndex = 0

    /// Positions the reader at the first feature of `data`.
    /// - Throws: ``GeometryError/Code/invalidEncoding`` when it is not a FeatureCollection.
    public init(data: Data) throws {
        self.data = data
        self.cursor = 0
        cursor = try data.withUnsafeBytes { try Self.locateFeatures($0) }
    }

    /// The next feature, or nil after the last one.
    public mutating func next() throws -> GeoJSONFeature? {
        if finished { return nil }
        let (start, end, more) = try data.withUnsafeBytes { raw -> (Int, Int, Bool) in
            var scanner = JSONScanner(bytes: raw, position: cursor)
            scanner.skipWhitespace()
            if scanner.peek() == UInt8(ascii: "]") { return (0, 0, false) }
            let start = scanner.position
            try scanner.skipValue()
            let end = scanner.position
            scanner.skipWhitespace()
            switch scanner.peek() {
            case UInt8(ascii: ","): scanner.position += 1
            case UInt8(ascii: "]"): break
            default: throw scanner.error("expected ',' or ']' after feature")
            }
            cursor = scanner.position
            return (start, end, true)
        }
        guard more else {
            finished = true
            return nil
        }
        featureIndex += 1
        do {
            return try GeoJSONFeature(json: JSONValue.parse(data.subdata(in: start..<end)))
        } catch var error as GeometryError {
            error.message = "feature \(featureIndex): \(error.message)"
            throw error
        }
    }

    private static func locateFeatures(_ raw: UnsafeRawBufferPointer) throws -> Int {
        var s = JSONScanner(bytes: raw, position: 0)
        s.skipWhitespace()
        if s.position + 3 <= raw.count, raw[s.position] == 0xEF, raw[s.position + 1] == 0xBB, raw[s.position + 2] == 0xBF {
            s.position += 3  // UTF-8 byte order mark
            s.skipWhitespace()
        }
        guard s.peek() == UInt8(ascii: "{") else { throw s.error("a FeatureCollection must be a JSON object") }
        s.position += 1
        while true {
            s.skipWhitespace()
            if s.peek() == UInt8(ascii: "}") { throw s.error("the object has no \"features\" array") }
            let key = try s.readString()
            s.skipWhitespace()
            guard s.peek() == UInt8(ascii: ":") else { throw s.error("expected ':' after a key") }
            s.position += 1
            s.skipWhitespace()
            if key == "features" {
                guard s.peek() == UInt8(ascii: "[") else { throw s.error("\"features\" must be an array") }
                return s.position + 1
            }
            try s.skipValue()
            s.skipWhitespace()
            if s.peek() == UInt8(ascii: ",") { s.position += 1 }
        }
    }
}

/// A byte-level JSON tokenizer that skips values without building them.
struct JSONScanner {
    let bytes: UnsafeRawBufferPointer
    var position: Int

    func peek() -> UInt8? { position < bytes.count ? bytes[position] : nil }

    func error(_ message: String) -> GeometryError {
        GeometryError(.invalidEncoding, "invalid GeoJSON: \(message)", offset: position)
    }

    mutating func skipWhitespace() {
        while let b = peek(), b == 0x20 || b == 0x0A || b == 0x0D || b == 0x09 { position += 1 }
    }

    /// Reads a string token and returns its raw contents (escapes kept; enough for key matching).
    mutating func readString() throws -> String {
        guard peek() == UInt8(ascii: "\"") else { throw error("expected a string") }
        let start = position + 1
        try skipString()
        return String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<(position - 1)]), as: UTF8.self)
    }

    mutating func skipString() throws {
        position += 1
        while let b = peek() {
            position += 1
            if b == UInt8(ascii: "\\") {
                position += 1
            } else if b == UInt8(ascii: "\"") {
                return
            }
        }
        throw error("unterminated string")
    }

    /// Skips one complete value: string, object, array or scalar.
    mutating func skipValue() throws {
        skipWhitespace()
        guard let first = peek() else { throw error("unexpected end of input") }
        switch first {
        case UInt8(ascii: "\""):
            try skipString()
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            var depth = 0
            while let b = peek() {
                switch b {
                case UInt8(ascii: "\""):
                    try skipString()
                    continue
                case UInt8(ascii: "{"), UInt8(ascii: "["):
                    depth += 1
                case UInt8(ascii: "}"), UInt8(ascii: "]"):
                    depth -= 1
                    if depth == 0 {
                        position += 1
                        return
                    }
                default: break
                }
                position += 1
            }
            throw error("unterminated object or array")
        default:
            let start = position
            while let b = peek(), b != UInt8(ascii: ","), b != UInt8(ascii: "}"), b != UInt8(ascii: "]"),
                b != 0x20, b != 0x0A, b != 0x0D, b != 0x09
            {
                position += 1
            }
            if position == start { throw error("unexpected '\(Character(UnicodeScalar(first)))'") }
        }
    }
}
