import Foundation
import OutpostCore
import OutpostServer
import OutpostStorage

/// The storage backends a service can run on. Server and sync tests run once per available
/// backend through `@Test(arguments: BackendKind.available)`: one test, every backend.
public enum BackendKind: String, Sendable, CaseIterable, CustomStringConvertible {
    case sqlite

    /// The backends this machine can run (PostgreSQL joins when the test script starts one).
    public static var available: [BackendKind] { [.sqlite] }

    public var description: String { rawValue }
}

/// A service with the sample field-inspection data on one backend, in a test's directory.
public struct TestService: Sendable {
    public let backend: any FeatureServiceBackend
    public let directory: TemporaryDirectory
    /// The service GeoPackage (SQLite backend).
    public let file: URL

    /// The sample service; `adjust` may change its schema first (a conflict policy, say).
    public static func fieldInspection(_ kind: BackendKind, name: String = "field_inspection", adjust: (inout ServiceSchema) -> Void = { _ in }) throws -> TestService {
        let directory = TemporaryDirectory("outpost-service")
        let file = directory.file("\(name).gpkg")
        var schema = try ServiceSchema.load(from: Repository.sampleData("field_inspection/service.json"))
        adjust(&schema)
        switch kind {
        case .sqlite:
            try SQLiteServiceBackend.create(at: file, schema: schema, dataDirectory: Repository.sampleData("field_inspection/data"))
            return TestService(backend: try SQLiteServiceBackend(url: file, name: name), directory: directory, file: file)
        }
    }

    /// Every feature of every layer and the generation: for "a rejected request changed nothing".
    public func snapshot() async throws -> ServiceSnapshot {
        var layers: [Int: [Feature]] = [:]
        for layer in try await backend.schema().allLayers {
            var all: [Feature] = []
            var query = FeatureQuery()
            query.limit = 1000
            while true {
                let page = try await backend.features(layerID: layer.id, query: query)
                all += page
                guard page.count == 1000 else { break }
                query.afterObjectID = page.last?.objectID
            }
            layers[layer.id] = all
        }
        return ServiceSnapshot(layers: layers, generation: try await backend.generation())
    }
}

public struct ServiceSnapshot: Equatable, Sendable {
    public var layers: [Int: [Feature]]
    public var generation: Int64
}
