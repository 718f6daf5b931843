import OutpostCore

/// How a layer's sync conflicts are resolved (docs/sync.md, "Conflicts"), set in the service schema
/// per layer (`"conflictPolicy"`) and overridable per field.
///
/// ```json
/// "conflictPolicy": {"default": "clientWins", "fields": {"status": "manual"},
///                    "updateDelete": "deleteWins", "deleteUpdate": "deleteWins"}
/// ```
public struct ConflictPolicy: Hashable, Sendable, Codable {
    /// The same column changed on the client and, since the client's base, on the server.
    public enum Rule: String, Hashable, Sendable, Codable, CaseIterable {
        /// The uploaded value wins (ArcGIS parity: the last synchronised edit wins).
        case clientWins
        /// The server's value stays.
        case serverWins
        /// The value edited last wins, by the time each edit was made (not when it synced);
        /// a tie goes to the client.
        case latestEditWins
        /// The server's value stays and the conflict stays open until someone resolves it.
        case manual
    }

    /// The client updated a feature the server deleted.
    public enum UpdateDeleteRule: String, Hashable, Sendable, Codable, CaseIterable {
        /// The feature stays deleted; the update's values go into the conflict record.
        case deleteWins
        /// The feature comes back with its last values and the update applied.
        case updateResurrects
    }

    /// The client deleted a feature the server updated.
    public enum DeleteUpdateRule: String, Hashable, Sendable, Codable, CaseIterable {
        /// The feature is deleted; the server's newer values go into the conflict record.
        case deleteWins
        /// The feature stays with the server's values; the delete is recorded as discarded.
        case keepServer
    }

    /// The rule for every column without an override.
    public var rule: Rule
    /// Per-column overrides (field names, or the geometry column's name).
    public var fields: [String: Rule]
    /// What happens when the client updates a feature the server deleted.
    public var updateDelete: UpdateDeleteRule
    /// What happens when the client deletes a feature the server updated.
    public var deleteUpdate: DeleteUpdateRule

    /// A policy of these rules.
    public init(rule: Rule = .clientWins, fields: [String: Rule] = [:], updateDelete: UpdateDeleteRule = .deleteWins, deleteUpdate: DeleteUpdateRule = .deleteWins) {
        self.rule = rule
        self.fields = fields
        self.updateDelete = updateDelete
        self.deleteUpdate = deleteUpdate
    }

    /// Client wins, deletes win: the policy when a service names none.
    public static let `default` = ConflictPolicy()

    /// The rule for one column: its override, else `layerRule` (a sync's own choice) or the
    /// layer's rule.
    public func rule(for column: String, layerRule: Rule? = nil) -> Rule {
        fields[column] ?? fields.first { $0.key.lowercased() == column.lowercased() }?.value ?? layerRule ?? rule
    }

    private enum CodingKeys: String, CodingKey {
        case rule = "default", fields, updateDelete, deleteUpdate
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        rule = try c.decodeIfPresent(Rule.self, forKey: .rule) ?? .clientWins
        fields = try c.decodeIfPresent([String: Rule].self, forKey: .fields) ?? [:]
        updateDelete = try c.decodeIfPresent(UpdateDeleteRule.self, forKey: .updateDelete) ?? .deleteWins
        deleteUpdate = try c.decodeIfPresent(DeleteUpdateRule.self, forKey: .deleteUpdate) ?? .deleteWins
    }
}
