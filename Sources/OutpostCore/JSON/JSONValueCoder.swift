import Foundation

/// Decodes `Decodable` values from a parsed ``JSONValue`` tree (or from JSON bytes through
/// `JSONParser`).
///
/// The wire types of sync carry free-form attribute maps (`[String: JSONValue]`). Through
/// Foundation's decoder each such value is found by trial (is it a Bool? an Int64? …), and each
/// miss throws; here a `JSONValue` or `[String: JSONValue]` field is taken from the tree as it is.
/// On a 5,000-edit batch that is the difference between most of the request's time and a small
/// part of it.
public struct JSONValueDecoder: Sendable {
    /// A decoder.
    public init() {}

    /// Decodes a value of `type` from a parsed JSON tree.
    public func decode<T: Decodable>(_ type: T.Type, from value: JSONValue) throws -> T {
        try _TreeDecoder(value, path: nil).decodeValue(type)
    }

    /// Parses JSON bytes and decodes a value of `type` from them; a parse error is a
    /// `DecodingError.dataCorrupted`.
    public func decode<T: Decodable>(_ type: T.Type, from data: Data) throws -> T {
        do {
            return try decode(type, from: try JSONValue.parse(data))
        } catch let error as GeometryError {
            throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: error.message, underlyingError: error))
        }
    }
}

/// Encodes `Encodable` values to a ``JSONValue`` tree; `encodeToData` writes it with sorted keys
/// (canonical bytes: the same value always gives the same text).
public struct JSONValueEncoder: Sendable {
    /// An encoder.
    public init() {}

    /// Encodes `value` as a JSON tree.
    public func encode<T: Encodable>(_ value: T) throws -> JSONValue {
        let root = _TreeEncoder.Node()
        try _TreeEncoder(node: root, path: nil).encodeValue(value)
        return root.resolved
    }

    /// Encodes `value` as JSON bytes with sorted keys.
    public func encodeToData<T: Encodable>(_ value: T) throws -> Data {
        try encode(value).jsonData
    }
}

// MARK: - Coding paths

/// A coding path as a chain of parents: built only when an error names it.
final class _PathNode: @unchecked Sendable {
    let parent: _PathNode?
    let key: any CodingKey

    init(_ parent: _PathNode?, _ key: any CodingKey) {
        self.parent = parent
        self.key = key
    }

    static func keys(_ node: _PathNode?) -> [any CodingKey] {
        var out: [any CodingKey] = []
        var n = node
        while let current = n {
            out.append(current.key)
            n = current.parent
        }
        return out.reversed()
    }
}

struct _IndexKey: CodingKey {
    let intValue: Int?
    var stringValue: String { "Index \(intValue ?? 0)" }
    init(_ index: Int) { intValue = index }
    init?(stringValue: String) { nil }
    init?(intValue: Int) { self.intValue = intValue }
}

// MARK: - Decoder

struct _TreeDecoder: Decoder, SingleValueDecodingContainer {
    let value: JSONValue
    let path: _PathNode?
    var userInfo: [CodingUserInfoKey: Any] { [:] }
    var codingPath: [any CodingKey] { _PathNode.keys(path) }

    init(_ value: JSONValue, path: _PathNode?) {
        self.value = value
        self.path = path
    }

