import Foundation
import OutpostCore

/// Tokens of the where-clause language.
enum WhereToken: Hashable {
    case identifier(String)
    case quotedIdentifier(String)
    case integer(Int64)
    case number(Double)
    case string(String)
    case symbol(String)
    case end
}

/// Recursive-descent parser for ``WhereClause``. Depth, list length and input length are bounded
/// so hostile input ends in an error, never a stack overflow or a huge allocation.
struct WhereClauseParser {
    private var tokens: [(token: WhereToken, offset: Int)]
    private var index = 0
    private var depth = 0
    private let field: (String) -> WhereClause.FieldInfo?

    init(text: String, field: @escaping (String) -> WhereClause.FieldInfo?) throws {
        self.field = field
        self.tokens = try Self.tokenize(text)
    }

    private static let keywords: Set<String> = [
        "AND", "OR", "NOT", "IN", "LIKE", "ESCAPE", "IS", "NULL", "BETWEEN", "DATE", "TIMESTAMP",
    ]

    private func error(_ message: String) -> StorageError {
        let offset = tokens[min(index, tokens.count - 1)].offset
        return StorageError(.invalidWhereClause, "\(message) (at character \(offset + 1))")
    }

    private var current: WhereToken { tokens[index].token }

    private mutating func advance() { if index < tokens.count - 1 { index += 1 } }

    private func isKeyword(_ word: String) -> Bool {
        if case .identifier(let s) = current { return s.uppercased() == word }
        return false
    }

    private mutating func accept(keyword: String) -> Bool {
        guard isKeyword(keyword) else { return false }
        advance()
        return true
    }

    private mutating func accept(symbol: String) -> Bool {
        guard current == .symbol(symbol) else { return false }
        advance()
        return true
    }

    private mutating func expect(symbol: String) throws {
        guard accept(symbol: symbol) else { throw error("expected '\(symbol)'") }
    }

    private mutating func enter() throws {
        depth += 1
        guard depth <= WhereClause.maxDepth else { throw error("the where clause nests deeper than \(WhereClause.maxDepth) levels") }
    }

    // MARK: Grammar

    mutating func parseAll() throws -> SQLExpression {
        guard current != .end else { throw error("the where clause is empty") }
        let e = try condition()
        guard current == .end else { throw error("unexpected \(describe(current))") }
        guard isBoolean(e) else { throw error("the where clause must be a condition, such as field = value") }
        return e
    }

    private mutating func condition() throws -> SQLExpression {
        try enter()
        defer { depth -= 1 }
        var left = try term()
        while accept(keyword: "OR") { left = .binary(.or, left, try term()) }
        return left
    }

    private mutating func term() throws -> SQLExpression {
        var left = try factor()
        while accept(keyword: "AND") { left = .binary(.and, left, try factor()) }
        return left
    }

    private mutating func factor() throws -> SQLExpression {
        if accept(keyword: "NOT") {
            try enter()
            defer { depth -= 1 }
            let inner = try factor()
            guard isBoolean(inner) else { throw error("NOT needs a condition") }
            return .not(inner)
        }
        return try predicate()
    }

    private mutating func predicate() throws -> SQLExpression {
        let left = try value()
        if case .symbol(let s) = current, let op = comparison(s) {
            advance()
            let right = try value()
            return .binary(op, left, try coerceDate(left, right))
        }
        let negated = accept(keyword: "NOT")
        if accept(keyword: "IN") {
            try expect(symbol: "(")
            var list: [SQLExpression] = []
            repeat {
                guard list.count < WhereClause.maxListLength else {
                    throw error("IN lists hold at most \(WhereClause.maxListLength) values")
                }
                list.append(try coerceDate(left, try value()))
            } while accept(symbol: ",")
            try expect(symbol: ")")
            return .inList(left, list, negated: negated)
        }
        if accept(keyword: "LIKE") {
            let pattern = try value()
            var escape: SQLExpression?
            if accept(keyword: "ESCAPE") {
                guard case .string(let s) = current, s.count == 1 else { throw error("ESCAPE takes one character in quotes") }
                advance()
                escape = .literal(.text(s))
            }
            return .like(left, pattern, escape: escape, negated: negated)
        }
        if accept(keyword: "BETWEEN") {
            let low = try value()
            guard accept(keyword: "AND") else { throw error("BETWEEN needs AND") }
            let high = try value()
            return .between(left, try coerceDate(left, low), try coerceDate(left, high), negated: negated)
        }
        if negated { throw error("NOT must be followed by IN, LIKE or BETWEEN here") }
        if accept(keyword: "IS") {
            let not = accept(keyword: "NOT")
            guard accept(keyword: "NULL") else { throw error("IS must be followed by NULL or NOT NULL") }
            return .isNull(left, negated: not)
        }
        return left
    }

