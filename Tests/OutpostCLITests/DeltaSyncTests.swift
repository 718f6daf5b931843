import Foundation
import OutpostCore
import OutpostStorage
import OutpostTestSupport
import OutpostServiceTestSupport
import Testing

/// Sync by delta files (`outpost sync export`, `outpost service import-delta`, `outpost sync
/// import`): exactly once through the same ledger as HTTP sync, mixed with HTTP syncs on one
/// replica, and damaged or out-of-order files refused with nothing applied.
@Suite("outpost sync export / import, service import-delta")
struct DeltaSyncTests {
    /// The layer's rows (object id → notes) on the server, through its query endpoint.
    static func serverNotes(_ url: String) async throws -> [String: String] {
        let result = try await ExternalTools.run("curl", ["-s", "\(url)/0/query?where=1%3D1&outFields=globalid,notes&returnGeometry=false&f=json"])
        let features = try JSONValue.parse(Data(result.stdout.utf8))["features"]?.arrayValue ?? []
        var out: [String: String] = [:]
        for f in features {
            if let gid = f["attributes"]?["globalid"]?.stringValue { out[gid.lowercased()] = f["attributes"]?["notes"]?.stringValue ?? "" }
        }
        return out
    }

    /// The field-inspection service served from a file, a folder for the crew, the FeatureServer URL.
    static func served() async throws -> (TestService, ServeProcess, TemporaryDirectory, String) {
        let service = try await TestService.fieldInspection(.sqlite)
        try await service.backend.close()
        let server = try await ServeProcess.start(service: service.file)
        return (service, server, TemporaryDirectory(), server.featureServer("field_inspection").absoluteString)
    }

    static func status(_ replica: String) async throws -> JSONValue {
        try JSONValue.parse(Data(try await outpost(["status", replica, "--json"]).stdout.utf8))
    }

