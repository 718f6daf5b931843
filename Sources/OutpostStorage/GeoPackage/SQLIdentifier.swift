/// `"name"` with embedded quotes doubled: the only way table and column names reach SQL text.
public func quotedIdentifier(_ identifier: String) -> String {
    guard identifier.utf8.contains(UInt8(ascii: "\"")) else { return "\"" + identifier + "\"" }
    return "\"" + identifier.replacingOccurrences(of: "\"", with: "\"\"") + "\""
}

func quoted(_ identifier: String) -> String { quotedIdentifier(identifier) }

/// `'text'` with embedded quotes doubled, for DDL literals built from validated names.
func literal(_ text: String) -> String {
    "'" + text.replacingOccurrences(of: "'", with: "''") + "'"
}
