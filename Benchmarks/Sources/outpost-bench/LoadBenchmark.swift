import Foundation
import OutpostLoadTesting
import OutpostPostgres
import OutpostSQLiteService
import OutpostServer
import OutpostStorage
import OutpostSyncService

#if canImport(Glibc)
    import Glibc
#endif

/// Fifty crews syncing at once (``CrewLoad``): one SQLite server process, then (with
/// `OUTPOST_POSTGRES`) one and two server processes on one PostgreSQL database. Each run checks
/// its oracles; the figures are syncs/s, sync latency and the server processes' peak memory.
enum LoadBenchmark {
    static func run(crews: Int, postgres: String?, executable: String, workDirectory: URL) async throws {
        var configuration = CrewLoad.Configuration(crews: crews)
        configuration.featuresPerCrew = 200
        var rows: [[String]] = []
        var problems: [String] = []
        let directory = workDirectory.appendingPathComponent("load")
        try? FileManager.default.removeItem(at: directory)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let file = directory.appendingPathComponent("\(CrewLoad.serviceName).gpkg")

        func measure(_ label: String, _ processes: [(Process, String)], _ backend: any FeatureServiceBackend & SyncBackend, replicas: URL) async throws {
            let samplers = processes.map { MemorySampler(pid: $0.0.processIdentifier) }
            let report = try await CrewLoad.run(configuration, servers: processes.map { URL(string: $0.1)! }, backend: backend, directory: replicas)
            let peaks = samplers.map { $0.stop().anonMB }
            for (process, _) in processes {
                kill(process.processIdentifier, SIGTERM)
                process.waitUntilExit()
            }
            try await backend.close()
            rows.append([
                label, String(report.crews), String(report.syncs), format(report.seconds, 1), format(report.syncsPerSecond, 1),
                format(report.percentile(0.5) * 1000), format(report.percentile(0.99) * 1000), String(report.failedAttempts),
                String(report.acceptedBatches), String(report.conflictRecords), peaks.map { format($0) }.joined(separator: " + "),
                report.problems.isEmpty ? "none" : String(report.problems.count),
            ])
            problems += report.problems.prefix(10).map { "\(label): \($0)" }
        }

        try CrewLoad.createService(at: file, configuration)
        let sqliteReplicas = directory.appendingPathComponent("sqlite")
        try FileManager.default.createDirectory(at: sqliteReplicas, withIntermediateDirectories: true)
        try await measure(
            "SQLite, 1 process", [try startServer(executable: executable, service: file)], try SQLiteServiceBackend(url: file, name: CrewLoad.serviceName),
            replicas: sqliteReplicas)

        if let postgres {
            let server = try PostgresLocation(url: postgres)
            for count in [1, 2] {
                let database = "outpost_load_\(getpid())_\(count)"
                let location = try await PostgresServiceStore.createDatabase(database, at: server)
                defer { PostgresBenchmark.dropDatabase(database, at: server) }
                try CrewLoad.createService(at: file, configuration)
                try await PostgresBenchmark.load(file, named: CrewLoad.serviceName, into: location)
                let processes = try (0..<count).map { _ in try PostgresBenchmark.startPostgresServer(executable: executable, location.url) }
                let replicas = directory.appendingPathComponent("postgres-\(count)")
                try FileManager.default.createDirectory(at: replicas, withIntermediateDirectories: true)
                try await measure(
                    "PostgreSQL, \(count) process\(count > 1 ? "es" : "")", processes, try await PostgresServiceBackend.open(service: CrewLoad.serviceName, at: location),
                    replicas: replicas)
            }
        } else {
            print("OUTPOST_POSTGRES is not set: PostgreSQL runs skipped")
        }
        printTable(
            "\(crews) crews at once, \(configuration.editsPerCrew) random edits and \(configuration.syncsPerCrew) syncs each (10% of edits on features a neighbour edits too), loopback",
            ["server", "crews", "syncs", "seconds", "syncs/s", "p50 ms", "p99 ms", "failed tries", "batches", "conflicts", "server peak MB (anon)", "problems"],
            rows)
        print("The crews, a recording proxy per server process (the oracle's view of accepted batches) and the servers share this machine's \(ProcessInfo.processInfo.activeProcessorCount) cores.")
        for problem in problems { print("PROBLEM \(problem)") }
        if !problems.isEmpty { throw BenchError("the oracles found \(problems.count)+ problems") }
    }
}
