import Foundation
import OutpostCore
import OutpostProtocol
import OutpostSQLiteService
import OutpostServer
import OutpostStorage
import OutpostSync
import OutpostSyncService

/// Sync by delta files (issue 25): for N edits of a point layer (60% moved and relabelled, 30%
/// added, 10% deleted), the edits file's size per edit next to the same edits as a pygeodiff
/// changeset (between the replica before and after, the change-capture tables left out of both)
/// and as gzipped GeoJSON (the added and updated features whole, the deleted ones by id), in the
/// same run; then the export, service import and reply import times. Target: smaller than both.
/// (The reply carries the answer only: the service leaves the replica's own edits out of its
/// feed.)
enum DeltaBenchmark {
    static func run(counts: [Int], workDirectory: URL) async throws {
        var rows: [[String]] = []
        for count in counts {
            let folder = workDirectory.appendingPathComponent("delta-\(count)")
            try? FileManager.default.removeItem(at: folder)
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            rows.append(try await roundTrip(edits: count, in: folder))
        }
        printTable(
            "Delta files (release build; bytes per edit; seconds)",
            ["edits", "delta B/edit", "pygeodiff B/edit", "gzipped GeoJSON B/edit", "export s", "service import s", "reply import s", "files", "reply B/file"],
            rows)
    }

    static func roundTrip(edits count: Int, in folder: URL) async throws -> [String] {
        let service = folder.appendingPathComponent("service.gpkg"), replica = folder.appendingPathComponent("replica.gpkg")
        let base = folder.appendingPathComponent("base.gpkg")
        try SyncBenchmark.createService(count: count, at: service)
        let backend = try SQLiteServiceBackend(url: service)
        let request = ReplicaRequest(name: "crew", layers: [ReplicaInfo.Layer(id: 0, serverGen: 0, syncDirection: .bidirectional)])
        Geodatabase.removeFiles(at: replica)
        _ = try await backend.createReplica(request, serviceURL: "http://127.0.0.1/arcgis/rest/services/service/FeatureServer", format: .geopackage, writingTo: replica)
        Geodatabase.removeFiles(at: base)
        try FileManager.default.copyItem(at: replica, to: base)
        let made = try edit(replica, count: count)

        // The same edits two other ways, in Python (pygeodiff, gzip).
        let python = ProcessInfo.processInfo.environment["OUTPOST_PYTHON"] ?? "python3"
        let peers = try measure([python, "-c", """
            import sys, os, shutil, sqlite3, json, gzip, pygeodiff
            base, edited, folder = sys.argv[1], sys.argv[2], sys.argv[3]
            def plain(src, dst):
                shutil.copy(src, dst)
                db = sqlite3.connect(dst)
                names = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'outpost_%'")]
                for n in names: db.execute('DROP TABLE "%s"' % n)
                for (t,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'outpost_%'").fetchall():
                    db.execute('DROP TRIGGER "%s"' % t)
                db.commit(); db.close()
            a, b = os.path.join(folder, "gd-base.gpkg"), os.path.join(folder, "gd-edited.gpkg")
            plain(base, a); plain(edited, b)
            changeset = os.path.join(folder, "edits.geodiff")
            pygeodiff.GeoDiff().create_changeset(a, b, changeset)
            print("geodiff", os.path.getsize(changeset))
            # GeoJSON of the edits: added and updated features whole (from the edited replica).
            db = sqlite3.connect(edited)
            baseids = {r[0]: r[1:] for r in sqlite3.connect(a).execute("SELECT globalid, id_int, value, label, observed, ref, geom FROM points")}
            features = []
            for row in db.execute("SELECT globalid, id_int, value, label, observed, ref, geom FROM points"):
                old = baseids.get(row[0])
                if old is not None and tuple(old) == tuple(row[1:]): continue
                blob = row[6]
                # GeoPackage point: 8-byte header + envelope (flags), then WKB; x, y are its last 16 bytes.
                import struct
                x, y = struct.unpack("<dd", blob[-16:])
                features.append({"type": "Feature", "geometry": {"type": "Point", "coordinates": [x, y]},
                                 "properties": {"globalid": row[0], "id_int": row[1], "value": row[2], "label": row[3], "observed": row[4], "ref": row[5]}})
            present = {r[0] for r in db.execute("SELECT globalid FROM points")}
            for gid in sorted(set(baseids) - present):
                features.append({"type": "Feature", "geometry": None, "properties": {"globalid": gid, "deleted": True}})
            text = json.dumps({"type": "FeatureCollection", "features": features}).encode()
            print("geojson", len(gzip.compress(text, 6)), len(features))
            """, base.path, replica.path, folder.path])
        func peer(_ name: String) -> Double {
            Double(peers.output.split(separator: "\n").first { $0.hasPrefix(name + " ") }?.split(separator: " ")[1] ?? "") ?? .nan
        }

        // Rounds of at most 100,000 edits (the CLI's default: a replica holds one unanswered
        // batch, and a batch is sealed in memory), each a file out and a reply back.
        let gdb = try Geodatabase.open(at: replica)
        var size = 0.0, replySize = 0.0, exportSeconds = 0.0, serviceSeconds = 0.0, replySeconds = 0.0, applied = 0, changes = 0, rounds = 0
        while true {
            let editsFile = folder.appendingPathComponent("edits-\(rounds).delta"), replyFile = folder.appendingPathComponent("reply-\(rounds).delta")
            var start = Date()
            let exported = try await DeltaSync.exportEdits(from: gdb, to: editsFile, parameters: SyncGeodatabaseParameters(maxChangesPerBatch: 100_000))
            exportSeconds += Date().timeIntervalSince(start)
            guard exported.header.seq != nil else { break }
            start = Date()
            let imported = try await DeltaImport.importEdits(editsFile, into: backend, service: "service", reply: replyFile)
            serviceSeconds += Date().timeIntervalSince(start)
            start = Date()
            let reply = try await DeltaSync.importReply(into: gdb, from: replyFile)
            replySeconds += Date().timeIntervalSince(start)
            guard reply.acknowledged else { throw DeltaError("round \(rounds) was not acknowledged: \(reply)") }
            size += Double(try fileSize(editsFile))
            replySize += Double(try fileSize(replyFile))
            applied += imported.edits
            changes += imported.changes
            rounds += 1
            try? FileManager.default.removeItem(at: editsFile)
            try? FileManager.default.removeItem(at: replyFile)
        }
        try gdb.close()
        try await backend.close()
        guard applied == made else { throw DeltaError("the rounds applied \(applied) of \(made) edits") }
        let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        let peak = status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") }?.split(separator: " ").dropFirst().first ?? "0"
        print("\(made) edits: \(rounds) rounds, process peak so far \((Double(peak) ?? 0) / 1024) MB")
        let n = Double(made)
        return [
            String(made), format(size / n, 1), format(peer("geodiff") / n, 1), format(peer("geojson") / n, 1), format(exportSeconds, 3),
            format(serviceSeconds, 3), format(replySeconds, 3), String(rounds), format(replySize / Double(rounds), 0),
        ]
    }

