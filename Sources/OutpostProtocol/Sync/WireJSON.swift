import OutpostCore

/// Reads one JSON object of the sync wire format field by field, throwing the `DecodingError`
/// the Codable decoding would for a missing or mistyped field. Upload batches, batch results and
/// change pages are read with it: the generic coder's containers cost more than the SQLite work
/// for the same batch.
struct WireJSON {
    let object: [String: JSONValue]
    let what: String

    init(_ json: JSONValue, _ what: String) throws {
        guard case .object(let o) = json else { throw Self.invalid("\(what) is not an object") }
        object = o
        self.what = what
    }

    static func invalid(_ message: String) -> DecodingError {
        DecodingError.dataCorrupted(DecodingError.Context(codingPath: [], debugDescription: message))
    }

    /// A value that is not there or null.
    func absent(_ key: String) -> Bool { object[key] == nil || object[key] == .null }

    func string(_ key: String) throws -> String {
        guard let s = object[key]?.stringValue else { throw Self.invalid("\(what) has no string \(key)") }
        return s
    }

    func optionalString(_ key: String) throws -> String? { absent(key) ? nil : try string(key) }

    func integer(_ key: String) throws -> Int64 {
        guard let i = object[key]?.integerValue else { throw Self.invalid("\(what) has no integer \(key)") }
        return i
    }

    func optionalInteger(_ key: String) throws -> Int64? { absent(key) ? nil : try integer(key) }

    func bool(_ key: String) throws -> Bool {
        guard let b = object[key]?.boolValue else { throw Self.invalid("\(what) has no boolean \(key)") }
        return b
    }

    func array(_ key: String) throws -> [JSONValue] {
        guard let a = object[key]?.arrayValue else { throw Self.invalid("\(what) has no array \(key)") }
        return a
    }

    func optionalObject(_ key: String) throws -> [String: JSONValue]? {
        if absent(key) { return nil }
        guard let o = object[key]?.objectValue else { throw Self.invalid("\(key) of \(what) is not an object") }
        return o
    }
}
