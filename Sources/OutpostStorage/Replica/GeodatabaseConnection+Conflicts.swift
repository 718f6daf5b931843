import Foundation
import GRDB
import OutpostCore

/// How a replica resolves an open (`manual`) conflict: with the values it uploaded, with the
/// server's, or with values given by whoever decides.
public enum ConflictResolution: Hashable, Sendable {
    /// Keep the values the replica uploaded.
    case ours
    /// Take the server's values.
    case theirs
    /// Values by column (sync JSON: dates in epoch ms, the geometry as Esri JSON).
    case values([String: JSONValue])

    /// The resolution's name as stored: `ours`, `theirs` or `values`.
    public var name: String {
        switch self {
        case .ours: "ours"
        case .theirs: "theirs"
        case .values: "values"
        }
    }
}

extension GeodatabaseConnection {
    /// Conflicts the server met with this replica's uploads, oldest first.
    public func conflicts() throws -> [SyncConflict] {
        guard try db.tableExists("outpost_conflicts") else { return [] }
        let hasState = try db.columns(in: "outpost_conflicts").contains { $0.name == "state" }
        let extra = hasState ? "state, resolution" : "NULL, NULL"
        return try Row.fetchAll(db, sql: "SELECT conflict_id, server_id, table_name, globalid, kind, record, at, \(extra) FROM outpost_conflicts ORDER BY conflict_id")
            .map {
                SyncConflict(id: $0[0], serverID: $0[1], table: $0[2], globalID: $0[3], kind: $0[4], record: $0[5], at: $0[6], state: $0[7], resolution: $0[8])
            }
    }

    /// Resolves an open conflict with a normal edit that syncs like any other (nothing to edit
    /// for `.theirs`: the replica already holds the server's values), and queues the resolution
    /// for the next upload so the server closes its record too.
    /// - Throws: ``StorageError`` `.notFound` for an unknown id, `.invalidEdit` when the conflict
    ///   is not open or the values do not fit the layer.
    public func resolveConflict(id: Int64, keep resolution: ConflictResolution) throws {
        guard let conflict = try conflicts().first(where: { $0.id == id }) else {
            throw StorageError(.notFound, "no conflict \(id) in this replica (outpost conflicts lists them)")
        }
        guard conflict.state == "open" else {
            throw StorageError(.invalidEdit, "conflict \(id) is \(conflict.state ?? "settled by its rule"), not open: there is nothing to resolve")
        }
        let record = try JSONValue.parse(conflict.record)
        let values: [String: JSONValue]
        switch resolution {
        case .ours: values = record["ours"]?.objectValue ?? [:]
        case .theirs: values = [:]
        case .values(let given): values = given
        }
        if !values.isEmpty {
            let table = try geodatabase.table(named: conflict.table)
            try apply(values, toFeature: conflict.globalID, of: table)
        }
        try db.execute(
            sql: "UPDATE outpost_conflicts SET state = 'resolved', resolution = ?, resolved_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE conflict_id = ?",
            arguments: [resolution.name, id])
    }

    /// Server ids of conflicts resolved here and not yet sent, marked as sent in batch `seq`.
    public func takeUnsentResolutions(seq: Int64) throws -> [Int64] {
        guard try db.tableExists("outpost_conflicts"), try db.columns(in: "outpost_conflicts").contains(where: { $0.name == "sent_in_seq" }) else { return [] }
        let ids = try Int64.fetchAll(db, sql: "SELECT server_id FROM outpost_conflicts WHERE state = 'resolved' AND sent_in_seq IS NULL AND server_id IS NOT NULL ORDER BY server_id")
        if !ids.isEmpty {
            try db.execute(sql: "UPDATE outpost_conflicts SET sent_in_seq = ? WHERE state = 'resolved' AND sent_in_seq IS NULL AND server_id IS NOT NULL", arguments: [seq])
        }
        return ids
    }

    /// Whether resolutions wait for an upload.
    public func hasUnsentResolutions() throws -> Bool {
        guard try db.tableExists("outpost_conflicts"), try db.columns(in: "outpost_conflicts").contains(where: { $0.name == "sent_in_seq" }) else { return false }
        return try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM outpost_conflicts WHERE state = 'resolved' AND sent_in_seq IS NULL AND server_id IS NOT NULL)") ?? false
    }

    /// Sets columns of one feature from sync JSON values.
    private func apply(_ values: [String: JSONValue], toFeature globalID: String, of table: FeatureTable) throws {
        let layer = table.definition
        var feature = Feature(globalID: globalID)
        var clearGeometry = false
        for (name, json) in values {
            if layer.isSpatial, name.lowercased() == layer.geometryColumn.lowercased() {
                if json.isNull {
                    clearGeometry = true
                } else {
                    do {
                        feature.geometry = try EsriJSON.decodeGeometry(json)
                    } catch {
                        throw StorageError(.invalidEdit, "invalid geometry: \(error)", table: layer.name, field: layer.geometryColumn)
                    }
                }
                continue
            }
            guard let field = layer.field(named: name), field.type != .oid, field.type != .globalID else {
                throw StorageError(.invalidEdit, "\(layer.name) has no editable field \"\(name.prefix(60))\"", table: layer.name, field: name)
            }
            feature.attributes[field.name] = try FieldValue(json: json, type: field.type)
        }
        if !feature.attributes.isEmpty || feature.geometry != nil || clearGeometry {
            try table.update([feature], in: self)
        }
        if clearGeometry, let gid = layer.globalIDField {
            try db.execute(
                sql: "UPDATE \(quotedIdentifier(layer.name)) SET \(quotedIdentifier(layer.geometryColumn)) = NULL WHERE \(quotedIdentifier(gid)) = ?",
                arguments: [globalID])
        }
    }
}
