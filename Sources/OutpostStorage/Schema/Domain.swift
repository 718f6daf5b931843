import OutpostCore

/// An attribute domain in the ArcGIS shape: coded values or a numeric range.
///
/// ```json
/// {"type": "codedValue", "name": "status", "codedValues": [{"name": "Open", "code": "open"}]}
/// {"type": "range", "name": "depth", "range": [0, 30]}
/// ```
public struct Domain: Hashable, Sendable, Codable {
    /// Coded values or a range.
    public enum Kind: String, Hashable, Sendable, Codable {
        /// A list of allowed values, each with a name.
        case codedValue
        /// A range of allowed numbers.
        case range
    }

    /// One allowed value and its label.
    public struct CodedValue: Hashable, Sendable, Codable {
        /// The name shown to people.
        public var name: String
        /// The value stored.
        public var code: JSONValue

        /// A coded value.
        public init(name: String, code: JSONValue) {
            self.name = name
            self.code = code
        }
    }

    /// Coded values or a range.
    public var type: Kind
    /// The domain's name.
    public var name: String
    /// What it is for, in words.
    public var description: String?
    /// The allowed values, for a coded-value domain.
    public var codedValues: [CodedValue]?
    /// `[min, max]`, inclusive.
    public var range: [Double]?

    /// A coded-value domain.
    public init(codedValues name: String, _ values: [CodedValue], description: String? = nil) {
        self.type = .codedValue
        self.name = name
        self.codedValues = values
        self.description = description
    }

    /// A range domain from `min` to `max`.
    public init(range name: String, min: Double, max: Double, description: String? = nil) {
        self.type = .range
        self.name = name
        self.range = [min, max]
        self.description = description
    }

    /// True when `value` is one of the codes or inside the range.
    public func allows(_ value: FieldValue) -> Bool {
        switch type {
        case .codedValue:
            return (codedValues ?? []).contains { FieldValue.matches(code: $0.code, value) }
        case .range:
            guard let r = range, r.count == 2, let d = value.doubleValue else { return false }
            return d >= r[0] && d <= r[1]
        }
    }

    /// A short description of what is allowed, for error messages.
    var allowedDescription: String {
        switch type {
        case .codedValue:
            let codes = (codedValues ?? []).prefix(8).map { $0.code.jsonString }
            return "one of \(codes.joined(separator: ", "))\((codedValues?.count ?? 0) > 8 ? ", …" : "")"
        case .range:
            let r = range ?? []
            return r.count == 2 ? "between \(r[0]) and \(r[1])" : "in an empty range"
        }
    }
}

/// A field's domain in a schema file: the name of a service-level domain, or the domain itself.
public enum DomainSpec: Hashable, Sendable, Codable {
    /// A domain the schema defines by name.
    case named(String)
    /// A domain written in the field.
    case inline(Domain)

    public init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if let name = try? c.decode(String.self) {
            self = .named(name)
        } else {
            self = .inline(try c.decode(Domain.self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .named(let n): try c.encode(n)
        case .inline(let d): try c.encode(d)
        }
    }
}
