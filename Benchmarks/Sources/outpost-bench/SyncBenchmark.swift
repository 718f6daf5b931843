import AsyncHTTPClient
import Foundation
import OutpostCore
import OutpostServer
import OutpostStorage
import OutpostSync
import OutpostSyncService

#if canImport(Glibc)
    import Glibc
#endif

/// The sync round trip of the sync issue: the edits of an N-feature layer (10% updated, 1%
/// deleted, 5% inserted) sealed and uploaded by one replica over loopback HTTP, applied by the
/// server (a child process), downloaded and applied by a second replica — next to pygeodiff's
/// `create_changeset` + `apply_changeset` for the same edits.
enum SyncBenchmark {
    static let schema = ServiceSchema(
        name: "bench",
        layers: [
            LayerDefinition(
                id: 0, name: "points", geometryType: .point,
                fields: [
                    FieldDefinition(name: "objectid", type: .oid), FieldDefinition(name: "globalid", type: .globalID),
                    FieldDefinition(name: "id_int", type: .integer), FieldDefinition(name: "value", type: .double),
                    FieldDefinition(name: "label", type: .string, length: 20), FieldDefinition(name: "observed", type: .date),
                    FieldDefinition(name: "ref", type: .guid),
                ])
        ], maxRecordCount: 100_000)

    static func createService(count: Int, at url: URL) throws {
        try ServerBenchmark.createService(count: count, at: url, schema: schema, seed: 5)
    }

    /// The edits, with plain SQL on the replica (captured by the triggers like any writer's):
    /// updates move the point and change two attributes. With `packIndex` the R-tree is packed
    /// again after the edits when that is cheaper than keeping it current through the triggers
    /// (``GeodatabaseConnection/maintainingSpatialIndex(of:_:)``).
    static func edit(_ replica: URL, count: Int, packIndex: Bool = false) throws -> Int {
        let gdb = try Geodatabase.open(at: replica)
        defer { try? gdb.close() }
        return try gdb.write { conn in
            packIndex ? try conn.maintainingSpatialIndex(of: "points") { try edits(conn, count: count) } : try edits(conn, count: count)
        }
    }

    /// Makes the edits inside the caller's transaction; returns how many.
    private static func edits(_ conn: GeodatabaseConnection, count: Int) throws -> Int {
        let updates = count / 10, deletes = count / 100, inserts = count / 20
        var random = FastRandomGenerator(seed: 9)
        let table = try conn.geodatabase.table(named: "points")
        var moved: [Feature] = []
        for i in stride(from: 1, through: updates * 10, by: 10) {
            let (x, y) = ImportBenchmark.coordinates(i + 7)
            moved.append(Feature(objectID: Int64(i), attributes: ["value": .double(Double(i) + 0.25), "label": .string("edited-\(i)")], geometry: .point(try Point(x: x, y: y))))
        }
        try table.update(moved, in: conn)
        try table.delete(objectIDs: (0..<deletes).map { Int64($0 * 100 + 5) }, in: conn)
        _ = try table.add(try (0..<inserts).map { try newPoint(count + $0, label: "new-\($0)", random: &random) }, in: conn)
        return updates + deletes + inserts
    }

    /// A point added by an edit: number `n` of the layer, at its place in the synthetic pattern.
    static func newPoint(_ n: Int, label: String, random: inout FastRandomGenerator) throws -> Feature {
        let (x, y) = ImportBenchmark.coordinates(n)
        return Feature(
            attributes: ["id_int": .integer(Int64(n)), "value": .double(1.5), "label": .string(label), "observed": .date(ImportBenchmark.epoch),
                         "ref": .string(GlobalID.make(using: &random))],
            geometry: .point(try Point(x: x, y: y)))
    }

    /// The floor of one apply (a worker process): the same edits made on a copy of the replica
    /// before them with change capture removed. `how`: `triggers` (through the API, the R-tree
    /// kept current by the GeoPackage triggers), `packed` (through the API, the R-tree packed
    /// again after the edits) or `raw` (``rawApply(_:count:)``). A round trip applies them twice:
    /// on the server and on the downloading replica.
    static func applyFloor(base: URL, copy: URL, count: Int, how: String) throws -> Double {
        Geodatabase.removeFiles(at: copy)
        try FileManager.default.copyItem(at: base, to: copy)
        defer { Geodatabase.removeFiles(at: copy) }
        let gdb = try Geodatabase.open(at: copy)
        try gdb.write { conn in
            for name in ["insert", "update", "delete", "globalid_immutable"] { try conn.execute("DROP TRIGGER outpost_points_\(name)") }
        }
        if how == "raw" {
            defer { try? gdb.close() }
            return try rawApply(gdb, count: count)
        }
        try gdb.close()
        let started = Date()
        _ = try edit(copy, count: count, packIndex: how == "packed")
        return Date().timeIntervalSince(started)
    }

