// Taking a whole map offline (its feature layers as replicas, its basemap as a tile package),
// then keeping it in step with its services.
import Foundation
import OutpostCore
import OutpostOffline

// snippet.hide
let arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.count == 2, let mapURL = URL(string: arguments[0]) else {
    print("usage: OfflineMap <map definition URL> <folder>")
    exit(2)
}
let folder = URL(fileURLWithPath: arguments[1])
let area = Envelope(xmin: 24.93, ymin: 60.16, xmax: 24.96, ymax: 60.18)
// snippet.show
// snippet.generate
let task = OfflineMapTask(url: mapURL)
let parameters = try await task.makeDefaultGenerateOfflineMapParameters(areaOfInterest: area, minScale: 0, maxScale: 5_000)
let offlineMap = try await task.makeGenerateOfflineMapJob(parameters: parameters, downloadDirectory: folder).run()
for problem in offlineMap.layerErrors { print("not offline:", problem) }
// snippet.end

// snippet.sync
// Later, with a link: what is waiting each way, then one job that syncs every replica.
let sync = OfflineMapSyncTask(offlineMap: offlineMap)
let updates = try await sync.checkForUpdates()
if updates.uploadAvailable || updates.downloadAvailable {
    let result = try await sync.makeOfflineMapSyncJob(parameters: sync.makeDefaultOfflineMapSyncParameters()).run()
    for replica in result.replicas where replica.error != nil { print(replica.file, replica.error!) }
}
// snippet.end
