/// A 64-bit hash of bytes: 8-byte words multiplied in and rotated, then the splitmix64
/// finaliser. Not cryptographic: it tells accidental differences apart (layer checksums, tile
/// deduplication), at memory speed.
public enum FastHash {
    /// The hash of `bytes`, starting from `seed` (the same bytes and seed always give the same value, on every
    /// platform).
    public static func hash64(_ bytes: UnsafeRawBufferPointer, seed: UInt64 = 0x243F_6A88_85A3_08D3) -> UInt64 {
        var h: UInt64 = seed ^ UInt64(bytes.count)
        var i = 0
        let n = bytes.count
        while i + 8 <= n {
            let w = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: i, as: UInt64.self))
            h = rotate((h ^ w) &* 0x9E37_79B9_7F4A_7C15)
            i += 8
        }
        if i < n {
            var w: UInt64 = 0
            for k in 0..<(n - i) { w |= UInt64(bytes[i + k]) << (8 * UInt64(k)) }
            h = rotate((h ^ w) &* 0x9E37_79B9_7F4A_7C15)
        }
        h ^= h >> 30
        h = h &* 0xBF58_476D_1CE4_E5B9
        h ^= h >> 27
        h = h &* 0x94D0_49BB_1331_11EB
        return h ^ (h >> 31)
    }

    @inline(__always) private static func rotate(_ x: UInt64) -> UInt64 { (x << 31) | (x >> 33) }
}
