import Foundation
import OutpostCore
import OutpostProtocol
import OutpostServer
import OutpostStorage
import OutpostSyncService
import OutpostTestSupport
import OutpostServiceTestSupport
import OutpostHTTPTestSupport
import Testing

@testable import OutpostSync

/// The same edits on both sides, with fixed global ids and dates, so that runs can be compared.
enum Scenario {
    static let newPoint = "{0A0A0A0A-0000-4000-8000-000000000001}"
    static let newLog = "{0A0A0A0A-0000-4000-8000-000000000002}"
    static let serverPoint = "{0B0B0B0B-0000-4000-8000-000000000001}"
    static let day = Date(timeIntervalSince1970: 1_750_000_000)

    /// Local: an add in two layers, an update, a delete, a move. Server: an update, an add.
    static func edit(_ h: SyncHarness, _ gdb: Geodatabase) async throws {
        try await editLocally(gdb)
        var other = try #require(try await h.service.backend.features(layerID: 0, query: FeatureQuery(where: "objectid = 3")).first)
        other.attributes = ["notes": .string("office note")]
        try await h.serverEdit(layer: 0, updates: [other])
        try await h.serverEdit(layer: 0, adds: [
            Feature(globalID: serverPoint, attributes: ["asset_id": .string("SRV-1"), "asset_type": .string("meter"), "status": .string("open")], geometry: try point(-122.61, 45.50))
        ])
    }

    static func editLocally(_ gdb: Geodatabase) async throws {
        let points = try gdb.table(named: "inspection_points")
        _ = try await points.add([
            Feature(
                globalID: newPoint,
                attributes: ["asset_id": .string("NEW-1"), "asset_type": .string("valve"), "status": .string("open"), "inspected_at": .date(day)],
                geometry: try point(-122.65, 45.52))
        ])
        var first = try #require(try await points.features(matching: FeatureQuery(where: "objectid = 1")).first)
        first.attributes = ["notes": .string("field note"), "condition": .integer(4)]
        try await points.update([first])
        try await points.delete(objectIDs: [2])
        var moved = try #require(try await points.features(matching: FeatureQuery(where: "objectid = 5")).first)
        moved.attributes = [:]
        moved.geometry = try point(-122.61, 45.55)
        try await points.update([moved])
        _ = try await gdb.table(named: "inspection_log").add([
            Feature(globalID: newLog, attributes: ["point_globalid": .string(newPoint), "action": .string("installed"), "logged_at": .date(day)])
        ])
    }

    /// Every feature of every layer on the server, and every feature of the replica, by global id.
    struct State: Equatable, CustomStringConvertible {
        var server: [Int: [String: SyncHarness.Row]]
        var replica: [String: [String: SyncHarness.Row]]

        var description: String {
            "server \(server.mapValues(\.count)) replica \(replica.mapValues(\.count))"
        }
    }

    static func state(_ h: SyncHarness, _ gdb: Geodatabase) async throws -> State {
        try await state(h.service.backend, gdb)
    }

    static func state(_ backend: any FeatureServiceBackend, _ gdb: Geodatabase) async throws -> State {
        var server: [Int: [String: SyncHarness.Row]] = [:]
        for id in 0...3 {
            let features = try await backend.features(layerID: id, query: FeatureQuery(limit: 100_000))
            server[id] = Dictionary(uniqueKeysWithValues: features.map { ($0.globalID!, SyncHarness.Row($0)) })
        }
        var replica: [String: [String: SyncHarness.Row]] = [:]
        for t in ["inspection_points", "pipelines", "service_areas", "inspection_log"] { replica[t] = try await SyncHarness.localRows(gdb, t) }
        return State(server: server, replica: replica)
    }

    /// The state an uninterrupted run reaches.
    static func reference(_ kind: BackendKind = .sqlite, serverEdits: Bool = true) async throws -> State {
        let h = try await SyncHarness.start(kind)
        let gdb = try await h.replica()
        if serverEdits { try await edit(h, gdb) } else { try await editLocally(gdb) }
        try await h.sync(gdb)
        let state = try await state(h, gdb)
        try await h.stop()
        return state
    }

    /// User tables as SQLite stores them, byte for byte (rows in fid order, every column).
    static func tableDump(_ gdb: Geodatabase) async throws -> [String: [[SQLLiteral]]] {
        try await gdb.read { conn in
            var dump: [String: [[SQLLiteral]]] = [:]
            for t in ["inspection_points", "pipelines", "service_areas", "inspection_log"] {
                dump[t] = try conn.query("SELECT * FROM \"\(t)\" ORDER BY 1")
            }
            return dump
        }
    }
}

@Suite("Exactly once: faults between every durable step (I2, I3, I6, I10)", .serialized)
struct ExactlyOnceTests {
    /// `client.afterStage` is reached by a staged download, `client.afterPageApplied` by one
    /// applied while it downloads (the default for small downloads).
    static let clientPoints = [
        "client.afterSeal", "client.afterSend", "client.afterAck", "client.afterStage", "client.afterPageApplied", "client.beforeApplyCommit", "client.afterApply",
    ]