    @Test(.scaledTimeLimit(minutes: 4))
    func editsTravelByFileExactlyOnceAndMixWithHTTPSync() async throws {
        let (service, server, dir, url) = try await Self.served()
        defer { Task { await server.stop() } }
        let replica = dir.file("crew.gpkg").path
        let created = try await outpost(["replica", "create", "--url", url, "--layers", "0", "--out", replica])
        #expect(created.succeeded, "\(created.stderr)")

        // Edits in the field, out on a file.
        #expect(try await SyncCommandTests.sqlite(replica, "UPDATE inspection_points SET notes = 'by file' WHERE objectid IN (1, 2);").succeeded)
        let edits = dir.file("edits.delta").path
        let exported = try await outpost(["sync", "export", replica, "--out", edits, "--json"])
        #expect(exported.succeeded, "\(exported.stderr)")
        let header = try JSONValue.parse(Data(exported.stdout.utf8))
        #expect(header["seq"] == 1 && header["edits"] == 2 && header["kind"] == "edits")
        // Still pending until the reply comes back; exporting again gives the same batch.
        #expect(try await Self.status(replica)["layers"]?[0]?["pending"]?["updates"] == 2)
        let again = dir.file("edits-again.delta").path
        #expect(try await outpost(["sync", "export", replica, "--out", again]).succeeded)
        let first = try JSONValue.parse(Data(try await outpost(["sync", "export", replica, "--out", again, "--json"]).stdout.utf8))
        #expect(first["batchHash"] == header["batchHash"])

        // The office imports it (the server keeps running: SQLite takes both), twice.
        let reply = dir.file("reply.delta").path, reply2 = dir.file("reply2.delta").path
        let imported = try await outpost(["service", "import-delta", service.file.path, edits, "--out", reply, "--json"])
        #expect(imported.succeeded, "\(imported.stderr)")
        #expect(try JSONValue.parse(Data(imported.stdout.utf8))["replayed"] == false)
        let twice = try await outpost(["service", "import-delta", service.file.path, again, "--out", reply2, "--json"])
        #expect(twice.succeeded, "\(twice.stderr)")
        #expect(try JSONValue.parse(Data(twice.stdout.utf8))["replayed"] == true)
        let notes = try await Self.serverNotes(url)
        #expect(notes.values.filter { $0 == "by file" }.count == 2)

        // The reply back in the field: acknowledged once; the replayed reply is refused as old.
        let applied = try await outpost(["sync", "import", replica, reply, "--json"])
        #expect(applied.succeeded, "\(applied.stderr)")
        #expect(try JSONValue.parse(Data(applied.stdout.utf8))["acknowledged"] == true)
        #expect(try await Self.status(replica)["layers"]?[0]?["pending"]?["updates"] == 0)
        let replayed = try await outpost(["sync", "import", replica, reply2])
        #expect(!replayed.succeeded && replayed.stderr.contains("nothing in it is new"), "\(replayed.stderr)")

        // The office edits over HTTP; the crew has no link: an empty export fetches the change.
        let feature = try JSONValue.parse(Data(try await ExternalTools.run("curl", ["-s", "\(url)/0/query?where=objectid%3D5&outFields=objectid&f=json"]).stdout.utf8))
        #expect(feature["features"]?[0] != nil)
        let edit = #"[{"attributes":{"objectid":5,"notes":"from the office"}}]"#
        let office = try await applyEdits(url, layer: 0, "updates", edit)
        #expect(office["updateResults"]?[0]?["success"] == true, "\(office)")
        let ask = dir.file("ask.delta").path, answer = dir.file("answer.delta").path
        let asked = try await outpost(["sync", "export", replica, "--out", ask])
        #expect(asked.succeeded && asked.stdout.contains("nothing to upload"), "\(asked.stdout)")
        #expect(try await outpost(["service", "import-delta", service.file.path, ask, "--out", answer]).succeeded)
        let fetched = try JSONValue.parse(Data(try await outpost(["sync", "import", replica, answer, "--json"]).stdout.utf8))
        #expect(fetched["changes"]?.integerValue ?? 0 >= 1, "\(fetched)")
        let local = try await ExternalTools.run("sqlite3", [replica, "SELECT notes FROM inspection_points WHERE objectid = 5"])
        #expect(local.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "from the office")
        // The old reply again.
        let stale = try await outpost(["sync", "import", replica, reply])
        #expect(!stale.succeeded && stale.stderr.contains("imported before"), "\(stale.stderr)")

        // Mixed with HTTP: a sync over the link finds nothing left and both sides equal.
        #expect(try await SyncCommandTests.sqlite(replica, "UPDATE inspection_points SET notes = 'by http' WHERE objectid = 3;").succeeded)
        let http = try JSONValue.parse(Data(try await outpost(["sync", replica, "--json"]).stdout.utf8))
        #expect(http["uploaded"]?["updates"] == 1 && http["checksumsMatch"] == true, "\(http)")
        let finalNotes = try await Self.serverNotes(url)
        #expect(finalNotes.values.filter { $0 == "by file" }.count == 2 && finalNotes.values.contains("by http"))
        // The next file carries batch 3 (1 by file, 2 over HTTP): one ledger.
        #expect(try await SyncCommandTests.sqlite(replica, "UPDATE inspection_points SET notes = 'third' WHERE objectid = 4;").succeeded)
        let third = try JSONValue.parse(Data(try await outpost(["sync", "export", replica, "--out", dir.file("third.delta").path, "--json"]).stdout.utf8))
        #expect(third["seq"] == 3, "\(third)")
    }