    /// The least SQLite work one apply of the edits needs: the same rows written by prepared
    /// statements by object id, with values and geometry blobs made before the clock starts
    /// (no API, no validation, no change capture), and the R-tree packed again after them.
    private static func rawApply(_ gdb: Geodatabase, count: Int) throws -> Double {
        let updates = count / 10, deletes = count / 100, inserts = count / 20
        let srs = try gdb.read { try $0.query("SELECT srs_id FROM gpkg_geometry_columns WHERE table_name = 'points'").first?[0].integerValue } ?? 4326
        func blob(_ i: Int) throws -> SQLLiteral {
            let (x, y) = ImportBenchmark.coordinates(i)
            return .blob(GeoPackageBinary.encode(.point(try Point(x: x, y: y)), srsID: Int32(srs)))
        }
        var random = FastRandomGenerator(seed: 9)
        let moved = try stride(from: 1, through: updates * 10, by: 10).map { i in
            [try blob(i + 7), .double(Double(i) + 0.25), .text("edited-\(i)"), .integer(Int64(i))]
        }
        let added = try (0..<inserts).map { i in
            [try blob(count + i), .text(GlobalID.make(using: &random)), .integer(Int64(count + i)), .double(1.5), .text("new-\(i)"),
             .text("2024-01-01T00:00:00.000Z"), .text(GlobalID.make(using: &random))] as [SQLLiteral]
        }
        let started = Date()
        try gdb.write { conn in
            try conn.maintainingSpatialIndex(of: "points", expectedGeometryWrites: updates + deletes + inserts) {
                let update = try conn.statement("UPDATE points SET geom = ?, value = ?, label = ? WHERE objectid = ?")
                for arguments in moved { try update.execute(arguments) }
                let delete = try conn.statement("DELETE FROM points WHERE objectid = ?")
                for i in 0..<deletes { try delete.execute([.integer(Int64(i * 100 + 5))]) }
                let insert = try conn.statement("INSERT INTO points (geom, globalid, id_int, value, label, observed, ref) VALUES (?, ?, ?, ?, ?, ?, ?)")
                for arguments in added { try insert.execute(arguments) }
            }
        }
        return Date().timeIntervalSince(started)
    }

    /// One sync of `replica` (a worker process): prints the seconds.
    static func syncOnce(replica: URL) async throws -> Double {
        let gdb = try Geodatabase.open(at: replica)
        defer { try? gdb.close() }
        guard let state = try await gdb.read({ try $0.replicaState() }) else { throw BenchError("not a replica") }
        let task = try GeodatabaseSyncTask(url: URL(string: state.serviceURL)!)
        let started = Date()
        let batchSize = ProcessInfo.processInfo.environment["BENCH_BATCH"].flatMap { Int($0) } ?? SyncGeodatabaseParameters().maxChangesPerBatch
        let first = ProcessInfo.processInfo.environment["BENCH_FIRST_BATCH"].flatMap { Int($0) }
        let job = task.makeSyncGeodatabaseJob(
            parameters: SyncGeodatabaseParameters(maxChangesPerBatch: batchSize, firstBatchChanges: first), geodatabase: gdb, faults: FaultInjector())
        try job.start()
        let results = try await job.output
        let seconds = Date().timeIntervalSince(started)
        guard results.allSatisfy({ $0.checksumMatches != false }) else { throw BenchError("checksums differ") }
        if ProcessInfo.processInfo.environment["BENCH_TRACE"] != nil {
            FileHandle.standardError.write(Data("  sync started at \(format(started.timeIntervalSince1970, 3)) (Unix time)\n".utf8))
            for m in job.messages { FileHandle.standardError.write(Data("  \(format(m.timestamp.timeIntervalSince(started), 3)) \(m.text)\n".utf8)) }
        }
        let r = results[0]
        FileHandle.standardError.write(Data("  up \(r.uploaded.total) down \(r.downloaded.total) match \(String(describing: r.checksumMatches))\n".utf8))
        return seconds
    }

    static func generate(_ serviceURL: URL, to file: URL) async throws {
        Geodatabase.removeFiles(at: file)
        let task = try GeodatabaseSyncTask(url: serviceURL)
        let parameters = try await task.makeDefaultGenerateGeodatabaseParameters(extent: nil)
        let job = task.makeGenerateGeodatabaseJob(parameters: parameters, downloadFileURL: file, faults: FaultInjector())
        try job.start()
        try await job.output.close()
    }

