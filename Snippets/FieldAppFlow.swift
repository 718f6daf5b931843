// The README's "Using the library" example: a field app's whole flow, generate → edit →
// sync with progress → cancel → sync again. SnippetTests keeps the README's copy equal
// to this file's shown lines.
// snippet.hide
import Foundation
// snippet.show
import OutpostCore
import OutpostStorage
import OutpostSync

// snippet.hide
let arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.count == 2, let serviceURL = URL(string: arguments[0]) else {
    print("usage: FieldAppFlow <FeatureServer URL> <replica.gpkg>")
    exit(2)
}
let replicaURL = URL(fileURLWithPath: arguments[1])
// snippet.show
let task = try GeodatabaseSyncTask(url: serviceURL)
try await task.load()
let replica = try await task.makeGenerateGeodatabaseJob(
    parameters: try await task.makeDefaultGenerateGeodatabaseParameters(extent: nil),
    downloadFileURL: replicaURL).run()          // cancelled with this Task; no partial file

let points = try replica.table(named: "inspection_points")
_ = try await points.add([Feature(attributes: ["asset_id": .string("HY-1042"), "asset_type": .string("hydrant")],
                                  geometry: .point(try Point(x: -122.65, y: 45.52)))])

let parameters = try await task.makeDefaultSyncGeodatabaseParameters(geodatabase: replica)
let sync = task.makeSyncGeodatabaseJob(parameters: parameters, geodatabase: replica)
let progress = Task { for await p in sync.progressUpdates { print(p.phases.map { "\($0.name) \($0.done)" }) } }
try sync.start()                                // the app's job: it outlives the screen that started it
sync.cancel()                                   // the user stops it (or the link drops) part way
_ = await sync.waitUntilFinished()
_ = try await task.makeSyncGeodatabaseJob(parameters: parameters, geodatabase: replica).run()
await progress.value                            // what went up before the cancel is not sent again
