import Foundation
import OutpostCore
import OutpostProtocol
import OutpostServer
import OutpostStorage
import OutpostSyncService
import OutpostTestSupport
import OutpostServiceTestSupport
import Testing

@testable import OutpostSync

/// A field-inspection service served over loopback HTTP, and replicas of it in a temporary
/// directory.
struct SyncHarness: Sendable {
    let service: TestService
    let live: LiveService
    let directory: TemporaryDirectory

    static func start(
        _ kind: BackendKind = .sqlite, configuration: ServerConfiguration = ServerConfiguration(port: 0), policy: ConflictPolicy? = nil
    ) async throws -> SyncHarness {
        let service = try await TestService.fieldInspection(kind) { schema in
            // The policy on every layer, with the field rules each layer has fields for.
            for i in schema.layers.indices {
                let layer = schema.layers[i]
                var p = policy
                if let fields = policy?.fields { p?.fields = fields.filter { layer.field(named: $0.key) != nil } }
                schema.layers[i].conflictPolicy = p
            }
        }
        return SyncHarness(service: service, live: try await LiveService.start(service, configuration: configuration), directory: TemporaryDirectory("outpost-sync"))
    }

    func stop() async throws {
        await live.stop()
        try await service.backend.close()
    }

    var url: URL { live.featureServerURL }

    func task(url: URL? = nil, token: String? = nil) throws -> GeodatabaseSyncTask {
        try GeodatabaseSyncTask(url: url ?? self.url, token: token)
    }

    /// Generates a replica of `layers` (all by default) within `extent` (lon/lat).
    func replica(
        _ name: String = "replica", extent: Envelope? = nil, layers: [Int]? = nil, where clauses: [Int: String] = [:],
        model: GenerateGeodatabaseParameters.SyncModel = .geodatabase, url: URL? = nil,
        attachments: GenerateGeodatabaseParameters.AttachmentSyncDirection = .none
    ) async throws -> Geodatabase {
        let task = try task(url: url)
        var parameters = try await task.makeDefaultGenerateGeodatabaseParameters(extent: extent)
        if let layers { parameters.layerOptions = layers.map { .init(layerID: $0) } }
        for i in parameters.layerOptions.indices {
            if let clause = clauses[parameters.layerOptions[i].layerID] { parameters.layerOptions[i].whereClause = clause }
        }
        parameters.syncModel = model
        parameters.replicaName = name
        parameters.returnAttachments = attachments != .none
        parameters.attachmentSyncDirection = attachments
        let job = task.makeGenerateGeodatabaseJob(parameters: parameters, downloadFileURL: directory.file("\(name).gpkg"), faults: FaultInjector())
        try job.start()
        return try await job.output
    }

    /// Runs one sync and returns its layer results.
    @discardableResult
    func sync(
        _ gdb: Geodatabase, _ parameters: SyncGeodatabaseParameters = SyncGeodatabaseParameters(), faults: FaultInjector = FaultInjector(),
        url: URL? = nil
    ) async throws -> [SyncLayerResult] {
        let job = try task(url: url).makeSyncGeodatabaseJob(parameters: parameters, geodatabase: gdb, faults: faults)
        try job.start()
        return try await job.output
    }

    /// The server's features of a layer by global id: attributes (no object id) and geometry.
    func serverRows(_ layerID: Int, query: FeatureQuery = FeatureQuery()) async throws -> [String: Row] {
        var q = query
        q.limit = 100_000
        let features = try await service.backend.features(layerID: layerID, query: q)
        return Dictionary(uniqueKeysWithValues: features.map { ($0.globalID!, Row($0)) })
    }

    /// A replica's features of a table by global id.
    static func localRows(_ gdb: Geodatabase, _ table: String) async throws -> [String: Row] {
        let features = try await gdb.table(named: table).features()
        return Dictionary(uniqueKeysWithValues: features.map { ($0.globalID!, Row($0)) })
    }

    /// A feature without its local object id.
    struct Row: Hashable, Sendable, CustomStringConvertible {
        var attributes: [String: FieldValue]
        var geometry: Geometry?

        init(_ f: Feature) {
            attributes = f.attributes.filter { $0.key != "objectid" && $0.key != "globalid" }
            geometry = f.geometry
        }

        var description: String { "\(attributes.sorted { $0.key < $1.key }) \(String(describing: geometry))" }
    }

    /// The server's features of `layerID` in a replica's scope equal the replica's table.
    func expectConverged(_ gdb: Geodatabase, table: String, layerID: Int, scope: FeatureQuery = FeatureQuery(), sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let server = try await serverRows(layerID, query: scope)
        let local = try await Self.localRows(gdb, table)
        #expect(server.count == local.count, "server \(server.count) vs replica \(local.count) features in \(table)", sourceLocation: sourceLocation)
        let differing = Set(server.keys).symmetricDifference(local.keys).union(server.keys.filter { local[$0] != nil && local[$0] != server[$0] })
        #expect(differing.isEmpty, "\(differing.count) features differ in \(table), e.g. \(differing.first.map { "\($0): server \(String(describing: server[$0])) replica \(String(describing: local[$0]))" } ?? "")", sourceLocation: sourceLocation)
    }
}

/// Edits through the server's applyEdits path (another user, connected).
extension SyncHarness {
    @discardableResult
    func serverEdit(layer: Int, adds: [Feature] = [], updates: [Feature] = [], deletes: [Feature] = []) async throws -> ApplyEditsResponse {
        try await service.backend.applyEdits(layerID: layer, edits: EditRequest(adds: adds, updates: updates, deletes: deletes), rollbackOnFailure: true)
    }
}

func point(_ x: Double, _ y: Double) throws -> Geometry { .point(try Point(x: x, y: y)) }
