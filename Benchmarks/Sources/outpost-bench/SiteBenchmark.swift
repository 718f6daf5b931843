import Foundation
import OutpostLoadTesting

/// A site of network namespaces (``SiteLab``): 2 and then 3 `outpost serve` hosts behind
/// HAProxy on a PostgreSQL primary with a synchronous standby, and `crews` crews syncing through
/// the balancer while one host is killed and started again and the standby is promoted. Needs
/// root, and the release `outpost` beside the bench (`swift build -c release --package-path
/// Benchmarks --product outpost`, or `OUTPOST_EXECUTABLE`): the hosts run the real command.
enum SiteBenchmark {
    static func run(crews: Int, executable: String, workDirectory: URL) async throws {
        let outpost = try outpostExecutable(bench: executable)
        var rows: [[String]] = []
        var problems: [String] = []
        // With a tile export on the killed host (it must finish on another), then without one,
        // so the hosts' CPU time is the crews' alone.
        for (hosts, levels) in [(2, "12-17"), (3, "12-17"), (2, nil), (3, nil)] as [(Int, String?)] {
            var configuration = SiteLab.Configuration(
                crews: crews, outpost: outpost, driver: [executable, "worker-site"], directory: workDirectory.appendingPathComponent("site-\(hosts)\(levels == nil ? "" : "-export")"))
            configuration.hosts = hosts
            configuration.exportLevels = levels
            configuration.load.featuresPerCrew = 200
            configuration.load.attempts = 60
            configuration.log = { print("  \(hosts) hosts: \($0)") }
            let report = try await SiteLab.run(configuration)
            let c = report.crews
            rows.append([
                String(hosts), levels.map { "levels \($0): \(report.export.status), \(report.export.bytes / 1000) kB" } ?? "none", String(c.crews), String(c.syncs), format(c.seconds, 1), format(c.syncsPerSecond, 1), format(c.percentile(0.5) * 1000),
                format(c.percentile(0.99) * 1000), String(c.failedAttempts), String(report.serverErrorsWhileSwitching),
                String(report.serverErrorsOtherwise.count), String(c.lost), String(c.duplicated),
                format(report.hostCPUSeconds * 1000 / Double(report.allSyncs), 1), format(report.databaseCPUSeconds * 1000 / Double(report.allSyncs), 1),
                format(report.balancerCPUSeconds * 1000 / Double(report.allSyncs), 2), report.problems.isEmpty ? "none" : String(report.problems.count),
            ])
            problems += report.problems.prefix(10).map { "\(hosts) hosts: \($0)" }
        }
        printTable(
            "\(crews) crews through HAProxy, \(CrewLoad.Configuration(crews: crews).editsPerCrew) random edits and \(CrewLoad.Configuration(crews: crews).syncsPerCrew) syncs each; host h1 SIGKILLed after 25% of the syncs and back after 45%, the primary stopped and the standby promoted after 60%",
            ["hosts", "export on the killed host", "crews", "syncs", "seconds", "syncs/s", "p50 ms", "p99 ms", "failed tries", "5xx while switching", "5xx otherwise", "lost", "duplicated", "host CPU ms/sync", "db CPU ms/sync", "HAProxy CPU ms/sync", "problems"],
            rows)
        print("CPU per sync: each process's user + system time over the crews' whole run (replica creation, the concurrent phase, the two closing rounds) divided by its syncs; databases: both PostgreSQL servers, every backend.")
        print("Every machine is a network namespace on this one (\(ProcessInfo.processInfo.activeProcessorCount) cores shared by the hosts, both databases, HAProxy and the crews).")
        for problem in problems { print("PROBLEM \(problem)") }
        if !problems.isEmpty { throw BenchError("the site run found \(problems.count)+ problems") }
    }

    /// `OUTPOST_EXECUTABLE`, else the `outpost` built beside this bench
    /// (`swift build -c release --package-path Benchmarks --product outpost`).
    static func outpostExecutable(bench: String) throws -> URL {
        if let explicit = ProcessInfo.processInfo.environment["OUTPOST_EXECUTABLE"] { return URL(fileURLWithPath: explicit) }
        let beside = URL(fileURLWithPath: bench).deletingLastPathComponent().appendingPathComponent("outpost")
        guard FileManager.default.isExecutableFile(atPath: beside.path) else {
            throw BenchError("no outpost beside the bench: run `swift build -c release --package-path Benchmarks --product outpost`, or set OUTPOST_EXECUTABLE")
        }
        return beside
    }
}
