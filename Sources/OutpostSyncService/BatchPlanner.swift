import Foundation
import OutpostCore
import OutpostProtocol
import OutpostStorage

/// One feature's change as the change log records it.
public struct ChangeLogEntry: Sendable {
    /// The feature's global id.
    public var globalID: String
    /// `insert`, `update` or `delete`.
    public var op: String
    /// The columns changed (the geometry column by name).
    public var columns: [String]
    /// When the edit was made, if not now (a replica's edit time, UTC ISO 8601).
    public var editedAt: String?
    /// A resolution the uploading replica must download too (the server kept a value other
    /// than the one it sent): logged without origin, no columns, so echo suppression lets it
    /// through and nobody's conflict detection counts it as a change.
    public var toOrigin = false
    /// A delete's last values (Esri JSON `{"attributes", "geometry"}`), kept in the tombstone
    /// for `updateResurrects`.
    public var row: String?

    /// An entry of these values.
    public init(globalID: String, op: String, columns: [String], editedAt: String? = nil, toOrigin: Bool = false, row: String? = nil) {
        self.globalID = globalID
        self.op = op
        self.columns = columns
        self.editedAt = editedAt
        self.toOrigin = toOrigin
        self.row = row
    }
}

/// A change others (not the uploading replica) made to a feature after some generation.
public struct OthersChange: Sendable {
    /// The generation of the change.
    public var generation: Int64
    /// The columns it changed.
    public var columns: [String]
    /// When it was made (UTC ISO 8601).
    public var editedAt: String

    /// A change of these values.
    public init(generation: Int64, columns: [String], editedAt: String) {
        self.generation = generation
        self.columns = columns
        self.editedAt = editedAt
    }
}

/// A deleted feature's tombstone: its last values when they were kept, and when it was deleted.
public struct TombstoneInfo: Sendable {
    /// The feature's last values, when kept.
    public var row: JSONValue?
    /// When it was deleted (UTC ISO 8601).
    public var editedAt: String

    /// A tombstone of these values.
    public init(row: JSONValue?, editedAt: String) {
        self.row = row
        self.editedAt = editedAt
    }
}

/// What applying one uploaded edit takes: the storage steps, the change-log entries, and the
/// edit's result (its conflict records still without ids; an insert's object id is filled in
/// by whoever runs the steps).
public struct EditPlan: Sendable {
    /// A storage step of a plan.
    public enum Step: Sendable {
        /// Adds the feature.
        case insert(Feature)
        /// Sets the feature's attributes (and geometry when given); `clearGeometry` sets it null.
        case update(objectID: Int64, Feature, clearGeometry: Bool)
        /// Deletes the feature.
        case delete(objectID: Int64)
    }

    /// The storage steps, in order.
    public var steps: [Step] = []
    /// What the change log records.
    public var log: [ChangeLogEntry] = []
    /// The edit's result.
    public var result: BatchEditResult
}

/// Decides how each edit of an uploaded batch applies (docs/sync.md, "Conflicts"): column-level
/// merge of concurrent updates, the per-column rules for overlapping changes, update-delete and
/// delete-update, edits made against an older schema. It reads nothing itself: a backend
/// fetches what it needs for the layer's edits first (`needsCurrentValues` and
/// `needsTombstones` say which features), then runs each plan's steps in its transaction.
/// The same planner serves the GeoPackage and the PostgreSQL backends, so both resolve alike.
public struct BatchPlanner: Sendable {
    /// The layer the batch's edits are for.
    public let layer: LayerDefinition
    let generation: Int64
    let origin: (replica: String, seq: Int64)
    /// The rule the sync asked for (per-field rules of the layer still apply).
    let requestedRule: ConflictPolicy.Rule?
    /// Fields of this layer dropped by migrations since the batch's schema version (lower case).
    let droppedFields: Set<String>
    /// When the batch is applied, for edits that carry no edit time.
    let now: String
    /// The layer's fields by name, and the columns an insert changes (made once, used per edit).
    private let fields: FieldLookup
    private let allColumns: [String]

