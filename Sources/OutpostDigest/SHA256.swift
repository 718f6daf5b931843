import Crypto
import Foundation

/// SHA-256 (FIPS 180-4), for content hashes of upload batches, attachments and delta files,
/// through swift-crypto: CryptoKit on Apple platforms, and on Linux the BoringSSL that swift-crypto
/// compiles in (with its assembly, which uses the processor's SHA instructions where it has them),
/// so the sync stack needs no system crypto library and hashing a 100 MB photo or a 3 MB batch is
/// not the slow part.
///
/// A value: a copy taken part way through hashes on independently of the original (swift-crypto's
/// hash functions copy their state on write).
public struct SHA256: Sendable {
    private var hasher = Crypto.SHA256()

    public init() {}

    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard !bytes.isEmpty else { return }
        hasher.update(bufferPointer: bytes)
    }

    public mutating func update(_ bytes: [UInt8]) { bytes.withUnsafeBytes { update($0) } }

    public mutating func update(_ data: Data) { data.withUnsafeBytes { update($0) } }

    public mutating func update(_ text: String) {
        var text = text
        text.withUTF8 { update(UnsafeRawBufferPointer($0)) }
    }

    /// The 32-byte digest (the hasher should not be used afterwards).
    public mutating func finalize() -> [UInt8] {
        Array(hasher.finalize())
    }

    /// The lower-case hex digest of `bytes`.
    public static func hex(_ bytes: [UInt8]) -> String {
        bytes.withUnsafeBytes { hex($0) }
    }

    public static func hex(_ data: Data) -> String {
        data.withUnsafeBytes { hex($0) }
    }

    public static func hex(_ bytes: UnsafeRawBufferPointer) -> String {
        var hasher = SHA256()
        hasher.update(bytes)
        return hexString(hasher.finalize())
    }

    public static func hex(_ text: String) -> String {
        var hasher = SHA256()
        hasher.update(text)
        return hexString(hasher.finalize())
    }

    public static func hexString(_ digest: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(digest.count * 2)
        for b in digest {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 0xF)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
