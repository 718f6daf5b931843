import Foundation
import OutpostPostgres
import OutpostServiceTestSupport
import OutpostSyncService
import Testing

/// The shared geoprocessing job records hosts of a site take over from one another.
@Suite("PostgreSQL geoprocessing job records", .enabled(if: BackendKind.postgresURL != nil, "run ./scripts/test: it starts PostgreSQL"))
struct PostgresGPJobStoreTests {
    /// Hosts that find the same expired leases at the same moment, each through its own pool of
    /// connections: every job goes to exactly one of them, round after round, and a finished job
    /// to none.
    @Test(.timeLimit(.minutes(2)))
    func hostsClaimingTogetherTakeEachExpiredJobOnce() async throws {
        let location = try PostgresLocation(url: try await BackendKind.newPostgresDatabase())
        var stores: [PostgresGPJobStore] = []
        for _ in 0..<4 { stores.append(try await PostgresJobStore(location: location).geoprocessingJobs(service: "Buffers")) }
        let other = try await PostgresJobStore(location: location).geoprocessingJobs(service: "Elsewhere")

        let ids = (0..<60).map { String(format: "j%03d", $0) }
        for (n, id) in ids.enumerated() {
            let job = StoredGPJob(id: id, task: "Buffer", status: "esriJobSubmitted", submitted: Int64(n), updated: Int64(n), inputs: "{}", environment: "{}")
            try await stores[0].insert(job, host: "gone", until: 0)
        }
        try await other.insert(StoredGPJob(id: "j000", task: "Buffer", status: "esriJobSubmitted", submitted: 0, updated: 0, inputs: "{}", environment: "{}"), host: "gone", until: 0)
        #expect(try await stores[0].update("j059", status: "esriJobSucceeded", finishes: true, results: "{}", now: 1))
        let open = Set(ids.dropLast())

        let lease: Int64 = 1_000
        for round in 1...6 {
            let now = Int64(round) * lease * 2
            let won = try await withThrowingTaskGroup(of: (Int, [String]).self) { group in
                for (h, store) in stores.enumerated() {
                    group.addTask { (h, try await store.claim(host: "host\(h)-\(round)", until: now + lease, now: now).map(\.id)) }
                }
                var won: [Int: [String]] = [:]
                for try await (h, claimed) in group { won[h] = claimed }
                return won
            }
            let all = won.values.flatMap { $0 }
            #expect(all.count == open.count, "round \(round): \(won.mapValues(\.count))")
            #expect(Set(all) == open, "round \(round)")
            // Claimed jobs come oldest first, as the host will run them.
            for claimed in won.values { #expect(claimed == claimed.sorted()) }
            // Nothing is left to claim while the winners' leases run.
            #expect(try await stores[0].claim(host: "late", until: now + lease, now: now + lease - 1).isEmpty)
        }
        // The other service's record with the same id was never touched.
        #expect(try await other.claim(host: "mine", until: 10_000_000, now: 10).map(\.id) == ["j000"])
    }
}
