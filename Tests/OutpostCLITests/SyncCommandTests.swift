import Foundation
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import OutpostCore
import OutpostStorage
import OutpostTestSupport
import OutpostServiceTestSupport
import Testing

/// The command-line contract of docs/cli.md for replicas and sync, against `outpost serve`.
@Suite("outpost replica, sync, status")
struct SyncCommandTests {
    @Test(.scaledTimeLimit(minutes: 3))
    func replicaSyncAndStatusFollowTheContract() async throws {
        let service = try await TestService.fieldInspection(.sqlite)
        try await service.backend.close()
        let server = try await ServeProcess.start(service: service.file)
        let dir = TemporaryDirectory()
        let replica = dir.file("crew.gpkg").path
        let url = server.featureServer("field_inspection").absoluteString

        let created = try await outpost(["replica", "create", "--url", url, "--extent", "-122.70,45.49,-122.64,45.53", "--layers", "0,3", "--out", replica, "--json"])
        #expect(created.status == 0, "\(created.stderr)")
        let info = try JSONValue.parse(Data(created.stdout.utf8))
        #expect(info["replicaId"]?.stringValue != nil)
        #expect(info["layers"]?.arrayValue?.map { $0["name"]?.stringValue } == ["inspection_points", "inspection_log"])
        // A replica is a GeoPackage that GDAL reads.
        let ogr = try await ExternalTools.run("ogrinfo", ["-ro", "-so", replica, "inspection_points"])
        #expect(ogr.succeeded && !ogr.stderr.contains("Warning"), "\(ogr.stderr)")

        // Edits from the sqlite3 shell (updates need SpatiaLite's ST_* functions for the R-tree
        // triggers; a DELETE works in the plain shell).
        let shell = try await Self.sqlite(replica, "UPDATE inspection_points SET notes = 'from the shell' WHERE objectid IN (1, 2);")
        #expect(shell.succeeded, "\(shell.stderr)")
        let plainDelete = try await ExternalTools.run("sqlite3", [replica, "DELETE FROM inspection_points WHERE objectid = 3"])
        #expect(plainDelete.succeeded, "\(plainDelete.stderr)")
        let before = try JSONValue.parse(Data(try await outpost(["status", replica, "--json"]).stdout.utf8))
        #expect(before["replicaId"] == info["replicaId"])
        #expect(before["serviceUrl"]?.stringValue == url)
        #expect(before["lastSync"] == .null)
        #expect(before["layers"]?[0]?["pending"] == ["inserts": 0, "updates": 2, "deletes": 1])
        #expect(before["layers"]?[0]?["rejected"] == 0)

        let sync = try await outpost(["sync", replica, "--json"])
        #expect(sync.status == 0, "\(sync.stderr)")
        let summary = try JSONValue.parse(Data(sync.stdout.utf8))
        #expect(summary["uploaded"] == ["inserts": 0, "updates": 2, "deletes": 1])
        #expect(summary["downloaded"]?["inserts"] != nil)
        #expect(summary["conflicts"] == 0)
        #expect(summary["rejected"] == [])
        #expect(summary["checksumsMatch"] == true)
        let after = try JSONValue.parse(Data(try await outpost(["status", replica, "--json"]).stdout.utf8))
        #expect(after["lastSync"]?.stringValue != nil)
        #expect(after["layers"]?[0]?["pending"] == ["inserts": 0, "updates": 0, "deletes": 0])

        // An invalid edit: with rollback (default) exit 1, one line, nothing changed; with
        // --no-rollback exit 2 and the rejection listed.
        #expect(try await Self.sqlite(replica, "UPDATE inspection_points SET asset_type = 'spaceship' WHERE objectid = 4; UPDATE inspection_points SET notes = 'valid' WHERE objectid = 5;").succeeded)
        let refused = try await outpost(["sync", replica])
        #expect(refused.status == 1)
        #expect(refused.stderr.split(separator: "\n").count == 1, "\(refused.stderr)")
        #expect(refused.stderr.contains("nothing was applied"))
        let pending = try JSONValue.parse(Data(try await outpost(["status", replica, "--json"]).stdout.utf8))
        #expect(pending["layers"]?[0]?["pending"]?["updates"] == 2)
        let partial = try await outpost(["sync", replica, "--no-rollback", "--json"])
        #expect(partial.status == 2, "\(partial.stderr)")
        let partialSummary = try JSONValue.parse(Data(partial.stdout.utf8))
        #expect(partialSummary["uploaded"]?["updates"] == 1)
        #expect(partialSummary["rejected"]?[0]?["layer"] == "inspection_points")
        #expect(partialSummary["rejected"]?[0]?["reason"]?.stringValue?.contains("asset_type") == true)
        let status = try await outpost(["status", replica])
        #expect(status.stdout.contains("1 rejected"), "\(status.stdout)")

        // Inspect shows the replica; info names its service; unregister ends syncing.
        let replicaInfo = try JSONValue.parse(Data(try await outpost(["replica", "info", replica, "--json"]).stdout.utf8))
        #expect(replicaInfo["serviceUrl"]?.stringValue == url)
        #expect(try await outpost(["replica", "unregister", replica]).status == 0)
        #expect(try await Self.sqlite(replica, "UPDATE inspection_points SET notes = 'after' WHERE objectid = 6;").succeeded)
        let unregistered = try await outpost(["sync", replica])
        #expect(unregistered.status == 1)
        #expect(unregistered.stderr.contains("unregistered"), "\(unregistered.stderr)")
        #expect(try await outpost(["sync", dir.file("nope.gpkg").path]).stderr.contains("does not exist"))
        #expect(await server.stop() == 0)
    }