    @Test(.scaledTimeLimit(minutes: 3))
    func damagedForeignAndOutOfOrderFilesAreRefused() async throws {
        let (service, server, dir, url) = try await Self.served()
        defer { Task { await server.stop() } }
        let a = dir.file("a.gpkg").path, b = dir.file("b.gpkg").path
        #expect(try await outpost(["replica", "create", "--url", url, "--layers", "0", "--out", a]).succeeded)
        #expect(try await outpost(["replica", "create", "--url", url, "--layers", "0", "--out", b]).succeeded)
        #expect(try await SyncCommandTests.sqlite(a, "UPDATE inspection_points SET notes = 'a' WHERE objectid = 1;").succeeded)
        let edits = dir.file("a.delta")
        #expect(try await outpost(["sync", "export", a, "--out", edits.path]).succeeded)

        // One byte changed anywhere: refused before anything is applied.
        var bytes = try Data(contentsOf: edits)
        bytes[bytes.count / 2] ^= 0x5A
        let damaged = dir.file("damaged.delta")
        try bytes.write(to: damaged)
        let refused = try await outpost(["service", "import-delta", service.file.path, damaged.path, "--out", dir.file("r.delta").path])
        #expect(!refused.succeeded && refused.stderr.contains("damaged"), "\(refused.stderr)")
        let cut = dir.file("cut.delta")
        try bytes.prefix(bytes.count - 40).write(to: cut)
        #expect(try await outpost(["service", "import-delta", service.file.path, cut.path, "--out", dir.file("r.delta").path]).stderr.contains("damaged"))
        try Data("not a delta".utf8).write(to: dir.file("text.delta"))
        #expect(try await outpost(["service", "import-delta", service.file.path, dir.file("text.delta").path, "--out", dir.file("r.delta").path]).stderr.contains("not a delta file"))
        #expect(try await Self.serverNotes(url).values.contains("a") == false)

        // A reply is for its replica only; an edits file is not a reply.
        let reply = dir.file("reply.delta").path
        #expect(try await outpost(["service", "import-delta", service.file.path, edits.path, "--out", reply]).succeeded)
        let foreign = try await outpost(["sync", "import", b, reply])
        #expect(!foreign.succeeded && foreign.stderr.contains("answers replica"), "\(foreign.stderr)")
        let wrongKind = try await outpost(["sync", "import", a, edits.path])
        #expect(!wrongKind.succeeded && wrongKind.stderr.contains("imports replies"), "\(wrongKind.stderr)")
        let reversed = try await outpost(["service", "import-delta", service.file.path, reply, "--out", dir.file("x.delta").path])
        #expect(!reversed.succeeded && reversed.stderr.contains("imports edits files"), "\(reversed.stderr)")

        // Replica a loses its reply and edits again: the file still carries batch 1 (sealed,
        // unanswered), so the service replays; the reply then acknowledges it.
        #expect(try await SyncCommandTests.sqlite(a, "UPDATE inspection_points SET notes = 'a2' WHERE objectid = 2;").succeeded)
        let resent = dir.file("resent.delta").path
        let header = try JSONValue.parse(Data(try await outpost(["sync", "export", a, "--out", resent, "--json"]).stdout.utf8))
        #expect(header["seq"] == 1)
        let replay = try JSONValue.parse(Data(try await outpost(["service", "import-delta", service.file.path, resent, "--out", dir.file("reply-again.delta").path, "--json"]).stdout.utf8))
        #expect(replay["replayed"] == true)
        #expect(try await outpost(["sync", "import", a, dir.file("reply-again.delta").path]).succeeded)
        // Batch 2 (the later edit) is next.
        let next = try JSONValue.parse(Data(try await outpost(["sync", "export", a, "--out", dir.file("two.delta").path, "--json"]).stdout.utf8))
        #expect(next["seq"] == 2)
        // A copy of replica a that diverged: its own batch 2 differs from the one applied.
        #expect(try await outpost(["service", "import-delta", service.file.path, dir.file("two.delta").path, "--out", dir.file("two-reply.delta").path]).succeeded)
        let copy = dir.file("copy.gpkg").path
        try FileManager.default.copyItem(atPath: a, toPath: copy)
        #expect(try await ExternalTools.run("sqlite3", [copy, "DELETE FROM outpost_batches"]).succeeded)
        #expect(try await SyncCommandTests.sqlite(copy, "UPDATE inspection_points SET notes = 'diverged' WHERE objectid = 3;").succeeded)
        let divergent = try await outpost(["sync", "export", copy, "--out", dir.file("divergent.delta").path])
        #expect(divergent.succeeded, "\(divergent.stderr)")
        let conflict = try await outpost(["service", "import-delta", service.file.path, dir.file("divergent.delta").path, "--out", dir.file("d.delta").path])
        #expect(!conflict.succeeded && conflict.stderr.contains("already applied with different content"), "\(conflict.stderr)")
    }

