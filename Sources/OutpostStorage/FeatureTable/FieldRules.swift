import Foundation
import OutpostCore

/// The checks an attribute value must pass for one field: type range, length, nullability, domain.
struct FieldRules: Sendable {
    let field: FieldDefinition
    let domain: Domain?

    /// nil when `value` is acceptable, else what is wrong.
    func problem(with value: FieldValue) -> String? {
        if value.isNull {
            return field.nullable ? nil : "is required (not nullable)"
        }
        switch (field.type, value) {
        case (.oid, .integer):
            return nil
        case (.smallInteger, .integer(let i)):
            if !(-32768...32767).contains(i) { return "\(i) is outside the SmallInteger range -32768…32767" }
        case (.integer, .integer(let i)):
            if !(Int64(Int32.min)...Int64(Int32.max)).contains(i) { return "\(i) is outside the 32-bit Integer range" }
        case (.bigInteger, .integer):
            break
        case (.double, .double(let d)):
            if !d.isFinite { return "\(d) is not a finite number" }
        case (.double, .integer):
            break
        case (.single, .double(let d)):
            if !d.isFinite || abs(d) > Double(Float.greatestFiniteMagnitude) { return "\(d) does not fit a Single" }
        case (.single, .integer):
            break
        case (.string, .string(let s)):
            // A string never has more characters than UTF-8 bytes: count characters only when needed.
            if let length = field.length, s.utf8.count > length, s.count > length {
                return "text of \(s.count) characters is longer than the field's \(length)"
            }
        case (.globalID, .string(let s)), (.guid, .string(let s)):
            if GlobalID.normalized(s) == nil { return "\"\(shortened(s))\" is not a GUID" }
        case (.date, .date(let d)), (.dateOnly, .date(let d)):
            if !d.timeIntervalSince1970.isFinite { return "is not a valid date" }
        case (.blob, .blob):
            break
        default:
            return "a \(kind(of: value)) value cannot go in a \(field.type.rawValue) field"
        }
        if let domain, !domain.allows(value) {
            return "\(shortened(value.jsonValue.jsonString)) is not in domain \"\(domain.name)\" (allowed: \(domain.allowedDescription))"
        }
        return nil
    }

    private func kind(of value: FieldValue) -> String {
        switch value {
        case .null: "null"
        case .integer: "integer"
        case .double: "double"
        case .string: "text"
        case .date: "date"
        case .blob: "blob"
        }
    }
}
