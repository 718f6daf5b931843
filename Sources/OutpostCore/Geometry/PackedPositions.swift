import Foundation

/// Lines stored as little-endian float64 x, y pairs (16 bytes a position): how locator and
/// network files keep street geometry compactly, without a GeoPackage header.
public enum PackedPositions {
    /// The positions' x and y as packed little-endian doubles (Z and M are dropped).
    public static func encode(_ positions: [Position]) -> Data {
        var bytes = [UInt8]()
        bytes.reserveCapacity(positions.count * 16)
        for p in positions {
            withUnsafeBytes(of: p.x.bitPattern.littleEndian) { bytes.append(contentsOf: $0) }
            withUnsafeBytes(of: p.y.bitPattern.littleEndian) { bytes.append(contentsOf: $0) }
        }
        return Data(bytes)
    }

    /// The positions packed in `data`; a trailing partial position is ignored.
    public static func decode(_ data: Data) -> [Position] {
        var out: [Position] = []
        out.reserveCapacity(data.count / 16)
        data.withUnsafeBytes { raw in
            var offset = 0
            while offset + 16 <= raw.count {
                let x = Double(bitPattern: UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self)))
                let y = Double(bitPattern: UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self)))
                out.append(Position(x: x, y: y))
                offset += 16
            }
        }
        return out
    }
}