    private func comparison(_ s: String) -> SQLOperator? {
        switch s {
        case "=": .equal
        case "<>", "!=": .notEqual
        case "<": .less
        case "<=": .lessOrEqual
        case ">": .greater
        case ">=": .greaterOrEqual
        default: nil
        }
    }

    private mutating func value() throws -> SQLExpression {
        try enter()
        defer { depth -= 1 }
        var left = try product()
        while true {
            if accept(symbol: "+") {
                left = .binary(.add, left, try product())
            } else if accept(symbol: "-") {
                left = .binary(.subtract, left, try product())
            } else if accept(symbol: "||") {
                left = .binary(.concatenate, left, try product())
            } else {
                return left
            }
        }
    }

    private mutating func product() throws -> SQLExpression {
        var left = try unary()
        while true {
            if accept(symbol: "*") {
                left = .binary(.multiply, left, try unary())
            } else if accept(symbol: "/") {
                left = .binary(.divide, left, try unary())
            } else {
                return left
            }
        }
    }

    private mutating func unary() throws -> SQLExpression {
        // Unary plus changes nothing: any number of them is skipped, not recursed into (a clause
        // of thousands of them overflowed the stack).
        while accept(symbol: "+") {}
        if accept(symbol: "-") {
            try enter()
            defer { depth -= 1 }
            let inner = try unary()
            if case .literal(.integer(let i)) = inner { return .literal(.integer(-i)) }
            if case .literal(.double(let d)) = inner { return .literal(.double(-d)) }
            return .negate(inner)
        }
        let token = current
        switch token {
        case .integer(let i):
            advance()
            return .literal(.integer(i))
        case .number(let d):
            advance()
            return .literal(.double(d))
        case .string(let s):
            advance()
            return .literal(.text(s))
        case .symbol("("):
            advance()
            let inner = try condition()
            try expect(symbol: ")")
            return inner
        case .quotedIdentifier(let name):
            advance()
            return try resolve(name)
        case .identifier(let word):
            let upper = word.uppercased()
            if upper == "NULL" {
                advance()
                return .literal(.null)
            }
            if upper == "DATE" || upper == "TIMESTAMP" {
                advance()
                guard case .string(let s) = current else { throw error("\(upper) must be followed by a quoted value") }
                guard let date = GeoPackageDate.parse(s) else { throw error("'\(shortened(s))' is not a valid \(upper.lowercased())") }
                advance()
                return .literal(.text(GeoPackageDate.format(date)))
            }
            if let function = SQLFunction(rawValue: upper) {
                advance()
                var args: [SQLExpression] = []
                if function.arity.lowerBound > 0 || current == .symbol("(") {
                    try expect(symbol: "(")
                    if !accept(symbol: ")") {
                        repeat { args.append(try value()) } while accept(symbol: ",")
                        try expect(symbol: ")")
                    }
                }
                guard function.arity.contains(args.count) else {
                    throw error("\(upper) takes \(function.arity.lowerBound == function.arity.upperBound ? "\(function.arity.lowerBound)" : "\(function.arity.lowerBound) or \(function.arity.upperBound)") argument(s)")
                }
                return .function(function, args)
            }
            if Self.keywords.contains(upper) { throw error("unexpected keyword \(upper)") }
            advance()
            if current == .symbol("(") { throw error("unknown function \(word); supported: \(SQLFunction.allCases.map(\.rawValue).joined(separator: ", "))") }
            return try resolve(word)
        case .symbol(let s):
            throw error("unexpected '\(s)'")
        case .end:
            throw error("the where clause ends too early")
        }
    }

    private func resolve(_ name: String) throws -> SQLExpression {
        guard let info = field(name) else { throw error("unknown field \"\(shortened(name))\"") }
        return .field(info.name)
    }

    /// A text literal compared with a date field is read as a date, so `d > '2024-01-01'` works.
    private func coerceDate(_ left: SQLExpression, _ right: SQLExpression) throws -> SQLExpression {
        guard case .field(let name) = left, let info = field(name), info.type.isDate,
            case .literal(.text(let s)) = right
        else { return right }
        guard let date = GeoPackageDate.parse(s) else { throw error("'\(shortened(s))' is not a date for field \(name)") }
        if info.type == .dateOnly { return .literal(.text(String(GeoPackageDate.format(date).prefix(10)))) }
        return .literal(.text(GeoPackageDate.format(date)))
    }