    @Test(.scaledTimeLimit(minutes: 5), arguments: BackendKind.syncing)
    func aFaultAtAnyStepThenASyncReachesTheUninterruptedState(kind: BackendKind) async throws {
        let expected = try await Scenario.reference(kind)
        #expect(expected.server[0]?[Scenario.newPoint] != nil)
        #expect(expected.replica["inspection_points"]?[Scenario.serverPoint] != nil)

        for point in Self.clientPoints + ["server.beforeCommit"] {
            let h = try await SyncHarness.start(kind)
            let gdb = try await h.replica()
            try await Scenario.edit(h, gdb)
            let faults = FaultInjector()
            let server = (h.service.backend as! any SyncBackend).faults
            if point.hasPrefix("server.") { server.arm(point) } else { faults.arm(point) }
            let pendingBefore = try await gdb.read { try $0.capturedChanges().count }
            let generationBefore = try await h.service.backend.generation()
            let cursorBefore = try await gdb.read { try $0.replicaState()!.cursor }
            let tablesBefore = try await Scenario.tableDump(gdb)

            await #expect(throws: (any Error).self, "a fault at \(point) fails the sync") {
                try await h.sync(gdb, SyncGeodatabaseParameters(attempts: 1, applyWhileDownloadingUpTo: point == "client.afterStage" ? 0 : nil), faults: faults)
            }
            // What each point leaves behind.
            let pendingAfter = try await gdb.read { try $0.capturedChanges().count }
            let cursorAfter = try await gdb.read { try $0.replicaState()!.cursor }
            switch point {
            case "client.afterSeal", "server.beforeCommit":
                #expect(pendingAfter == pendingBefore, "I2: no change row goes before the acknowledgement (\(point))")
                #expect(try await h.service.backend.generation() == generationBefore, "the server applied nothing (\(point))")
                #expect(try await gdb.read { try $0.sealedBatch() } != nil, "the sealed batch waits to be sent again")
            case "client.afterSend":
                #expect(pendingAfter == pendingBefore, "I2: applied on the server but not acknowledged here: change rows stay")
                #expect(try await h.service.backend.generation() > generationBefore)
            case "client.afterStage", "client.afterPageApplied", "client.beforeApplyCommit":
                #expect(pendingAfter == 0)
                #expect(cursorAfter == cursorBefore, "I6: the cursor moves only with the apply")
                let tables = try await Scenario.tableDump(gdb)
                #expect(tables["pipelines"] == tablesBefore["pipelines"])
                #expect(tables["inspection_points"]?.count == tablesBefore["inspection_points"]?.count, "nothing downloaded was applied")
            default:
                #expect(pendingAfter == 0)
            }
            try await h.sync(gdb)
            let state = try await Scenario.state(h, gdb)
            #expect(state == expected, "after a fault at \(point) and a new sync: \(state) vs \(expected)")
            #expect(try await gdb.read { try $0.capturedChanges().count } == 0)
            #expect(try await gdb.read { try $0.sealedBatch() } == nil)
            try await h.stop()
        }
    }

    @Test(.scaledTimeLimit(minutes: 3), arguments: BackendKind.syncing)
    func aLostResponseIsReplayedNotReapplied(kind: BackendKind) async throws {
        let expected = try await Scenario.reference(kind)
        for retryInTheSameJob in [false, true] {
            let h = try await SyncHarness.start(kind)
            let gdb = try await h.replica()
            try await Scenario.edit(h, gdb)
            let drops = DropCounter(limit: 1)
            let proxy = try await LoopbackProxy.start(upstream: h.live.baseURL) { method, uri in
                method == "PUT" && uri.contains("/batches/") && drops.take() ? .dropResponse : .forward
            }
            let viaProxy = proxy.url(for: h.url)
            if retryInTheSameJob {
                let results = try await h.sync(gdb, SyncGeodatabaseParameters(attempts: 3), url: viaProxy)
                #expect(results.first { $0.layerId == 0 }?.uploaded.total == 4)
            } else {
                let error = await #expect(throws: JobError.self) { try await h.sync(gdb, SyncGeodatabaseParameters(attempts: 1), url: viaProxy) }
                #expect(error?.syncErrorCode == .unreachable)
                #expect(try await gdb.read { try $0.sealedBatch() } != nil)
                try await h.sync(gdb, url: viaProxy)
            }
            #expect(drops.taken == 1, "the proxy dropped the server's answer once")
            let state = try await Scenario.state(h, gdb)
            #expect(state == expected, "I3: the batch applied once (retry in the same job: \(retryInTheSameJob))")
            // The server's ledger: one batch, applied once.
            let info = try await (h.service.backend as! any SyncBackend).replica(id: try await gdb.read { try $0.replicaState()!.replicaID })
            #expect(info.lastSeq == 1)
            try await proxy.stop()
            try await h.stop()
        }
    }

    @Test(.scaledTimeLimit(minutes: 3), arguments: BackendKind.syncing)
    func aDroppedDownloadRequestIsFetchedAgain(kind: BackendKind) async throws {
        let expected = try await Scenario.reference(kind)
        let h = try await SyncHarness.start(kind)
        let gdb = try await h.replica()
        try await Scenario.edit(h, gdb)
        let drops = DropCounter(limit: 1)
        let proxy = try await LoopbackProxy.start(upstream: h.live.baseURL) { method, uri in
            uri.contains("/changes") && drops.take() ? .dropRequest : .forward
        }
        let error = await #expect(throws: JobError.self) { try await h.sync(gdb, SyncGeodatabaseParameters(attempts: 1), url: proxy.url(for: h.url)) }
        #expect(error?.syncErrorCode == .unreachable)
        try await h.sync(gdb, url: proxy.url(for: h.url))
        #expect(try await Scenario.state(h, gdb) == expected)
        try await proxy.stop()
        try await h.stop()
    }
}

/// Lets the first `limit` matching requests be dropped.
final class DropCounter: Sendable {
    private let state: Locked<Int>
    let limit: Int

    init(limit: Int) {
        self.limit = limit
        state = Locked(0)
    }

    func take() -> Bool {
        state.withLock { n in
            guard n < limit else { return false }
            n += 1
            return true
        }
    }

    var taken: Int { state.withLock { $0 } }
}
