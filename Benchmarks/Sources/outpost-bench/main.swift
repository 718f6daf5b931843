import Foundation
import OutpostLoadTesting
import OutpostStorage
import OutpostTileCodecs

// outpost-bench [import [counts…] | edits [base edits] | server | secure | png | jpeg | gp | gp-server | locator [count] | route [rows columns] [uniform] | delta [edits…] | vtiles [points] | offline [max scale] | crew | load [crews] | site [crews] | costs | sync [features] | codec | postgres [features] | tiles | all]
// Each measured run is a child process (worker-* subcommands), so peak memory is its own.
SystemTileCodecs.install()
let arguments = CommandLine.arguments
let executable = URL(fileURLWithPath: arguments[0]).standardizedFileURL.path
let work = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-bench")
try? FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)

do {
    switch arguments.dropFirst().first ?? "all" {
    case "worker-import":
        print(try ImportBenchmark.runOutpost(count: Int(arguments[2])!, output: URL(fileURLWithPath: arguments[3])))
    case "worker-floor":
        print(try ImportBenchmark.runFloor(count: Int(arguments[2])!, output: URL(fileURLWithPath: arguments[3])))
    case "worker-edits":
        let base = URL(fileURLWithPath: arguments[3])
        let copy = work.appendingPathComponent("edits-\(arguments[2]).gpkg")
        let edits = Int(arguments[4])!
        switch arguments[2] {
        case "floor": print(try EditsBenchmark.runRawSQL(base: base, copy: copy, edits: edits, dropCapture: true))
        case "capture": print(try EditsBenchmark.runRawSQL(base: base, copy: copy, edits: edits, dropCapture: false))
        default: print(try await EditsBenchmark.runAPI(base: base, copy: copy, edits: edits))
        }
        Geodatabase.removeFiles(at: copy)
    case "worker-sync-service":
        // For profiling by hand: the service file.
        try SyncBenchmark.createService(count: Int(arguments[2])!, at: URL(fileURLWithPath: arguments[3]))
    case "worker-sync-replicas":
        // For profiling by hand: replicas A (edited) and B of the service at a URL.
        try await SyncBenchmark.generate(URL(string: arguments[2])!, to: URL(fileURLWithPath: arguments[3]))
        try await SyncBenchmark.generate(URL(string: arguments[2])!, to: URL(fileURLWithPath: arguments[4]))
        print(try SyncBenchmark.edit(URL(fileURLWithPath: arguments[3]), count: Int(arguments[5])!))
    case "worker-sync-floor":
        print(try SyncBenchmark.applyFloor(base: URL(fileURLWithPath: arguments[2]), copy: URL(fileURLWithPath: arguments[3]), count: Int(arguments[4])!, how: arguments.count > 5 ? arguments[5] : "triggers"))
    case "worker-sync":
        print(try await SyncBenchmark.syncOnce(replica: URL(fileURLWithPath: arguments[2])))
    case "codec":
        try CodecBenchmark.run()
    case "sync":
        let count = arguments.dropFirst(2).compactMap { Int($0) }.first ?? 100_000
        try await SyncBenchmark.run(count: count, executable: executable, workDirectory: work)
    case "attachments":
        let megabytes = arguments.dropFirst(2).compactMap { Int($0) }.first ?? 100
        try await AttachmentsBenchmark.run(megabytes: megabytes, executable: executable, workDirectory: work)
    case "worker-tiles-export":
        print(try await TilesBenchmark.export(folder: URL(fileURLWithPath: arguments[2]), output: URL(fileURLWithPath: arguments[3])))
    case "worker-tiles-floor":
        print(try TilesBenchmark.floor(folder: URL(fileURLWithPath: arguments[2]), output: URL(fileURLWithPath: arguments[3])))
    case "tiles":
        try TilesBenchmark.run(executable: executable, workDirectory: work)
        try await PNGBenchmark.run(workDirectory: work)
        try await JPEGBenchmark.run(workDirectory: work)
    case "worker-serve-postgres":
        try await PostgresBenchmark.serve(arguments[2])
    case "postgres":
        guard let url = ProcessInfo.processInfo.environment["OUTPOST_POSTGRES"] else {
            throw BenchError("set OUTPOST_POSTGRES=postgres://user@host:port/database (a server with PostGIS; a scratch database is created there)")
        }
        let count = arguments.dropFirst(2).compactMap { Int($0) }.first ?? 100_000
        try await PostgresBenchmark.run(count: count, postgres: url, executable: executable, workDirectory: work)
    case "costs":
        guard let url = ProcessInfo.processInfo.environment["OUTPOST_POSTGRES"] else {
            throw BenchError("set OUTPOST_POSTGRES=postgres://user@host:port/database (a server with PostGIS on this machine; a scratch database is created there)")
        }
        try await CostsBenchmark.run(postgres: url, executable: executable, workDirectory: work)
    case "worker-serve":
        try await ServerBenchmark.serve(URL(fileURLWithPath: arguments[2]))
    case "server":
        try await ServerBenchmark.run(executable: executable, workDirectory: work)
    case "worker-serve-secure":
        try await SecureServerBenchmark.serve(
            URL(fileURLWithPath: arguments[2]), tls: arguments[3] == "tls", users: arguments[4] == "-" ? nil : arguments[4], directory: URL(fileURLWithPath: arguments[5]))
    case "worker-secure-floor":
        let (time, bytes) = try await SecureServerBenchmark.floor(URL(fileURLWithPath: arguments[2]))
        print("floor: \(Int(100_000 / time)) features/s, \(bytes) bytes")
    case "png":
        try await PNGBenchmark.run(workDirectory: work)
    case "jpeg":
        try await JPEGBenchmark.run(workDirectory: work)
    case "gp":
        try await GeoprocessingBenchmark.run(workDirectory: work)
    case "worker-serve-gp":
        try await GPServerBenchmark.serve(URL(fileURLWithPath: arguments[2]))
    case "gp-server":
        try await GPServerBenchmark.run(executable: executable, workDirectory: work)
    case "worker-route":
        try RouteBenchmark.worker(kind: arguments[2], rows: Int(arguments[3]) ?? 100, columns: Int(arguments[4]) ?? 100, folder: URL(fileURLWithPath: arguments[5]))
    case "delta":
        let counts = arguments.dropFirst(2).compactMap { Int($0) }
        try await DeltaBenchmark.run(counts: counts.isEmpty ? [100, 10_000, 1_000_000] : counts, workDirectory: work)
    case "route":
        let size = arguments.dropFirst(2).compactMap { Int($0) }
        try RouteBenchmark.run(
            rows: size.first ?? 710, columns: size.dropFirst().first ?? 710, uniform: arguments.contains("uniform"), executable: executable, workDirectory: work)
    case "worker-locator-build":
        try LocatorBenchmark.build(arguments[2], arguments[3])
    case "worker-locator-queries":
        try LocatorBenchmark.queries(URL(fileURLWithPath: arguments[2]), count: Int(arguments[3]) ?? 1_000_000)
    case "worker-serve-locator":
        try await LocatorBenchmark.serve(URL(fileURLWithPath: arguments[2]))
    case "locator":
        let count = arguments.dropFirst(2).compactMap { Int($0) }.first ?? 1_000_000
        try await LocatorBenchmark.run(count: count, executable: executable, workDirectory: work)
    case "worker-vtiles":
        print(try await VectorTilesBenchmark.worker(URL(fileURLWithPath: arguments[2]), URL(fileURLWithPath: arguments[3]), maxZoom: Int(arguments[4]) ?? 14))
    case "vtiles":
        try VectorTilesBenchmark.run(points: arguments.dropFirst(2).compactMap { Int($0) }.first ?? 1_000_000, executable: executable, workDirectory: work)
    case "vtserve":
        try await VectorTileServeBenchmark.run(executable: executable, workDirectory: work)
    case "offline":
        try await OfflineBenchmark.run(maxScale: arguments.dropFirst(2).compactMap { Int($0) }.first ?? 70_000, executable: executable, workDirectory: work)
    case "crew":
        try await CrewSyncBenchmark.run(executable: executable, workDirectory: work)
    case "load":
        let crews = arguments.dropFirst(2).compactMap { Int($0) }.first ?? 50
        try await LoadBenchmark.run(crews: crews, postgres: ProcessInfo.processInfo.environment["OUTPOST_POSTGRES"], executable: executable, workDirectory: work)
    case "site":
        let crews = arguments.dropFirst(2).compactMap { Int($0) }.first ?? 100
        try await SiteBenchmark.run(crews: crews, executable: executable, workDirectory: work)
    case "worker-site":
        exit(await SiteLab.driverMain(Array(arguments.dropFirst(2))))
    case "secure":
        try await SecureServerBenchmark.run(executable: executable, workDirectory: work)
    case "import":
        let counts = arguments.dropFirst(2).compactMap { Int($0) }
        try ImportBenchmark.run(counts: counts.isEmpty ? [100_000, 1_000_000] : counts, executable: executable, workDirectory: work)
    case "edits":
        let numbers = arguments.dropFirst(2).compactMap { Int($0) }
        try EditsBenchmark.run(base: numbers.first ?? 100_000, edits: numbers.dropFirst().first ?? 100_000, executable: executable, workDirectory: work)
    case "all":
        try ImportBenchmark.run(counts: [100_000, 1_000_000], executable: executable, workDirectory: work)
        try EditsBenchmark.run(base: 100_000, edits: 100_000, executable: executable, workDirectory: work)
        try await ServerBenchmark.run(executable: executable, workDirectory: work)
        try await SecureServerBenchmark.run(executable: executable, workDirectory: work)
        try await SyncBenchmark.run(count: 100_000, executable: executable, workDirectory: work)
        try TilesBenchmark.run(executable: executable, workDirectory: work)
        try await PNGBenchmark.run(workDirectory: work)
        try await JPEGBenchmark.run(workDirectory: work)
    default:
        print("usage: outpost-bench [import [counts…] | edits [base edits] | server | secure | png | jpeg | gp | gp-server | locator [count] | route [rows columns] [uniform] | delta [edits…] | vtiles [points] | offline [max scale] | crew | load [crews] | site [crews] | costs | sync [features] | codec | tiles | all]")
        exit(2)
    }
    if arguments.dropFirst().first?.hasPrefix("worker-") == true { printOwnPeakMemory() }
} catch {
    FileHandle.standardError.write(Data("outpost-bench: \(error)\n".utf8))
    exit(1)
}