    /// Object ids of the batch's features present now (kept current as plans delete and the
    /// backend reports inserts).
    public var objectIDs: [String: Int64] = [:]
    /// Changes others made to the batch's features after the oldest base generation in the batch.
    public var others: [String: [OthersChange]] = [:]
    /// Current values of the features `needsCurrentValues` names.
    public var current: [String: Feature] = [:]
    /// Tombstones of the features `needsTombstones` names.
    public var tombstones: [String: TombstoneInfo] = [:]

    /// A planner of the edits of `layer` under `generation`, uploaded by `origin` (replica and seq).
    public init(
        layer: LayerDefinition, generation: Int64, origin: (replica: String, seq: Int64), requestedRule: ConflictPolicy.Rule?,
        droppedFields: Set<String>, now: String
    ) {
        self.layer = layer
        self.generation = generation
        self.origin = origin
        self.requestedRule = requestedRule
        self.droppedFields = droppedFields
        self.now = now
        fields = FieldLookup(layer.fields)
        allColumns = layer.fields.filter { $0.type != .oid }.map(\.name) + (layer.isSpatial ? [layer.geometryColumn] : [])
    }

    /// The layer's field called `name` (in any case).
    private func field(named name: String) -> FieldDefinition? {
        fields.index(of: name).map { layer.fields[$0] }
    }

    /// The rule a batch names; an unknown one is an `invalidParameter` error.
    public static func rule(_ name: String?) throws -> ConflictPolicy.Rule? {
        guard let name else { return nil }
        guard let rule = ConflictPolicy.Rule(rawValue: name) else {
            throw SyncServiceError.invalidParameter("conflictPolicy", "expected one of \(ConflictPolicy.Rule.allCases.map(\.rawValue).joined(separator: ", ")), got \"\(name.prefix(40))\"")
        }
        return rule
    }

    /// The time stamp edits without one are applied at (UTC ISO 8601 with milliseconds, the
    /// nearest millisecond), of a time read from the store's clock. Written by
    /// `GeoPackageDate.format(milliseconds:)`: Foundation's ISO 8601 formatter, made per batch, took
    /// 3–5 ms on a server's first batch (setting up its calendar), in the batch's transaction.
    public static func timestamp(_ date: Date) -> String {
        GeoPackageDate.format(milliseconds: Int64((date.timeIntervalSince1970 * 1000).rounded()))
    }

    /// The edits' global ids (normalised; malformed ones left out: their edits fail on their own).
    public static func globalIDs(_ edits: BatchLayer) -> [String] { edits.edits.compactMap { GlobalID.normalized($0.globalId) } }

    /// Features whose current values the plans need, once ``objectIDs`` and ``others`` are known:
    /// those deleted (for the tombstone) and those others changed after the edit's base.
    public func needsCurrentValues(_ edits: BatchLayer) -> [String] {
        edits.edits.compactMap { edit in
            guard let gid = GlobalID.normalized(edit.globalId), objectIDs[gid] != nil else { return nil }
            switch edit.op {
            case .delete: return gid
            case .update: return changedSince(edit.baseGeneration, gid).isEmpty ? nil : gid
            case .insert: return nil
            }
        }
    }

    /// Updated features that are not here: their tombstones decide between update-delete rules.
    public func needsTombstones(_ edits: BatchLayer) -> [String] {
        edits.edits.compactMap { edit in
            guard edit.op == .update, let gid = GlobalID.normalized(edit.globalId), objectIDs[gid] == nil else { return nil }
            return gid
        }
    }

    /// The plan for one edit. An edit made against an older schema keeps the values of fields
    /// dropped since in a `schemaDropped` conflict record instead of failing; the rest applies.
    /// - Throws: `StorageError` for an edit that cannot apply (its values, its geometry).
    public mutating func plan(_ edit: BatchEdit) throws -> EditPlan {
        guard !droppedFields.isEmpty, edit.op != .delete,
            case let lost = (edit.attributes ?? [:]).filter({ droppedFields.contains($0.key.lowercased()) && field(named: $0.key) == nil }), !lost.isEmpty
        else { return try planApplying(edit) }
        var kept = edit
        kept.attributes = edit.attributes?.filter { lost[$0.key] == nil }
        kept.changedColumns = edit.changedColumns?.filter { lost[$0] == nil }
        var plan = try planApplying(kept)
        let gid = GlobalID.normalized(edit.globalId) ?? edit.globalId
        let archived = conflict(ConflictRecord(
            layerId: layer.id, globalId: gid, kind: .schemaDropped, columns: lost.keys.sorted(), base: edit.baseValues?.filter { lost[$0.key] != nil },
            ours: lost, theirs: nil, policy: "schemaDropped", winner: "theirs", oursEditedAt: edit.editedAt ?? now))
        plan.result.conflicts = (plan.result.conflicts ?? []) + [archived]
        return plan
    }

