import Foundation
import HTTPTypes

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import OutpostCore
import OutpostServiceTestSupport
import OutpostTestSupport
import Testing

@testable import OutpostServer

/// What an operator watches: /health, /ready, /metrics in the Prometheus format (read by the
/// prometheus_client parser), request ids, and the drain of a graceful shutdown.
@Suite("Health, readiness, metrics, request ids, drain")
struct OperationsTests {
    /// The samples of a metrics text, as Python's prometheus_client parses them.
    static func samples(_ text: String) async throws -> [JSONValue] {
        let dir = TemporaryDirectory()
        let file = dir.file("metrics.txt")
        try Data(text.utf8).write(to: file)
        let parsed = try await ExternalTools.python(
            """
            import json, sys
            from prometheus_client.parser import text_string_to_metric_families
            out = []
            for family in text_string_to_metric_families(open(sys.argv[1]).read()):
                for s in family.samples:
                    out.append({"family": family.name, "type": family.type, "name": s.name, "labels": s.labels, "value": s.value})
            print(json.dumps(out))
            """, [file.path])
        #expect(parsed.succeeded, "\(parsed.stderr)")
        return try JSONValue.parse(parsed.stdout).arrayValue ?? []
    }

    static func value(_ samples: [JSONValue], _ name: String, _ labels: [String: String]) -> Double {
        samples.filter { s in
            s["name"]?.stringValue == name && labels.allSatisfy { s["labels"]?[$0.key]?.stringValue == $0.value }
        }.compactMap { $0["value"]?.doubleValue }.reduce(0, +)
    }

