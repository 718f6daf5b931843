import Foundation
import OutpostCore
import OutpostProtocol
import OutpostStorage
import OutpostSyncService

/// Applies one applyEdits request inside a write transaction, logging every change under the
/// next generation.
struct EditApplier {
    let table: FeatureTable
    let conn: GeodatabaseConnection
    let rollbackOnFailure: Bool
    /// When the edits are applied (the change log's time).
    let changedAt: String

    var layer: LayerDefinition { table.definition }

    func apply(_ edits: EditRequest) throws -> ApplyEditsResponse {
        // A request that rewrites a large part of the layer packs its R-tree again at the end.
        let geometryWrites = edits.adds.count + edits.updates.count { $0.geometry != nil } + edits.deletes.count
        return try conn.maintainingSpatialIndex(of: table.name, expectedGeometryWrites: geometryWrites) {
            try applyEach(edits)
        }
    }

    private func applyEach(_ edits: EditRequest) throws -> ApplyEditsResponse {
        let generation = try ServiceStore.generation(conn) + 1
        var response = ApplyEditsResponse()
        var applied = 0
        for (index, feature) in edits.adds.enumerated() {
            response.addResults.append(try attempt("adds", index, feature) {
                let added = try table.add([feature], in: conn)[0]
                if let gid = added.globalID {
                    try ServiceStore.log(conn, generation: generation, layerID: layer.id, globalID: gid, op: "insert", columns: allColumns, changedAt: changedAt)
                }
                applied += 1
                return EditResult(objectId: added.objectID, globalId: added.globalID, success: true)
            })
        }
        for (index, feature) in edits.updates.enumerated() {
            response.updateResults.append(try attempt("updates", index, feature) {
                let before = try existing(feature)
                var change = feature
                change.objectID = before.objectID
                try table.update([change], in: conn)
                let after = try existing(Feature(objectID: before.objectID))
                let columns = changedColumns(before, after)
                if let gid = after.globalID, !columns.isEmpty {
                    try ServiceStore.log(conn, generation: generation, layerID: layer.id, globalID: gid, op: "update", columns: columns, changedAt: changedAt)
                    applied += 1
                }
                return EditResult(objectId: after.objectID, globalId: after.globalID, success: true)
            })
        }
        for (index, feature) in edits.deletes.enumerated() {
            response.deleteResults.append(try attempt("deletes", index, feature) {
                let before = try existing(feature)
                try table.delete(objectIDs: [before.objectID!], in: conn)
                if let gid = before.globalID {
                    try ServiceStore.log(
                        conn, generation: generation, layerID: layer.id,
                        [.init(globalID: gid, op: "delete", columns: [], row: try ReplicaRows.tombstoneJSON(before, layer))], changedAt: changedAt)
                }
                applied += 1
                return EditResult(objectId: before.objectID, globalId: before.globalID, success: true)
            })
        }
        if applied > 0 { try ServiceStore.setGeneration(conn, generation) }
        return response
    }

    var allColumns: [String] {
        layer.fields.filter { $0.type != .oid }.map(\.name) + (layer.isSpatial ? [layer.geometryColumn] : [])
    }

    /// Runs one edit. With rollbackOnFailure a failure ends the request (the transaction rolls
    /// back); without, the edit's own changes roll back and its result says why.
    private func attempt(_ list: String, _ index: Int, _ feature: Feature, _ body: () throws -> EditResult) throws -> EditResult {
        do {
            return try conn.inSavepoint(body)
        } catch {
            return try EditFailure.result(error, layer: layer, list: list, index: index, feature: feature, rollbackOnFailure: rollbackOnFailure)
        }
    }

    private func existing(_ feature: Feature) throws -> Feature {
        var query = FeatureQuery()
        if let oid = feature.objectID {
            query.objectIDs = [oid]
        } else if let gid = feature.globalID, layer.globalIDField != nil {
            query.globalIDs = [gid]
        } else {
            throw StorageError(.invalidEdit, "the edit names no feature (objectId or globalId)", table: layer.name)
        }
        var found: Feature?
        try table.forEach(matching: query, in: conn) { found = $0 }
        guard let found else {
            throw StorageError(.notFound, "no feature with \(feature.objectID.map { "object id \($0)" } ?? "global id \(feature.globalID ?? "")")", table: layer.name)
        }
        return found
    }

    private func changedColumns(_ before: Feature, _ after: Feature) -> [String] {
        EditFailure.changedColumns(before, after, layer)
    }
}