    /// After the backend ran an insert step.
    public mutating func inserted(_ globalID: String, objectID: Int64) { objectIDs[globalID] = objectID }

    /// Takes `plan`, made for an edit of feature `globalID` by another planner that held the
    /// same values for that feature (a backend planning a run's edits ahead, on a reader, while
    /// it writes the run before): this planner changes as ``plan(_:)`` would have changed it.
    /// Only for the batch's first edit of its feature: such a plan rests on nothing but that
    /// feature's values, which no earlier edit changed.
    public mutating func adopt(_ plan: EditPlan, globalID: String) {
        for step in plan.steps {
            if case .delete = step { objectIDs[globalID] = nil }
        }
    }

    /// What an edit's plan and steps may change in the planner (a feature's object id), to undo
    /// when the edit fails. Cheaper than keeping a copy of the planner, whose tables a change
    /// would copy whole for every edit.
    public func undoPoint(_ edit: BatchEdit) -> (globalID: String, objectID: Int64?)? {
        GlobalID.normalized(edit.globalId).map(undoPoint(globalID:))
    }

    /// ``undoPoint(_:)`` for an edit of feature `globalID` (already normalised).
    public func undoPoint(globalID: String) -> (globalID: String, objectID: Int64?) {
        (globalID, objectIDs[globalID])
    }

    /// Restores what ``undoPoint(_:)`` kept (nothing for nil).
    public mutating func undo(_ point: (globalID: String, objectID: Int64?)?) {
        guard let point else { return }
        objectIDs[point.globalID] = point.objectID
    }

    private mutating func planApplying(_ edit: BatchEdit) throws -> EditPlan {
        guard let gid = GlobalID.normalized(edit.globalId) else {
            throw StorageError(.invalidEdit, "\"\(edit.globalId.prefix(40))\" is not a global id", table: layer.name)
        }
        let existingID = objectIDs[gid]
        switch edit.op {
        case .insert:
            if let existingID {
                // A feature with this global id is already here (it can only be this very edit):
                // report it rather than duplicate it.
                return EditPlan(result: BatchEditResult(globalId: gid, op: .insert, success: true, objectId: existingID, resolution: "alreadyApplied"))
            }
            var feature = Feature(globalID: gid, attributes: try values(edit.attributes ?? [:]))
            feature.geometry = try geometry(of: edit)
            return EditPlan(
                steps: [.insert(feature)], log: [ChangeLogEntry(globalID: gid, op: "insert", columns: allColumns, editedAt: edit.editedAt)],
                result: BatchEditResult(globalId: gid, op: .insert, success: true))
        case .update:
            guard let existingID else {
                guard let tombstone = tombstones[gid] else {
                    throw StorageError(.notFound, "no feature with global id \(gid)", table: layer.name)
                }
                return try updateOfDeleted(edit, gid: gid, tombstone: tombstone)
            }
            return try update(edit, gid: gid, objectID: existingID)
        case .delete:
            guard let existingID else {
                return EditPlan(result: BatchEditResult(globalId: gid, op: .delete, success: true, resolution: "alreadyDeleted"))
            }
            return try delete(edit, gid: gid, objectID: existingID)
        }
    }