    func mismatch(_ expected: String) -> DecodingError {
        .typeMismatch(Any.self, .init(codingPath: codingPath, debugDescription: "expected \(expected), found \(value.typeName)"))
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard case .object(let object) = value else { throw mismatch("an object") }
        return KeyedDecodingContainer(_KeyedDecoding<Key>(object: object, path: path))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard case .array(let array) = value else { throw mismatch("an array") }
        return _UnkeyedDecoding(array: array, path: path)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { self }

    func decodeNil() -> Bool { value == .null }

    func decode(_ type: Bool.Type) throws -> Bool {
        guard case .bool(let b) = value else { throw mismatch("a boolean") }
        return b
    }

    func decode(_ type: String.Type) throws -> String {
        guard case .string(let s) = value else { throw mismatch("a string") }
        return s
    }

    func decode(_ type: Double.Type) throws -> Double {
        guard let d = value.doubleValue else { throw mismatch("a number") }
        return d
    }

    func decode(_ type: Float.Type) throws -> Float { Float(try decode(Double.self)) }

    func integer<T: FixedWidthInteger>(_ type: T.Type) throws -> T {
        let wide: Int64
        switch value {
        case .integer(let i): wide = i
        case .number(let d) where d.rounded() == d && abs(d) < 9.2e18: wide = Int64(d)
        default: throw mismatch("an integer")
        }
        guard let narrow = T(exactly: wide) else {
            throw DecodingError.dataCorrupted(.init(codingPath: codingPath, debugDescription: "\(wide) does not fit \(T.self)"))
        }
        return narrow
    }

    func decode(_ type: Int.Type) throws -> Int { try integer(type) }
    func decode(_ type: Int8.Type) throws -> Int8 { try integer(type) }
    func decode(_ type: Int16.Type) throws -> Int16 { try integer(type) }
    func decode(_ type: Int32.Type) throws -> Int32 { try integer(type) }
    func decode(_ type: Int64.Type) throws -> Int64 { try integer(type) }
    func decode(_ type: UInt.Type) throws -> UInt { try integer(type) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try integer(type) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try integer(type) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try integer(type) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try integer(type) }

    func decode<T: Decodable>(_ type: T.Type) throws -> T { try decodeValue(type) }

    /// The value as `T`: JSON trees and attribute maps as they are, everything else by its
    /// `init(from:)`.
    func decodeValue<T: Decodable>(_ type: T.Type) throws -> T {
        if T.self == JSONValue.self { return value as! T }
        if T.self == [String: JSONValue].self {
            guard case .object(let object) = value else { throw mismatch("an object") }
            return object as! T
        }
        if T.self == String.self { return try decode(String.self) as! T }
        if T.self == Int64.self { return try decode(Int64.self) as! T }
        if T.self == Int.self { return try decode(Int.self) as! T }
        if T.self == Bool.self { return try decode(Bool.self) as! T }
        if T.self == Double.self { return try decode(Double.self) as! T }
        if T.self == URL.self {
            guard let url = URL(string: try decode(String.self)) else { throw mismatch("a URL") }
            return url as! T
        }
        return try T(from: self)
    }
}

struct _KeyedDecoding<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let object: [String: JSONValue]
    let path: _PathNode?
    var codingPath: [any CodingKey] { _PathNode.keys(path) }
    var allKeys: [Key] { object.keys.compactMap { Key(stringValue: $0) } }

    func contains(_ key: Key) -> Bool { object[key.stringValue] != nil }

    func child(_ key: Key) throws -> _TreeDecoder {
        guard let value = object[key.stringValue] else {
            throw DecodingError.keyNotFound(key, .init(codingPath: codingPath, debugDescription: "no value for \"\(key.stringValue)\""))
        }
        return _TreeDecoder(value, path: _PathNode(path, key))
    }

    func decodeNil(forKey key: Key) throws -> Bool { (object[key.stringValue] ?? .null) == .null }
    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try child(key).decode(type) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try child(key).decode(type) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try child(key).decode(type) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try child(key).decode(type) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try child(key).decode(type) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try child(key).decode(type) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try child(key).decode(type) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try child(key).decode(type) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try child(key).decode(type) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try child(key).decode(type) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try child(key).decode(type) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try child(key).decode(type) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try child(key).decode(type) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try child(key).decode(type) }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try child(key).decodeValue(type) }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        try child(key).container(keyedBy: type)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer { try child(key).unkeyedContainer() }
    func superDecoder() throws -> any Decoder { _TreeDecoder(.object(object), path: path) }
    func superDecoder(forKey key: Key) throws -> any Decoder { try child(key) }
}

