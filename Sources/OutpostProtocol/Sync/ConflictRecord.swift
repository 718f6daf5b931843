import OutpostCore

/// A value a sync discarded, kept so nothing is overwritten silently (DESIGN §5 "Conflicts",
/// invariant I8): the same columns were changed on both sides since the client's base
/// generation, or one side deleted a feature the other changed.
public struct ConflictRecord: Codable, Hashable, Sendable {
    public enum Kind: String, Codable, Hashable, Sendable {
        /// Both sides updated the same columns.
        case updateUpdate
        /// The client updated a feature the server had deleted.
        case updateDelete
        /// The client deleted a feature the server had updated.
        case deleteUpdate
    }

    /// The server's id of the record.
    public var id: Int64?
    public var layerId: Int
    public var globalId: String
    public var kind: Kind
    public var columns: [String]
    /// Values before the client's edit (as the client had them).
    public var base: [String: JSONValue]?
    /// The client's values (nil for a delete).
    public var ours: [String: JSONValue]?
    /// The server's values (nil when the server had deleted the feature).
    public var theirs: [String: JSONValue]?
    /// The rule that decided: `clientWins`, `deleteWins`.
    public var policy: String
    /// `ours` or `theirs`.
    public var winner: String
    public var replicaId: String?
    public var seq: Int64?
    public var generation: Int64?

    public init(
        id: Int64? = nil, layerId: Int, globalId: String, kind: Kind, columns: [String], base: [String: JSONValue]?, ours: [String: JSONValue]?,
        theirs: [String: JSONValue]?, policy: String, winner: String, replicaId: String? = nil, seq: Int64? = nil, generation: Int64? = nil
    ) {
        self.id = id
        self.layerId = layerId
        self.globalId = globalId
        self.kind = kind
        self.columns = columns
        self.base = base
        self.ours = ours
        self.theirs = theirs
        self.policy = policy
        self.winner = winner
        self.replicaId = replicaId
        self.seq = seq
        self.generation = generation
    }
}
