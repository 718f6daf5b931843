import Foundation
import Synchronization
import OutpostCore
import OutpostDigest
import OutpostProtocol
import OutpostStorage
import OutpostSyncService

/// The embedded default backend: a service is one GeoPackage (data, attachments and the
/// ServiceStore tables), served through a WAL connection pool: reads in parallel, one writer.
public final class SQLiteServiceBackend: FeatureServiceBackend {
    public let name: String
    package let geodatabase: Geodatabase
    /// Attachment content uploaded by hash, beside the service file.
    let blobs: BlobStore
    /// Fault points for tests (`server.beforeCommit`).
    public let faults: FaultInjector
    /// Where the store reads the time (replicas' creation and last sync).
    public let clock: ServiceClock
    /// The layers' whole checksums this process knows, with the generation of each.
    let layerChecksums = LayerChecksums()
    /// How this service's batch writer and the helper that prepares its runs ahead meet
    /// (`BatchApplier.HelperPacing`'s raw value): `free`, as a server runs, unless a test needs
    /// another way.
    public let readAheadPacing = Atomic<Int>(BatchApplier.HelperPacing.free.rawValue)

    /// The service writer's page cache: 64 MB, twice a replica's. A batch of 16,000 edits at
    /// 100,000 points changes ~27 MB of pages (rows, global-id index, R-tree, change log); in
    /// 32 MB beside the pages it reads, SQLite wrote some into the WAL before the commit and
    /// again when the batch changed them after, and the batch's `commit` stage took 15–30 ms
    /// longer. One writer a service; SQLite takes the memory as pages are used.
    static let writerCache = 64 << 20

    /// Opens a service GeoPackage made by ``create(at:schema:dataDirectory:overwrite:)``.
    /// - Throws: `SyncServiceError` (`failed`) when the file is not an Outpost service.
    public init(url: URL, name: String? = nil, faults: FaultInjector = FaultInjector(), clock: ServiceClock = .system) throws {
        self.clock = clock
        geodatabase = try Geodatabase.open(at: url, writerCache: Self.writerCache)
        blobs = BlobStore(directory: URL(fileURLWithPath: url.path + ".blobs"))
        self.name = name ?? url.deletingPathExtension().lastPathComponent
        self.faults = faults
        let gdb = geodatabase
        guard try gdb.read({ conn in try ServiceStore.isService(conn) }) else {
            try? gdb.close()
            throw SyncServiceError(.failed, "\(url.lastPathComponent) is not an Outpost service; create one with: outpost service create")
        }
        // Services made before a table was added get it now (every statement is idempotent).
        try gdb.write { conn in try ServiceStore.upgrade(conn) }
    }

    /// Creates a service GeoPackage from a schema and `<dataDirectory>/<layer>.geojson` files.
    /// - Returns: features imported per layer.
    @discardableResult
    public static func create(at url: URL, schema: ServiceSchema, dataDirectory: URL?, overwrite: Bool = false) throws -> [String: Int] {
        var counts: [String: Int] = [:]
        try create(at: url, schema: schema, overwrite: overwrite) { conn in
            for table in conn.geodatabase.tables {
                let file = dataDirectory?.appendingPathComponent("\(table.name).geojson")
                if let file, FileManager.default.fileExists(atPath: file.path) {
                    counts[table.name] = try GeoJSONImport.importFile(file, into: table, in: conn)
                } else {
                    counts[table.name] = 0
                }
            }
        }
        return counts
    }

    /// Creates a service GeoPackage whose initial data `populate` loads (with
    /// `FeatureTable/importFeatures(in:captureChanges:_:)`, say).
    public static func create(
        at url: URL, schema: ServiceSchema, overwrite: Bool = false, populate: @escaping (GeodatabaseConnection) throws -> Void
    ) throws {
        let gdb = try Geodatabase.create(at: url, schema: schema, overwrite: overwrite, changeCapture: false) { conn in
            try populate(conn)
            try ServiceStore.install(conn, schema: conn.geodatabase.schema)
        }
        try gdb.close()
    }