struct _UnkeyedDecoding: UnkeyedDecodingContainer {
    let array: [JSONValue]
    let path: _PathNode?
    var currentIndex = 0
    var codingPath: [any CodingKey] { _PathNode.keys(path) }
    var count: Int? { array.count }
    var isAtEnd: Bool { currentIndex >= array.count }

    init(array: [JSONValue], path: _PathNode?) {
        self.array = array
        self.path = path
    }

    mutating func next() throws -> _TreeDecoder {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(Any.self, .init(codingPath: codingPath, debugDescription: "the array has only \(array.count) elements"))
        }
        defer { currentIndex += 1 }
        return _TreeDecoder(array[currentIndex], path: _PathNode(path, _IndexKey(currentIndex)))
    }

    mutating func decodeNil() throws -> Bool {
        guard !isAtEnd, array[currentIndex] == .null else { return false }
        currentIndex += 1
        return true
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { try next().decode(type) }
    mutating func decode(_ type: String.Type) throws -> String { try next().decode(type) }
    mutating func decode(_ type: Double.Type) throws -> Double { try next().decode(type) }
    mutating func decode(_ type: Float.Type) throws -> Float { try next().decode(type) }
    mutating func decode(_ type: Int.Type) throws -> Int { try next().decode(type) }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try next().decode(type) }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try next().decode(type) }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try next().decode(type) }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try next().decode(type) }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try next().decode(type) }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try next().decode(type) }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try next().decode(type) }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try next().decode(type) }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try next().decode(type) }
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { try next().decodeValue(type) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        try next().container(keyedBy: type)
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer { try next().unkeyedContainer() }
    mutating func superDecoder() throws -> any Decoder { try next() }
}

// MARK: - Encoder

struct _TreeEncoder: Encoder, SingleValueEncodingContainer {
    /// A value under construction: containers hand out children that fill in later.
    final class Node {
        var value: JSONValue = .null
        var object: [String: Node]?
        var array: [Node]?

        var resolved: JSONValue {
            if let object { return .object(object.mapValues(\.resolved)) }
            if let array { return .array(array.map(\.resolved)) }
            return value
        }
    }

    let node: Node
    let path: _PathNode?
    var userInfo: [CodingUserInfoKey: Any] { [:] }
    var codingPath: [any CodingKey] { _PathNode.keys(path) }

    init(node: Node, path: _PathNode?) {
        self.node = node
        self.path = path
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        if node.object == nil { node.object = [:] }
        return KeyedEncodingContainer(_KeyedEncoding<Key>(node: node, path: path))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        if node.array == nil { node.array = [] }
        return _UnkeyedEncoding(node: node, path: path)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer { self }

    func encodeNil() throws { node.value = .null }
    func encode(_ value: Bool) throws { node.value = .bool(value) }
    func encode(_ value: String) throws { node.value = .string(value) }
    func encode(_ value: Double) throws { node.value = .number(value) }
    func encode(_ value: Float) throws { try encode(Double(value)) }
    func encode(_ value: Int) throws { node.value = .integer(Int64(value)) }
    func encode(_ value: Int8) throws { node.value = .integer(Int64(value)) }
    func encode(_ value: Int16) throws { node.value = .integer(Int64(value)) }
    func encode(_ value: Int32) throws { node.value = .integer(Int64(value)) }
    func encode(_ value: Int64) throws { node.value = .integer(value) }
    func encode(_ value: UInt) throws { try encode(UInt64(value)) }
    func encode(_ value: UInt8) throws { node.value = .integer(Int64(value)) }
    func encode(_ value: UInt16) throws { node.value = .integer(Int64(value)) }
    func encode(_ value: UInt32) throws { node.value = .integer(Int64(value)) }
    func encode(_ value: UInt64) throws {
        guard let exact = Int64(exactly: value) else {
            throw EncodingError.invalidValue(value, .init(codingPath: codingPath, debugDescription: "\(value) does not fit a JSON integer"))
        }
        node.value = .integer(exact)
    }

    func encode<T: Encodable>(_ value: T) throws { try encodeValue(value) }

    func encodeValue<T: Encodable>(_ value: T) throws {
        if let json = value as? JSONValue {
            node.value = json
        } else if let map = value as? [String: JSONValue] {
            node.value = .object(map)
        } else if let text = value as? String {
            node.value = .string(text)
        } else if let url = value as? URL {
            node.value = .string(url.absoluteString)
        } else {
            try value.encode(to: self)
        }
    }
}

struct _KeyedEncoding<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let node: _TreeEncoder.Node
    let path: _PathNode?
    var codingPath: [any CodingKey] { _PathNode.keys(path) }

