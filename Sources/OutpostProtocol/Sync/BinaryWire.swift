import Foundation
import OutpostCore

/// A binary body's first four bytes: three that say what it is (a JSON body starts with `{` or
/// white space), then the version of its layout.
struct BinaryWireMagic {
    let bytes: [UInt8]
    /// What the body is, for the error about a layout this reader does not know.
    let what: String

    /// Whether `body` is such a body, in any layout version.
    func marks(_ body: Data) -> Bool { body.starts(with: bytes.prefix(3)) }

    /// Whether `body` is such a body in this very layout version.
    func marksLayout(of body: Data) -> Bool { body.starts(with: bytes) }
}

/// The primitives of Outpost's compact binary sync encoding (docs/sync.md, "Binary batch
/// encoding"): LEB128 variable-length integers (signed ones zigzag-mapped), length-prefixed
/// UTF-8 strings, little-endian IEEE 754 doubles, a per-body table of names so a field name is
/// written once and then referred to by number, and tagged values that carry any ``JSONValue``.
struct BinaryWireWriter {
    /// Value tags; the reader refuses any other.
    enum Tag: UInt8 {
        case null = 0, `false`, `true`, integer, number, string, array, object
    }

    var out: [UInt8] = []
    private var names: [String: UInt64] = [:]
    /// By member count: the sorted names of the last object of that many members and their
    /// numbers in the table (see ``object(_:)``).
    private var shapes: [(names: [String], numbers: [UInt64])?] = []

    /// A body that starts with `magic`.
    init(capacity: Int, magic: BinaryWireMagic) {
        out.reserveCapacity(capacity)
        out.append(contentsOf: magic.bytes)
    }

    mutating func byte(_ b: UInt8) { out.append(b) }

    mutating func unsigned(_ value: UInt64) { Varint.append(value, to: &out) }

    mutating func signed(_ value: Int64) { unsigned(Varint.zigzag(value)) }

    /// The place of a count written before what it counts is known (``beginCount()``).
    struct CountMark {
        fileprivate let offset: Int
    }

    /// Room for a count, filled by ``endCount(_:_:)`` once the items after it are written.
    mutating func beginCount() -> CountMark {
        let mark = CountMark(offset: out.count)
        out.append(contentsOf: repeatElement(0, count: Self.countRoom))
        return mark
    }

    /// Writes the count at `mark`, moving what follows back over the room it did not need.
    mutating func endCount(_ mark: CountMark, _ count: Int) {
        var encoded = BinaryWireWriter(bare: ())
        encoded.unsigned(UInt64(count))
        out.replaceSubrange(mark.offset..<mark.offset + Self.countRoom, with: encoded.out)
    }

    /// Writes at `mark` the number of bytes written after its room (a length-prefixed part).
    mutating func endLength(_ mark: CountMark) {
        endCount(mark, out.count - mark.offset - Self.countRoom)
    }

    /// Where the room of `mark` starts: the bytes before it do not move when it is filled.
    func offset(of mark: CountMark) -> Int { mark.offset }

    /// The most bytes a 64-bit LEB128 integer takes.
    private static let countRoom = 10

    private init(bare: Void) {}

    mutating func double(_ value: Double) {
        let bits = value.bitPattern.littleEndian
        withUnsafeBytes(of: bits) { out.append(contentsOf: $0) }
    }

    mutating func string(_ value: String) {
        var s = value
        s.withUTF8 { utf8 in
            unsigned(UInt64(utf8.count))
            out.append(contentsOf: utf8)
        }
    }

    /// Bytes as they are, after their length (a string's layout, without its UTF-8 check).
    mutating func blob(_ value: [UInt8]) {
        unsigned(UInt64(value.count))
        out.append(contentsOf: value)
    }

    /// A name: its number in the body's table, or (the first time) the table's next number
    /// followed by the name itself.
    mutating func name(_ value: String) {
        if let known = names[value] {
            unsigned(known)
            return
        }
        let next = UInt64(names.count)
        names[value] = next
        unsigned(next)
        string(value)
    }

    /// Names and their values, names in sorted order so the same content gives the same bytes.
    ///
    /// The objects of a body mostly share their names (a page's features, a batch's inserts): an
    /// object with the names of the last one of its size reuses their order and numbers, and
    /// looks each member up once, instead of sorting its names and hashing each twice (a profile
    /// of a server making a download's pages: ~11% of its samples hashing strings, ~3% comparing
    /// them, some of it for these). The bytes are the same.
    mutating func object(_ members: [String: JSONValue]) {
        unsigned(UInt64(members.count))
        if members.count == 1, let (key, value) = members.first {
            name(key)
            self.value(value)
            return
        }
        let size = members.count
        if size < shapes.count, let shape = shapes[size] {
            var found: [Dictionary<String, JSONValue>.Index] = []
            found.reserveCapacity(size)
            for key in shape.names {
                guard let index = members.index(forKey: key) else { break }
                found.append(index)
            }
            if found.count == size {
                for (k, index) in found.enumerated() {
                    unsigned(shape.numbers[k])
                    value(members[index].value)
                }
                return
            }
        }
        let sorted = members.keys.sorted()
        var numbers: [UInt64] = []
        numbers.reserveCapacity(size)
        for key in sorted {
            name(key)
            numbers.append(names[key]!)
            value(members[key]!)
        }
        if size < 64 {
            if shapes.count <= size { shapes.append(contentsOf: repeatElement(nil, count: size + 1 - shapes.count)) }
            shapes[size] = (sorted, numbers)
        }
    }

