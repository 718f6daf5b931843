import OutpostStorage

/// Replica ids as every store keys them.
public enum ReplicaID {
    /// The id in its canonical form: a GUID upper-cased in braces (however a client wrote it),
    /// anything else as it is (a store then finds no such replica).
    public static func normalized(_ id: String) -> String { GlobalID.normalized(id) ?? id }
}