    static func fileSize(_ url: URL) throws -> Int { try FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int ?? 0 }

    /// `count` edits on a `count`-feature replica: 60% moved and relabelled, 30% added, 10% deleted.
    static func edit(_ replica: URL, count: Int) throws -> Int {
        let gdb = try Geodatabase.open(at: replica)
        defer { try? gdb.close() }
        let updates = count * 6 / 10, inserts = count * 3 / 10, deletes = count - updates - inserts
        var random = FastRandomGenerator(seed: 11)
        try gdb.write { conn in
            let table = try conn.geodatabase.table(named: "points")
            var moved: [Feature] = []
            for i in 0..<updates {
                let (x, y) = ImportBenchmark.coordinates(i + 7)
                moved.append(Feature(objectID: Int64(i + 1), attributes: ["value": .double(Double(i) + 0.25), "label": .string("edited-\(i)")], geometry: .point(try Point(x: x, y: y))))
                if moved.count == 10_000 {
                    try table.update(moved, in: conn)
                    moved.removeAll(keepingCapacity: true)
                }
            }
            try table.update(moved, in: conn)
            try table.delete(objectIDs: (0..<deletes).map { Int64(count - $0) }, in: conn)
            var added: [Feature] = []
            for i in 0..<inserts {
                added.append(try SyncBenchmark.newPoint(count + i, label: "new-\(i)", random: &random))
                if added.count == 10_000 {
                    _ = try table.add(added, in: conn)
                    added.removeAll(keepingCapacity: true)
                }
            }
            _ = try table.add(added, in: conn)
        }
        return updates + inserts + deletes
    }
}
