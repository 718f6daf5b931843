import Foundation
import OutpostCore
import OutpostProtocol
import OutpostStorage

/// Applies staged server changes to one table inside the download's write transaction (change
/// capture silenced, so nothing is echoed back). Each staged row carries the feature's full
/// state, so applying it twice changes nothing (invariant I7).
///
/// Local edits not yet acknowledged by the server win locally: their columns are left alone
/// (the upload carries them, and the server's answer settles them), a feature deleted locally is
/// not brought back, and a feature with local edits that left the replica's scope stays until
/// those edits are uploaded.
struct DownloadApplier {
    let conn: GeodatabaseConnection
    let layer: LayerDefinition
    let table: FeatureTable
    private var writer: ServiceRowWriter
    private(set) var counts = PendingChanges()
    /// Features the server sent that were kept as they are because of local edits.
    private(set) var kept = 0

    /// Where downloaded attachment content waits (`<sha256>` files), when attachments download.
    let contentDirectory: URL?
    /// The writer's fields by attribute name, for the attributes of every change.
    private var columns: AttributeColumns
    /// The writer's index of each column of the stored form's rows (nil: a field it has not),
    /// for the columns last seen (a page's rows share theirs).
    private var storedColumns: (of: FeedColumns, index: [Int?])?

    /// Whether the table had local edits pending when the applier was made. None can appear
    /// while it runs (inside the download's write transaction, capture silenced), so a table
    /// without any skips looking for them page by page (a query over the page's global ids:
    /// ~0.7 ms a page of 1,000).
    private let hasLocalEdits: Bool

    init(conn: GeodatabaseConnection, layer: LayerDefinition, contentDirectory: URL? = nil) throws {
        self.conn = conn
        self.layer = layer
        self.contentDirectory = contentDirectory
        table = try conn.geodatabase.table(named: layer.name)
        writer = ServiceRowWriter(table: table, conn: conn)
        columns = AttributeColumns(writer.fields)
        hasLocalEdits = try conn.hasCapturedChanges(table: layer.name)
    }

    /// A chunk's local attachments by feature, and those added here and not yet uploaded: read
    /// with two queries per chunk, not two per feature.
    struct LocalAttachments {
        var byFeature: [String: [AttachmentRecord]] = [:]
        var pending: Set<String> = []
    }

    private func localAttachments(_ changes: [FeedChange]) throws -> LocalAttachments {
        guard contentDirectory != nil, layer.hasAttachments else { return LocalAttachments() }
        let owners = changes.filter { $0.attachments != nil }.map(\.globalId)
        guard !owners.isEmpty else { return LocalAttachments() }
        let byFeature = try conn.attachmentRecords(layer: layer.name, featureGlobalIDs: owners)
        let ids = byFeature.values.flatMap { $0.map(\.globalID) }
        let pending = Set(try conn.capturedChanges(table: GeodatabaseConnection.attachmentsTable, globalIDs: ids).compactMap(\.globalID))
        return LocalAttachments(byFeature: byFeature, pending: pending)
    }

    /// Makes a feature's attachments the server's list: new ones from the downloaded content,
    /// ones the server no longer has removed (unless added here and not yet uploaded).
    private func syncAttachments(_ list: [AttachmentInfo], feature objectID: Int64, globalID: String, _ known: LocalAttachments) throws {
        guard let directory = contentDirectory, layer.hasAttachments else { return }
        let local = known.byFeature[globalID] ?? []
        let wanted = Set(list.map(\.globalId))
        for record in local where !wanted.contains(record.globalID) && !known.pending.contains(record.globalID) {
            try conn.deleteAttachment(globalID: record.globalID)
        }
        let have = Set(local.map(\.globalID))
        for info in list where !have.contains(info.globalId) {
            let file = directory.appendingPathComponent(info.sha256)
            guard FileManager.default.fileExists(atPath: file.path) else {
                throw SyncError(.invalidResponse, "the content of attachment \(info.globalId) was not downloaded")
            }
            _ = try table.addAttachment(
                toFeature: objectID, name: info.name, contentType: info.contentType, keywords: info.keywords, globalID: info.globalId, fromFile: file, in: conn)
        }
    }