    /// Columns others changed after the client's base: where the values differ, the rule of each
    /// column decides, and the discarded values go into conflict records.
    private func update(_ edit: BatchEdit, gid: String, objectID: Int64) throws -> EditPlan {
        // The columns the edit names that the layer has (its geometry column included).
        var changed = Set<String>(minimumCapacity: edit.changedColumns?.count ?? edit.attributes?.count ?? 0)
        func keep(_ name: String) { if name == layer.geometryColumn || fields.index(of: name) != nil { changed.insert(name) } }
        if let columns = edit.changedColumns { columns.forEach(keep) } else { edit.attributes?.keys.forEach(keep) }
        let theirsChanged = changedSince(edit.baseGeneration, gid)
        let overlapping = theirsChanged.isEmpty ? [] : theirsChanged.intersection(changed)
        var conflicts: [ConflictRecord] = []
        var clientLost = Set<String>()
        if !overlapping.isEmpty, let existing = current[gid] {
            let ours = try jsonValues(edit), theirs = jsonValues(existing)
            var groups: [String: (rule: ConflictPolicy.Rule, winner: String, columns: [String])] = [:]
            for column in overlapping.sorted() where ours[column] != theirs[column] {
                let rule = layer.conflicts.rule(for: column, layerRule: requestedRule)
                let winner: String
                switch rule {
                case .clientWins: winner = "ours"
                case .serverWins, .manual: winner = "theirs"
                case .latestEditWins: winner = (edit.editedAt ?? now) >= theirsEditedAt(edit.baseGeneration, gid, [column]) ? "ours" : "theirs"
                }
                if winner == "theirs" { clientLost.insert(column) }
                groups[rule.rawValue + "/" + winner, default: (rule, winner, [])].columns.append(column)
            }
            for (_, group) in groups.sorted(by: { $0.key < $1.key }) {
                let columns = group.columns
                conflicts.append(conflict(ConflictRecord(
                    layerId: layer.id, globalId: gid, kind: .updateUpdate, columns: columns, base: edit.baseValues?.filter { columns.contains($0.key) },
                    ours: ours.filter { columns.contains($0.key) }, theirs: theirs.filter { columns.contains($0.key) }, policy: group.rule.rawValue,
                    winner: group.winner, oursEditedAt: edit.editedAt ?? now, theirsEditedAt: theirsEditedAt(edit.baseGeneration, gid, Set(columns)),
                    state: group.rule == .manual ? "open" : nil)))
            }
        }
        let applying = clientLost.isEmpty ? changed : changed.subtracting(clientLost)
        var plan = EditPlan(result: BatchEditResult(globalId: gid, op: .update, success: true, objectId: objectID))
        var update = Feature(objectID: objectID, attributes: try values(edit.attributes ?? [:], only: applying))
        let geometryChanged = layer.isSpatial && applying.contains(layer.geometryColumn)
        if geometryChanged { update.geometry = try geometry(of: edit) }
        let clearGeometry = geometryChanged && update.geometry == nil
        if !update.attributes.isEmpty || update.geometry != nil || clearGeometry {
            plan.steps.append(.update(objectID: objectID, update, clearGeometry: clearGeometry))
        }
        if !applying.isEmpty {
            // The edit's own list when it is exactly what applies, in order (as a replica seals it).
            let named = edit.changedColumns ?? []
            let columns = named.count == applying.count && zip(named, named.dropFirst()).allSatisfy({ $0 < $1 }) ? named : applying.sorted()
            plan.log.append(ChangeLogEntry(globalID: gid, op: "update", columns: columns, editedAt: edit.editedAt))
        }
        // The replica holds its own values for the columns it lost: it must download the server's.
        if !clientLost.isEmpty { plan.log.append(forOrigin(gid)) }
        let merged = !theirsChanged.isEmpty && !theirsChanged.subtracting(changed).isEmpty
        plan.result.resolution = !conflicts.isEmpty ? "conflict" : merged ? "merged" : nil
        plan.result.conflicts = conflicts.isEmpty ? nil : conflicts
        return plan
    }

