// Jobs and loadable resources: the patterns a view model uses.
import Foundation
import OutpostCore
import OutpostStorage
import OutpostTiles

// snippet.hide
let folder = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("outpost-snippet-\(ProcessInfo.processInfo.processIdentifier)")
try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(at: folder) }
let template = CommandLine.arguments.dropFirst().first ?? "http://127.0.0.1:9/{z}/{x}/{y}.png"
// snippet.show
// snippet.load
// A loadable loads once, however many callers ask; a failed load can be retried.
let tiles = ExportTileCacheTask(source: .http(template))
async let first: Void = tiles.load()
async let second: Void = tiles.load()  // shares the first caller's load
_ = try await (first, second)
print(tiles.loadStatus)  // .loaded
// snippet.end

// snippet.structured
// The structured form: `run()` starts the job and ends it when the calling Task is cancelled,
// the way a SwiftUI `.task` modifier cancels its work when the view goes away. A job that
// ends cancelled leaves no partial file.
let parameters = ExportTileCacheParameters(areaOfInterest: nil, levelIDs: [0, 1])
let export = Task {
    try await tiles.makeExportTileCacheJob(parameters: parameters, downloadFileURL: folder.appendingPathComponent("one.mbtiles")).run()
}
export.cancel()  // the view went away
_ = try? await export.value
// snippet.end

// snippet.shared
// The shared form: a started job outlives whoever awaits it. Cancelling a Task that awaits
// `output` ends that wait only; `cancel()` ends the job.
let job = tiles.makeExportTileCacheJob(parameters: parameters, downloadFileURL: folder.appendingPathComponent("two.mbtiles"))
try job.start()
let progress = Task {
    for await update in job.progressUpdates { print(update.fraction) }
}
let waiting = Task { try await job.output }
waiting.cancel()  // the job goes on
job.cancel()  // now it ends, as `.failed` with the `.cancelled` code
print(await job.waitUntilFinished(), job.error?.code == .cancelled)
await progress.value
// snippet.end

// snippet.persist
// A job kept in a JobManager's directory survives the process: after a restart,
// `resumeAll()` picks up each running job from its last checkpoint.
let manager = try JobManager(directory: folder.appendingPathComponent("jobs"))
let kept = try manager.add(
    ExportTileCacheJob(source: tiles.source, parameters: parameters, downloadFileURL: folder.appendingPathComponent("three.mbtiles")))
print(kept.id, try manager.snapshots().map(\.status))
// snippet.end
