import Foundation
import GRDB
import OutpostCore
import OutpostGeoprocessing
import OutpostStorage

/// Builds `.locator` files from the layers of a geodatabase, and brings them up to date after
/// the geodatabase changes (a sync) by indexing again only the rows that changed.
///
/// ```swift
/// let fields = try LocatorFieldMap(parsing: "house=house_number,street=street,city=city,postal=postcode")
/// try LocatorBuilder.create(from: gdb, sources: [LocatorSource(layer: "addresses", fields: fields)], at: url)
/// ```
///
/// Memory stays bounded whatever the layer size: rows stream from the layer into the file; only
/// the distinct search terms and, during an update, one page of fingerprints are held.
public enum LocatorBuilder {
    /// Rows compared per page during an update.
    static let updatePage = 10_000

    /// Builds a locator at `url` (written beside it and moved into place when complete).
    /// - Throws: ``LocatorError`` `.invalidInput` for a layer or field that is not there, layers
    ///   in different spatial references, or an existing file without `overwrite`.
    @discardableResult
    public static func create(
        from geodatabase: Geodatabase, sources: [LocatorSource], at url: URL, overwrite: Bool = false,
        progress: ((Int) -> Void)? = nil
    ) throws -> LocatorBuildSummary {
        let started = Date()
        guard !sources.isEmpty else { throw LocatorError(.invalidInput, "a locator needs at least one layer") }
        if FileManager.default.fileExists(atPath: url.path), !overwrite {
            throw LocatorError(.invalidInput, "\(url.lastPathComponent) exists (overwrite it to build again)")
        }
        let layers = try sources.map { try checkedLayer($0, in: geodatabase) }
        let references = Set(layers.map { $0.spatialReference?.wkid ?? 4326 })
        guard references.count == 1, let wkid = references.first else {
            throw LocatorError(.invalidInput, "the layers are in different spatial references (\(references.sorted().map(String.init).joined(separator: ", ")))")
        }
        let system = try CoordinateSystemInfo(SpatialReference(wkid: wkid))
        let building = url.deletingLastPathComponent().appendingPathComponent(".\(url.lastPathComponent).\(UUID().uuidString).building")
        defer { try? FileManager.default.removeItem(at: building) }
        var summary = LocatorBuildSummary()
        do {
            let queue = try DatabaseQueue(path: building.path)
            try queue.writeWithoutTransaction { db in
                // A file being built is thrown away if anything fails, so it needs no journal.
                try db.execute(sql: "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; PRAGMA cache_size = -65536")
                try db.execute(sql: "PRAGMA application_id = \(LocatorLayout.applicationID); PRAGMA user_version = \(LocatorLayout.version)")
                try db.inTransaction {
                    try db.execute(sql: LocatorLayout.schema)
                    // A bulk build merges the full-text segments once, at the end ('optimize'),
                    // rather than while rows arrive.
                    try db.execute(sql: "INSERT INTO address_index(address_index, rank) VALUES('automerge', 0)")
                    let writer = try LocatorWriter(db, geographic: system.isGeographic, metresPerUnit: system.metresPerUnit ?? 1)
                    writer.tracksChanges = false
                    var done = 0
                    for (index, source) in sources.enumerated() {
                        let sourceID = Int64(index + 1)
                        let role = [.lineString, .multiLineString].contains(layers[index].geometryType?.type) ? "streets" : "points"
                        let fields = String(decoding: try JSONEncoder().encode(source.fields), as: UTF8.self)
                        try db.execute(
                            sql: "INSERT INTO locator_sources(id, layer, role, fields, where_clause) VALUES (?, ?, ?, ?, ?)",
                            arguments: [sourceID, source.layer, role, fields, source.whereClause])
                        // Two threads: one reads the layer and prepares rows (values, terms,
                        // keys), this one writes them; a bounded channel between them.
                        let channel = BatchChannel<[LocatorWriter.PreparedRow]>(capacity: 8)
                        let producerDone = DispatchSemaphore(value: 0)
                        let query = query(for: source, after: nil, limit: nil)
                        let fieldMap = source.fields
                        Thread.detachNewThread {
                            defer { producerDone.signal() }
                            do {
                                try geodatabase.read { conn in
                                    let table = try geodatabase.table(named: source.layer)
                                    var batch: [LocatorWriter.PreparedRow] = []
                                    batch.reserveCapacity(512)
                                    try table.forEach(matching: query, in: conn) { feature in
                                        batch.append(LocatorWriter.prepare(feature, source: sourceID, fields: fieldMap, role: role))
                                        if batch.count == 512 {
                                            guard channel.send(batch) else { throw CancellationError() }
                                            batch.removeAll(keepingCapacity: true)
                                        }
                                    }
                                    if !batch.isEmpty { _ = channel.send(batch) }
                                }
                                channel.finish(nil)
                            } catch {
                                channel.finish(error)
                            }
                        }
                        do {
                            while let batch = try channel.receive() {
                                for row in batch {
                                    let added = try writer.write(row)
                                    summary.entries += added.entries
                                    summary.segments += added.segments
                                    summary.skipped += added.skipped
                                    done += 1
                                    if done % 10_000 == 0 { progress?(done) }
                                }
                            }
                        } catch {
                            channel.cancel()
                            producerDone.wait()
                            throw error
                        }
                        producerDone.wait()
                    }
                    try writer.fillCells()
                    try db.execute(sql: LocatorLayout.indexes)
                    summary.places = try writer.rebuildPlaces(.all)
                    try writer.flushVocabulary()
                    try writeInfo(db, wkid: wkid, geodatabase: geodatabase)
                    progress?(done)
                    return .commit
                }
                try db.execute(sql: "INSERT INTO address_index(address_index) VALUES('optimize')")
                try db.execute(sql: "INSERT INTO place_index(place_index) VALUES('optimize')")
                try db.execute(sql: "ANALYZE")
            }
            try queue.close()
        } catch let error as LocatorError {
            throw error
        } catch let error as StorageError {
            throw LocatorError(.invalidInput, "cannot read the layers: \(error)")
        }
        if FileManager.default.fileExists(atPath: url.path) { try FileManager.default.removeItem(at: url) }
        try FileManager.default.moveItem(at: building, to: url)
        summary.seconds = Date().timeIntervalSince(started)
        return summary
    }