    public func schema() async throws -> ServiceSchema { geodatabase.schema }

    func table(_ layerID: Int) throws -> FeatureTable {
        do {
            return try geodatabase.table(id: layerID)
        } catch {
            throw SyncServiceError.notFound("layer \(layerID)")
        }
    }

    public func extent(layerID: Int) async throws -> Envelope? {
        try await table(layerID).extent()
    }

    public func count(layerID: Int, query: FeatureQuery) async throws -> Int {
        try await table(layerID).count(matching: query)
    }

    public func objectIDs(layerID: Int, query: FeatureQuery) async throws -> [Int64] {
        try await table(layerID).objectIDs(matching: query)
    }

    public func features(layerID: Int, query: FeatureQuery) async throws -> [Feature] {
        try await table(layerID).features(matching: query)
    }

    public func generation() async throws -> Int64 {
        try await geodatabase.read { conn in try ServiceStore.generation(conn) }
    }

    public func close() async throws { try geodatabase.close() }

    // MARK: - Edits

    public func applyEdits(layerID: Int, edits: EditRequest, rollbackOnFailure: Bool) async throws -> ApplyEditsResponse {
        let table = try table(layerID)
        let now = BatchPlanner.timestamp(clock.now())
        return try await geodatabase.write { conn in
            try EditApplier(table: table, conn: conn, rollbackOnFailure: rollbackOnFailure, changedAt: now).apply(edits)
        }
    }

    // MARK: - Attachments

    public func attachments(layerID: Int, objectID: Int64) async throws -> [Attachment] {
        let table = try table(layerID)
        try await requireFeature(table, objectID)
        return try await table.attachments(forFeature: objectID)
    }

    public func attachmentBytes(layerID: Int, attachmentID: Int64, offset: Int64, length: Int) async throws -> Data {
        let table = try table(layerID)
        return try await geodatabase.read { conn in
            try table.readAttachment(id: attachmentID, offset: offset, length: length, in: conn)
        }
    }

    public func addAttachment(layerID: Int, objectID: Int64, name: String, contentType: String, data: Data) async throws -> Attachment {
        let table = try table(layerID)
        guard table.definition.hasAttachments else { throw SyncServiceError(.invalidRequest, "layer \(layerID) does not support attachments") }
        try await requireFeature(table, objectID)
        let now = BatchPlanner.timestamp(clock.now())
        return try await geodatabase.write { conn in
            let added = try table.addAttachment(toFeature: objectID, name: name, contentType: contentType, size: Int64(data.count), in: conn) { try $0(data) }
            try ServiceStore.attachmentsChanged(conn, layerID: layerID, featureGlobalID: added.featureGlobalID, at: now, sha256: (added.globalID, SHA256.hex(data)))
            return added
        }
    }

    public func deleteAttachments(layerID: Int, objectID: Int64, attachmentIDs: [Int64]) async throws -> [EditResult] {
        let table = try table(layerID)
        try await requireFeature(table, objectID)
        let existing = try await table.attachments(forFeature: objectID)
        var results: [EditResult] = []
        for id in attachmentIDs {
            guard let attachment = existing.first(where: { $0.id == id }) else {
                results.append(EditResult(objectId: id, globalId: nil, success: false, error: .init(code: EditResult.Code.notFound, description: "attachment \(id) not found")))
                continue
            }
            // The delete and the log entry that tells replicas, in one transaction.
            let now = BatchPlanner.timestamp(clock.now())
            try await geodatabase.write { conn in
                try conn.deleteAttachment(globalID: attachment.globalID)
                try ServiceStore.attachmentsChanged(conn, layerID: layerID, featureGlobalID: attachment.featureGlobalID, at: now)
            }
            results.append(EditResult(objectId: id, globalId: nil, success: true))
        }
        return results
    }

    private func requireFeature(_ table: FeatureTable, _ objectID: Int64) async throws {
        guard try await table.count(matching: FeatureQuery(objectIDs: [objectID])) == 1 else {
            throw SyncServiceError.notFound("feature \(objectID) of layer \(table.definition.id)")
        }
    }
}