    /// Replies imported out of order, a replica restored from an older copy, and a batch the
    /// service rolls back: each said plainly, with nothing applied that should not be.
    @Test(.scaledTimeLimit(minutes: 3))
    func repliesOutOfOrderAndRolledBackBatches() async throws {
        let (service, server, dir, url) = try await Self.served()
        defer { Task { await server.stop() } }
        let replica = dir.file("crew.gpkg").path, older = dir.file("older.gpkg").path
        #expect(try await outpost(["replica", "create", "--url", url, "--layers", "0", "--out", replica]).succeeded)
        #expect(try await SyncCommandTests.sqlite(replica, "UPDATE inspection_points SET notes = 'one' WHERE objectid = 1;").succeeded)
        func file(_ name: String) -> String { dir.file(name).path }
        #expect(try await outpost(["sync", "export", replica, "--out", file("e1.delta")]).succeeded)
        try FileManager.default.copyItem(atPath: replica, toPath: older)
        #expect(try await outpost(["service", "import-delta", service.file.path, file("e1.delta"), "--out", file("r1.delta")]).succeeded)
        // The office edits between two imports of the same file: two replies, the second longer.
        let edit = #"[{"attributes":{"objectid":7,"notes":"office"}}]"#
        #expect(try await applyEdits(url, layer: 0, "updates", edit)["updateResults"]?[0]?["success"] == true)
        #expect(try await outpost(["service", "import-delta", service.file.path, file("e1.delta"), "--out", file("r2.delta")]).succeeded)
        #expect(try await outpost(["sync", "import", replica, file("r1.delta")]).succeeded)
        let late = try await outpost(["sync", "import", replica, file("r2.delta")])
        #expect(!late.succeeded && late.stderr.contains("export the edits again"), "\(late.stderr)")
        // The next round brings the office's edit.
        #expect(try await outpost(["sync", "export", replica, "--out", file("e2.delta")]).succeeded)
        #expect(try await outpost(["service", "import-delta", service.file.path, file("e2.delta"), "--out", file("r3.delta")]).succeeded)
        #expect(try await outpost(["sync", "import", replica, file("r3.delta")]).succeeded)
        let notes = try await ExternalTools.run("sqlite3", [replica, "SELECT notes FROM inspection_points WHERE objectid = 7"])
        #expect(notes.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "office")
        // A copy restored from before r1: r3 starts past it.
        let restored = try await outpost(["sync", "import", older, file("r3.delta")])
        #expect(!restored.succeeded && restored.stderr.contains("import the earlier reply first"), "\(restored.stderr)")
        #expect(try await outpost(["sync", "import", older, file("r1.delta")]).succeeded)

        // An invalid edit: the service rolls the batch back; the reply withdraws it and the
        // edits stay pending.
        #expect(try await SyncCommandTests.sqlite(replica, "UPDATE inspection_points SET asset_type = 'spaceship' WHERE objectid = 4;").succeeded)
        #expect(try await outpost(["sync", "export", replica, "--out", file("bad.delta")]).succeeded)
        let rolled = try await outpost(["service", "import-delta", service.file.path, file("bad.delta"), "--out", file("bad-reply.delta"), "--json"])
        #expect(rolled.succeeded, "\(rolled.stderr)")
        #expect(try JSONValue.parse(Data(rolled.stdout.utf8))["rejected"] == true)
        let withdrawn = try await outpost(["sync", "import", replica, file("bad-reply.delta")])
        #expect(withdrawn.status == 2 && withdrawn.stdout.contains("rolled back"), "\(withdrawn.stdout) \(withdrawn.stderr)")
        #expect(try await Self.status(replica)["layers"]?[0]?["pending"]?["updates"] == 1)
        let fixed = try await SyncCommandTests.sqlite(replica, "UPDATE inspection_points SET asset_type = (SELECT asset_type FROM inspection_points WHERE objectid = 5) WHERE objectid = 4;")
        #expect(fixed.succeeded)
        #expect(try await outpost(["sync", replica]).succeeded)
    }

