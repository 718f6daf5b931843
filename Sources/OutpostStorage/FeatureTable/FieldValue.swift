import Foundation
import OutpostCore

/// One attribute value of a feature.
public enum FieldValue: Hashable, Sendable {
    /// No value.
    case null
    /// An integer (OID, SmallInteger, Integer, BigInteger fields).
    case integer(Int64)
    /// A floating-point number (Double, Single fields).
    case double(Double)
    /// Text (String, GUID and GlobalID fields).
    case string(String)
    /// A date and time (Date fields; DateOnly keeps the day).
    case date(Date)
    /// Bytes (Blob fields).
    case blob([UInt8])

    /// Whether it is `.null`.
    public var isNull: Bool { self == .null }

    /// The value as a number, for integers and doubles.
    public var doubleValue: Double? {
        switch self {
        case .integer(let i): Double(i)
        case .double(let d): d
        default: nil
        }
    }

    /// The value as an integer, for integers and whole doubles.
    public var integerValue: Int64? {
        switch self {
        case .integer(let i): return i
        case .double(let d) where d.rounded() == d && abs(d) < 9.2e18: return Int64(d)
        default: return nil
        }
    }

    /// The text, for strings.
    public var stringValue: String? { if case .string(let s) = self { s } else { nil } }

    /// `d` as an integer when it is one that Int64 holds.
    static func exactInteger(_ d: Double) -> Int64? {
        d.rounded() == d && abs(d) < 9.2e18 ? Int64(d) : nil
    }

    /// A value stored as text in a column that is not a text column (another writer's choice):
    /// a date that parses is a date, a number that parses a number, anything else stays text.
    static func decodeStoredText(_ s: String, date: Bool, integer: Bool, numeric: Bool) -> FieldValue {
        if date, let d = GeoPackageDate.parse(s) { return .date(d) }
        if numeric, let d = Double(s) {
            if integer, let exact = exactInteger(d) { return .integer(exact) }
            return .double(d)
        }
        return .string(s)
    }

    /// A stored value as a field of `type` holds it (another writer's forms read as they mean):
    /// what a feature read from the table gets, so a value copied from a row as it is stored
    /// (a change page's stored form) becomes the value its reader would have made.
    public init(stored: StoredValue, as type: FieldType) {
        switch stored {
        case .null: self = .null
        case .integer(let i):
            if type == .double || type == .single {
                self = .double(Double(i))
            } else if type.isDate {
                self = .date(Date(timeIntervalSince1970: Double(i) / 1000))
            } else {
                self = .integer(i)
            }
        case .real(let d):
            if type.isInteger, let exact = Self.exactInteger(d) { self = .integer(exact) } else { self = .double(d) }
        case .text(let s): self = Self.decodeStoredText(s, date: type.isDate, integer: type.isInteger, numeric: type.isNumeric)
        case .blob(let b): self = .blob(b)
        }
    }

    /// The value as the ArcGIS REST API writes it: dates as epoch milliseconds, blobs base64.
    public var jsonValue: JSONValue {
        switch self {
        case .null: .null
        case .integer(let i): .integer(i)
        case .double(let d): d.isFinite ? .number(d) : .null
        case .string(let s): .string(s)
        case .date(let d): .integer(Int64((d.timeIntervalSince1970 * 1000).rounded()))
        case .blob(let b): .string(Data(b).base64EncodedString())
        }
    }

    /// Converts a JSON value to the value a field of `type` stores.
    ///
    /// Dates accept epoch milliseconds (ArcGIS) or ISO 8601 text (GeoJSON); GUIDs accept any case
    /// with or without braces and are normalised to `{UPPER-CASE}`; integers accept integral numbers.
    /// - Throws: ``StorageError/Code/invalidEdit`` when the value cannot be that type.
    public init(json: JSONValue, type: FieldType) throws {
        func mismatch() -> StorageError {
            StorageError(.invalidEdit, "\(shortened(json.jsonString)) is not a valid \(type.rawValue)")
        }
        if json.isNull {
            self = .null
            return
        }
        switch type {
        case .oid, .smallInteger, .integer, .bigInteger:
            guard let i = json.integerValue else { throw mismatch() }
            self = .integer(i)
        case .double, .single:
            guard let d = json.doubleValue, d.isFinite else { throw mismatch() }
            self = .double(d)
        case .string:
            switch json {
            case .string(let s): self = .string(s)
            case .integer(let i): self = .string(String(i))
            case .number(let d): self = .string("\(d)")
            case .bool(let b): self = .string(b ? "true" : "false")
            default: throw mismatch()
            }
        case .globalID, .guid:
            guard let s = json.stringValue, let g = GlobalID.normalized(s) else { throw mismatch() }
            self = .string(g)
        case .date, .dateOnly:
            if let ms = json.doubleValue, ms.isFinite {
                self = .date(Date(timeIntervalSince1970: ms / 1000))
            } else if let s = json.stringValue, let d = GeoPackageDate.parse(s) {
                self = .date(d)
            } else {
                throw mismatch()
            }
        case .blob:
            guard let s = json.stringValue, let data = Data(base64Encoded: s) else { throw mismatch() }
            self = .blob([UInt8](data))
        }
    }