    mutating func value(_ value: JSONValue) {
        switch value {
        case .null: byte(Tag.null.rawValue)
        case .bool(let b): byte(b ? Tag.true.rawValue : Tag.false.rawValue)
        case .integer(let i):
            byte(Tag.integer.rawValue)
            signed(i)
        case .number(let d):
            byte(Tag.number.rawValue)
            double(d)
        case .string(let s):
            byte(Tag.string.rawValue)
            string(s)
        case .array(let items):
            byte(Tag.array.rawValue)
            unsigned(UInt64(items.count))
            for item in items { self.value(item) }
        case .object(let members):
            byte(Tag.object.rawValue)
            object(members)
        }
    }
}

/// Reads what ``BinaryWireWriter`` writes from borrowed bytes. Every read checks the bytes left
/// first, a count is refused when the bytes left cannot hold that many items (so a hostile
/// count allocates nothing), strings must be valid UTF-8, numbers finite, and nesting shallow:
/// malformed input ends in a `DecodingError` naming the offset, never a crash.
struct BinaryWireReader {
    private let bytes: UnsafeRawBufferPointer
    private(set) var offset = 0
    /// The names defined so far (a framed batch's frames go on with the table of those before).
    private(set) var names: [String] = []
    private var depth = 0
    static let maximumDepth = 64

    /// Reads a part of a body without a magic of its own (a frame), its name table going on
    /// from `names`.
    init(part bytes: UnsafeRawBufferPointer, names: [String]) {
        self.bytes = bytes
        self.names = names
    }

    /// Reads after `magic`, refusing a body in another layout version.
    init(_ bytes: UnsafeRawBufferPointer, after magic: BinaryWireMagic) throws {
        self.bytes = bytes
        let version = magic.bytes[3]
        guard bytes.count >= magic.bytes.count, bytes[3] == version else {
            throw WireJSON.invalid("\(magic.what) layout \(bytes.count > 3 ? bytes[3] : 0) is not this reader's (\(version))")
        }
        offset = magic.bytes.count
    }

    var atEnd: Bool { offset == bytes.count }

    func invalid(_ message: String) -> DecodingError { WireJSON.invalid("\(message) (byte \(offset))") }

    mutating func byte() throws -> UInt8 {
        guard offset < bytes.count else { throw invalid("the body ends early") }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func unsigned() throws -> UInt64 {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            let b = try byte()
            guard shift < 64, shift < 63 || b <= 1 else { throw invalid("an integer is too long") }
            result |= UInt64(b & 0x7F) << shift
            if b < 0x80 { return result }
            shift += 7
        }
    }

    mutating func signed() throws -> Int64 {
        return Varint.unzigzag(try unsigned())
    }

    /// A count of items that each take at least `bytesEach` bytes.
    mutating func count(_ what: String, bytesEach: Int = 1) throws -> Int {
        let n = try unsigned()
        guard n <= UInt64(bytes.count - offset) / UInt64(bytesEach) else { throw invalid("\(what) counts \(n) items, more than the body holds") }
        return Int(n)
    }

    mutating func double() throws -> Double {
        guard bytes.count - offset >= 8 else { throw invalid("the body ends inside a number") }
        var bits: UInt64 = 0
        withUnsafeMutableBytes(of: &bits) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + 8])) }
        offset += 8
        let value = Double(bitPattern: UInt64(littleEndian: bits))
        guard value.isFinite else { throw invalid("a number is not finite") }
        return value
    }

    mutating func string() throws -> String {
        let length = try count("a string")
        let raw = UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + length])
        guard let text = String(validUTF8: raw.bindMemory(to: UInt8.self)) else { throw invalid("a string is not UTF-8") }
        offset += length
        return text
    }

    /// What ``BinaryWireWriter/blob(_:)`` writes: a length, then that many bytes (copied).
    mutating func blob() throws -> [UInt8] {
        let length = try count("a blob")
        defer { offset += length }
        return [UInt8](UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + length]))
    }

    mutating func name() throws -> String {
        let n = try unsigned()
        if n < UInt64(names.count) { return names[Int(n)] }
        guard n == UInt64(names.count) else { throw invalid("name \(n) is not defined (\(names.count) are)") }
        let text = try string()
        names.append(text)
        return text
    }

    mutating func object() throws -> [String: JSONValue] {
        // A member is at least a name number and a tag.
        let n = try count("an object", bytesEach: 2)
        var members = [String: JSONValue](minimumCapacity: n)
        for _ in 0..<n {
            let key = try name()
            guard members.updateValue(try value(), forKey: key) == nil else { throw invalid("an object names \"\(key.prefix(40))\" twice") }
        }
        return members
    }

    mutating func value() throws -> JSONValue {
        let tag = try byte()
        switch BinaryWireWriter.Tag(rawValue: tag) {
        case .null: return .null
        case .false: return .bool(false)
        case .true: return .bool(true)
        case .integer: return .integer(try signed())
        case .number: return .number(try double())
        case .string: return .string(try string())
        case .array:
            let n = try count("an array")
            return try nested {
                var items: [JSONValue] = []
                items.reserveCapacity(n)
                for _ in 0..<n { items.append(try $0.value()) }
                return .array(items)
            }
        case .object: return try nested { .object(try $0.object()) }
        case nil: throw invalid("unknown value tag \(tag)")
        }
    }

    private mutating func nested(_ body: (inout BinaryWireReader) throws -> JSONValue) throws -> JSONValue {
        depth += 1
        guard depth <= Self.maximumDepth else { throw invalid("values are nested too deeply") }
        defer { depth -= 1 }
        return try body(&self)
    }
}
