import Foundation
import OutpostCore
import OutpostProtocol
import OutpostServer
import OutpostStorage
import OutpostTestSupport
import OutpostLoadTesting
import OutpostServiceTestSupport
import Testing

@testable import OutpostSync

/// Several `outpost serve` processes on one PostgreSQL database, behind no balancer at all:
/// each sync picks a process at random. Processes die mid-request (one in a batch's
/// transaction, one killed while syncs are in flight) and come back; clients retry elsewhere.
@Suite("Sync through several server processes on one PostgreSQL", .enabled(if: BackendKind.postgresURL != nil, "run ./scripts/test: it starts PostgreSQL"))
struct MultiProcessSyncTests {
    /// The processes serving the database; a dead one is replaced by a new process.
    final class Fleet: Sendable {
        let service: TestService
        let servers: Locked<[ServeProcess]>

        init(_ service: TestService, _ servers: [ServeProcess]) {
            self.service = service
            self.servers = Locked(servers)
        }

        /// A process picked at random among those running (as a balancer with health checks would).
        func random(_ rng: inout SeededGenerator) -> ServeProcess {
            let all = servers.withLock { $0 }
            let running = all.filter(\.process.isRunning)
            let pool = running.isEmpty ? all : running
            return pool[Int.random(in: 0..<pool.count, using: &rng)]
        }

        /// Starts a replacement for every process that died (as a supervisor would).
        func restartDead() async throws -> Int {
            var restarted = 0
            for index in servers.withLock({ $0.indices }) where !servers.withLock({ $0[index].process.isRunning }) {
                let replacement = try await ServeProcess.start(service)
                servers.withLock { $0[index] = replacement }
                restarted += 1
            }
            return restarted
        }

        /// Kills process `index` (SIGKILL, whatever it is doing) and starts a replacement.
        func kill(_ index: Int, environment: [String: String] = [:]) async throws -> Int32 {
            let doomed = servers.withLock { $0[index] }
            let status = await doomed.stop(signal: SIGKILL)
            let replacement = try await ServeProcess.start(service, environment: environment)
            servers.withLock { $0[index] = replacement }
            return status
        }

        func stopAll() async {
            for server in servers.withLock({ $0 }) { _ = await server.stop() }
        }
    }

    struct Replica: Sendable {
        let name: String
        let gdb: Geodatabase
        /// The server features it holds (nil: all of them).
        let scope: FeatureQuery?
    }

