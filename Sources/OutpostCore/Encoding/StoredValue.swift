/// A value as SQLite stores it, in one of its five storage classes: what the stored form of a
/// change page carries for each column (docs/sync.md, "Binary change pages"), so the server
/// copies a column's value from its row and the replica binds it, with no JSON between.
public enum StoredValue: Hashable, Sendable {
    /// NULL.
    case null
    /// An INTEGER.
    case integer(Int64)
    /// A REAL.
    case real(Double)
    /// TEXT.
    case text(String)
    /// A BLOB.
    case blob([UInt8])
}