    static func run(count: Int, executable: String, workDirectory: URL) async throws {
        let service = workDirectory.appendingPathComponent("sync-service.gpkg")
        try createService(count: count, at: service)
        let (server, url) = try startServer(executable: executable, service: service)
        defer { kill(server.processIdentifier, SIGTERM); server.waitUntilExit() }
        let serviceURL = URL(string: url + "/arcgis/rest/services/sync-service/FeatureServer")!

        let trip = try await roundTrip(serviceURL: serviceURL, count: count, executable: executable, workDirectory: workDirectory, serverPID: server.processIdentifier)
        let (edits, uploadBest, downloadBest, peak) = (trip.edits, trip.upload, trip.download, trip.clientPeakMB)
        let serverPeak = peakMemoryMB(of: server.processIdentifier)
        let (stages, preparedAhead) = try await batchStages(serverURL: url)
        let base = workDirectory.appendingPathComponent("sync-base.gpkg"), a0 = workDirectory.appendingPathComponent("sync-a0.gpkg")
        let generateSeconds = trip.generateSeconds

        // pygeodiff: the changeset between the base and the edited replica, applied to a copy.
        let geodiff = try measure([
            ProcessInfo.processInfo.environment["OUTPOST_PYTHON"] ?? "python3", "-c",
            """
            import sys, shutil, time, pygeodiff
            base, modified, target, changeset = sys.argv[1:5]
            shutil.copyfile(base, target)
            g = pygeodiff.GeoDiff()
            t = time.perf_counter()
            g.create_changeset(base, modified, changeset)
            g.apply_changeset(target, changeset)
            print(g.changes_count(changeset), file=sys.stderr)
            print(time.perf_counter() - t)
            print("vmhwm-kb", [l.split()[1] for l in open("/proc/self/status") if l.startswith("VmHWM:")][0])
            """,
            base.path, a0.path, workDirectory.appendingPathComponent("geodiff-target.gpkg").path,
            workDirectory.appendingPathComponent("geodiff.bin").path,
        ])
        let geodiffSeconds = try reportedSeconds(geodiff)
        let floors = try ["triggers", "packed", "raw"].map { how in
            try reportedSeconds(try measure([
                executable, "worker-sync-floor", base.path, workDirectory.appendingPathComponent("sync-floor.gpkg").path, String(count), how,
            ]))
        }
        let floor = floors[0...1].min()!
        let total = uploadBest + downloadBest
        printTable(
            "Sync round trip: \(edits) edits of a \(count)-feature layer (10% updated, 1% deleted, 5% inserted), loopback HTTP",
            ["", "seconds", "edits/s", "peak MB"],
            [
                ["Outpost upload (seal, PUT, server apply, verify)", format(uploadBest, 3), format(Double(edits) / uploadBest), format(peak)],
                ["Outpost download (feed, stage, apply, verify)", format(downloadBest, 3), format(Double(edits) / downloadBest), ""],
                ["Outpost end to end", format(total, 3), format(Double(edits) / total), format(serverPeak) + " server"],
                ["pygeodiff create_changeset + apply_changeset", format(geodiffSeconds, 3), format(Double(edits) / geodiffSeconds), format(geodiff.peakMemoryMB)],
                ["floor: the edits applied once (API, R-tree triggers, no capture)", format(floors[0], 3), format(Double(edits) / floors[0]), ""],
                ["floor: the same, R-tree packed after the edits", format(floors[1], 3), format(Double(edits) / floors[1]), ""],
                ["floor: raw SQL (prepared statements, values made before), R-tree packed", format(floors[2], 3), format(Double(edits) / floors[2]), ""],
            ])
        print("a round trip applies the edits twice (server, replica): 2 x floor = \(format(2 * floor, 3)) s = \(format(geodiffSeconds / (2 * floor), 2))x pygeodiff")
        print("  with raw SQL: 2 x \(format(floors[2], 3)) = \(format(2 * floors[2], 3)) s = \(format(geodiffSeconds / (2 * floors[2]), 2))x pygeodiff")
        if !stages.isEmpty {
            let sum = stages.reduce(0) { $0 + $1.seconds }
            print("the server's batches, by stage (its /metrics, all batches): " + stages.map { "\($0.stage) \(format($0.seconds * 1000, 1)) ms" }.joined(separator: ", ")
                + "; \(format(sum * 1000, 1)) ms in all; \(preparedAhead) edits prepared ahead of the writer")
        }
        print("end to end: \(format(total / geodiffSeconds, 2))x pygeodiff's time (target ≤ 0.75x), \(format(total / (2 * floors[2]), 2))x the raw floor of two applies (target ≤ 2.3x); replica generation of \(count) features: \(format(generateSeconds, 2)) s")
    }

