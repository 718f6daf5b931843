// The `.task` and `Task { }` patterns of a SwiftUI app, written as plain Swift: a screen's work
// ends with the screen; the app's work goes on without it.
import Foundation
import OutpostCore
import OutpostStorage
import OutpostSync

// snippet.hide
let arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.count == 2, let serviceURL = URL(string: arguments[0]) else {
    print("usage: Concurrency <FeatureServer URL> <replica.gpkg>")
    exit(2)
}
let replica = try Geodatabase.open(at: URL(fileURLWithPath: arguments[1]))
// snippet.show
// snippet.screen
/// A list of open inspections. What a SwiftUI view starts in `.task { }` runs in a Task that
/// is cancelled when the view goes away; here the screen keeps that Task itself.
final class OpenInspectionsScreen: Sendable {
    let table: FeatureTable
    let loading = Locked<Task<[Feature], any Error>?>(nil)

    init(table: FeatureTable) { self.table = table }

    func appear() {
        let table = table
        loading.set(Task {
            // Cancelled with the screen: the query's SQLite statement is interrupted.
            try await table.features(matching: FeatureQuery(where: "status = 'open'"))
        })
    }

    func disappear() { loading.get()?.cancel() }
}
// snippet.end

// snippet.app
/// The app's sync: it goes on when the user leaves the screen that started it. Screens await or
/// watch the job; one that goes away ends its own wait, not the job.
final class SyncModel: Sendable {
    let job = Locked<Job<SyncGeodatabaseJob>?>(nil)

    func sync(_ task: GeodatabaseSyncTask, _ replica: Geodatabase) async throws {
        let parameters = try await task.makeDefaultSyncGeodatabaseParameters(geodatabase: replica)
        let job = task.makeSyncGeodatabaseJob(parameters: parameters, geodatabase: replica)
        try job.start()
        self.job.set(job)
    }

    /// The user's "Stop" button.
    func stop() { job.get()?.cancel() }
}
// snippet.end

// snippet.hide
let screen = OpenInspectionsScreen(table: try replica.table(named: "inspection_points"))
screen.appear()
screen.disappear()
let model = SyncModel()
try await model.sync(try GeodatabaseSyncTask(url: serviceURL), replica)
print(await model.job.get()?.waitUntilFinished() ?? .notStarted)
// snippet.show
