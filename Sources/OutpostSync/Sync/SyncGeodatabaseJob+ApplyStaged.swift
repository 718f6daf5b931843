import Foundation
import OutpostCore
import OutpostProtocol
import OutpostStorage

extension SyncGeodatabaseJob {
    /// Applies a layer's staged rows, a thousand at a time (inside the caller's transaction).
    static func applyStaged(
        layerID: Int, table: String, _ conn: GeodatabaseConnection, deleteAbsent: Bool = false, contentDirectory: URL? = nil
    ) throws -> PendingChanges {
        guard let layer = conn.geodatabase.schema.allLayers.first(where: { $0.name == table }) else {
            throw SyncError(.notAReplica, "the replica has no table \(table)")
        }
        var applier = try DownloadApplier(conn: conn, layer: layer, contentDirectory: contentDirectory)
        func change(_ row: GeodatabaseConnection.StagedRow) throws -> FeedChange {
            if let text = row.row { return try FeedChange(json: JSONValue.parse(text)) }
            return FeedChange(kind: FeedChange.Kind(rawValue: row.kind) ?? .leave, globalId: row.globalID, generation: row.generation)
        }
        /// Applies pages of staged rows read by `page` (given the last global id applied).
        func applyPages(_ page: (String) throws -> [GeodatabaseConnection.StagedRow]) throws {
            var after = ""
            while true {
                let rows = try page(after)
                guard let last = rows.last else { return }
                try applier.apply(rows.map(change))
                after = last.globalID
            }
        }
        func applyAll() throws {
            if let gidField = layer.globalIDField {
                try applyInRowOrder(gidField)
            } else {
                try applyPages { try conn.stagedRows(layerID: layerID, after: $0, limit: 1000) }
            }
            if deleteAbsent { try applier.deleteAbsent(stagedLayerID: layerID) }
        }
        func applyInRowOrder(_ gidField: String) throws {
            var after = ""
            // Features the replica holds are changed in the order of their rows, not of their
            // global ids (random): each table page is then written once, not again and again as
            // the page cache turns over (1,000,000 updates of a 6,250,000-row table: 12.9 s in
            // row order, 23.5 s at random). The keys are sorted a window of a million at a time
            // (16 bytes each). Changing a row never makes another one match or not, so every
            // staged row of a held feature is applied once here; a feature this deletes is gone
            // from the table, but the pass below reads only upserts.
            while true {
                let (keys, last) = try conn.stagedRowsOfLocalFeatures(
                    layerID: layerID, table: table, globalIDField: gidField, objectIDField: layer.objectIDField, after: after, limit: 1 << 20)
                guard let last else { break }
                let ordered = keys.sorted { $0.objectID < $1.objectID }.map(\.rowID)
                for start in stride(from: 0, to: ordered.count, by: 1000) {
                    let ids = Array(ordered[start..<min(start + 1000, ordered.count)])
                    let rows = try conn.stagedRows(rowIDs: ids)
                    try applier.apply(ids.compactMap { rows[$0] }.map(change))
                }
                after = last
            }
            // Then new features (upserts of features the replica does not hold).
            try applyPages {
                try conn.stagedUpsertsWithoutLocalFeature(layerID: layerID, table: table, globalIDField: gidField, after: $0, limit: 1000)
            }
        }
        try applyingInBulk(conn, table: table, rows: try conn.stagedCount(layerID: layerID), applyAll)
        return applier.counts
    }

    /// Runs a download's writes of about `rows` changes to `table` as a bulk apply wants them:
    /// `gpkg_contents` brought up to date once, after the last write, not once per feature; the
    /// R-tree packed again after them when they rewrite a large part of the layer (nearly every
    /// change writes a geometry); the silenced capture triggers set aside when there are enough.
    static func applyingInBulk(_ conn: GeodatabaseConnection, table: String, rows: Int, _ body: () throws -> Void) throws {
        try conn.maintainingSpatialIndex(of: table, expectedGeometryWrites: rows) {
            try conn.withCaptureTriggersSetAside(of: table, expectedWrites: rows) {
                try conn.deferringContentsUpdates(body)
            }
        }
    }
}