    /// Brings the locator at `url` up to date with `geodatabase` (the one it was built from, or
    /// a copy such as a replica after a sync): rows added, changed or deleted in the source
    /// layers are indexed again or removed, and the street, postal-code and city entries they
    /// belong to are recomputed. Unchanged rows are compared by fingerprint only.
    @discardableResult
    public static func update(_ url: URL, from geodatabase: Geodatabase, progress: ((Int) -> Void)? = nil) throws -> LocatorBuildSummary {
        let started = Date()
        let queue = try LocatorReader.openQueue(url, readOnly: false)
        var summary = LocatorBuildSummary()
        try queue.write { db in
            let wkid = try Int.fetchOne(db, sql: "SELECT value FROM locator_info WHERE key = 'wkid'") ?? 4326
            let system = try CoordinateSystemInfo(SpatialReference(wkid: wkid))
            let writer = try LocatorWriter(db, geographic: system.isGeographic, metresPerUnit: system.metresPerUnit ?? 1)
            let rows = try Row.fetchAll(db, sql: "SELECT id, layer, role, fields, where_clause FROM locator_sources ORDER BY id")
            var done = 0
            for row in rows {
                let sourceID: Int64 = row["id"]
                let fieldsJSON: String = row["fields"]
                let source = LocatorSource(
                    layer: row["layer"], fields: try JSONDecoder().decode(LocatorFieldMap.self, from: Data(fieldsJSON.utf8)),
                    whereClause: row["where_clause"])
                let layer = try checkedLayer(source, in: geodatabase)
                guard (layer.spatialReference?.wkid ?? 4326) == wkid else {
                    throw LocatorError(.invalidInput, "\(source.layer) is no longer in EPSG:\(wkid)")
                }
                let role: String = row["role"]
                try geodatabase.read { conn in
                    let table = try geodatabase.table(named: source.layer)
                    var after: Int64 = .min
                    while true {
                        var page: [Feature] = []
                        try table.forEach(matching: query(for: source, after: after == .min ? nil : after, limit: updatePage), in: conn) { page.append($0) }
                        let upper = page.count < updatePage ? Int64.max : (page.last?.objectID ?? .max)
                        try writer.merge(page, source: sourceID, fields: source.fields, role: role, range: (after, upper), summary: &summary)
                        done += page.count
                        progress?(done)
                        if upper == .max { break }
                        after = upper
                    }
                }
            }
            summary.places = try writer.rebuildPlaces(writer.touched)
            try writer.flushVocabulary()
            try db.execute(sql: "INSERT OR REPLACE INTO locator_info(key, value) VALUES ('updated', ?)", arguments: [ISO8601DateFormatter().string(from: Date())])
            try writeCounts(db)
        }
        try queue.close()
        summary.seconds = Date().timeIntervalSince(started)
        return summary
    }

