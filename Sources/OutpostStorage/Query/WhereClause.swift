import Foundation
import OutpostCore

/// A parsed where clause in the SQL-92 subset ArcGIS feature services accept.
///
/// Grammar (case-insensitive keywords):
///
/// ```
/// condition := term { OR term }            term := factor { AND factor }
/// factor    := NOT factor | predicate
/// predicate := value [ compare value | [NOT] IN (value, …) | [NOT] LIKE value [ESCAPE 'c']
///                    | IS [NOT] NULL | [NOT] BETWEEN value AND value ]
/// value     := sum;  sum := product { (+|-|'||') product };  product := unary { (*|/) unary }
/// unary     := -unary | number | 'text' | DATE 'yyyy-mm-dd' | TIMESTAMP 'yyyy-mm-dd hh:mm:ss'
///            | NULL | field | "field" | function(value, …) | ( condition )
/// function  := UPPER | LOWER | CHAR_LENGTH | ABS | ROUND | CURRENT_DATE | CURRENT_TIMESTAMP
/// ```
///
/// Field names are resolved against the layer (case-insensitively) and emitted quoted; every
/// literal becomes a bound parameter. Nothing the user typed is ever pasted into SQL text.
public struct WhereClause: Hashable, Sendable {
    /// The parsed condition, with canonical field names.
    public let expression: SQLExpression

    /// Longest where clause accepted, in characters.
    public static let maxLength = 32_768
    /// Deepest nesting of parentheses and operators accepted.
    public static let maxDepth = 64
    /// Most values in one IN list.
    public static let maxListLength = 10_000

    /// What the parser needs to know about a field: its canonical name and type.
    public struct FieldInfo: Hashable, Sendable {
        /// The field's name as the layer spells it.
        public var name: String
        /// The field's type.
        public var type: FieldType
        /// A field of this name and type.
        public init(name: String, type: FieldType) {
            self.name = name
            self.type = type
        }
    }

    /// Parses `text`, resolving field names with `field`.
    /// - Throws: ``StorageError/Code/invalidWhereClause`` naming the position and the problem.
    public init(_ text: String, field: @escaping (String) -> FieldInfo?) throws {
        guard text.count <= Self.maxLength else {
            throw StorageError(.invalidWhereClause, "the where clause is longer than \(Self.maxLength) characters")
        }
        var parser = try WhereClauseParser(text: text, field: field)
        expression = try parser.parseAll()
    }

    /// Parses `text` against the fields of `layer`.
    public init(_ text: String, layer: LayerDefinition) throws {
        try self.init(text) { name in
            layer.field(named: name).map { FieldInfo(name: $0.name, type: $0.type) }
        }
    }

    /// SQL text with placeholders and the values to bind, in order.
    public func sql(dialect: SQLDialect = .sqlite, firstParameter: Int = 1) -> (sql: String, arguments: [SQLLiteral]) {
        var renderer = SQLRenderer(dialect: dialect, nextParameter: firstParameter)
        let text = renderer.render(expression)
        return (text, renderer.arguments)
    }
}

/// A value bound to an SQL statement: a where-clause literal or a raw statement argument.
public enum SQLLiteral: Hashable, Sendable {
    /// SQL NULL.
    case null
    /// A 64-bit integer.
    case integer(Int64)
    /// A double.
    case double(Double)
    /// Text.
    case text(String)
    /// Bytes.
    case blob([UInt8])

    /// The value as an integer: an integer, or a double with no fractional part.
    public var integerValue: Int64? {
        switch self {
        case .integer(let i): i
        case .double(let d): Int64(exactly: d)
        default: nil
        }
    }

    /// The value when it is text.
    public var textValue: String? { if case .text(let s) = self { s } else { nil } }
}