    /// The sqlite3 shell with SpatiaLite loaded.
    static func sqlite(_ file: String, _ sql: String) async throws -> CommandResult {
        try await ExternalTools.run("sqlite3", [file], input: ".bail on\n.load mod_spatialite\nSELECT EnableGpkgAmphibiousMode();\n\(sql)\n")
    }

    /// `outpost sync --policy manual` leaves a conflict open; `outpost conflicts` lists it with
    /// both values; `outpost conflicts resolve` settles it with an edit the next sync uploads, and
    /// the server's record closes.
    @Test(.scaledTimeLimit(minutes: 3))
    func conflictsAreListedAndResolvedFromTheCommandLine() async throws {
        let service = try await TestService.fieldInspection(.sqlite)
        try await service.backend.close()
        let server = try await ServeProcess.start(service: service.file)
        let dir = TemporaryDirectory()
        let replica = dir.file("crew.gpkg").path
        let url = server.featureServer("field_inspection")
        #expect(try await outpost(["replica", "create", "--url", url.absoluteString, "--layers", "0", "--out", replica]).succeeded)
        let gid = try #require(try await Self.sqlite(replica, "SELECT globalid FROM inspection_points WHERE objectid = 1;").stdout
            .trimmingCharacters(in: .whitespacesAndNewlines).split(separator: "\n").last.map(String.init))
        #expect(try await Self.sqlite(replica, "UPDATE inspection_points SET notes = 'crew' WHERE objectid = 1;").succeeded)
        func post(_ path: String, _ form: String) async throws -> JSONValue {
            var request = URLRequest(url: url.appendingPathComponent(path))
            request.httpMethod = "POST"
            request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
            request.httpBody = Data(form.utf8)
            return try JSONValue.parse(try await URLSession.shared.data(for: request).0)
        }
        let updates = "[{\"attributes\":{\"globalid\":\"\(gid)\",\"notes\":\"office\"}}]"
        let office = try await post("0/applyEdits", "f=json&useGlobalIds=true&updates=" + updates.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)
        #expect(office["updateResults"]?[0]?["success"] == true, "\(office)")

        #expect(try await outpost(["sync", replica, "--policy", "nonsense"]).status != 0)
        let sync = try await outpost(["sync", replica, "--policy", "manual", "--json"])
        #expect(sync.status == 0, "\(sync.stderr)")
        let summary = try JSONValue.parse(Data(sync.stdout.utf8))
        #expect(summary["conflicts"] == 1 && summary["openConflicts"] == 1)

