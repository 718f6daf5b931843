/// Bounds-checked little/big-endian reads over a borrowed byte buffer.
///
/// Every read checks the bytes left first, so a truncated or hostile input ends in a
/// ``GeometryError`` instead of a crash or an out-of-bounds read.
struct ByteReader: ~Copyable {
    let buffer: UnsafeRawBufferPointer
    private(set) var offset: Int
    var littleEndian = true

    init(_ buffer: UnsafeRawBufferPointer, offset: Int = 0) {
        self.buffer = buffer
        self.offset = offset
    }

    var remaining: Int { buffer.count - offset }

    mutating func require(_ count: Int, _ what: @autoclosure () -> String) throws {
        guard count >= 0, remaining >= count else {
            throw GeometryError(.truncated, "input ended inside \(what())", offset: offset)
        }
    }

    mutating func readByte() throws -> UInt8 {
        try require(1, "a byte")
        defer { offset += 1 }
        return buffer[offset]
    }

    mutating func readUInt32() throws -> UInt32 {
        try require(4, "a 32-bit integer")
        var raw: UInt32 = 0
        withUnsafeMutableBytes(of: &raw) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: buffer[offset..<offset + 4])) }
        offset += 4
        return littleEndian ? UInt32(littleEndian: raw) : UInt32(bigEndian: raw)
    }

    mutating func readInt32() throws -> Int32 { Int32(bitPattern: try readUInt32()) }

    mutating func readDouble() throws -> Double {
        try require(8, "a double")
        var raw: UInt64 = 0
        withUnsafeMutableBytes(of: &raw) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: buffer[offset..<offset + 8])) }
        offset += 8
        return Double(bitPattern: littleEndian ? UInt64(littleEndian: raw) : UInt64(bigEndian: raw))
    }

    mutating func skip(_ count: Int) throws {
        try require(count, "skipped bytes")
        offset += count
    }
}

/// Appends little- or big-endian values to a growing byte array.
struct ByteWriter {
    var bytes: [UInt8] = []
    var littleEndian = true

    init(capacity: Int = 64, littleEndian: Bool = true) {
        bytes.reserveCapacity(capacity)
        self.littleEndian = littleEndian
    }

    mutating func writeByte(_ byte: UInt8) { bytes.append(byte) }

    mutating func writeUInt32(_ value: UInt32) {
        let v = littleEndian ? value.littleEndian : value.bigEndian
        withUnsafeBytes(of: v) { bytes.append(contentsOf: $0) }
    }

    mutating func writeInt32(_ value: Int32) { writeUInt32(UInt32(bitPattern: value)) }

    mutating func writeDouble(_ value: Double) {
        let bits = value.bitPattern
        let v = littleEndian ? bits.littleEndian : bits.bigEndian
        withUnsafeBytes(of: v) { bytes.append(contentsOf: $0) }
    }

    mutating func write(contentsOf other: [UInt8]) { bytes.append(contentsOf: other) }
}
