/// `"name"` with embedded quotes doubled: the only way table and column names reach SQL text.
func quoted(_ identifier: String) -> String {
    "\"" + identifier.replacingOccurrences(of: "\"", with: "\"\"") + "\""
}

/// `'text'` with embedded quotes doubled, for DDL literals built from validated names.
func literal(_ text: String) -> String {
    "'" + text.replacingOccurrences(of: "'", with: "''") + "'"
}