    /// Applies the changes of one chunk (a page, or a slice of the staging table), writing the
    /// server's values through a ``ServiceRowWriter`` (no `Feature` round trip).
    mutating func apply(_ changes: [FeedChange]) throws {
        guard !changes.isEmpty else { return }
        let gids = changes.map(\.globalId)
        let pending = hasLocalEdits ? try conn.pendingColumns(table: layer.name, globalIDs: gids) : [:]
        let local = try writer.locate(globalIDs: gids)
        let attachments = try localAttachments(changes)
        let geometryColumn = layer.isSpatial ? writer.table.definition.geometryColumn : nil
        // One row's values, emptied for each change (not an array made per change).
        var values = [FieldValue?](repeating: nil, count: writer.fields.count)
        for change in changes {
            let protected = pending[change.globalId] ?? []
            let existing = local[change.globalId]
            switch change.kind {
            case .leave:
                guard let existing else { continue }
                if !protected.isEmpty {
                    kept += 1
                    continue
                }
                try writer.delete(objectID: existing.objectID)
                counts.deletes += 1
            case .upsert:
                if protected.contains("*") {
                    kept += 1
                    continue
                }
                for i in values.indices { values[i] = nil }
                var geometry = ServiceRowWriter.GeometryWrite.keep
                let writesGeometry = geometryColumn.map { !protected.contains($0) } ?? false
                if let stored = change.stored {
                    // Each value as the service stores it, read as the replica's field holds it.
                    let index = indexes(of: stored.columns)
                    for (k, value) in stored.values.enumerated() {
                        guard let i = index[k], protected.isEmpty || !protected.contains(columns.names[i]) else { continue }
                        values[i] = FieldValue(stored: value, as: columns.types[i])
                    }
                    if writesGeometry { geometry = try stored.geometry.map { .set(try Self.geometry($0, of: change)) } ?? .clear }
                } else {
                    var position = 0
                    for (name, json) in change.attributes ?? [:] {
                        defer { position += 1 }
                        // The writer's fields are neither the object id nor the global id.
                        guard let i = columns.index(of: name, at: position) else { continue }
                        guard protected.isEmpty || !protected.contains(columns.names[i]) else { continue }
                        values[i] = try FieldValue(json: json, type: columns.types[i])
                    }
                    if writesGeometry {
                        let json = change.geometry ?? .null
                        geometry = json.isNull ? .clear : .set(try EsriJSON.decodeGeometry(json))
                    }
                }
                if let existing {
                    try writer.update(objectID: existing.objectID, values: values, geometry: geometry, stored: existing.geometry)
                    if !protected.isEmpty { kept += 1 }
                    counts.updates += 1
                    if let list = change.attachments { try syncAttachments(list, feature: existing.objectID, globalID: change.globalId, attachments) }
                } else {
                    var shape: Geometry?
                    if case .set(let g) = geometry { shape = g }
                    let id = try writer.insert(globalID: change.globalId, values: values, geometry: shape)
                    counts.inserts += 1
                    if let list = change.attachments { try syncAttachments(list, feature: id, globalID: change.globalId, attachments) }
                }
            }
        }
        try writer.finish()
    }

    /// The writer's index of each of `columns` (looked up once per page's columns).
    private mutating func indexes(of columns: FeedColumns) -> [Int?] {
        if let storedColumns, storedColumns.of === columns { return storedColumns.index }
        let index = columns.names.map { writer.fieldIndex(named: $0) }
        storedColumns = (columns, index)
        return index
    }

    /// A stored form's geometry blob, decoded (the writer brings it to the layer's type and
    /// spatial reference as it would a JSON one).
    static func geometry(_ blob: [UInt8], of change: FeedChange) throws -> Geometry {
        do {
            return try GeoPackageBinary.decode(blob).geometry
        } catch {
            throw SyncError(.invalidResponse, "the server's geometry of feature \(change.globalId) cannot be read: \(error)")
        }
    }

