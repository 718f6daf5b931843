/// Unsigned LEB128 integers ("varints": seven bits a byte, low first, the top bit saying more
/// follows) and the zigzag mapping that gives small negative numbers short varints, as protobuf
/// (vector tiles) and Outpost's binary sync wire write them.
public enum Varint {
    /// Appends `value` as a varint.
    @inlinable
    public static func append(_ value: UInt64, to out: inout [UInt8]) {
        var v = value
        while v >= 0x80 {
            out.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        out.append(UInt8(v))
    }

    /// A signed number as zigzag: 0, −1, 1, −2 … become 0, 1, 2, 3 …
    @inlinable
    public static func zigzag(_ v: Int64) -> UInt64 { UInt64(bitPattern: (v << 1) ^ (v >> 63)) }

    /// The signed number a zigzag value stands for.
    @inlinable
    public static func unzigzag(_ v: UInt64) -> Int64 { Int64(bitPattern: v >> 1) ^ -Int64(bitPattern: v & 1) }
}