    // MARK: - Helpers

    static func checkedLayer(_ source: LocatorSource, in geodatabase: Geodatabase) throws -> LayerDefinition {
        guard let layer = geodatabase.schema.layer(named: source.layer) else {
            let names = geodatabase.schema.allLayers.map(\.name).joined(separator: ", ")
            throw LocatorError(.invalidInput, "\(geodatabase.url.lastPathComponent) has no layer \(source.layer) (it has \(names))")
        }
        guard layer.isSpatial else { throw LocatorError(.invalidInput, "\(source.layer) has no geometry to locate") }
        for name in source.fields.fieldNames where !layer.fields.contains(where: { $0.name.caseInsensitiveCompare(name) == .orderedSame }) {
            throw LocatorError(.invalidInput, "\(source.layer) has no field \(name)")
        }
        if [.lineString, .multiLineString].contains(layer.geometryType?.type), source.fields.street == nil {
            throw LocatorError(.invalidInput, "\(source.layer) is a line layer: map its street name (street=…)")
        }
        return layer
    }

    static func query(for source: LocatorSource, after: Int64?, limit: Int?) -> FeatureQuery {
        var query = FeatureQuery(where: source.whereClause, outFields: source.fields.fieldNames, returnGeometry: true, limit: limit)
        query.afterObjectID = after
        return query
    }

    static func writeInfo(_ db: Database, wkid: Int, geodatabase: Geodatabase) throws {
        let now = ISO8601DateFormatter().string(from: Date())
        for (key, value) in [
            ("format", "outpost-locator"), ("layout", "\(LocatorLayout.version)"), ("wkid", "\(wkid)"),
            ("source", geodatabase.url.path), ("created", now), ("updated", now),
        ] {
            try db.execute(sql: "INSERT OR REPLACE INTO locator_info(key, value) VALUES (?, ?)", arguments: [key, value])
        }
        try writeCounts(db)
    }

    static func writeCounts(_ db: Database) throws {
        let count = try Int.fetchOne(db, sql: "SELECT count(*) FROM entries WHERE kind IN (1, 2)") ?? 0
        try db.execute(sql: "INSERT OR REPLACE INTO locator_info(key, value) VALUES ('entries', ?)", arguments: ["\(count)"])
        if let extent = try Row.fetchOne(db, sql: "SELECT min(xmin), min(ymin), max(xmax), max(ymax) FROM entries"), let xmin: Double = extent[0] {
            let ymin: Double = extent[1], xmax: Double = extent[2], ymax: Double = extent[3]
            try db.execute(sql: "INSERT OR REPLACE INTO locator_info(key, value) VALUES ('extent', ?)", arguments: ["\(xmin),\(ymin),\(xmax),\(ymax)"])
        }
    }
}