    /// 20 replicas (whole layer, and filtered by status; both sync models) make random edits,
    /// the same hot features included, and sync through three processes with failures: at the
    /// end every replica equals the server within its filter, every feature a replica added is
    /// on the server exactly once (unless it deleted it again), and none it deleted is.
    @Test(.scaledTimeLimit(minutes: 8))
    func twentyReplicasConvergeThroughThreeProcesses() async throws {
        var rng = SeededGenerator(state: 20261122)
        let service = try await TestService.fieldInspection(.postgres)
        try await service.backend.close()
        // The third process dies in the transaction of the first batch it applies.
        let fleet = Fleet(service, [
            try await ServeProcess.start(service), try await ServeProcess.start(service),
            try await ServeProcess.start(service, environment: ["OUTPOST_FAULT": "server.beforeCommit:kill"]),
        ])
        let directory = TemporaryDirectory("outpost-fleet")

        var replicas: [Replica] = []
        for i in 0..<20 {
            let filtered = i % 4 == 3
            let task = try GeodatabaseSyncTask(url: fleet.random(&rng).featureServer("field_inspection"))
            var parameters = try await task.makeDefaultGenerateGeodatabaseParameters(extent: nil)
            parameters.layerOptions = [.init(layerID: 0)]
            if filtered { parameters.layerOptions[0].whereClause = "status = 'open'" }
            parameters.syncModel = i % 2 == 0 ? .geodatabase : .layer
            parameters.replicaName = "crew-\(i)"
            let job = task.makeGenerateGeodatabaseJob(parameters: parameters, downloadFileURL: directory.file("crew-\(i).gpkg"), faults: FaultInjector())
            try job.start()
            replicas.append(Replica(name: "crew-\(i)", gdb: try await job.output, scope: filtered ? FeatureQuery(where: "status = 'open'") : nil))
        }

        // What crews added (asset id → global id) and deleted of their own additions.
        var added: [String: String] = [:]
        var deleted = Set<String>()
        var failures = 0, restarts = 0
        for round in 0..<3 {
            for (r, replica) in replicas.enumerated() {
                let points = try replica.gdb.table(named: "inspection_points")
                for n in 0..<Int.random(in: 2...5, using: &rng) {
                    let ids = try await points.objectIDs().sorted()
                    switch Int.random(in: 0..<10, using: &rng) {
                    case 0..<3:
                        let assetID = "F\(round)-\(r)-\(n)"
                        let gid = GlobalID.make()
                        // Filtered replicas add open features, so they stay in their scope.
                        _ = try await points.add([Feature(globalID: gid, attributes: [
                            "asset_id": .string(assetID), "asset_type": .string("valve"), "status": .string("open"), "condition": .integer(Int64.random(in: 1...5, using: &rng)),
                        ], geometry: .point(try Point(x: -122.6 - Double(r) / 1000, y: 45.5 + Double(n) / 1000)))])
                        added[assetID] = gid
                    case 3 where !added.isEmpty:
                        // Delete one of its own additions, if it holds one.
                        let mine = added.filter { $0.key.hasPrefix("F") && $0.key.split(separator: "-")[1] == "\(r)" && !deleted.contains($0.key) }
                        guard let (assetID, gid) = mine.sorted(by: { $0.key < $1.key }).first else { continue }
                        var q = FeatureQuery()
                        q.globalIDs = [gid]
                        let local = try await points.objectIDs(matching: q)
                        guard !local.isEmpty else { continue }
                        try await points.delete(objectIDs: local)
                        deleted.insert(assetID)
                    default:
                        // Updates go to a hot set every crew edits too: conflicts are common.
                        guard let id = ids.prefix(25).randomElement(using: &rng) else { continue }
                        var f = Feature(objectID: id)
                        if Bool.random(using: &rng) { f.attributes["condition"] = .integer(Int64.random(in: 1...5, using: &rng)) } else {
                            f.attributes["notes"] = .string("crew \(r) round \(round)")
                        }
                        try await points.update([f])
                    }
                }
            }
            // Everyone syncs at once through random processes; half way through the second
            // round a process is killed whatever it is doing. A failed sync is retried through
            // another process.
            try await withThrowingTaskGroup(of: Int.self) { group in
                for (r, replica) in replicas.enumerated() {
                    let seed = UInt64(round * 100 + r)
                    group.addTask {
                        var local = SeededGenerator(state: seed)
                        var failed = 0
                        for attempt in 0..<12 {
                            let url = fleet.random(&local).featureServer("field_inspection")
                            do {
                                try await Self.sync(replica.gdb, url)
                                return failed
                            } catch {
                                failed += 1
                                if attempt == 11 { throw error }
                                try await Task.sleep(for: .milliseconds(200))
                            }
                        }
                        return failed
                    }
                }
                if round == 1 {
                    try await Task.sleep(for: .milliseconds(Int.random(in: 100...600, using: &rng)))
                    #expect(try await fleet.kill(0) == SIGKILL)
                }
                for try await f in group { failures += f }
            }
            restarts += try await fleet.restartDead()
        }
        #expect(restarts >= 1, "the process with the armed fault died in a batch's transaction")
        // Two quiet passes: everyone receives everything.
        for _ in 0..<2 {
            for replica in replicas { try await Self.sync(replica.gdb, fleet.random(&rng).featureServer("field_inspection")) }
        }

        let server = try await service.reopened()
        var all: [String: SyncHarness.Row] = [:]
        var assetIDs: [String: Int] = [:]
        for f in try await server.features(layerID: 0, query: FeatureQuery(limit: 100_000)) {
            all[f.globalID!] = SyncHarness.Row(f)
            if case .string(let a) = f.attributes["asset_id"] ?? .null { assetIDs[a, default: 0] += 1 }
        }
        for (assetID, gid) in added {
            if deleted.contains(assetID) {
                #expect(all[gid] == nil, "\(assetID), deleted by its crew, is gone")
            } else {
                #expect(all[gid] != nil && assetIDs[assetID] == 1, "\(assetID) is on the server exactly once")
            }
        }
        #expect(assetIDs.filter { $0.value > 1 && $0.key.hasPrefix("F") }.isEmpty, "no feature added twice")
        for replica in replicas {
            var scope = replica.scope ?? FeatureQuery()
            scope.limit = 100_000
            let want = Dictionary(uniqueKeysWithValues: try await server.features(layerID: 0, query: scope).map { ($0.globalID!, SyncHarness.Row($0)) })
            let have = try await SyncHarness.localRows(replica.gdb, "inspection_points")
            let differing = Set(want.keys).symmetricDifference(have.keys).union(want.keys.filter { have[$0] != nil && have[$0] != want[$0] })
            #expect(differing.isEmpty, "\(replica.name): \(differing.count) features differ from the server's")
            #expect(try await replica.gdb.read { try $0.capturedChanges().count } == 0, "\(replica.name) has nothing pending")
        }
        #expect(failures > 0, "some syncs met a dead process and were retried")
        try await server.close()
        await fleet.stopAll()
    }

