import Foundation
import OutpostCore
import OutpostLoadTesting
import OutpostPostgres
import OutpostSQLiteService
import OutpostServer
import OutpostServiceTestSupport
import OutpostStorage
import OutpostTestSupport
import Testing

/// Ten crews syncing at once with `outpost serve` processes, checked against the oracles of
/// ``CrewLoad``: the small variant of `outpost-bench load` (fifty crews).
@Suite("Crews syncing at once")
struct CrewLoadTests {
    static var configuration: CrewLoad.Configuration {
        var c = CrewLoad.Configuration(crews: 10)
        c.featuresPerCrew = 100
        return c
    }

    @Test(.scaledTimeLimit(minutes: 4))
    func tenCrewsOnTheSQLiteBackend() async throws {
        let directory = TemporaryDirectory("outpost-crews")
        let file = directory.file("\(CrewLoad.serviceName).gpkg")
        try CrewLoad.createService(at: file, Self.configuration)
        let server = try await ServeProcess.start(service: file)
        let backend = try SQLiteServiceBackend(url: file, name: CrewLoad.serviceName)
        let report = try await CrewLoad.run(Self.configuration, servers: [server.url], backend: backend, directory: directory.url)
        try await backend.close()
        await server.stop()
        Self.expectCorrect(report)
    }

    @Test(.scaledTimeLimit(minutes: 4), .enabled(if: BackendKind.postgresURL != nil, "run ./scripts/test: it starts PostgreSQL"))
    func tenCrewsThroughTwoProcessesOnPostgreSQL() async throws {
        let directory = TemporaryDirectory("outpost-crews")
        let file = directory.file("\(CrewLoad.serviceName).gpkg")
        try CrewLoad.createService(at: file, Self.configuration)
        let database = try await PostgresServiceStore.createDatabase(
            "outpost_t\(UInt64.random(in: 0...UInt64.max) % 1_000_000_000_000)", at: try PostgresLocation(url: try #require(BackendKind.postgresURL)))
        let source = try Geodatabase.open(at: file)
        _ = try await PostgresServiceStore.createService(named: CrewLoad.serviceName, from: source, at: database)
        try source.close()
        let servers = [
            try await ServeProcess.start(source: ["--postgres", database.url]), try await ServeProcess.start(source: ["--postgres", database.url]),
        ]
        let backend = try await PostgresServiceBackend.open(service: CrewLoad.serviceName, at: database)
        let report = try await CrewLoad.run(Self.configuration, servers: servers.map(\.url), backend: backend, directory: directory.url)
        try await backend.close()
        for server in servers { await server.stop() }
        Self.expectCorrect(report)
    }

    static func expectCorrect(_ report: CrewLoad.Report, sourceLocation: SourceLocation = #_sourceLocation) {
        print(
            "crews: \(report.crews), syncs \(report.syncs) in \(String(format: "%.1f", report.seconds)) s, p50 \(String(format: "%.3f", report.percentile(0.5))) s,"
                + " p99 \(String(format: "%.3f", report.percentile(0.99))) s, \(report.failedAttempts) failed attempts, \(report.acceptedBatches) batches,"
                + " \(report.conflictRecords) conflict records")
        let problems = report.problems.count
        #expect(problems == 0, "\(problems) problems: \(report.problems.prefix(5).joined(separator: "; "))", sourceLocation: sourceLocation)
        #expect(report.syncs == report.crews * configuration.syncsPerCrew, "every sync of the concurrent phase succeeded", sourceLocation: sourceLocation)
        #expect(report.edits == report.crews * configuration.editsPerCrew, sourceLocation: sourceLocation)
        #expect(report.acceptedBatches >= report.crews, "the oracle saw the batches (\(report.acceptedBatches))", sourceLocation: sourceLocation)
        #expect(report.conflictRecords > 0, "neighbours' edits of the shared strips met", sourceLocation: sourceLocation)
    }
}
