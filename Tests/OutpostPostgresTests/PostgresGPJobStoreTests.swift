import Foundation
import OutpostPostgres
import OutpostServiceTestSupport
import OutpostSyncService
import OutpostTestSupport
import Testing

/// The shared geoprocessing job records hosts of a site take over from one another.
@Suite("PostgreSQL geoprocessing job records", .enabled(if: BackendKind.postgresURL != nil, "run ./scripts/test: it starts PostgreSQL"))
struct PostgresGPJobStoreTests {
    /// Hosts that find the same expired leases at the same moment, each through its own pool of
    /// connections: every job goes to exactly one of them, round after round, and a finished job
    /// to none.
    @Test(.scaledTimeLimit(minutes: 2))
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

/// The server job records of a site: leases renewed by the host running a job, and the jobs of
/// a host that stopped failed by the others.
@Suite("PostgreSQL server job leases", .enabled(if: BackendKind.postgresURL != nil, "run ./scripts/test: it starts PostgreSQL"))
struct PostgresJobLeaseTests {
    @Test(.scaledTimeLimit(minutes: 2))
    func hostsFailAStoppedHostsJobsOnceAndLeaveRenewedOnes() async throws {
        let location = try PostgresLocation(url: try await BackendKind.newPostgresDatabase())
        var stores: [PostgresJobStore] = []
        for _ in 0..<3 { stores.append(try await PostgresJobStore(location: location)) }
        func record(_ id: String) -> JobRecord {
            JobRecord(id: id, status: "InProgress", responseType: "esriExportTiles", submissionTime: 0, lastUpdatedTime: 0)
        }
        for n in 0..<30 { try await stores[0].insert(record("gone\(n)"), host: "gone", until: 1_000) }
        for n in 0..<5 { try await stores[1].insert(record("live\(n)"), host: "live", until: 1_000) }
        try await stores[1].renew(host: "live", until: 10_000)

        let failed = try await withThrowingTaskGroup(of: [String].self) { group in
            for store in stores { group.addTask { try await store.failAbandoned(now: 5_000, error: "stopped") } }
            var all: [String] = []
            for try await ids in group { all += ids }
            return all
        }
        #expect(failed.count == 30 && Set(failed) == Set((0..<30).map { "gone\($0)" }), "each once: \(failed.count)")
        let record = try #require(try await stores[2].record("gone7"))
        #expect(record.status == "Failed" && record.error == "stopped")
        #expect(try await stores[2].record("live3")?.status == "InProgress")
        // The stopped host's late word does not reopen or change what was decided.
        try await stores[0].update("gone7", status: "Completed", result: ["resultUrl": "x"], error: nil)
        let after = try #require(try await stores[2].record("gone7"))
        #expect(after.status == "Failed" && after.result == nil)
        // Past the renewed lease, the live host's jobs go too.
        #expect(try await stores[2].failAbandoned(now: 20_000, error: "stopped").count == 5)
    }

    /// Jobs recorded with what runs them again: three hosts taking a stopped host's jobs at
    /// once take each once, with its input; a job asked to cancel, one without an input and one
    /// started as often as allowed are not taken (they are failed instead).
    @Test(.scaledTimeLimit(minutes: 2))
    func hostsTakeAStoppedHostsResumableJobsOnce() async throws {
        let location = try PostgresLocation(url: try await BackendKind.newPostgresDatabase())
        var stores: [PostgresJobStore] = []
        for _ in 0..<3 { stores.append(try await PostgresJobStore(location: location)) }
        func record(_ id: String) -> JobRecord {
            JobRecord(id: id, status: "InProgress", responseType: "esriExportTiles", submissionTime: 0, lastUpdatedTime: 0)
        }
        for n in 0..<30 {
            try await stores[0].insert(record("gone\(n)"), host: "gone", until: 1_000, resumable: ResumableJob(kind: "exportTiles", input: ["n": .integer(Int64(n))]))
        }
        try await stores[0].insert(record("plain"), host: "gone", until: 1_000)
        try await stores[0].insert(record("cancelled"), host: "gone", until: 1_000, resumable: ResumableJob(kind: "exportTiles", input: [:]))
        #expect(try await stores[0].requestCancel("cancelled"))

        let taken = try await withThrowingTaskGroup(of: [(id: String, job: ResumableJob)].self) { group in
            for (i, store) in stores.enumerated() {
                group.addTask { try await store.takeAbandoned(now: 5_000, host: "h\(i)", until: 8_000, maximumStarts: 3) }
            }
            var all: [(id: String, job: ResumableJob)] = []
            for try await jobs in group { all += jobs }
            return all
        }
        #expect(taken.count == 30 && Set(taken.map(\.id)) == Set((0..<30).map { "gone\($0)" }), "each once: \(taken.count)")
        #expect(taken.allSatisfy { $0.job.kind == "exportTiles" && $0.job.input["n"]?.integerValue.map { "gone\($0)" } == $0.id })
        // Held by their new hosts now: not taken again before that lease ends, nor failed.
        #expect(try await stores[1].takeAbandoned(now: 6_000, host: "late", until: 9_000, maximumStarts: 3).isEmpty)
        #expect(Set(try await stores[1].failAbandoned(now: 6_000, error: "stopped")) == ["plain", "cancelled"])
        // Started three times (its first start and two takings): failed, not taken a third time.
        #expect(try await stores[2].takeAbandoned(now: 9_000, host: "again", until: 12_000, maximumStarts: 3).count == 30)
        #expect(try await stores[2].takeAbandoned(now: 13_000, host: "third", until: 16_000, maximumStarts: 3).isEmpty)
        #expect(try await stores[2].failAbandoned(now: 13_000, error: "stopped").count == 30)
    }
}