    func child(_ key: Key) -> _TreeEncoder {
        let child = _TreeEncoder.Node()
        node.object![key.stringValue] = child
        return _TreeEncoder(node: child, path: _PathNode(path, key))
    }

    mutating func encodeNil(forKey key: Key) throws { try child(key).encodeNil() }
    mutating func encode(_ value: Bool, forKey key: Key) throws { try child(key).encode(value) }
    mutating func encode(_ value: String, forKey key: Key) throws { try child(key).encode(value) }
    mutating func encode(_ value: Double, forKey key: Key) throws { try child(key).encode(value) }
    mutating func encode(_ value: Float, forKey key: Key) throws { try child(key).encode(value) }
    mutating func encode(_ value: Int, forKey key: Key) throws { try child(key).encode(value) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { try child(key).encode(value) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { try child(key).encode(value) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { try child(key).encode(value) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { try child(key).encode(value) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { try child(key).encode(value) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { try child(key).encode(value) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { try child(key).encode(value) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { try child(key).encode(value) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { try child(key).encode(value) }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws { try child(key).encodeValue(value) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        child(key).container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer { child(key).unkeyedContainer() }
    mutating func superEncoder() -> any Encoder { _TreeEncoder(node: node, path: path) }
    mutating func superEncoder(forKey key: Key) -> any Encoder { child(key) }
}

struct _UnkeyedEncoding: UnkeyedEncodingContainer {
    let node: _TreeEncoder.Node
    let path: _PathNode?
    var codingPath: [any CodingKey] { _PathNode.keys(path) }
    var count: Int { node.array!.count }

    func next() -> _TreeEncoder {
        let child = _TreeEncoder.Node()
        let index = node.array!.count
        node.array!.append(child)
        return _TreeEncoder(node: child, path: _PathNode(path, _IndexKey(index)))
    }

    mutating func encodeNil() throws { try next().encodeNil() }
    mutating func encode(_ value: Bool) throws { try next().encode(value) }
    mutating func encode(_ value: String) throws { try next().encode(value) }
    mutating func encode(_ value: Double) throws { try next().encode(value) }
    mutating func encode(_ value: Float) throws { try next().encode(value) }
    mutating func encode(_ value: Int) throws { try next().encode(value) }
    mutating func encode(_ value: Int8) throws { try next().encode(value) }
    mutating func encode(_ value: Int16) throws { try next().encode(value) }
    mutating func encode(_ value: Int32) throws { try next().encode(value) }
    mutating func encode(_ value: Int64) throws { try next().encode(value) }
    mutating func encode(_ value: UInt) throws { try next().encode(value) }
    mutating func encode(_ value: UInt8) throws { try next().encode(value) }
    mutating func encode(_ value: UInt16) throws { try next().encode(value) }
    mutating func encode(_ value: UInt32) throws { try next().encode(value) }
    mutating func encode(_ value: UInt64) throws { try next().encode(value) }
    mutating func encode<T: Encodable>(_ value: T) throws { try next().encodeValue(value) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        next().container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer { next().unkeyedContainer() }
    mutating func superEncoder() -> any Encoder { next() }
}