/// A where-clause expression tree. Field names are canonical; literals are values.
public indirect enum SQLExpression: Hashable, Sendable {
    /// A literal value (bound as a parameter).
    case literal(SQLLiteral)
    /// A field, by canonical name.
    case field(String)
    /// Unary minus.
    case negate(SQLExpression)
    /// `NOT`.
    case not(SQLExpression)
    /// A comparison, logical or arithmetic operator between two expressions.
    case binary(SQLOperator, SQLExpression, SQLExpression)
    /// `[NOT] IN (…)`.
    case inList(SQLExpression, [SQLExpression], negated: Bool)
    /// `[NOT] LIKE`, with an optional `ESCAPE`.
    case like(SQLExpression, SQLExpression, escape: SQLExpression?, negated: Bool)
    /// `IS [NOT] NULL`.
    case isNull(SQLExpression, negated: Bool)
    /// `[NOT] BETWEEN … AND …`.
    case between(SQLExpression, SQLExpression, SQLExpression, negated: Bool)
    /// A call of one of the allowed functions.
    case function(SQLFunction, [SQLExpression])
}

/// A binary operator of the where-clause grammar; the raw value is its SQL spelling.
public enum SQLOperator: String, Hashable, Sendable {
    /// Comparisons.
    case equal = "=", notEqual = "<>", less = "<", lessOrEqual = "<=", greater = ">", greaterOrEqual = ">="
    /// Logical operators.
    case and = "AND", or = "OR"
    /// Arithmetic and string concatenation.
    case add = "+", subtract = "-", multiply = "*", divide = "/", concatenate = "||"
}

/// A function the where-clause grammar allows; the raw value is its name.
public enum SQLFunction: String, Hashable, Sendable, CaseIterable {
    /// Functions of one value (`ROUND` also takes a number of digits).
    case upper = "UPPER", lower = "LOWER", charLength = "CHAR_LENGTH", abs = "ABS", round = "ROUND"
    /// The current date or timestamp (no arguments).
    case currentDate = "CURRENT_DATE", currentTimestamp = "CURRENT_TIMESTAMP"

    var arity: ClosedRange<Int> {
        switch self {
        case .upper, .lower, .charLength, .abs: 1...1
        case .round: 1...2
        case .currentDate, .currentTimestamp: 0...0
        }
    }
}

/// The SQL spelling differences between the storage engines Outpost targets.
public enum SQLDialect: Sendable {
    /// SQLite (GeoPackage files).
    case sqlite
    /// PostgreSQL.
    case postgres
}

struct SQLRenderer {
    let dialect: SQLDialect
    var nextParameter: Int
    var arguments: [SQLLiteral] = []

    mutating func bind(_ value: SQLLiteral) -> String {
        arguments.append(value)
        defer { nextParameter += 1 }
        return dialect == .sqlite ? "?" : "$\(nextParameter)"
    }

    mutating func render(_ e: SQLExpression) -> String {
        switch e {
        case .literal(let v): return bind(v)
        case .field(let name): return quoted(name)
        case .negate(let x): return "(-\(render(x)))"
        case .not(let x): return "(NOT \(render(x)))"
        case .binary(let op, let l, let r): return "(\(render(l)) \(op.rawValue) \(render(r)))"
        case .inList(let x, let list, let negated):
            let target = render(x)
            return "(\(target) \(negated ? "NOT IN" : "IN") (\(list.map { render($0) }.joined(separator: ", "))))"
        case .like(let x, let pattern, let escape, let negated):
            var s = "(\(render(x)) \(negated ? "NOT LIKE" : "LIKE") \(render(pattern))"
            if let escape { s += " ESCAPE \(render(escape))" }
            return s + ")"
        case .isNull(let x, let negated): return "(\(render(x)) IS \(negated ? "NOT " : "")NULL)"
        case .between(let x, let low, let high, let negated):
            return "(\(render(x)) \(negated ? "NOT BETWEEN" : "BETWEEN") \(render(low)) AND \(render(high)))"
        case .function(let f, let args):
            let a = args.map { render($0) }
            switch (f, dialect) {
            case (.upper, _): return "upper(\(a[0]))"
            case (.lower, _): return "lower(\(a[0]))"
            case (.charLength, .sqlite): return "length(\(a[0]))"
            case (.charLength, .postgres): return "char_length(\(a[0]))"
            case (.abs, _): return "abs(\(a[0]))"
            case (.round, _): return "round(\(a.joined(separator: ", ")))"
            case (.currentDate, .sqlite): return "strftime('%Y-%m-%dT00:00:00.000Z', 'now')"
            case (.currentTimestamp, .sqlite): return "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"
            case (.currentDate, .postgres): return "CURRENT_DATE"
            case (.currentTimestamp, .postgres): return "CURRENT_TIMESTAMP"
            }
        }
    }
}