    /// Deletes local features a full refetch did not list (the staged rows of `stagedLayerID`),
    /// unless they have local edits.
    mutating func deleteAbsent(stagedLayerID: Int) throws {
        guard let gidField = layer.globalIDField else { return }
        let absent = try conn.query(
            """
            SELECT \(Self.quoted(layer.objectIDField)), \(Self.quoted(gidField)) FROM \(Self.quoted(layer.name))
            WHERE \(Self.quoted(gidField)) NOT IN (SELECT globalid FROM outpost_staging WHERE layer_id = ?)
            """, arguments: [.integer(Int64(stagedLayerID))]
        ).compactMap { row in row[0].integerValue.flatMap { id in row[1].textValue.map { (id, $0) } } }
        let pending = hasLocalEdits ? try conn.pendingColumns(table: layer.name, globalIDs: absent.map(\.1)) : [:]
        let doomed = absent.filter { pending[$0.1] == nil }.map(\.0)
        if !doomed.isEmpty { try table.delete(objectIDs: doomed, in: conn) }
        counts.deletes += doomed.count
    }

    static func quoted(_ name: String) -> String { quotedIdentifier(name) }
}

/// The index in a writer's fields (any case, as ``ServiceRowWriter/fieldIndex(named:)``) of
/// each attribute name a download's changes carry. The changes of
/// a page come with the same names, and their attribute lists mostly in the same order: the
/// name at a position is compared with the one last seen there (field names are short strings,
/// compared in place) before it is looked up (once per distinct name, misses included: a
/// change's global id is no field of the writer). Each change's names looked up by hash, the
/// global id's twice and lowercased, took ~5% of a download's writer.
struct AttributeColumns {
    let names: [String]
    let types: [FieldType]
    private let lookup: FieldLookup
    private var byName: [String: Int] = [:]
    private var lastAt: [(name: String, index: Int)] = []

    init(_ fields: [FieldDefinition]) {
        names = fields.map(\.name)
        types = fields.map(\.type)
        lookup = FieldLookup(fields)
    }

    /// The writer's index of the field `name` (the attribute at `position` of its change), nil
    /// when the writer has no such field.
    mutating func index(of name: String, at position: Int) -> Int? {
        if position < lastAt.count, lastAt[position].name == name { return Self.found(lastAt[position].index) }
        let index: Int
        if let known = byName[name] {
            index = known
        } else {
            index = lookup.index(of: name) ?? -1
            byName[name] = index
        }
        if position < lastAt.count {
            lastAt[position] = (name, index)
        } else if position == lastAt.count {
            lastAt.append((name, index))
        }
        return Self.found(index)
    }

    private static func found(_ index: Int) -> Int? { index >= 0 ? index : nil }
}

extension FeedChange {
    /// The changes with their stored values (`FeedRow`) made JSON, as the JSON form of the page
    /// would have carried them (what a staged row keeps): each value as its field's type reads
    /// it, the global id fields the change's global id, the geometry as Esri JSON. The fields'
    /// types are read once per column set (a page's rows share theirs), not per value.
    static func withJSONValues(_ changes: [FeedChange]) throws -> [FeedChange] {
        var types: (of: FeedColumns, types: [FieldType])?
        return try changes.map { change in
            guard let stored = change.stored else { return change }
            if types?.of !== stored.columns { types = (stored.columns, stored.columns.types.map { FieldType(rawValue: $0) ?? .string }) }
            return try change.withJSONValues(stored, types: types!.types)
        }
    }

    private func withJSONValues(_ stored: FeedRow, types: [FieldType]) throws -> FeedChange {
        var change = self
        change.stored = nil
        let columns = stored.columns
        var attributes: [String: JSONValue] = [:]
        attributes.reserveCapacity(columns.names.count + columns.globalIDFields.count)
        for (k, name) in columns.names.enumerated() {
            attributes[name] = FieldValue(stored: stored.values[k], as: types[k]).jsonValue
        }
        for name in columns.globalIDFields { attributes[name] = .string(globalId) }
        change.attributes = attributes
        change.geometry = try stored.geometry.map { try EsriJSON.value(try DownloadApplier.geometry($0, of: self)) }
        return change
    }
}
