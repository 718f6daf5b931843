import Foundation

/// A parsed JSON document: the shared currency of the GeoJSON and Esri JSON codecs, service
/// schemas and wire bodies.
///
/// Integers that fit 64 bits stay exact (`.integer`); other numbers are `.number`. Equality is
/// JSON's: a number is its value, however it is spelled, so `.integer(12)` equals `.number(12.0)`
/// (JSON text written from a Double reads back as an integer when it has no fraction).
public enum JSONValue: Hashable, Sendable {
    /// `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// A number without fraction or exponent that fits 64 bits.
    case integer(Int64)
    /// Any other number.
    case number(Double)
    /// A string.
    case string(String)
    /// An array.
    case array([JSONValue])
    /// An object; its keys keep no order.
    case object([String: JSONValue])

    /// Parses JSON text.
    /// - Throws: ``GeometryError/Code/invalidEncoding`` with the parser's reason.
    public static func parse(_ data: Data) throws -> JSONValue {
        try data.withUnsafeBytes { raw in try parse(raw.bindMemory(to: UInt8.self)) }
    }

    /// Parses JSON text.
    public static func parse(_ text: String) throws -> JSONValue {
        var text = text
        return try text.withUTF8 { try parse($0) }
    }

    /// Parses JSON from UTF-8 bytes borrowed from elsewhere.
    public static func parse(_ bytes: UnsafeBufferPointer<UInt8>) throws -> JSONValue {
        do throws(JSONParser.Failure) {
            return try JSONParser.parse(bytes)
        } catch {
            throw GeometryError(.invalidEncoding, "invalid JSON: \(error.message) at byte \(error.offset)")
        }
    }


    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): true
        case (.bool(let a), .bool(let b)): a == b
        case (.integer(let a), .integer(let b)): a == b
        case (.number(let a), .number(let b)): a == b
        case (.integer(let i), .number(let d)), (.number(let d), .integer(let i)): Int64(exactly: d) == i
        case (.string(let a), .string(let b)): a == b
        case (.array(let a), .array(let b)): a == b
        case (.object(let a), .object(let b)): a == b
        default: false
        }
    }

    /// Consistent with ``==(_:_:)``: a whole-number `.number` hashes as the integer it equals.
    public func hash(into hasher: inout Hasher) {
        switch self {
        case .null: hasher.combine(0 as UInt8)
        case .bool(let b): hasher.combine(1 as UInt8); hasher.combine(b)
        case .integer(let i): hasher.combine(2 as UInt8); hasher.combine(i)
        case .number(let d):
            if let i = Int64(exactly: d) {
                hasher.combine(2 as UInt8); hasher.combine(i)
            } else {
                hasher.combine(3 as UInt8); hasher.combine(d)
            }
        case .string(let s): hasher.combine(4 as UInt8); hasher.combine(s)
        case .array(let a): hasher.combine(5 as UInt8); hasher.combine(a)
        case .object(let o): hasher.combine(6 as UInt8); hasher.combine(o)
        }
    }

    public subscript(key: String) -> JSONValue? {
        if case .object(let o) = self { return o[key] }
        return nil
    }

    /// An array element, nil when out of range or not an array.
    public subscript(index: Int) -> JSONValue? {
        if case .array(let a) = self, a.indices.contains(index) { return a[index] }
        return nil
    }

    /// The members, when it is an object.
    public var objectValue: [String: JSONValue]? { if case .object(let o) = self { o } else { nil } }
    /// The elements, when it is an array.
    public var arrayValue: [JSONValue]? { if case .array(let a) = self { a } else { nil } }
    /// The string, when it is one.
    public var stringValue: String? { if case .string(let s) = self { s } else { nil } }
    /// The Boolean, when it is one.
    public var boolValue: Bool? { if case .bool(let b) = self { b } else { nil } }
    /// Whether it is `null`.
    public var isNull: Bool { self == .null }

    /// The number as a Double, for `.integer` and `.number`.
    public var doubleValue: Double? {
        switch self {
        case .integer(let i): Double(i)
        case .number(let d): d
        default: nil
        }
    }

    /// The number as an exact integer (a `.number` only when it has no fraction and fits).
    public var integerValue: Int64? {
        switch self {
        case .integer(let i): return i
        case .number(let d):
            guard d.rounded() == d, abs(d) < 9.2e18 else { return nil }
            return Int64(d)
        default: return nil
        }
    }

    /// A short name of the JSON type, for error messages.
    public var typeName: String {
        switch self {
        case .null: "null"
        case .bool: "boolean"
        case .integer, .number: "number"
        case .string: "string"
        case .array: "array"
        case .object: "object"
        }
    }

    // MARK: - Writing

    /// Compact JSON text; object keys are sorted so output is stable.
    public var jsonString: String { String(decoding: jsonBytes, as: UTF8.self) }

    /// The value as compact UTF-8 JSON.
    public var jsonData: Data { Data(jsonBytes) }

    /// The UTF-8 bytes of ``jsonString``.
    public var jsonBytes: [UInt8] {
        var out: [UInt8] = []
        write(to: &out)
        return out
    }

    /// Appends the compact JSON text to a string (feature writers that mix it with their own
    /// text): scalars directly, containers through the byte writer.
    public func write(to out: inout String) {
        switch self {
        case .null: out += "null"
        case .bool(let b): out += b ? "true" : "false"
        case .integer(let i): out += String(i)
        case .number(let d): JSONValue.writeNumber(d, to: &out)
        case .string(let s): JSONValue.writeString(s, to: &out)
        case .array, .object: out += String(decoding: jsonBytes, as: UTF8.self)
        }
    }

    /// Appends the compact JSON text as UTF-8: the writer behind every other spelling (bytes
    /// append without String's per-call bookkeeping, a large batch is written several times
    /// faster).
    public func write(to out: inout [UInt8]) {
        switch self {
        case .null: JSONValue.append("null", to: &out)
        case .bool(let b): JSONValue.append(b ? "true" : "false", to: &out)
        case .integer(let i): JSONValue.writeInteger(i, to: &out)
        case .number(let d): JSONValue.writeNumber(d, to: &out)
        case .string(let s): JSONValue.writeString(s, to: &out)
        case .array(let a):
            out.append(UInt8(ascii: "["))
            for (i, v) in a.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                v.write(to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let o):
            out.append(UInt8(ascii: "{"))
            // The entries' positions sorted by key: no copy of the entries, no second look-up,
            // and no heap array (a batch writes tens of thousands of small objects).
            withUnsafeTemporaryAllocation(of: [String: JSONValue].Index.self, capacity: o.count) { positions in
                var n = 0
                var position = o.startIndex
                while position != o.endIndex {
                    positions.initializeElement(at: n, to: position)
                    n += 1
                    position = o.index(after: position)
                }
                var sorted = positions  // the same memory: sorted in place
                sorted.sort { o[$0].key < o[$1].key }
                for i in 0..<n {
                    if i > 0 { out.append(UInt8(ascii: ",")) }
                    JSONValue.writeString(o[positions[i]].key, to: &out)
                    out.append(UInt8(ascii: ":"))
                    o[positions[i]].value.write(to: &out)
                }
                _ = positions.deinitialize()
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    private static func append(_ text: StaticString, to out: inout [UInt8]) {
        out.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    private static func append(_ text: String, to out: inout [UInt8]) {
        var text = text
        text.withUTF8 { out.append(contentsOf: $0) }
    }

    /// Writes an integer's decimal digits.
    public static func writeInteger(_ i: Int64, to out: inout [UInt8]) {
        if i < 0 { out.append(UInt8(ascii: "-")) }
        var magnitude = i.magnitude
        guard magnitude >= 10 else { return out.append(UInt8(ascii: "0") + UInt8(magnitude)) }
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var n = 0
            while magnitude > 0 {
                digits[n] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
                n += 1
            }
            for k in stride(from: n - 1, through: 0, by: -1) { out.append(digits[k]) }
        }
    }

    /// Writes a number as JSON: shortest round-trip form, integers without a fraction, `null` for
    /// NaN and infinities (JSON has no spelling for them).
    public static func writeNumber(_ d: Double, to out: inout String) {
        guard d.isFinite else { return out += "null" }
        out += writesAsInteger(d) ? String(Int64(d)) : d.description
    }

    /// ``writeNumber(_:to:)-(_,String)`` for a byte buffer.
    public static func writeNumber(_ d: Double, to out: inout [UInt8]) {
        guard d.isFinite else { return append("null", to: &out) }
        if writesAsInteger(d) {
            writeInteger(Int64(d), to: &out)
        } else {
            append(d.description, to: &out)
        }
    }

    private static func writesAsInteger(_ d: Double) -> Bool { d.rounded() == d && abs(d) < 1e15 }

    /// The JSON text of an array of strings, as `JSONValue.array(strings.map { .string($0) })`
    /// writes it, written straight from the strings (no enum value per element): the lists of
    /// global ids bound for `json_each`, a thousand to a download's page.
    public static func arrayText(_ strings: some Collection<String>) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(2 + strings.count * 41)
        out.append(UInt8(ascii: "["))
        for (i, s) in strings.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            writeString(s, to: &out)
        }
        out.append(UInt8(ascii: "]"))
        return String(decoding: out, as: UTF8.self)
    }

    /// Writes a JSON string literal with the escapes RFC 8259 §7 requires.
    public static func writeString(_ s: String, to out: inout String) {
        // Most strings need no escape: appended whole, no byte buffer.
        guard s.utf8.contains(where: { $0 < 0x20 || $0 == 0x22 || $0 == 0x5C }) else {
            out += "\""
            out += s
            out += "\""
            return
        }
        var bytes: [UInt8] = []
        writeString(s, to: &bytes)
        out += String(decoding: bytes, as: UTF8.self)
    }

    /// ``writeString(_:to:)-(_,String)`` for a byte buffer.
    public static func writeString(_ s: String, to out: inout [UInt8]) {
        var s = s
        s.withUTF8 { utf8 in
            out.append(UInt8(ascii: "\""))
            // Runs without an escape are appended whole.
            var run = 0
            for (i, byte) in utf8.enumerated() where byte < 0x20 || byte == 0x22 || byte == 0x5C {
                out.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[run..<i]))
                run = i + 1
                out.append(UInt8(ascii: "\\"))
                switch byte {
                case 0x22: out.append(UInt8(ascii: "\""))
                case 0x5C: out.append(UInt8(ascii: "\\"))
                case 0x0A: out.append(UInt8(ascii: "n"))
                case 0x0D: out.append(UInt8(ascii: "r"))
                case 0x09: out.append(UInt8(ascii: "t"))
                default:
                    let hex = Array("0123456789abcdef".utf8)
                    out.append(contentsOf: [UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
                }
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[run...]))
            out.append(UInt8(ascii: "\""))
        }
    }
}

extension JSONValue: Codable {
    public init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() {
            self = .null
        } else if let b = try? c.decode(Bool.self) {
            self = .bool(b)
        } else if let i = try? c.decode(Int64.self) {
            self = .integer(i)
        } else if let d = try? c.decode(Double.self) {
            self = .number(d)
        } else if let s = try? c.decode(String.self) {
            self = .string(s)
        } else if let a = try? c.decode([JSONValue].self) {
            self = .array(a)
        } else {
            self = .object(try c.decode([String: JSONValue].self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .null: try c.encodeNil()
        case .bool(let b): try c.encode(b)
        case .integer(let i): try c.encode(i)
        case .number(let d): try c.encode(d)
        case .string(let s): try c.encode(s)
        case .array(let a): try c.encode(a)
        case .object(let o): try c.encode(o)
        }
    }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int64) { self = .integer(value) }
    public init(floatLiteral value: Double) { self = .number(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
    public init(nilLiteral: ()) { self = .null }
}