    private func isBoolean(_ e: SQLExpression) -> Bool {
        switch e {
        case .not, .inList, .like, .isNull, .between: return true
        case .binary(let op, _, _):
            return [.equal, .notEqual, .less, .lessOrEqual, .greater, .greaterOrEqual, .and, .or].contains(op)
        default: return false
        }
    }

    private func describe(_ t: WhereToken) -> String {
        switch t {
        case .identifier(let s), .quotedIdentifier(let s): "\"\(shortened(s))\""
        case .integer(let i): "\(i)"
        case .number(let d): "\(d)"
        case .string(let s): "'\(shortened(s))'"
        case .symbol(let s): "'\(s)'"
        case .end: "end of input"
        }
    }

    // MARK: Tokens

    static func tokenize(_ text: String) throws -> [(token: WhereToken, offset: Int)] {
        let chars = Array(text.unicodeScalars)
        var out: [(WhereToken, Int)] = []
        var i = 0
        func fail(_ message: String) -> StorageError {
            StorageError(.invalidWhereClause, "\(message) (at character \(i + 1))")
        }
        while i < chars.count {
            let c = chars[i]
            if c.properties.isWhitespace {
                i += 1
                continue
            }
            let start = i
            if c == "'" {
                var s = String.UnicodeScalarView()
                i += 1
                while true {
                    guard i < chars.count else { throw fail("unterminated text literal") }
                    if chars[i] == "'" {
                        if i + 1 < chars.count, chars[i + 1] == "'" {
                            s.append("'")
                            i += 2
                            continue
                        }
                        i += 1
                        break
                    }
                    s.append(chars[i])
                    i += 1
                }
                out.append((.string(String(s)), start))
            } else if c == "\"" {
                var s = String.UnicodeScalarView()
                i += 1
                while true {
                    guard i < chars.count else { throw fail("unterminated quoted field name") }
                    if chars[i] == "\"" {
                        i += 1
                        break
                    }
                    s.append(chars[i])
                    i += 1
                }
                out.append((.quotedIdentifier(String(s)), start))
            } else if c.properties.isAlphabetic || c == "_" {
                var s = String.UnicodeScalarView()
                while i < chars.count, chars[i].properties.isAlphabetic || chars[i] == "_" || ("0"..."9").contains(chars[i]) {
                    s.append(chars[i])
                    i += 1
                }
                out.append((.identifier(String(s)), start))
            } else if ("0"..."9").contains(c) || (c == "." && i + 1 < chars.count && ("0"..."9").contains(chars[i + 1])) {
                var s = ""
                var isInteger = true
                while i < chars.count, ("0"..."9").contains(chars[i]) || chars[i] == "." {
                    if chars[i] == "." { isInteger = false }
                    s.unicodeScalars.append(chars[i])
                    i += 1
                }
                if i < chars.count, chars[i] == "e" || chars[i] == "E" {
                    isInteger = false
                    s.unicodeScalars.append(chars[i])
                    i += 1
                    if i < chars.count, chars[i] == "+" || chars[i] == "-" {
                        s.unicodeScalars.append(chars[i])
                        i += 1
                    }
                    while i < chars.count, ("0"..."9").contains(chars[i]) {
                        s.unicodeScalars.append(chars[i])
                        i += 1
                    }
                }
                if isInteger, let v = Int64(s) {
                    out.append((.integer(v), start))
                } else if let d = Double(s), d.isFinite {
                    out.append((.number(d), start))
                } else {
                    throw fail("'\(shortened(s))' is not a number")
                }
            } else {
                let two = i + 1 < chars.count ? String(c) + String(chars[i + 1]) : ""
                if ["<=", ">=", "<>", "!=", "||"].contains(two) {
                    out.append((.symbol(two), start))
                    i += 2
                } else if "=<>()+-*/,".unicodeScalars.contains(c) {
                    out.append((.symbol(String(c)), start))
                    i += 1
                } else {
                    throw fail("unexpected character '\(String(c))'")
                }
            }
            guard out.count <= 4 * WhereClause.maxListLength else { throw fail("the where clause has too many tokens") }
        }
        out.append((.end, chars.count))
        return out
    }
}
