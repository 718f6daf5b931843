/// CRC-32 (ISO 3309 / ITU-T V.42, polynomial 0xEDB88320 reflected), as zlib, PNG and ZIP use it.
public struct CRC32: Sendable, Hashable {
    /// The checksum of the bytes so far.
    public private(set) var value: UInt32 = 0

    /// The checksum of no bytes.
    public init() {}

    /// Continues a checksum computed earlier (for example, one saved in a job checkpoint).
    public init(resuming value: UInt32) { self.value = value }

    private static let table: [UInt32] = (0..<256).map { n in
        var c = UInt32(n)
        for _ in 0..<8 { c = c & 1 != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        return c
    }

    /// Continues the checksum over `bytes`.
    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        var c = ~value
        for b in bytes { c = Self.table[Int((c ^ UInt32(b)) & 0xFF)] ^ (c >> 8) }
        value = ~c
    }

    /// Adds bytes to the checksum.
    public mutating func update(_ bytes: [UInt8]) { bytes.withUnsafeBytes { update($0) } }

    /// The checksum of `bytes`.
    public static func checksum(_ bytes: [UInt8]) -> UInt32 {
        var crc = CRC32()
        crc.update(bytes)
        return crc.value
    }
}
