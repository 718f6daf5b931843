import Foundation
import OutpostCore
import OutpostProtocol
import OutpostStorage

/// How a page of the change feed is made from the change log, whatever the store (docs/sync.md,
/// "Download"): which features to read, and what each changed feature becomes for the replica.
/// The backends read the log and the features; this decides, without I/O.
public enum ChangeFeedAssembly {
    /// One feature changed in the window: its latest generation there, whether only the replica
    /// itself changed it (an echo), and whether it was added or deleted in the window.
    public struct Row: Sendable, Equatable {
        /// The feature's global id.
        public var globalID: String
        /// Its latest generation in the window.
        public var generation: Int64
        /// Whether only the replica itself changed it in the window.
        public var echo: Bool
        /// Whether it was added in the window.
        public var inserted: Bool
        /// Whether it is deleted.
        public var deleted: Bool

        /// A row of these values.
        public init(globalID: String, generation: Int64, echo: Bool, inserted: Bool, deleted: Bool) {
            self.globalID = globalID
            self.generation = generation
            self.echo = echo
            self.inserted = inserted
            self.deleted = deleted
        }
    }

    /// The feature reads a page needs, as queries on the layer: whole rows for the features
    /// someone else changed; of the replica's own changes only whether each is still in scope
    /// (after a large upload nearly every row of the window is its own), and for a replica that
    /// holds the whole layer not even that. Empty when the replica holds none of the layer.
    public static func reads(_ rows: [Row], scope: FeatureQuery?) -> [FeatureQuery] {
        guard let scope, !rows.isEmpty else { return [] }
        var out: [FeatureQuery] = []
        let others = rows.filter { !$0.echo }.map(\.globalID)
        if !others.isEmpty {
            var q = scope
            q.globalIDs = others
            out.append(q)
        }
        let own = holdsWholeLayer(scope) ? [] : rows.filter(\.echo).map(\.globalID)
        if !own.isEmpty {
            var q = scope
            q.globalIDs = own
            q.outFields = []
            q.returnGeometry = false
            out.append(q)
        }
        return out
    }

    /// Whether a window holds nothing for the replica, known before reading it page by page: a
    /// replica that holds the whole layer gets nothing of its own changes, so a window in which
    /// nobody else changed the layer is empty (after it uploaded 16,000 edits, reading them all
    /// to drop them took 16 pages of work for an empty answer).
    public static func windowIsEmpty(scope: FeatureQuery?, othersChangedWindow: Bool) -> Bool {
        scope == nil || (holdsWholeLayer(scope) && !othersChangedWindow)
    }

    /// A replica holding the whole layer cannot have moved its own features out of scope.
    public static func holdsWholeLayer(_ scope: FeatureQuery?) -> Bool { scope?.selectsEveryFeature == true }

    /// The page's changes: an upsert with every value for a feature someone else changed that is
    /// in scope; a leave for one deleted or moved out of scope (also by the replica's own edit:
    /// it must drop what it no longer holds), except its own delete, which it has applied; nothing
    /// for a feature only the replica changed (echo suppression).
    /// - Parameters:
    ///   - inScope: the features the reads found, by global id.
    ///   - attachments: each feature's attachments, when the replica syncs them.
    /// - Parameter layer: the layer whose changes the page holds.
    /// - Parameter rows: the change-log rows of the page, in generation order.
    /// - Parameter scope: the replica's area, where clause and own replica id.
    public static func changes(
        _ rows: [Row], scope: FeatureQuery?, inScope: [String: Feature], layer: LayerDefinition, attachments: [String: [AttachmentInfo]]?
    ) throws -> [FeedChange] {
        let fields = layer.fields.filter { $0.type != .oid }
        return try changes(rows, scope: scope, inScope: inScope, attachments: attachments) { feature, row in
            try ReplicaRows.upsert(feature, fields: fields, generation: row.generation, inserted: row.inserted)
        }
    }

    /// ``changes(_:scope:inScope:layer:attachments:)`` of the features in scope read as sync rows
    /// (of those only the replica changed, only their presence counts).
    public static func changes(
        _ rows: [Row], scope: FeatureQuery?, syncRows inScope: [String: FeatureTable.SyncRow], attachments: [String: [AttachmentInfo]]?
    ) throws -> [FeedChange] {
        try changes(rows, scope: scope, inScope: inScope, attachments: attachments) { held, row in
            FeedChange(
                kind: .upsert, globalId: held.globalID, generation: row.generation, attributes: held.attributes,
                geometry: held.geometry, inserted: row.inserted)
        }
    }

    /// ``changes(_:scope:inScope:layer:attachments:)`` of the features in scope read in the
    /// stored form (nil for those read only for their presence: the replica's own changes).
    public static func changes(
        _ rows: [Row], scope: FeatureQuery?, storedRows inScope: [String: FeedRow?], attachments: [String: [AttachmentInfo]]?
    ) throws -> [FeedChange] {
        try changes(rows, scope: scope, inScope: inScope, attachments: attachments) { held, row in
            guard let held else { throw SyncServiceError(.failed, "feature \(row.globalID), changed by another, was read only for its presence") }
            var change = FeedChange(kind: .upsert, globalId: row.globalID, generation: row.generation, inserted: row.inserted)
            change.stored = held
            return change
        }
    }

    private static func changes<Held>(
        _ rows: [Row], scope: FeatureQuery?, inScope: [String: Held], attachments: [String: [AttachmentInfo]]?, upsert: (Held, Row) throws -> FeedChange
    ) throws -> [FeedChange] {
        let wholeLayer = holdsWholeLayer(scope)
        var changes: [FeedChange] = []
        for row in rows {
            if row.echo && wholeLayer { continue }
            guard let held = inScope[row.globalID] else {
                if row.echo && row.deleted { continue }
                changes.append(FeedChange(kind: .leave, globalId: row.globalID, generation: row.generation))
                continue
            }
            if row.echo { continue }
            var change = try upsert(held, row)
            if let attachments { change.attachments = attachments[row.globalID] ?? [] }
            changes.append(change)
        }
        return changes
    }

    /// The cursor of the next page: the last global id of a full page.
    public static func next(_ rows: [Row], limit: Int) -> String? { rows.count == limit ? rows.last?.globalID : nil }
}
