import Foundation
import OutpostCore
import OutpostPostgres
import OutpostSQLiteService
import OutpostServer
import OutpostStorage
import OutpostSyncService
import OutpostTestSupport

/// The storage backends a service can run on. Server and sync tests run once per available
/// backend through `@Test(arguments: BackendKind.available)`: one test, every backend.
public enum BackendKind: String, Sendable, CaseIterable, CustomStringConvertible {
    case sqlite
    case postgres

    /// The backends this machine can run: PostgreSQL joins when the test script started one
    /// (`OUTPOST_TEST_POSTGRES`).
    public static var available: [BackendKind] { postgresURL == nil ? [.sqlite] : [.sqlite, .postgres] }

    /// The backends that serve sync too (replicas, the batch ledger, the change feed): all of them.
    public static var syncing: [BackendKind] { available }

    /// The test server's database, from the environment.
    public static var postgresURL: String? { ProcessInfo.processInfo.environment["OUTPOST_TEST_POSTGRES"] }

    public var description: String { rawValue }

    /// The URL of a new, empty database on the test PostgreSQL (with PostGIS, from its
    /// template), for processes a test starts on it.
    public static func newPostgresDatabase() async throws -> String {
        guard let url = postgresURL else { throw ServiceError(503, "no test PostgreSQL: run ./scripts/test") }
        return try await PostgresServiceStore.createDatabase("outpost_t\(UInt64.random(in: 0...UInt64.max) % 1_000_000_000_000)", at: try PostgresLocation(url: url)).url
    }
}

/// A service with the sample field-inspection data on one backend, in a test's directory.
public struct TestService: Sendable {
    public let backend: any FeatureServiceBackend
    public let directory: TemporaryDirectory
    /// The service GeoPackage (SQLite backend; the source loaded into PostgreSQL otherwise).
    public let file: URL
    /// The database the service is in (PostgreSQL backend).
    public var postgres: PostgresLocation?

    /// What `outpost serve` needs to serve this service.
    public var serveArguments: [String] { postgres.map { ["--postgres", $0.url] } ?? ["--service", file.path] }

    /// The sample service; `adjust` may change its schema first (a conflict policy, say).
    /// On PostgreSQL the service goes into a database of its own, so tests running at once never
    /// see each other's services.
    /// `server` picks another PostgreSQL server than the test script's.
    public static func fieldInspection(
        _ kind: BackendKind, name: String = "field_inspection", server: String? = nil, adjust: (inout ServiceSchema) -> Void = { _ in }
    ) async throws -> TestService {
        let directory = TemporaryDirectory("outpost-service")
        let file = directory.file("\(name).gpkg")
        var schema = try ServiceSchema.load(from: Repository.sampleData("field_inspection/service.json"))
        adjust(&schema)
        switch kind {
        case .sqlite:
            try SQLiteServiceBackend.create(at: file, schema: schema, dataDirectory: Repository.sampleData("field_inspection/data"))
            return TestService(backend: try SQLiteServiceBackend(url: file, name: name), directory: directory, file: file)
        case .postgres:
            guard let url = server ?? BackendKind.postgresURL else { throw ServiceError(503, "no test PostgreSQL: run ./scripts/test") }
            try SQLiteServiceBackend.create(at: file, schema: schema, dataDirectory: Repository.sampleData("field_inspection/data"))
            let database = try await PostgresServiceStore.createDatabase(
                "outpost_t\(UInt64.random(in: 0...UInt64.max) % 1_000_000_000_000)", at: try PostgresLocation(url: url))
            let source = try Geodatabase.open(at: file)
            defer { try? source.close() }
            _ = try await PostgresServiceStore.createService(named: name, from: source, at: database)
            return TestService(
                backend: try await PostgresServiceBackend.open(service: name, at: database), directory: directory, file: file, postgres: database)
        }
    }

    /// A new backend on the same service (after the first was closed, or another process wrote).
    public func reopened() async throws -> any FeatureServiceBackend {
        if let postgres { return try await PostgresServiceBackend.open(service: backend.name, at: postgres) }
        return try SQLiteServiceBackend(url: file, name: backend.name)
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

extension ServeProcess {
    /// Serves a test service from its backend (the GeoPackage, or the PostgreSQL database).
    public static func start(
        _ service: TestService, arguments: [String] = [], environment: [String: String] = [:], timeout: TimeInterval = 60
    ) async throws -> ServeProcess {
        try await start(source: service.serveArguments, arguments: arguments, environment: environment, timeout: timeout)
    }
}
