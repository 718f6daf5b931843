import Foundation
import OutpostCore
import OutpostStorage
import OutpostSync

#if canImport(Glibc)
    import Glibc
#endif

/// What a crew feels: a sync of 10 edits and a sync with nothing to do, on loopback, through
/// the library (a sync job on an open geodatabase) and through the CLI (`outpost sync`, process
/// start included). Replicas of a crew's area (1,000 of the service's 100,000 points) and of the
/// whole layer.
enum CrewSyncBenchmark {
    static let runs = 21

    static func run(executable: String, workDirectory: URL) async throws {
        let service = workDirectory.appendingPathComponent("crew-service.gpkg")
        try SyncBenchmark.createService(count: 100_000, at: service)
        let (server, url) = try startServer(executable: executable, service: service)
        defer { kill(server.processIdentifier, SIGTERM); server.waitUntilExit() }
        let serviceURL = URL(string: url + "/arcgis/rest/services/crew-service/FeatureServer")!
        let cli = outpostExecutable(beside: executable)
        var rows: [[String]] = []
        for (label, extent) in [("an area (1,000 points)", area()), ("the whole layer (100,000 points)", nil)] {
            let file = workDirectory.appendingPathComponent("crew-replica.gpkg")
            Geodatabase.removeFiles(at: file)
            let task = try GeodatabaseSyncTask(url: serviceURL)
            let parameters = try await task.makeDefaultGenerateGeodatabaseParameters(extent: extent)
            let generate = task.makeGenerateGeodatabaseJob(parameters: parameters, downloadFileURL: file, faults: FaultInjector())
            try generate.start()
            let gdb = try await generate.output
            let held = try await gdb.table(named: "points").count()

            var library: (edits: [Double], nothing: [Double]) = ([], [])
            for i in 0..<runs {
                try await edit(gdb, ten: i)
                library.edits.append(try await sync(gdb, serviceURL))
                library.nothing.append(try await sync(gdb, serviceURL))
            }
            try gdb.close()
            rows.append(row("library, 10 edits", label, held, library.edits))
            rows.append(row("library, nothing to do", label, held, library.nothing))

            guard let cli else { continue }
            var command: (edits: [Double], nothing: [Double]) = ([], [])
            for i in 0..<runs {
                let reopened = try Geodatabase.open(at: file)
                try await edit(reopened, ten: runs + i)
                try reopened.close()
                command.edits.append(try timeCLI(cli, file))
                command.nothing.append(try timeCLI(cli, file))
            }
            rows.append(row("CLI, 10 edits", label, held, command.edits))
            rows.append(row("CLI, nothing to do", label, held, command.nothing))
        }
        printTable(
            "A crew's sync on loopback (release build; \(runs) runs each; targets: p50 ≤ 20 ms library, ≤ 100 ms CLI)",
            ["sync", "replica", "features", "p50 ms", "p90 ms", "best ms"], rows)
        if cli == nil { print("no outpost beside outpost-bench (swift build -c release --package-path Benchmarks --product outpost): CLI rows skipped") }
    }

    /// A strip of 1% of the extent the benchmark's points are spread over (±180°, ±85°).
    static func area() -> Envelope { Envelope(xmin: -180, ymin: -85, xmax: 180, ymax: -83.3) }

    static func row(_ what: String, _ replica: String, _ held: Int, _ seconds: [Double]) -> [String] {
        let sorted = seconds.sorted()
        return [what, replica, String(held), format(sorted[sorted.count / 2] * 1000, 1), format(sorted[sorted.count * 9 / 10] * 1000, 1), format(sorted[0] * 1000, 1)]
    }

    /// Ten edits: five moved and renamed points, three added, two deleted.
    static func edit(_ gdb: Geodatabase, ten run: Int) async throws {
        let table = try gdb.table(named: "points")
        let ids = try await table.objectIDs(matching: FeatureQuery(limit: 200)).shuffled()
        var updates: [Feature] = []
        var near = Position(x: 0, y: -84)
        for id in ids.prefix(5) {
            let p = try await table.features(matching: FeatureQuery(objectIDs: [id])).first?.geometry
            guard case .point(let point)? = p, let position = point.position else { continue }
            near = position
            updates.append(Feature(objectID: id, attributes: ["label": .string("run \(run)")], geometry: .point(try Point(x: position.x + 0.0001, y: position.y))))
        }
        try await table.update(updates)
        var added: [Feature] = []
        for i in 0..<3 {
            added.append(Feature(
                attributes: ["id_int": .integer(Int64(1_000_000 + run * 10 + i)), "value": .double(1), "label": .string("new")],
                geometry: .point(try Point(x: near.x - 0.0001 * Double(i + 1), y: near.y))))
        }
        _ = try await table.add(added)
        try await table.delete(objectIDs: Array(ids.dropFirst(5).prefix(2)))
    }

    /// `BENCH_STAGE=1`: every download staged first (as before downloads were applied while
    /// they arrive), to compare the two.
    static let stageDownloads = ProcessInfo.processInfo.environment["BENCH_STAGE"] == "1"

    static func sync(_ gdb: Geodatabase, _ serviceURL: URL) async throws -> Double {
        let start = ContinuousClock.now
        let task = try GeodatabaseSyncTask(url: serviceURL)
        let job = task.makeSyncGeodatabaseJob(
            parameters: SyncGeodatabaseParameters(applyWhileDownloadingUpTo: stageDownloads ? 0 : nil), geodatabase: gdb, faults: FaultInjector())
        try job.start()
        let results = try await job.output
        let elapsed = ContinuousClock.now - start
        guard results.allSatisfy({ $0.checksumMatches != false }) else { throw BenchError("checksums differ") }
        if ProcessInfo.processInfo.environment["BENCH_TRACE"] != nil, let first = job.messages.first?.timestamp {
            let lines = job.messages.map { "  \(format($0.timestamp.timeIntervalSince(first) * 1000, 2)) ms \($0.text)" }
            FileHandle.standardError.write(Data((lines.joined(separator: "\n") + "\n").utf8))
        }
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }

    static func timeCLI(_ cli: String, _ file: URL) throws -> Double {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: cli)
        process.arguments = ["sync", file.path, "--json"] + (stageDownloads ? ["--stage-downloads"] : [])
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        // The end is taken from the termination handler: `waitUntilExit` polls its run loop, and
        // rounded the times up to its ticks.
        let exited = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in exited.signal() }
        let start = ContinuousClock.now
        try process.run()
        exited.wait()
        let elapsed = ContinuousClock.now - start
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw BenchError("outpost sync exited \(process.terminationStatus)") }
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }

    /// `outpost` built beside this executable (`swift build -c release --package-path Benchmarks
    /// --product outpost`), if it is there.
    static func outpostExecutable(beside executable: String) -> String? {
        let path = URL(fileURLWithPath: executable).deletingLastPathComponent().appendingPathComponent("outpost").path
        return FileManager.default.isExecutableFile(atPath: path) ? path : nil
    }
}