    /// Several replicas, each adding features with unique labels, sync at random by HTTP or by
    /// delta files — with files imported twice, replies lost, and replies imported late or out of
    /// order. At the end every replica equals the service and every added feature is there once.
    /// (A larger run belongs in Benchmarks; this one is seeded and small.)
    @Test(.scaledTimeLimit(minutes: 6), arguments: [UInt64(7), 8])
    func randomMixOfHTTPAndFileSyncsLosesAndDuplicatesNothing(seed: UInt64) async throws {
        let (service, server, dir, url) = try await Self.served()
        defer { Task { await server.stop() } }
        let crews = (0..<3).map { dir.file("crew\($0).gpkg").path }
        for crew in crews { #expect(try await outpost(["replica", "create", "--url", url, "--layers", "0", "--out", crew]).succeeded) }
        var rng = FastRandomGenerator(seed: seed)
        func pick(_ n: Int) -> Int { Int(rng.next() % UInt64(n)) }
        var added: [String] = []
        /// Replies written but not yet imported, per crew (oldest first).
        var waiting: [[String]] = [[], [], []]
        var refusals = 0
        for step in 0..<36 {
            let c = pick(crews.count), crew = crews[c]
            switch pick(6) {
            case 0, 1:
                // Field edits: a new feature with a label no one else uses, and a changed note.
                let label = "c\(c)-s\(step)"
                let gdb = try Geodatabase.open(at: URL(fileURLWithPath: crew))
                let table = try gdb.table(named: "inspection_points")
                let template = try #require(try await table.features().first)
                var feature = Feature(attributes: template.attributes, geometry: template.geometry)
                feature.attributes["objectid"] = nil
                feature.attributes["globalid"] = nil
                feature.attributes["asset_id"] = .string(label)
                _ = try await table.add([feature])
                try gdb.close()
                added.append(label)
            case 2:
                let sync = try await outpost(["sync", crew])
                #expect(sync.succeeded, "\(sync.stderr)")
            default:
                // By file: export, import at the office (sometimes twice), then the reply is
                // imported now, kept for later, or lost.
                let edits = dir.file("e\(step).delta").path, reply = dir.file("r\(step).delta").path
                #expect(try await outpost(["sync", "export", crew, "--out", edits]).succeeded)
                let office = try await outpost(["service", "import-delta", service.file.path, edits, "--out", reply])
                #expect(office.succeeded, "\(office.stderr)")
                if pick(3) == 0 { #expect(try await outpost(["service", "import-delta", service.file.path, edits, "--out", reply]).succeeded) }
                switch pick(4) {
                case 0: waiting[c].append(reply)
                case 1: break  // lost
                default: waiting[c].append(reply)
                    for file in waiting[c].shuffled(using: &rng) {
                        let imported = try await outpost(["sync", "import", crew, file])
                        if !imported.succeeded {
                            // Only the refusals that leave the replica as it was.
                            #expect(["nothing in it is new", "export the edits again", "import the earlier reply first"].contains { imported.stderr.contains($0) }, "\(imported.stderr)")
                            refusals += 1
                        }
                    }
                    waiting[c] = []
                }
            }
        }
        // Everyone syncs over the link twice: all edits in, all changes out.
        for _ in 0..<2 {
            for crew in crews {
                let sync = try await outpost(["sync", crew, "--json"])
                #expect(sync.succeeded, "\(sync.stderr)")
            }
        }
        let result = try await ExternalTools.run("curl", ["-s", "\(url)/0/query?where=1%3D1&outFields=asset_id&returnGeometry=false&f=json"])
        let onServer = (try JSONValue.parse(Data(result.stdout.utf8))["features"]?.arrayValue ?? []).compactMap { $0["attributes"]?["asset_id"]?.stringValue }
        for label in added { #expect(onServer.filter { $0 == label }.count == 1, "\(label) is on the server \(onServer.filter { $0 == label }.count) times") }
        let serverSorted = onServer.sorted()
        for crew in crews {
            let rows = try await ExternalTools.run("sqlite3", [crew, "SELECT asset_id FROM inspection_points"])
            let local = rows.stdout.split(separator: "\n").map(String.init).sorted()
            #expect(local == serverSorted, "\(crew) differs from the service")
            #expect(try await Self.status(crew)["layers"]?[0]?["pending"] == ["inserts": 0, "updates": 0, "deletes": 0])
        }
        #expect(added.count > 5)
        print("mixed run seed \(seed): \(added.count) features added, \(refusals) replies refused as out of order or old")
    }

    /// A scheduled update package: the service's changes since a generation within an area, for
    /// replicas with nothing to upload; imported by one at that generation and by one already
    /// past part of it; refused where edits wait.
    @Test(.scaledTimeLimit(minutes: 3))
    func updatePackagesReachReplicasWithNothingToUpload() async throws {
        let (service, server, dir, url) = try await Self.served()
        defer { Task { await server.stop() } }
        let first = dir.file("first.gpkg").path, later = dir.file("later.gpkg").path, busy = dir.file("busy.gpkg").path
        for replica in [first, busy] { #expect(try await outpost(["replica", "create", "--url", url, "--layers", "0", "--out", replica]).succeeded) }
        let info = try JSONValue.parse(Data(try await outpost(["replica", "info", first, "--json"]).stdout.utf8))
        let since = try #require(info["generation"]?.integerValue)
        func officeEdit(_ id: Int, _ note: String) async throws {
            let edit = #"[{"attributes":{"objectid":\#(id),"notes":"\#(note)"}}]"#
            let answer = try await applyEdits(url, layer: 0, "updates", edit)
            #expect(answer["updateResults"]?[0]?["success"] == true, "\(answer)")
        }
        try await officeEdit(1, "update one")
        // A replica made now already holds the first change.
        #expect(try await outpost(["replica", "create", "--url", url, "--layers", "0", "--out", later]).succeeded)
        try await officeEdit(2, "update two")
        let package = dir.file("updates.delta").path
        let made = try await outpost(["service", "export-updates", service.file.path, "--since", String(since), "--out", package, "--json"])
        #expect(made.succeeded, "\(made.stderr)")
        #expect(try JSONValue.parse(Data(made.stdout.utf8))["changes"] == 2)
        for replica in [first, later] {
            let imported = try await outpost(["sync", "import", replica, package, "--json"])
            #expect(imported.succeeded, "\(imported.stderr)")
            let notes = try await ExternalTools.run("sqlite3", [replica, "SELECT notes FROM inspection_points WHERE objectid IN (1, 2) ORDER BY objectid"])
            #expect(notes.stdout == "update one\nupdate two\n", "\(replica): \(notes.stdout)")
            // Then HTTP sync carries on from there: nothing left to fetch, checksums equal.
            let sync = try JSONValue.parse(Data(try await outpost(["sync", replica, "--json"]).stdout.utf8))
            #expect(sync["downloaded"] == ["inserts": 0, "updates": 0, "deletes": 0] && sync["checksumsMatch"] == true, "\(sync)")
        }
        #expect(try await SyncCommandTests.sqlite(busy, "UPDATE inspection_points SET notes = 'mine' WHERE objectid = 3;").succeeded)
        let refused = try await outpost(["sync", "import", busy, package])
        #expect(!refused.succeeded && refused.stderr.contains("edits waiting to upload"), "\(refused.stderr)")
        // An area far from every feature: the changed features come only as leaving it (a
        // replica of that area drops them if it had them), and a replica there stays as it was.
        let far = dir.file("far.gpkg").path
        #expect(try await outpost(["replica", "create", "--url", url, "--layers", "0", "--extent", "0,0,1,1", "--out", far]).succeeded)
        let farSince = try #require(try JSONValue.parse(Data(try await outpost(["replica", "info", far, "--json"]).stdout.utf8))["generation"]?.integerValue)
        try await officeEdit(3, "update three")
        let areaPackage = dir.file("area.delta").path
        #expect(try await outpost(["service", "export-updates", service.file.path, "--since", String(farSince), "--area", "0,0,1,1", "--out", areaPackage]).succeeded)
        #expect(try await outpost(["sync", "import", far, areaPackage]).succeeded)
        let farRows = try await ExternalTools.run("sqlite3", [far, "SELECT count(*) FROM inspection_points"])
        #expect(farRows.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "0")
        let bad = try await outpost(["service", "export-updates", service.file.path, "--since", "999999", "--out", dir.file("x.delta").path])
        #expect(!bad.succeeded && bad.stderr.contains("is not a generation"), "\(bad.stderr)")
    }
}

