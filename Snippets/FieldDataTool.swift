// A field-data tool in one file: take a feature service offline, add an inspection, sync while
// watching the progress, and sync again after a cancel without losing or doubling an edit.
//
//     swift run FieldDataTool <FeatureServer URL> <replica.gpkg>
import Foundation
import OutpostCore
import OutpostStorage
import OutpostSync

// snippet.hide
let arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.count == 2, let serviceURL = URL(string: arguments[0]) else {
    print("usage: FieldDataTool <FeatureServer URL> <replica.gpkg>")
    exit(2)
}
let replicaURL = URL(fileURLWithPath: arguments[1])
// snippet.show
// snippet.load
// 1. Load the service: its layers, what it allows, its spatial reference.
let task = try GeodatabaseSyncTask(url: serviceURL)
try await task.load()
print("layers:", task.serviceInfo?.layers.map(\.name) ?? [])
// snippet.end

// snippet.generate
// 2. Take it offline. `run()` starts the job and cancels it if this Task is cancelled;
//    the replica appears only when it is complete.
let generateParameters = try await task.makeDefaultGenerateGeodatabaseParameters(extent: nil)
let replica = try await task.makeGenerateGeodatabaseJob(parameters: generateParameters, downloadFileURL: replicaURL).run()
defer { try? replica.close() }
// snippet.end

// snippet.edit
// 3. Edit in the field. Edits are checked against the schema; a bad one writes nothing.
let points = try replica.table(named: "inspection_points")
_ = try await points.add([
    Feature(
        attributes: ["asset_id": .string("HY-1042"), "asset_type": .string("hydrant"), "condition": .integer(2), "status": .string("open")],
        geometry: .point(try Point(x: -122.65, y: 45.52)))
])
print("waiting to sync:", try await points.pendingChanges().total)
// snippet.end

// snippet.sync
// 4. Sync, watching progress. A sync job belongs to whoever started it: it goes on until it
//    finishes or `cancel()` is called, whichever Task awaits it.
var syncParameters = try await task.makeDefaultSyncGeodatabaseParameters(geodatabase: replica)
syncParameters.maxChangesPerBatch = 500
let sync = task.makeSyncGeodatabaseJob(parameters: syncParameters, geodatabase: replica)
let watching = Task {
    for await progress in sync.progressUpdates {  // ends when the job does
        print(progress.phases.map { "\($0.name) \($0.done)" }.joined(separator: ", "))
    }
}
try sync.start()
if await sync.waitUntilFinished() == .failed {
    // Cancelled or cut off part way: what went up is recorded on both sides, so the next sync
    // sends only the rest and the service applies every edit exactly once.
    print("sync stopped:", sync.error.map { "\($0)" } ?? "")
    _ = try await task.makeSyncGeodatabaseJob(parameters: syncParameters, geodatabase: replica).run()
}
await watching.value
print("waiting to sync:", try await points.pendingChanges().total)
// snippet.end
