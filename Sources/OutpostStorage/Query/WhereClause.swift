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
    public let expression: SQLExpression

    /// Longest where clause accepted, in characters.
    public static let maxLength = 32_768
    /// Deepest nesting of parentheses and operators accepted.
    public static let maxDepth = 64
    /// Most values in one IN list.
    public static let maxListLength = 10_000

    /// What the parser needs to know about a field: its canonical name and type.
    public struct FieldInfo: Hashable, Sendable {
        public var name: String
        public var type: FieldType
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
    case null
    case integer(Int64)
    case double(Double)
    case text(String)
    case blob([UInt8])

    public var integerValue: Int64? {
        switch self {
        case .integer(let i): i
        case .double(let d): Int64(exactly: d)
        default: nil
        }
    }

    public var textValue: String? { if case .text(let s) = self { s } else { nil } }
}

/// A where-clause expression tree. Field names are canonical; literals are values.
public indirect enum SQLExpression: Hashable, Sendable {
    case literal(SQLLiteral)
    case field(String)
    case negate(SQLExpression)
    case not(SQLExpression)
    case binary(SQLOperator, SQLExpression, SQLExpression)
    case inList(SQLExpression, [SQLExpression], negated: Bool)
    case like(SQLExpression, SQLExpression, escape: SQLExpression?, negated: Bool)
    case isNull(SQLExpression, negated: Bool)
    case between(SQLExpression, SQLExpression, SQLExpression, negated: Bool)
    case function(SQLFunction, [SQLExpression])
}

public enum SQLOperator: String, Hashable, Sendable {
    case equal = "=", notEqual = "<>", less = "<", lessOrEqual = "<=", greater = ">", greaterOrEqual = ">="
    case and = "AND", or = "OR"
    case add = "+", subtract = "-", multiply = "*", divide = "/", concatenate = "||"
}

public enum SQLFunction: String, Hashable, Sendable, CaseIterable {
    case upper = "UPPER", lower = "LOWER", charLength = "CHAR_LENGTH", abs = "ABS", round = "ROUND"
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
    case sqlite
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
