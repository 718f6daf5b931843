import ArgumentParser
import Foundation
import OutpostVectorTiles
import OutpostCore
import OutpostLocator
import OutpostOffline
import OutpostStorage
import OutpostSync
import OutpostTiles

/// The job types `outpost` can resume: copies, server-side jobs, replicas, syncs, tile exports
/// and offline maps (a service's token comes from `OUTPOST_TOKEN`, never from the job file).
func outpostJobRegistry(
    tiles: TileJobEnvironment = TileJobEnvironment(token: serviceToken(nil), faults: processFaults, checkpointInterval: testCheckpointInterval)
) -> JobRegistry {
    var registry = JobRegistry.withOfflineMapJobs(
        OfflineJobEnvironment(token: serviceToken(nil), faults: processFaults, tileCheckpointInterval: testCheckpointInterval))
    registry.withTileJobs(tiles)
    ExportVectorTilesJob.register(in: &registry, environment: vectorTileJobEnvironment)
    registry.register(BatchGeocodeJob.self)
    return registry
}

/// What this process's vector tile exports take: its fault points and checkpoint interval.
let vectorTileJobEnvironment = VectorTileJobEnvironment(token: serviceToken(nil), faults: processFaults, checkpointInterval: testCheckpointInterval)

/// Where jobs keep their JSON: `--job-dir`, else `OUTPOST_JOB_DIR`, else `.outpost/jobs`.
func jobDirectory(_ option: String?) -> URL {
    URL(fileURLWithPath: option ?? ProcessInfo.processInfo.environment["OUTPOST_JOB_DIR"] ?? ".outpost/jobs")
}

struct CopyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "copy",
        abstract: "Copy a file as a resumable, verified job (for geodatabases and tile packages on removable storage).",
        discussion: """
            The copy checkpoints after every chunk. Ctrl-C pauses it; if the process is killed, \
            `outpost job resume <job-dir>` continues from the last checkpoint. The destination \
            appears only once the copy is verified (CRC-32).
            """)

    @Argument(help: "The file to copy.") var source: String
    @Argument(help: "Where to put the copy.") var destination: String
    @Option(help: "Directory for the job's JSON (default: $OUTPOST_JOB_DIR or .outpost/jobs).") var jobDir: String?
    @Option(help: "Chunk size in KB (one checkpoint per chunk).") var chunkKb = 1024
    @Option(help: "Pause after each chunk, in milliseconds, to leave I/O to other work.") var throttleMs = 0
    @Flag(help: "Print the result as JSON.") var json = false

    func validate() throws {
        guard chunkKb > 0, throttleMs >= 0 else { throw ValidationError("--chunk-kb must be positive and --throttle-ms not negative") }
    }

    func run() async throws {
        guard FileManager.default.isReadableFile(atPath: source) else {
            throw CLIFailure(message: "\(source) does not exist or cannot be read")
        }
        let manager = try JobManager(directory: jobDirectory(jobDir), registry: outpostJobRegistry())
        let job = try manager.add(
            CopyFileJob(
                source: URL(fileURLWithPath: source), destination: URL(fileURLWithPath: destination),
                chunkSize: chunkKb * 1024, throttle: .milliseconds(throttleMs)))
        if ProgressDisplay().enabled {
            FileHandle.standardError.write(Data("job \(job.id): \(manager.jsonURL(id: job.id).path)\n".utf8))
        }
        try manager.start(job)
        let status = await runShowingProgress(job, label: "copy")
        try report(job, status: status, json: json)
    }
}

/// Prints a job's outcome and maps it to the exit code (0 succeeded, 1 failed; a paused job
/// says how to resume and exits 1).
func report(_ job: any AnyJob, status: JobStatus, json: Bool) throws {
    let snapshot = job.snapshot
    if json {
        print(String(decoding: try snapshot.encoded(), as: UTF8.self))
    }
    switch status {
    case .succeeded:
        if !json { print(snapshot.messages.last { $0.text != "succeeded" }?.text ?? "job \(snapshot.id) succeeded") }
    case .paused:
        throw CLIFailure(message: "job \(snapshot.id) paused at step \(snapshot.currentStep + 1); resume it with: outpost job resume <job-dir>")
    default:
        throw CLIFailure(message: "job \(snapshot.id) failed: \(snapshot.error?.message ?? status.rawValue)")
    }
}

/// The unfinished job of `definition`'s type that `sameTarget` picks (the same command run again
/// after a pause or a kill continues it), else a new one. With `madeOutput` (where the job's
/// output lands): when the latest such job succeeded with the same parameters and its output
/// is there, that job — a kill can land after its last save and before the process exits, and
/// the same command again must then report what was made, not refuse the existing output.
/// - Throws: when the unfinished job has other parameters (it must be cancelled first).
func resumingOrAdding<D: JobDefinition>(
    _ definition: D, in manager: JobManager, target: String, madeOutput: URL? = nil, sameTarget: (JobSnapshot) -> Bool
) throws -> any AnyJob {
    let snapshots = try manager.snapshots().filter { $0.jobType == D.jobType && sameTarget($0) }
    if let madeOutput, let latest = snapshots.first, latest.status == .succeeded, latest.parameters == definition.parameters,
        FileManager.default.fileExists(atPath: madeOutput.path)
    {
        FileHandle.standardError.write(Data("job \(latest.id) already made \(target)\n".utf8))
        return try manager.job(id: latest.id)
    }
    guard let earlier = snapshots.first(where: { !$0.status.isFinished }) else {
        return try manager.add(definition)
    }
    guard earlier.parameters == definition.parameters else {
        throw CLIFailure(message: "an unfinished job for \(target) with other parameters exists (job \(earlier.id)); cancel it with outpost job cancel")
    }
    FileHandle.standardError.write(Data("resuming job \(earlier.id)\n".utf8))
    return try manager.job(id: earlier.id)
}

/// Runs `job` in this process showing its progress, or, when it already succeeded (see
/// ``resumingOrAdding(_:in:target:madeOutput:sameTarget:)``), just says so.
func startShowingProgress(_ job: any AnyJob, in manager: JobManager, label: String) async throws -> JobStatus {
    if job.status == .succeeded { return .succeeded }
    try manager.start(job)
    return await runShowingProgress(job, label: label)
}
