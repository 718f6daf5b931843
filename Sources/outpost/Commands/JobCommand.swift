import ArgumentParser
import Foundation
import OutpostCore
import OutpostStorage
import OutpostSync

struct JobCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "job",
        abstract: "List, show, resume and cancel the jobs kept in a job directory.",
        subcommands: [List.self, Show.self, Resume.self, Cancel.self])

    /// A job directory, or one job's JSON file inside one.
    struct Target {
        var directory: URL
        var id: String?

        init(_ path: String) throws {
            let url = URL(fileURLWithPath: path)
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory) else {
                throw CLIFailure(message: "\(path) does not exist")
            }
            if isDirectory.boolValue {
                directory = url
            } else {
                guard url.pathExtension == "json" else { throw CLIFailure(message: "\(path) is not a job JSON file") }
                directory = url.deletingLastPathComponent()
                id = url.deletingPathExtension().lastPathComponent
            }
        }

        func manager() throws -> JobManager { try JobManager(directory: directory, registry: outpostJobRegistry()) }

        func ids(_ manager: JobManager, unfinishedOnly: Bool) throws -> [String] {
            if let id { return [id] }
            return try manager.snapshots().filter { !unfinishedOnly || !$0.status.isFinished }.map(\.id)
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the jobs in a directory.")
        @Argument(help: "A job directory.") var directory: String
        @Flag(help: "Print JSON.") var json = false

        func run() async throws {
            let snapshots = try Target(directory).manager().snapshots()
            if json {
                let rows: [JSONValue] = snapshots.map { s in
                    [
                        "id": .string(s.id), "jobType": .string(s.jobType), "status": .string(s.status.rawValue),
                        "step": .integer(Int64(s.currentStep)), "steps": .integer(Int64(s.steps.count)),
                        "fraction": .number(s.progress.fraction), "error": s.error.map { .string($0.message) } ?? .null,
                    ]
                }
                print(JSONValue.array(rows).jsonString)
                return
            }
            if snapshots.isEmpty { print("no jobs in \(directory)") }
            for s in snapshots {
                let step = s.currentStep < s.steps.count ? s.steps[s.currentStep] : "done"
                print("\(s.id)  \(s.jobType)  \(s.status.rawValue)  step \(min(s.currentStep + 1, s.steps.count))/\(s.steps.count) (\(step))  \(Int(s.progress.fraction * 100))%\(s.error.map { "  \($0.message)" } ?? "")")
            }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print a job's JSON (all jobs' for a directory).")
        @Argument(help: "A job directory or job JSON file.") var target: String

        func run() async throws {
            let t = try Target(target)
            let manager = try t.manager()
            let snapshots = try manager.snapshots().filter { t.id == nil || $0.id == t.id }
            guard !snapshots.isEmpty else { throw CLIFailure(message: "no job found at \(target)") }
            for s in snapshots { print(String(decoding: try s.encoded(), as: UTF8.self)) }
        }
    }

    struct Resume: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Resume a paused or interrupted job (all unfinished ones for a directory).")
        @Argument(help: "A job directory or job JSON file.") var target: String
        @Flag(help: "Print the final job JSON.") var json = false

        func run() async throws {
            let t = try Target(target)
            let manager = try t.manager()
            let ids = try t.ids(manager, unfinishedOnly: true)
            guard !ids.isEmpty else {
                print("nothing to resume in \(target)")
                return
            }
            for id in ids {
                let job = try manager.job(id: id)
                guard !job.status.isFinished else {
                    throw CLIFailure(message: "job \(id) already \(job.status.rawValue)")
                }
                if job.status == .canceling {
                    job.cancel()
                    _ = await job.waitUntilFinished()
                    try report(job, status: job.status, json: json)
                    continue
                }
                try manager.start(job)
                let status = await runShowingProgress(job, label: job.jobType)
                try report(job, status: status, json: json)
            }
        }
    }

    struct Cancel: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Cancel a job (all unfinished ones for a directory), wherever it runs.")
        @Argument(help: "A job directory or job JSON file.") var target: String

        func run() async throws {
            let t = try Target(target)
            let manager = try t.manager()
            for id in try t.ids(manager, unfinishedOnly: true) {
                let snapshot = try await manager.cancel(id: id)
                print("job \(id): \(snapshot.status.rawValue)\(snapshot.error.map { " (\($0.message))" } ?? "")")
            }
        }
    }
}
