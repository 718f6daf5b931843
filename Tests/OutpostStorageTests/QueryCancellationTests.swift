import Foundation
import OutpostCore
import OutpostTestSupport
import Synchronization
import Testing

@testable import OutpostStorage

/// A query of a 200,000-feature layer whose Task is cancelled stops: the awaiting call throws
/// CancellationError within the bound, the statement is interrupted (the read does not run to the
/// end of the layer), and the geodatabase answers the next query.
@Suite("Query cancellation")
struct QueryCancellationTests {
    @Test(.scaledTimeLimit(minutes: 3))
    func aLargeQueryEndsWithItsTask() async throws {
        let dir = TemporaryDirectory("outpost-query-cancel")
        let gdb = try SampleGeodatabases.emptyFieldInspection(in: dir)
        defer { try? gdb.close() }
        let table = try gdb.table(named: "inspection_points")
        try await ImporterTests.importPoints(ImporterTests.randomPoints(200_000, seed: 54), into: table)

        // Rows the query has read, counted as it streams them. Past the first thousand each row
        // takes 0.2 ms, so the cancel surely lands mid-read: on a loaded machine the reader
        // thread once read all 200,000 rows before the cancelling task was scheduled.
        let read = Atomic<Int>(0)
        let querying = Task {
            try await gdb.read { conn in
                try table.forEach(matching: FeatureQuery(where: "status = 'open'"), in: conn) { _ in
                    if read.add(1, ordering: .relaxed).newValue > 1_000 { usleep(200) }
                }
            }
        }
        let (took, error) = try await CancellationBound.cancel(querying) { read.load(ordering: .relaxed) >= 1_000 }
        #expect(error is CancellationError, "\(String(describing: error))")
        #expect(took < CancellationBound.loaded)
        #expect(read.load(ordering: .relaxed) < 200_000, "the statement stopped before the end of the layer")

        // The same through features(matching:), the collecting form.
        let collecting = Task { try await table.features(matching: .all) }
        try await Task.sleep(for: .milliseconds(50))
        collecting.cancel()
        await #expect(throws: CancellationError.self) { _ = try await collecting.value }
        #expect(try await table.count() == 200_000, "the geodatabase answers the next query")
    }
}
