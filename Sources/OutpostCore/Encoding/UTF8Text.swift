extension String {
    /// The text of `bytes` when they are valid UTF-8, else nil.
    ///
    /// ASCII (global ids, most names and values) is valid UTF-8 as it is and goes through the
    /// decoding initializer, which is specialized for it; `String(validating:as:)` is the standard
    /// library's unspecialized generic, which looks up type metadata for every string (a fifth of a
    /// server's binary batch decoding, a tenth of a JSON parse).
    public init?(validUTF8 bytes: UnsafeBufferPointer<UInt8>) {
        if bytes.allSatisfy({ $0 < 0x80 }) {
            self = String(decoding: bytes, as: UTF8.self)
        } else if let text = String(validating: bytes, as: UTF8.self) {
            self = text
        } else {
            return nil
        }
    }
}