    /// Deleted here, changed on the server meanwhile: by default the delete wins and the
    /// server's newer values are kept in a conflict record; `keepServer` keeps the feature and
    /// records the discarded delete.
    private mutating func delete(_ edit: BatchEdit, gid: String, objectID: Int64) throws -> EditPlan {
        let existing = current[gid]
        var plan = EditPlan(result: BatchEditResult(globalId: gid, op: .delete, success: true, objectId: objectID))
        let changedThere = changedSince(edit.baseGeneration, gid)
        if !changedThere.isEmpty, let existing {
            let theirs = jsonValues(existing).filter { changedThere.contains($0.key) }
            let keep = layer.conflicts.deleteUpdate == .keepServer
            plan.result.resolution = "conflict"
            plan.result.conflicts = [conflict(ConflictRecord(
                layerId: layer.id, globalId: gid, kind: .deleteUpdate, columns: changedThere.sorted(), base: edit.baseValues?.filter { changedThere.contains($0.key) },
                ours: nil, theirs: theirs, policy: layer.conflicts.deleteUpdate.rawValue, winner: keep ? "theirs" : "ours", oursEditedAt: edit.editedAt ?? now,
                theirsEditedAt: theirsEditedAt(edit.baseGeneration, gid, changedThere)))]
            if keep {
                plan.log.append(forOrigin(gid))
                return plan
            }
        }
        plan.steps.append(.delete(objectID: objectID))
        plan.log.append(ChangeLogEntry(globalID: gid, op: "delete", columns: [], editedAt: edit.editedAt, row: try existing.map { try ReplicaRows.tombstoneJSON($0, layer) }))
        objectIDs[gid] = nil
        return plan
    }

    /// The client updated a feature the server deleted since: `deleteWins` keeps it deleted and
    /// records the update's values; `updateResurrects` brings it back with its last values and
    /// the update applied, and records the discarded delete.
    private func updateOfDeleted(_ edit: BatchEdit, gid: String, tombstone: TombstoneInfo) throws -> EditPlan {
        let ours = try jsonValues(edit)
        let resurrect = layer.conflicts.updateDelete == .updateResurrects && tombstone.row != nil
        let record = conflict(ConflictRecord(
            layerId: layer.id, globalId: gid, kind: .updateDelete, columns: ours.keys.sorted(), base: edit.baseValues, ours: ours, theirs: nil,
            policy: resurrect ? "updateResurrects" : "deleteWins", winner: resurrect ? "ours" : "theirs", oursEditedAt: edit.editedAt ?? now,
            theirsEditedAt: tombstone.editedAt))
        var plan = EditPlan(result: BatchEditResult(globalId: gid, op: .update, success: true, resolution: "conflict", conflicts: [record]))
        guard resurrect, let row = tombstone.row else {
            // The replica still holds the feature: it must download the delete.
            plan.log.append(forOrigin(gid))
            return plan
        }
        var attributes = row["attributes"]?.objectValue ?? [:]
        for (name, value) in edit.attributes ?? [:] where (edit.changedColumns ?? Array(ours.keys)).contains(name) { attributes[name] = value }
        var feature = Feature(globalID: gid, attributes: try values(attributes.filter { field(named: $0.key).map { $0.type != .globalID && $0.type != .oid } ?? false }))
        let geometryChanged = layer.isSpatial && (edit.changedColumns ?? []).contains(layer.geometryColumn)
        feature.geometry = try geometryChanged ? geometry(of: edit) : geometry(row["geometry"])
        plan.steps.append(.insert(feature))
        plan.log += [ChangeLogEntry(globalID: gid, op: "insert", columns: allColumns, editedAt: edit.editedAt), forOrigin(gid)]
        return plan
    }

    /// Columns others changed after generation `base` (none without a base).
    private func changedSince(_ base: Int64?, _ gid: String) -> Set<String> {
        guard let base, let theirs = others[gid] else { return [] }
        return Set(theirs.filter { $0.generation > base }.flatMap(\.columns))
    }

    /// When others last edited any of `columns` after `base` ("" when they did not).
    private func theirsEditedAt(_ base: Int64?, _ gid: String, _ columns: Set<String>) -> String {
        guard let base else { return "" }
        return (others[gid] ?? []).filter { $0.generation > base && !columns.isDisjoint(with: $0.columns) }.map(\.editedAt).max() ?? ""
    }