    /// PostgreSQL stops just after a replica sealed its batch and starts again three seconds
    /// later: the upload meets 503s, the client retries with backoff and finishes; the edits are
    /// on the server once.
    @Test(.scaledTimeLimit(minutes: 4))
    func postgresRestartingDuringASyncLosesNothing() async throws {
        try await PostgresCluster.with { cluster in try await Self.restartDuringSync(cluster) }
    }

    static func restartDuringSync(_ cluster: PostgresCluster) async throws {
        let service = try await TestService.fieldInspection(.postgres, server: cluster.url())
        try await service.backend.close()
        let server = try await ServeProcess.start(service, arguments: ["--database-timeout", "2"])
        let task = try GeodatabaseSyncTask(url: server.featureServer("field_inspection"))
        let directory = TemporaryDirectory("outpost-pg-restart")
        let generate = task.makeGenerateGeodatabaseJob(
            parameters: try await task.makeDefaultGenerateGeodatabaseParameters(extent: nil), downloadFileURL: directory.file("crew.gpkg"), faults: FaultInjector())
        try generate.start()
        let gdb = try await generate.output
        let points = try gdb.table(named: "inspection_points")
        _ = try await points.add(try (0..<50).map { i in
            Feature(globalID: GlobalID.make(), attributes: ["asset_id": .string("PR-\(i)"), "asset_type": .string("valve")], geometry: .point(try Point(x: -122.6, y: 45.5)))
        })
        try await points.update((1...10).map { Feature(objectID: Int64($0), attributes: ["notes": .string("after the restart")]) })

        let faults = FaultInjector()
        let outage = Outage()
        faults.onReach("client.afterSeal") {
            // Blocks the sync until PostgreSQL is down, then lets it run into the outage.
            let down = DispatchSemaphore(value: 0)
            Task {
                let stopped = (try? await cluster.stopServer()) != nil
                outage.state.withLock { $0.stopped = stopped }
                down.signal()
                try? await Task.sleep(for: .seconds(3))
                let started = (try? await cluster.startServer()) != nil
                outage.state.withLock { $0.started = started }
            }
            down.wait()
        }
        let job = task.makeSyncGeodatabaseJob(parameters: SyncGeodatabaseParameters(attempts: 8), geodatabase: gdb, faults: faults)
        try job.start()
        let results = try await job.output
        #expect(results.allSatisfy { $0.checksumMatches == true })
        #expect(outage.state.withLock { $0.stopped && $0.started }, "PostgreSQL was stopped after the seal and started again during the sync")
        #expect(try await gdb.read { try $0.capturedChanges().count } == 0)

        let backend = try await service.reopened()
        #expect(try await backend.count(layerID: 0, query: FeatureQuery(where: "asset_id LIKE 'PR-%'")) == 50, "every added feature once")
        #expect(try await backend.count(layerID: 0, query: FeatureQuery(where: "notes = 'after the restart'")) == 10)
        try await backend.close()
        #expect(await server.stop() == 0)
    }

    /// Whether the restart test's outage happened (written by the task that stops and starts PostgreSQL).
    final class Outage: Sendable {
        let state = Locked((stopped: false, started: false))
    }

    struct ChecksumMismatch: Error {}

    static func sync(_ gdb: Geodatabase, _ url: URL) async throws {
        let job = try GeodatabaseSyncTask(url: url).makeSyncGeodatabaseJob(parameters: SyncGeodatabaseParameters(attempts: 1), geodatabase: gdb, faults: FaultInjector())
        try job.start()
        let results = try await job.output
        guard results.allSatisfy({ $0.checksumMatches != false }) else { throw ChecksumMismatch() }
    }
}