    /// The time the server's applied batches spent in each stage, summed, and how many of their
    /// edits it prepared ahead of its writer (its `/metrics`).
    static func batchStages(serverURL: String) async throws -> (stages: [(stage: String, seconds: Double)], preparedAhead: Int) {
        let response = try await HTTPClient.shared.execute(HTTPClientRequest(url: serverURL + "/metrics"), timeout: .seconds(30))
        var text = ""
        for try await chunk in response.body { text += String(buffer: chunk) }
        let prefix = "outpost_sync_batch_stage_duration_seconds_sum{stage=\""
        let order = BatchStages().named.map(\.stage)
        let lines = text.split(separator: "\n")
        let ahead = lines.first { $0.hasPrefix("outpost_sync_batch_edits_prepared_ahead_total") }
            .flatMap { $0.split(separator: " ").last.flatMap { Double($0) } }
        let stages = lines.compactMap { line -> (stage: String, seconds: Double)? in
            guard line.hasPrefix(prefix), let end = line.dropFirst(prefix.count).firstIndex(of: "\""),
                let value = line.split(separator: " ").last.flatMap({ Double($0) })
            else { return nil }
            return (String(line[line.index(line.startIndex, offsetBy: prefix.count)..<end]), value)
        }.sorted { (order.firstIndex(of: $0.stage) ?? order.count) < (order.firstIndex(of: $1.stage) ?? order.count) }
        return (stages, Int(ahead ?? 0))
    }

    /// Replicas A (edited, uploads) and B (downloads) of the service at `serviceURL`, then one
    /// sync of each as worker processes. The server's state moves on: a second run needs a new
    /// service. Keeps A's state before the edits as `sync-base.gpkg` (for pygeodiff).
    static func roundTrip(
        serviceURL: URL, count: Int, executable: String, workDirectory: URL, serverPID: Int32? = nil
    ) async throws -> (edits: Int, upload: Double, download: Double, clientPeakMB: Double, generateSeconds: Double) {
        let a0 = workDirectory.appendingPathComponent("sync-a0.gpkg"), b0 = workDirectory.appendingPathComponent("sync-b0.gpkg")
        let generateStart = Date()
        try await generate(serviceURL, to: a0)
        let generateSeconds = Date().timeIntervalSince(generateStart)
        try await generate(serviceURL, to: b0)
        let base = workDirectory.appendingPathComponent("sync-base.gpkg")
        Geodatabase.removeFiles(at: base)
        try FileManager.default.copyItem(at: a0, to: base)
        let edits = try edit(a0, count: count)
        // BENCH_JSON_BATCHES: the replica forgets that its server reads binary batches (A/B).
        if ProcessInfo.processInfo.environment["BENCH_JSON_BATCHES"] != nil {
            let gdb = try Geodatabase.open(at: a0)
            try await gdb.write { conn in
                guard var state = try conn.replicaState() else { return }
                state.batchEncodings = nil
                try conn.setReplicaState(state)
            }
            try gdb.close()
        }
        // The server's peak memory is counted from here (replica generation is not sync).
        if let serverPID { try? "5".write(toFile: "/proc/\(serverPID)/clear_refs", atomically: false, encoding: .utf8) }
        let sampler = serverPID.map { MemorySampler(pid: $0) }
        // CPU time as well as wall time: on two cores the round trip's time is bounded by the
        // work of both sides together.
        let serverCPU = { serverPID.map { cpuSeconds(ofProcess: $0) } ?? 0 }
        let serverAtStart = serverCPU()
        let up = try measure([executable, "worker-sync", a0.path])
        let serverAfterUpload = serverCPU()
        let down = try measure([executable, "worker-sync", b0.path])
        let serverAfterDownload = serverCPU()
        print(
            "CPU time (user + system): upload replica \(format(up.cpuSeconds, 3)) s + server \(format(serverAfterUpload - serverAtStart, 3)) s, "
                + "download replica \(format(down.cpuSeconds, 3)) s + server \(format(serverAfterDownload - serverAfterUpload, 3)) s")
        if let server = sampler?.stop() {
            print("server during the syncs: peak anonymous memory \(format(server.anonMB)) MB, peak file-backed (mapped database pages) \(format(server.fileMB)) MB")
        }
        return (edits, try reportedSeconds(up), try reportedSeconds(down), max(up.peakMemoryMB, down.peakMemoryMB), generateSeconds)
    }

    /// A live process's peak resident memory (VmHWM), in MB.
    static func peakMemoryMB(of pid: Int32) -> Double {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") })
        else { return 0 }
        return (Double(line.split(separator: " ").dropFirst().first ?? "0") ?? 0) / 1024
    }
}