    /// Whether a coded value's `code` equals `value` (numbers compare numerically).
    static func matches(code: JSONValue, _ value: FieldValue) -> Bool {
        switch (code, value) {
        case (.string(let a), .string(let b)): return a == b
        case (_, .integer), (_, .double):
            guard let a = code.doubleValue, let b = value.doubleValue else { return false }
            return a == b
        default: return false
        }
    }
}

/// Global ids: UUIDs written `{XXXXXXXX-XXXX-XXXX-XXXX-XXXXXXXXXXXX}` (upper case, braces), as the
/// ArcGIS REST API writes them; stored the same way so no conversion is ever needed.
public enum GlobalID {
    /// A new random (version 4) global id.
    public static func make() -> String {
        var rng = SystemRandomNumberGenerator()
        return make(using: &rng)
    }

    /// A new version 4 global id from `generator` (bulk importers pass a fast seeded generator).
    public static func make(using generator: inout some RandomNumberGenerator) -> String {
        var high = generator.next() as UInt64
        var low = generator.next() as UInt64
        high = (high & ~0xF000) | 0x4000  // version 4
        low = (low & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000  // RFC 4122 variant
        return String(unsafeUninitializedCapacity: 38) { out in
            let digits: StaticString = "0123456789ABCDEF"
            let hex = digits.utf8Start
            out[0] = UInt8(ascii: "{")
            out[37] = UInt8(ascii: "}")
            var position = 1
            for nibble in 0..<32 {
                if nibble == 8 || nibble == 12 || nibble == 16 || nibble == 20 {
                    out[position] = UInt8(ascii: "-")
                    position += 1
                }
                let word = nibble < 16 ? high : low
                out[position] = hex[Int((word >> UInt64(60 - 4 * (nibble % 16))) & 0xF)]
                position += 1
            }
            return 38
        }
    }

    /// `{UPPER}` form of a UUID given in any case, with or without braces; nil if it is not a UUID.
    public static func normalized(_ text: String) -> String? {
        if isCanonical(text.utf8) { return text }
        var body = Array(text.utf8)
        if body.count == 38, body.first == UInt8(ascii: "{"), body.last == UInt8(ascii: "}") {
            body = Array(body[1..<37])
        }
        guard body.count == 36 else { return nil }
        var out: [UInt8] = [UInt8(ascii: "{")]
        out.reserveCapacity(38)
        for (i, raw) in body.enumerated() {
            if i == 8 || i == 13 || i == 18 || i == 23 {
                guard raw == UInt8(ascii: "-") else { return nil }
                out.append(raw)
                continue
            }
            let c = raw >= 97 && raw <= 102 ? raw - 32 : raw  // a-f to A-F
            guard (c >= 48 && c <= 57) || (c >= 65 && c <= 70) else { return nil }
            out.append(c)
        }
        out.append(UInt8(ascii: "}"))
        return String(decoding: out, as: UTF8.self)
    }

    /// Whether `utf8` is already `{XXXXXXXX-XXXX-XXXX-XXXX-XXXXXXXXXXXX}` in upper case: the
    /// common case, checked without allocating.
    static func isCanonical(_ utf8: String.UTF8View) -> Bool {
        guard utf8.count == 38 else { return false }
        let checked = utf8.withContiguousStorageIfAvailable { bytes -> Bool in
            guard bytes[0] == UInt8(ascii: "{"), bytes[37] == UInt8(ascii: "}") else { return false }
            for i in 1..<37 {
                let c = bytes[i]
                if i == 9 || i == 14 || i == 19 || i == 24 {
                    if c != UInt8(ascii: "-") { return false }
                } else if !((c >= 48 && c <= 57) || (c >= 65 && c <= 70)) {
                    return false
                }
            }
            return true
        }
        return checked ?? false
    }
}

/// A fast, non-cryptographic generator (SplitMix64) seeded from the system generator, for bulk
/// global ids: 122 random bits per id keep collisions out of reach without a syscall per id.
public struct FastRandomGenerator: RandomNumberGenerator, Sendable {
    private var state: UInt64

    /// A generator seeded from the system's random source.
    public init() {
        var system = SystemRandomNumberGenerator()
        state = system.next()
    }

    /// A generator with a fixed seed: the same sequence every time (for tests and benchmarks).
    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