    @Test(arguments: BackendKind.syncing)
    func metricsCountRequestsBatchesAndEdits(kind: BackendKind) async throws {
        try await withServer(kind) { client, service in
            for _ in 0..<3 { #expect(try await client.get("\(base)/0/query?where=1%3D1&returnCountOnly=true").status == 200) }
            #expect(try await client.get("\(base)/0/query?where=nope").status == 400)
            let adds = #"[{"attributes":{"asset_id":"M-1","asset_type":"valve"},"geometry":{"x":-122.65,"y":45.52}}]"#
            #expect(try await client.post("\(base)/0/applyEdits", ["adds": adds]).status == 200)
            let info = try await registerReplica(service)
            let uri = "\(native)/replicas/\(q(info.replicaID))/batches"
            let first = try batch(info, seq: 1, [insertEdit(), insertEdit("{0C0C0C0C-0000-4000-8000-000000000002}")])
            #expect(try await client.put("\(uri)/1", json: first).status == 200)
            #expect(try await client.put("\(uri)/1", json: first).status == 200, "the same batch again: replayed")
            #expect(try await client.put("\(uri)/1", json: try batch(info, seq: 1, [insertEdit("{0C0C0C0C-0000-4000-8000-000000000003}")])).status == 409)

            if kind == .sqlite {  // drawn MapServers are the GeoPackage backend's
                for _ in 0..<2 { #expect(try await client.get("/arcgis/rest/services/field_inspection/MapServer/tile/12/1465/650").status == 200) }
            }
            let metrics = try await client.get("/metrics")
            #expect(metrics.headers[.contentType]?.hasPrefix("text/plain; version=0.0.4") == true)
            let samples = try await Self.samples(metrics.text)
            #expect(Self.value(samples, "outpost_http_requests_total", ["route": "featureserver.query", "status": "200"]) == 3)
            #expect(Self.value(samples, "outpost_http_requests_total", ["route": "featureserver.query", "status": "400"]) == 1)
            #expect(Self.value(samples, "outpost_http_request_duration_seconds_count", ["route": "featureserver.query"]) == 4)
            #expect(Self.value(samples, "outpost_sync_batches_total", ["outcome": "applied"]) == 1)
            #expect(Self.value(samples, "outpost_sync_batches_total", ["outcome": "replayed"]) == 1)
            #expect(Self.value(samples, "outpost_sync_batches_total", ["outcome": "refused"]) == 1)
            #expect(Self.value(samples, "outpost_edits_applied_total", ["via": "batch"]) == 2)
            // Where the applied batch's time went, once per stage (the replay applied nothing).
            for stage in ["reading", "editing", "spatial_index", "change_log", "commit"] {
                #expect(Self.value(samples, "outpost_sync_batch_stage_duration_seconds_count", ["stage": stage]) == 1, "\(stage)")
                #expect(Self.value(samples, "outpost_sync_batch_stage_duration_seconds_sum", ["stage": stage]) >= 0, "\(stage)")
            }
            #expect(Self.value(samples, "outpost_sync_batch_stage_duration_seconds_sum", ["stage": "editing"]) > 0)
            #expect(Self.value(samples, "outpost_sync_batch_stage_duration_seconds_sum", ["stage": "commit"]) > 0)
            // The commit lock was held from before the stages to the commit's end.
            #expect(Self.value(samples, "outpost_sync_commit_lock_held_seconds_count", [:]) == 1)
            #expect(
                Self.value(samples, "outpost_sync_commit_lock_held_seconds_sum", [:])
                    >= ["reading", "editing", "change_log", "commit"].map { Self.value(samples, "outpost_sync_batch_stage_duration_seconds_sum", ["stage": $0]) }.reduce(0, +))
            #expect(Self.value(samples, "outpost_edits_applied_total", ["via": "applyEdits"]) == 1)
            #expect(samples.contains { $0["name"]?.stringValue == "outpost_active_jobs_count" })
            if kind == .sqlite {
                #expect(Self.value(samples, "outpost_tiles_served_total", ["source": "drawn"]) == 1)
                #expect(Self.value(samples, "outpost_tiles_served_total", ["source": "kept"]) == 1)
            }
            // Routes are kinds, never paths: no object id or replica id becomes a label.
            #expect(!metrics.text.contains(info.replicaID) && !metrics.text.contains("objectid"))
        }
    }

    @Test(arguments: BackendKind.available)
    func requestIDsAndReadiness(kind: BackendKind) async throws {
        try await withServer(kind) { client, service in
            let given = try await client.get("\(base)?f=json", headers: [OperationsTests.requestID: "crew-7.sync_42"])
            #expect(given.headers[OperationsTests.requestID] == "crew-7.sync_42")
            let made = try #require(try await client.get("\(base)?f=json").headers[OperationsTests.requestID])
            #expect(UUID(uuidString: made) != nil)
            let hostile = try await client.get("\(base)?f=json", headers: [OperationsTests.requestID: String(repeating: "x", count: 65)])
            #expect(hostile.headers[OperationsTests.requestID]?.count == 36, "an over-long id is replaced")
            #expect(try await client.get("/ready").json()["status"] == "ready")
            // A store that no longer answers (PostgreSQL going away: the outage test) makes the
            // server unready; here the service's file is closed under it.
            guard kind == .sqlite else { return }
            try await service.backend.close()
            let unready = try await client.get("/ready")
            #expect(unready.status == 503 && (try? unready.json())?["service"] == "field_inspection", "\(unready.text)")
            #expect(try await client.get("/health").status == 200, "alive, though not ready")
        }
    }

    static let requestID = HTTPField.Name("X-Request-Id")!

    /// The site directory's check behind `/ready`: callers that come while it runs share its
    /// outcome (one write, however many ask); once it has run past the limit, callers hear at
    /// once that the directory does not answer, and none starts another until it ends.
    @Test(.scaledTimeLimit(minutes: 1))
    func readinessChecksOfTheSiteDirectoryShareOneWrite() async throws {
        let directory = TemporaryDirectory().url
        let writes = Locked(0)
        // The write waits until every caller has come, so all ten come while it runs.
        let release = DispatchSemaphore(value: 0)
        let slow = SiteDirectoryProbe(timeout: .seconds(30)) { url in
            writes.withLock { $0 += 1 }
            release.wait()
            return SiteDirectoryProbe.tryWriting(in: url)
        }
        let answers = await withTaskGroup(of: String?.self) { group in
            for _ in 0..<10 { group.addTask { await slow.problem(with: directory) } }
            while slow.waitingCallers < 10 { try? await Task.sleep(for: .milliseconds(5)) }
            release.signal()
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(answers.count == 10 && answers.allSatisfy { $0 == nil }, "\(answers)")
        #expect(writes.get() == 1)
        release.signal()
        #expect(await slow.problem(with: directory) == nil && writes.get() == 2, "a caller after the check ended starts another")

        // A directory that blocks (a mount gone silent) past the limit, until released.
        let blocking = Locked(true)
        let gate = DispatchSemaphore(value: 0)
        let blocked = SiteDirectoryProbe(timeout: .milliseconds(200)) { _ in
            if blocking.get() { gate.wait() }
            return nil
        }
        let first = await blocked.problem(with: directory)
        #expect(first?.contains("did not take a file within 200 ms") == true, "\(first ?? "nil")")
        let next = await blocked.problem(with: directory)
        #expect(next?.contains("has not finished") == true, "\(next ?? "nil")")
        blocking.set(false)
        gate.signal()
        // Once the blocked write ends, the next caller's check is a new one, and passes.
        var answer = next
        for _ in 0..<100 where answer != nil {
            try await Task.sleep(for: .milliseconds(20))
            answer = await blocked.problem(with: directory)
        }
        #expect(answer == nil)
    }

    @Test func aDrainingServerAnswers503ButStaysAlive() async throws {
        let drain = ServerDrain()
        try await withServer(.sqlite, drain: drain) { client, _ in
            #expect(try await client.get("\(base)?f=json").status == 200)
            drain.state.startDraining()
            let refused = try await client.get("\(base)/0/query?where=1%3D1")
            #expect(refused.status == 503 && refused.headers[.retryAfter] == "5")
            #expect(try await client.get("/health").status == 200)
        }
    }

    /// The drain's rule, with time passed in: a sync that had begun before the drain goes on
    /// (its replica's requests, its service's attachments), others are refused; checksums asked
    /// with the upload end nothing, asked after the feed they end the sync a second later;
    /// a sync that goes quiet ends after the idle time.
    @Test func theDrainLetsSyncsThatHadBegunFinishAndNothingElse() {
        let drain = DrainState()
        let t0 = ContinuousClock.now
        #expect(drain.admits(service: "s", replica: "{ABC}", step: .uploads, now: t0))
        #expect(drain.admits(service: "s", replica: "quiet", step: .downloads, now: t0))
        #expect(drain.admits(service: "s", replica: "new", step: .continues, now: t0), "before the drain, everything")
        drain.startDraining()
        #expect(drain.syncsUnderWay(now: t0) == 2)
        #expect(!drain.admits(service: "s", replica: "new", step: .uploads, now: t0), "a sync that had not begun")
        #expect(!drain.admits(service: "other", replica: "abc", step: .downloads, now: t0), "another service's replica")
        #expect(drain.admits(service: "S", replica: "abc", step: .verifies, now: t0 + .seconds(1)), "the same replica, braces and case aside")
        #expect(drain.admits(service: "s", replica: nil, step: .continues, now: t0 + .seconds(1)), "the service's attachments while it syncs")
        #expect(!drain.admits(service: "other", replica: nil, step: .continues, now: t0 + .seconds(1)))
        // Checksums ahead of the feed kept the sync; its feed, then its verify, end it.
        #expect(drain.admits(service: "s", replica: "abc", step: .downloads, now: t0 + .seconds(2)))
        #expect(drain.admits(service: "s", replica: "abc", step: .verifies, now: t0 + .seconds(3)))
        #expect(drain.syncsUnderWay(now: t0 + .milliseconds(3_900)) == 2)
        #expect(drain.syncsUnderWay(now: t0 + .milliseconds(4_100)) == 1, "ended a second after its verify")
        #expect(drain.syncsUnderWay(now: t0 + DrainState.idle + .milliseconds(100)) == 0, "the quiet one after the idle time")
        #expect(!drain.admits(service: "s", replica: "abc", step: .continues, now: t0 + DrainState.idle + .seconds(1)))
        #expect(!drain.admits(service: "s", replica: nil, step: .continues, now: t0 + DrainState.idle + .seconds(1)))
    }

    /// SIGTERM with a client's keep-alive connection open: the server drains and exits 0.
    @Test(.scaledTimeLimit(minutes: 1))
    func sigtermStopsGracefully() async throws {
        let service = try await TestService.fieldInspection(.sqlite)
        try await service.backend.close()
        let server = try await ServeProcess.start(service: service.file)
        let session = URLSession(configuration: .ephemeral)
        _ = try await session.data(from: server.featureServer("field_inspection").appendingPathComponent("0/query?where=1%3D1&f=json"))
        let started = Date()
        let status = await server.stop(signal: SIGTERM, timeout: 20)
        #expect(status == 0, "exit status \(status)")
        #expect(Date().timeIntervalSince(started) < 15)
        withExtendedLifetime(service) {}
    }
}