        let listed = try JSONValue.parse(Data(try await outpost(["conflicts", replica, "--json"]).stdout.utf8))
        let conflict = try #require(listed["conflicts"]?[0])
        #expect(conflict["state"] == "open" && conflict["policy"] == "manual" && conflict["winner"] == "theirs")
        #expect(conflict["ours"]?["notes"] == "crew" && conflict["theirs"]?["notes"] == "office" && conflict["columns"] == ["notes"])
        let id = try #require(conflict["id"]?.integerValue)
        let text = try await outpost(["conflicts", replica])
        #expect(text.stdout.contains("manual") && text.stdout.contains("\"office\""), "\(text.stdout)")

        let unknown = try await outpost(["conflicts", "resolve", "999", replica, "--keep", "ours"])
        #expect(unknown.status == 1 && unknown.stderr.split(separator: "\n").count == 1, "\(unknown.stderr)")
        let resolved = try await outpost(["conflicts", "resolve", String(id), replica, "--keep", "ours"])
        #expect(resolved.status == 0, "\(resolved.stderr)")
        #expect(try await outpost(["sync", replica]).succeeded)
        let query = try JSONValue.parse(try await URLSession.shared.data(from: URL(string: url.absoluteString + "/0/query?where=objectid%3D1&outFields=notes&f=json")!).0)
        #expect(query["features"]?[0]?["attributes"]?["notes"] == "crew", "the crew's value reached the server")
        let after = try JSONValue.parse(Data(try await outpost(["conflicts", replica, "--json"]).stdout.utf8))
        #expect(after["conflicts"]?[0]?["state"] == "resolved" && after["conflicts"]?[0]?["resolution"] == "ours")
        #expect(try await outpost(["conflicts", replica, "--open"]).stdout.contains("no conflicts"))
        _ = await server.stop()
    }

    /// `outpost service migrate`: additive steps print and bump the version; the same schema again
    /// changes nothing; a drop without --allow-drop fails in one line and changes nothing.
    @Test(.scaledTimeLimit(minutes: 1))
    func serviceMigrateFollowsTheContract() async throws {
        let service = try await TestService.fieldInspection(.sqlite)
        try await service.backend.close()
        let dir = TemporaryDirectory()
        var json = try JSONValue.parse(try Data(contentsOf: Repository.sampleData("field_inspection/service.json")))
        guard case .object(var root) = json, case .array(var layers)? = root["layers"], case .object(var points) = layers[0],
            case .array(var fields)? = points["fields"]
        else { throw ReaderMismatch(description: "unexpected sample schema") }
        fields.append(["name": "photo_count", "type": "SmallInteger", "nullable": true])
        points["fields"] = .array(fields)
        layers[0] = .object(points)
        root["layers"] = .array(layers)
        json = .object(root)
        let added = dir.file("added.json")
        try Data(json.jsonString.utf8).write(to: added)

        let first = try await outpost(["service", "migrate", service.file.path, "--schema", added.path, "--json"])
        #expect(first.status == 0, "\(first.stderr)")
        let answer = try JSONValue.parse(Data(first.stdout.utf8))
        #expect(answer["schemaVersion"] == 2 && answer["steps"] == ["add field photo_count to layer 0"])
        let again = try await outpost(["service", "migrate", service.file.path, "--schema", added.path])
        #expect(again.status == 0 && again.stdout.contains("unchanged (version 2)"), "\(again.stdout)")
        let dropped = try await outpost(["service", "migrate", service.file.path, "--schema", Repository.sampleData("field_inspection/service.json").path])
        #expect(dropped.status == 1 && dropped.stderr.split(separator: "\n").count == 1 && dropped.stderr.contains("--allow-drop"), "\(dropped.stderr)")
        let info = try await ExternalTools.run("ogrinfo", ["-ro", "-so", service.file.path, "inspection_points"])
        #expect(info.succeeded && info.stdout.contains("photo_count"), "\(info.stderr)")
    }

    /// A 100 MB photo syncs up from one replica and down to another through `outpost sync`, each
    /// process's peak memory far below the photo's size (content streams in 1 MB chunks).
    @Test(.scaledTimeLimit(minutes: 3))
    func aHundredMegabyteAttachmentSyncsWithBoundedMemory() async throws {
        let service = try await TestService.fieldInspection(.sqlite)
        try await service.backend.close()
        let server = try await ServeProcess.start(service: service.file)
        let dir = TemporaryDirectory()
        let url = server.featureServer("field_inspection").absoluteString
        for name in ["crew", "office"] {
            let made = try await outpost(["replica", "create", "--url", url, "--layers", "0", "--attachments", "--out", dir.file("\(name).gpkg").path])
            #expect(made.succeeded, "\(made.stderr)")
        }
        // 100 MB of random bytes, made and hashed by other processes (the test's own threads stay
        // free for the tests running beside it), attached a megabyte at a time.
        let photo = dir.file("photo.bin")
        #expect(try await ExternalTools.run("sh", ["-c", "head -c 104857600 /dev/urandom > '\(photo.path)'"]).succeeded)
        let sha = String(try await ExternalTools.run("sha256sum", [photo.path]).stdout.prefix(64))
        let crew = try Geodatabase.open(at: dir.file("crew.gpkg"))
        let added = try await crew.table(named: "inspection_points").addAttachment(toFeature: 1, name: "photo.bin", contentType: "application/octet-stream", contentsOf: photo)
        try crew.close()

        /// Runs `outpost` and returns its peak anonymous (heap) memory and its peak resident set in
        /// MB, sampled from /proc every 10 ms. The resident set also counts pages of the GeoPackage
        /// that SQLite maps (at most its mmap_size, 128 MB) — file pages the kernel drops at will —
        /// so the bound is asserted on the heap.
        func peakMB(_ arguments: [String]) async throws -> (heap: Double, resident: Double) {
            let run = try await ExternalTools.run(ExternalTools.python, ["-c", """
                import subprocess, sys, time
                p = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                anon = hwm = 0
                while p.poll() is None:
                    try:
                        for line in open(f"/proc/{p.pid}/status"):
                            if line.startswith("RssAnon:"): anon = max(anon, int(line.split()[1]))
                            if line.startswith("VmHWM:"): hwm = max(hwm, int(line.split()[1]))
                    except OSError:
                        pass
                    time.sleep(0.01)
                out, err = p.communicate()
                sys.stderr.write(err)
                print(anon, hwm)
                sys.exit(p.returncode)
                """, Repository.outpostExecutable.path] + arguments)
            #expect(run.succeeded, "\(run.stderr)")
            let numbers = run.stdout.split(separator: " ").compactMap { Double($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
            return (numbers.first.map { $0 / 1024 } ?? .infinity, numbers.last.map { $0 / 1024 } ?? .infinity)
        }
        let up = try await peakMB(["sync", dir.file("crew.gpkg").path])
        let status = try JSONValue.parse(Data(try await outpost(["status", dir.file("crew.gpkg").path, "--json"]).stdout.utf8))
        #expect(status["lastSync"]?.stringValue != nil)
        let down = try await peakMB(["sync", dir.file("office.gpkg").path])
        print("100 MB attachment: peak heap upload \(Int(up.heap)) MB, download \(Int(down.heap)) MB; peak resident \(Int(up.resident)) / \(Int(down.resident)) MB")
        if Sanitized.memoryIsMeasurable {
            #expect(up.heap < 64 && down.heap < 64, "peak heap: upload \(up.heap) MB, download \(down.heap) MB for a 100 MB attachment")
            #expect(up.resident < 400 && down.resident < 400, "peak resident: upload \(up.resident) MB, download \(down.resident) MB")
        }
        let received = try await ExternalTools.run(ExternalTools.python, ["-c", """
            import hashlib, sqlite3, sys
            row = sqlite3.connect(sys.argv[1]).execute("SELECT data FROM attachments WHERE globalid = ?", (sys.argv[2],)).fetchone()
            print(hashlib.sha256(row[0]).hexdigest() if row else "missing")
            """, dir.file("office.gpkg").path, added.globalID])
        #expect(received.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == sha, "byte-identical on the other replica")
        _ = await server.stop()
    }
}
