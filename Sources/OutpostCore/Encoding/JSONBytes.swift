/// JSON written as UTF-8 bytes: the writers of features and geometries append to a byte array,
/// which costs a fraction of appending to a `String` (no per-append count and flag upkeep), and
/// their `String` spellings decode the bytes once at the end.
extension Array where Element == UInt8 {
    /// Appends a literal's UTF-8 bytes.
    @inlinable public mutating func append(utf8 text: StaticString) {
        append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    /// Appends a string's UTF-8 bytes.
    @inlinable public mutating func append(utf8 text: String) {
        var text = text
        text.withUTF8 { append(contentsOf: $0) }
    }
}

extension String {
    /// Appends what `write` writes as bytes: the `String` spelling of a byte writer.
    @inlinable public mutating func appendWritten(_ write: (inout [UInt8]) throws -> Void) rethrows {
        var bytes: [UInt8] = []
        try write(&bytes)
        self += String(decoding: bytes, as: UTF8.self)
    }
}