    /// The values an edit sets, normalised as the server stores them (dates in epoch ms, the
    /// geometry as Esri JSON), by column.
    private func jsonValues(_ edit: BatchEdit) throws -> [String: JSONValue] {
        let changed = edit.changedColumns.map(Set.init)
        var out: [String: JSONValue] = [:]
        for (name, value) in try values(edit.attributes ?? [:]) where changed?.contains(name) ?? true { out[name] = value.jsonValue }
        if layer.isSpatial, changed?.contains(layer.geometryColumn) ?? (edit.op == .insert) {
            out[layer.geometryColumn] = try geometry(of: edit).map { try EsriJSON.value($0) } ?? .null
        }
        return out
    }

    private func jsonValues(_ feature: Feature) -> [String: JSONValue] {
        var out: [String: JSONValue] = [:]
        for field in layer.fields where field.type != .oid && field.type != .globalID { out[field.name] = (feature.attributes[field.name] ?? .null).jsonValue }
        if layer.isSpatial { out[layer.geometryColumn] = feature.geometry.flatMap { try? EsriJSON.value($0) } ?? .null }
        return out
    }

    /// A conflict record of this batch (the backend gives it its id when it keeps it).
    private func conflict(_ record: ConflictRecord) -> ConflictRecord {
        var c = record
        c.replicaId = origin.replica
        c.seq = origin.seq
        c.generation = generation
        return c
    }

    /// The attributes (of the names in `only`, when given) as field values.
    private func values(_ attributes: [String: JSONValue], only: Set<String>? = nil) throws -> [String: FieldValue] {
        var out: [String: FieldValue] = [:]
        out.reserveCapacity(attributes.count)
        for (name, json) in attributes {
            if let only, !only.contains(name) { continue }
            guard let index = fields.index(of: name) else {
                throw StorageError(.invalidEdit, "\(layer.name) has no field \"\(name.prefix(60))\"", table: layer.name, field: name)
            }
            // Read in place: a copy of the field definition per value retains and releases its strings.
            let type = layer.fields[index].type
            if type == .oid || type == .globalID { continue }
            do {
                out[layer.fields[index].name] = try FieldValue(json: json, type: type)
            } catch var error as StorageError {
                error.field = layer.fields[index].name
                error.table = layer.name
                throw error
            }
        }
        return out
    }

    /// An edit's geometry, from its blob (its header's spatial reference id is not read: as for
    /// Esri JSON, a batch's geometries are in the layer's) or its Esri JSON.
    private func geometry(of edit: BatchEdit) throws -> Geometry? {
        guard let blob = edit.geometryBlob else { return try geometry(edit.geometry) }
        return try readingGeometry { try GeoPackageBinary.decode(blob).geometry }
    }

    private func geometry(_ json: JSONValue?) throws -> Geometry? {
        guard let json, !json.isNull else { return nil }
        return try readingGeometry { try EsriJSON.decodeGeometry(json) }
    }

    /// A geometry `read` gives, for a spatial layer; an unreadable one is an invalid edit.
    private func readingGeometry(_ read: () throws -> Geometry) throws -> Geometry {
        guard layer.isSpatial else { throw StorageError(.invalidEdit, "\(layer.name) is a table without geometry", table: layer.name) }
        do {
            return try read()
        } catch let error as GeometryError {
            throw StorageError(.invalidEdit, "invalid geometry: \(error)", table: layer.name, field: layer.geometryColumn, cause: error)
        }
    }

    private func forOrigin(_ gid: String) -> ChangeLogEntry { ChangeLogEntry(globalID: gid, op: "update", columns: [], toOrigin: true) }

    /// The result of an edit that failed (its savepoint, or the whole batch, rolled back).
    public static func failure(_ edit: BatchEdit, _ error: Error) -> BatchEditResult { failure(globalID: edit.globalId, op: edit.op, error) }

    /// The result of a failed feature or attachment edit: not found, or an invalid edit.
    public static func failure(globalID: String, op: BatchEdit.Operation, _ error: Error) -> BatchEditResult {
        let storage = error as? StorageError
        return BatchEditResult(
            globalId: globalID, op: op, success: false,
            error: .init(code: storage?.code == .notFound ? EditResult.Code.notFound : EditResult.Code.invalidEdit, description: storage?.description ?? "\(error)"))
    }
}
