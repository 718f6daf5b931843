import OutpostCore

/// A value a sync discarded, kept so nothing is overwritten silently (docs/sync.md, "Conflicts";
/// invariant I8): the same columns were changed on both sides since the client's base
/// generation, or one side deleted a feature the other changed.
public struct ConflictRecord: Codable, Hashable, Sendable {
    /// What the two sides did to the feature.
    public enum Kind: String, Codable, Hashable, Sendable {
        /// Both sides updated the same columns.
        case updateUpdate
        /// The client updated a feature the server had deleted.
        case updateDelete
        /// The client deleted a feature the server had updated.
        case deleteUpdate
        /// The client set a field that a schema migration dropped meanwhile: the value is kept
        /// here instead of failing the edit.
        case schemaDropped
    }

    /// The server's id of the record.
    public var id: Int64?
    /// The service layer of the feature.
    public var layerId: Int
    /// The feature's global id.
    public var globalId: String
    /// What the two sides did.
    public var kind: Kind
    /// The columns changed on both sides (the geometry column by its name).
    public var columns: [String]
    /// Values before the client's edit (as the client had them).
    public var base: [String: JSONValue]?
    /// The client's values (nil for a delete).
    public var ours: [String: JSONValue]?
    /// The server's values (nil when the server had deleted the feature).
    public var theirs: [String: JSONValue]?
    /// The rule that decided: `clientWins`, `serverWins`, `latestEditWins`, `manual`,
    /// `deleteWins`, `updateResurrects`, `keepServer`.
    public var policy: String
    /// `ours` (the uploading replica's edit) or `theirs` (the server's state).
    public var winner: String
    /// The replica whose edit met the conflict.
    public var replicaId: String?
    /// The upload batch that carried the edit.
    public var seq: Int64?
    /// The service generation at which the conflict was settled.
    public var generation: Int64?
    /// When the client's edit was made and when the server's value was (UTC ISO 8601; what
    /// `latestEditWins` compared).
    public var oursEditedAt: String?
    /// When the server's value was made (UTC ISO 8601).
    public var theirsEditedAt: String?
    /// `open` for a `manual` conflict nobody has resolved yet, `resolved` once someone has;
    /// nil for conflicts a rule settled.
    public var state: String?

    /// Whether the record still waits for someone to decide.
    public var isOpen: Bool { state == "open" }

    /// A record of these values.
    public init(
        id: Int64? = nil, layerId: Int, globalId: String, kind: Kind, columns: [String], base: [String: JSONValue]?, ours: [String: JSONValue]?,
        theirs: [String: JSONValue]?, policy: String, winner: String, replicaId: String? = nil, seq: Int64? = nil, generation: Int64? = nil,
        oursEditedAt: String? = nil, theirsEditedAt: String? = nil, state: String? = nil
    ) {
        self.oursEditedAt = oursEditedAt
        self.theirsEditedAt = theirsEditedAt
        self.state = state
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
