import Foundation
import GRDB
import OutpostCore
import OutpostTestSupport
import Testing

@testable import OutpostStorage

@Suite("Change capture")
struct ChangeCaptureTests {
    @Test func ownEditsAreCapturedAndCoalesced() async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.fieldInspection(in: dir)
        let table = try gdb.table(named: "inspection_points")
        #expect(try await table.pendingChanges() == PendingChanges())
        let added = try await table.add([FeatureTableEditTests.validPoint(), FeatureTableEditTests.validPoint()])
        try await table.update([Feature(objectID: added[0].objectID, attributes: ["notes": .string("updated after insert")])])
        try await table.delete(objectIDs: [added[1].objectID!])  // insert + delete: nothing to sync
        try await table.update([Feature(objectID: 1, attributes: ["notes": .string("a")])])
        try await table.update([Feature(objectID: 1, geometry: FeatureTableEditTests.point(-122.61, 45.51))])
        try await table.update([Feature(objectID: 2, attributes: ["condition": .integer(5)])])
        try await table.delete(objectIDs: [2, 3])
        // A no-op update is not an edit.
        let unchanged = try #require(try await table.feature(objectID: 4))
        try await table.update([Feature(objectID: 4, attributes: ["notes": unchanged["notes"]!])])
        let pending = try await table.pendingChanges()
        #expect(pending == PendingChanges(inserts: 1, updates: 1, deletes: 2))

        let changes = try await gdb.read { conn in try conn.capturedChanges(table: "inspection_points") }
        #expect(changes.count == 9)
        let geometryUpdate = try #require(changes.first { $0.objectID == 1 && $0.changedColumns == ["geom"] })
        let oldGeometry = try #require(geometryUpdate.oldGeometry)
        #expect(try GeoPackageBinary.decode(oldGeometry).geometry.type == .point)
        let noteUpdate = try #require(changes.first { $0.objectID == 1 && $0.changedColumns == ["notes"] })
        #expect(noteUpdate.oldValues.keys.sorted() == ["notes"])
        let delete = try #require(changes.first { $0.operation == .delete && $0.objectID == 3 })
        #expect(delete.oldValues["asset_id"] != nil && delete.oldGeometry != nil)
        #expect(changes.allSatisfy { $0.globalID.flatMap(GlobalID.normalized) != nil })
        #expect(changes.allSatisfy { GeoPackageDate.parse($0.editedAt) != nil })
        try gdb.close()
    }

    @Test func aSealReadsEachFeaturesChangesTogetherInSQLitesOrder() async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.fieldInspection(in: dir)
        let table = try gdb.table(named: "inspection_points")
        let added = try await table.add((0..<40).map { _ in FeatureTableEditTests.validPoint() })
        for round in 0..<3 {
            for feature in added.shuffled().prefix(25) {
                try await table.update([Feature(objectID: feature.objectID, attributes: ["notes": .string("round \(round)")])])
            }
        }
        try await table.delete(objectIDs: [added[3].objectID!, 2, 3])
        let last = try await gdb.read { try $0.lastChangeID() }
        let sorted = try await gdb.read { conn in try conn.capturedChanges(upTo: last, after: 0, tables: ["inspection_points"]) }
        let bySQLite = try await gdb.read { conn in
            try conn.capturedChanges(where: "change_id <= ?", arguments: [.integer(last)], order: "table_name, globalid, change_id")
        }
        #expect(sorted.count == bySQLite.count && sorted.count > 100)
        #expect(sorted == bySQLite)
        // A window after a change id leaves the older rows out, in the same order.
        let after = sorted.map(\.id).sorted()[50]
        let window = try await gdb.read { conn in try conn.capturedChanges(upTo: last, after: after, tables: ["inspection_points"]) }
        #expect(window == sorted.filter { $0.id > after })
        try gdb.close()
    }

    /// A seal's span of many rows is read in two halves at once, the older on a reader of the
    /// committed data: the rows are those one read on the writer gives, in the same order. Inside
    /// an explicit transaction (its change rows not committed, so no reader sees them) the writer
    /// reads them all.
    @Test func aLargeSpanReadInHalvesGivesTheRowsOfOneRead() async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.fieldInspection(in: dir)
        let table = try gdb.table(named: "inspection_points")
        let added = try await table.add((0..<2_500).map { _ in FeatureTableEditTests.validPoint() })
        try await table.update(added.shuffled().prefix(2_000).map { Feature(objectID: $0.objectID, attributes: ["notes": .string("changed")]) })
        let tables = ["inspection_points"]
        func bothReads() async throws -> (halves: [CapturedChange], whole: [CapturedChange], span: GeodatabaseConnection.SealSpan) {
            try await gdb.write { conn in
                let span = try #require(try conn.sealSpan(maxChanges: 100_000, tables: tables))
                return (try conn.capturedChanges(in: span, tables: tables), try conn.capturedChanges(upTo: span.limit, tables: tables), span)
            }
        }
        let halvedBefore = GeodatabaseConnection.halvedReads.withLock { $0 }
        let (halves, whole, span) = try await bothReads()
        #expect(GeodatabaseConnection.halvedReads.withLock { $0 } > halvedBefore, "read in halves")
        #expect(span.count >= GeodatabaseConnection.halvedReadRows && span.count == whole.count)
        #expect(halves == whole)
        // A span after a change id, and a small one (read on the writer alone).
        try await gdb.write { conn in
            let later = try #require(try conn.sealSpan(maxChanges: 4_200, tables: tables, after: whole[0].id))
            #expect(try conn.capturedChanges(in: later, tables: tables) == conn.capturedChanges(upTo: later.limit, after: whole[0].id, tables: tables))
            let small = try #require(try conn.sealSpan(maxChanges: 10, tables: tables))
            #expect(try conn.capturedChanges(in: small, tables: tables) == conn.capturedChanges(upTo: small.limit, tables: tables))
        }

        try gdb.beginTransaction()
        try await table.update(added.prefix(30).map { Feature(objectID: $0.objectID, attributes: ["notes": .string("uncommitted")]) })
        try await gdb.write { conn in try conn.execute("DELETE FROM outpost_changes WHERE change_id IN (SELECT change_id FROM outpost_changes ORDER BY change_id LIMIT 30)") }
        let (inside, insideWhole, insideSpan) = try await bothReads()
        #expect(insideSpan.count == span.count, "30 rows deleted and 30 added, all uncommitted")
        let newest = try #require(whole.map(\.id).max())
        #expect(inside.filter { $0.id > newest }.count == 30, "the transaction's own rows")
        #expect(inside == insideWhole)
        try gdb.rollback()
        try gdb.close()
    }

    /// An acknowledgement deletes its batch's change rows. When they are all the table holds, it
    /// empties the table in one step (a few WAL frames instead of one per leaf page), and change
    /// ids go on growing; rows of another table, or after the batch, stay.
    @Test func anAcknowledgementCoveringEveryRowEmptiesTheTableInOneStep() async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.fieldInspection(in: dir)
        let deferral = gdb.deferCheckpoints()
        defer { deferral.end() }
        let table = try gdb.table(named: "inspection_points")
        let tables = ["inspection_points"]
        func ids() async throws -> [Int64] { try await gdb.read { try Int64.fetchAll($0.db, sql: "SELECT change_id FROM outpost_changes ORDER BY change_id") } }
        let added = try await table.add((0..<3_000).map { _ in FeatureTableEditTests.validPoint() })
        let last = try await gdb.read { try $0.lastChangeID() }
        let wal = gdb.url.path + "-wal"
        func walBytes() throws -> Int { (try FileManager.default.attributesOfItem(atPath: wal)[.size] as? NSNumber)?.intValue ?? 0 }
        let before = try walBytes()
        try await gdb.write { conn in try conn.deleteChangeRows(upTo: last, of: tables) }
        let frames = (try walBytes() - before) / (4096 + 24)
        #expect(frames < 20, "the delete wrote \(frames) pages")
        #expect(try await ids().isEmpty)

        // Ids go on after the emptied table's.
        try await table.update([Feature(objectID: added[0].objectID, attributes: ["notes": .string("after")])])
        let next = try #require(try await ids().first)
        #expect(next > last)
        // Another table's row stays.
        try await gdb.write { conn in
            try conn.execute("INSERT INTO outpost_changes (table_name, fid, globalid, op) VALUES ('pipelines', 1, '{00000000-0000-0000-0000-000000000001}', 'update')")
        }
        let other = try #require(try await ids().last)
        try await gdb.write { conn in try conn.deleteChangeRows(upTo: other, of: tables) }
        #expect(try await ids() == [other])
        // So do the rows after the batch.
        try await table.update((1..<4).map { Feature(objectID: added[$0].objectID, attributes: ["notes": .string("later")]) })
        let after = try await ids()
        try await gdb.write { conn in try conn.deleteChangeRows(upTo: after[1], of: tables + ["pipelines"]) }
        #expect(try await ids() == Array(after.dropFirst(2)))
        try gdb.close()
    }

    /// A batch's span: the oldest change rows of its tables after `after`, at most `maxChanges`
    /// of them; its limit is the last one's id, its count how many there are (one pass over
    /// the ids answers both; other tables' rows never count).
    @Test func aBatchsSpanIsTheOldestRowsOfItsTables() async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.fieldInspection(in: dir)
        let table = try gdb.table(named: "inspection_points")
        let added = try await table.add((0..<30).map { _ in FeatureTableEditTests.validPoint() })
        for feature in added.prefix(12) {
            try await table.update([Feature(objectID: feature.objectID, attributes: ["notes": .string("changed")])])
        }
        let ids = try await gdb.read { conn in
            try conn.capturedChanges(where: "table_name = 'inspection_points'", arguments: [], order: "change_id").map(\.id)
        }
        #expect(ids.count == 42)
        for after in [Int64(0), ids[9], ids[41]] {
            let rest = ids.filter { $0 > after }
            for maxChanges in [1, 5, rest.count, rest.count + 7] {
                let span = try await gdb.read { conn in try conn.sealSpan(maxChanges: maxChanges, tables: ["inspection_points"], after: after) }
                let limit = try await gdb.read { conn in try conn.sealLimit(maxChanges: maxChanges, tables: ["inspection_points"], after: after) }
                let expected = rest.prefix(maxChanges)
                #expect(span?.limit == expected.last && span?.count == (expected.isEmpty ? nil : expected.count))
                #expect(limit == expected.last)
            }
        }
        #expect(try await gdb.read { conn in try conn.sealSpan(maxChanges: 100, tables: ["no_such_table"]) } == nil)
        #expect(try await gdb.read { conn in try conn.sealSpan(maxChanges: 100, tables: []) } == nil)
        try gdb.close()
    }

    @Test func sortingByFeatureAgreesWithTheRowsOwnOrder() {
        // Global ids sharing their first 16 bytes or more, a prefix of another, empty, null, and
        // non-ASCII table names: the keys decide only where they differ.
        let gids: [String?] = [
            nil, "", "{AAAAAAAA-AAAA-AAAA-0001}", "{AAAAAAAA-AAAA-AAAA-0002}", "{AAAAAAAA-AAAA-A", "{AAAAAAAA-AAAA-AB", "{0}", "{ff}", "é-1", "e-1",
        ]
        let tables = ["points", "Zones", "pölder", "lines"]
        var random = SystemRandomNumberGenerator()
        var changes: [CapturedChange] = []
        for id in 1...400 {
            changes.append(CapturedChange(
                id: Int64(id), table: tables.randomElement(using: &random)!, objectID: Int64(id), globalID: gids.randomElement(using: &random)!,
                operation: .update, changedColumns: [], oldValues: [:], oldGeometry: nil, editedAt: "", baseGeneration: nil))
        }
        changes.shuffle(using: &random)
        let expected = changes.sorted(by: CapturedChange.precedesByFeature)
        #expect(CapturedChange.sortedByFeature(changes).map(\.id) == expected.map(\.id))
        #expect(CapturedChange.sortedByFeature([]).isEmpty)
    }

    @Test func theSealsReaderFindsAFeatureByItsObjectIDOrElseByItsGlobalID() async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.fieldInspection(in: dir)
        let table = try gdb.table(named: "inspection_points")
        let features = try await table.features()
        let (a, b) = (features[0], features[1])
        let gidA = try #require(a.globalID), gidB = try #require(b.globalID)
        try await gdb.read { conn in
            var byGlobalID = try FeatureTable.CurrentValuesReader(table, in: conn)
            var reader = try FeatureTable.CurrentValuesReader(table, in: conn)
            #expect(try byGlobalID.read(gidA))
            // Its own object id, another feature's, one no feature has: the same values.
            for objectID in [a.objectID!, b.objectID!, 987_654] {
                #expect(try reader.read(gidA, objectID: objectID))
                #expect(reader.values == byGlobalID.values && reader.geometry == byGlobalID.geometry)
            }
            #expect(try byGlobalID.read(gidB))
            #expect(try reader.read(gidB, objectID: b.objectID!))
            #expect(reader.values == byGlobalID.values && reader.geometry == byGlobalID.geometry)
            #expect(try !reader.read("{00000000-0000-0000-0000-000000000001}", objectID: a.objectID!))
        }
        try gdb.close()
    }

    @Test func silencedCaptureRecordsNothingAndAlwaysComesBack() async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.fieldInspection(in: dir)
        let table = try gdb.table(named: "inspection_points")
        try await gdb.write { conn in
            try conn.withChangeCaptureSilenced {
                _ = try table.add([FeatureTableEditTests.validPoint()], in: conn)
                try table.update([Feature(objectID: 1, attributes: ["notes": .string("downloaded")])], in: conn)
                try table.delete(objectIDs: [2], in: conn)
            }
        }
        #expect(try await table.pendingChanges() == PendingChanges())
        // A failure inside the silenced block rolls the flag back with the transaction.
        await #expect(throws: StorageError.self) {
            try await gdb.write { conn in
                try conn.withChangeCaptureSilenced {
                    try table.delete(objectIDs: [99_999], in: conn)
                }
            }
        }
        try await table.update([Feature(objectID: 1, attributes: ["notes": .string("local")])])
        #expect(try await table.pendingChanges().updates == 1)
        #expect(throws: StorageError.self) { try gdb.read { conn in try conn.withChangeCaptureSilenced {} } }
        try gdb.close()
    }

    @Test func captureTriggersSetAsideForALargeSilencedWriteComeBackUnchanged() async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.fieldInspection(in: dir)
        let table = try gdb.table(named: "inspection_points")
        let triggersSQL = "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'inspection_points' ORDER BY name"
        @Sendable func triggers(_ conn: GeodatabaseConnection) throws -> [String] {
            try Row.fetchAll(conn.db, sql: triggersSQL).map { "\($0[0] as String): \($0[1] as String)" }
        }
        let before = try await gdb.read(triggers)
        let capture = ChangeCapture.writeTriggerNames(table: "inspection_points")
        #expect(capture.allSatisfy { name in before.contains { $0.hasPrefix(name + ":") } })
        let many = GeodatabaseConnection.captureSetAsideMinimum
        try await gdb.write { conn in
            try conn.withChangeCaptureSilenced {
                try conn.withCaptureTriggersSetAside(of: "inspection_points", expectedWrites: many) {
                    // Gone while the writes run (the global id guard stays)...
                    let during = try triggers(conn)
                    #expect(capture.allSatisfy { name in !during.contains { $0.hasPrefix(name + ":") } })
                    #expect(during.contains { $0.hasPrefix("outpost_inspection_points_globalid_immutable:") })
                    _ = try table.add([FeatureTableEditTests.validPoint()], in: conn)
                    try table.update([Feature(objectID: 1, attributes: ["notes": .string("downloaded")])], in: conn)
                    try table.delete(objectIDs: [2], in: conn)
                }
                // ...and back, word for word, before the transaction commits.
                #expect(try triggers(conn) == before)
                // Fewer writes leave them in place.
                let kept = try conn.withCaptureTriggersSetAside(of: "inspection_points", expectedWrites: many - 1) { try triggers(conn) }
                #expect(kept == before)
            }
            // Never while capture records: the edits must be captured.
            let capturing = try conn.withCaptureTriggersSetAside(of: "inspection_points", expectedWrites: many) { try triggers(conn) }
            #expect(capturing == before)
        }
        #expect(try await table.pendingChanges() == PendingChanges())
        // A failure inside restores them too (and the transaction rolls back).
        await #expect(throws: StorageError.self) {
            try await gdb.write { conn in
                try conn.withChangeCaptureSilenced {
                    try conn.withCaptureTriggersSetAside(of: "inspection_points", expectedWrites: many) {
                        try table.delete(objectIDs: [99_999], in: conn)
                    }
                    Issue.record("the delete of a missing feature should have failed")
                }
            }
        }
        #expect(try await gdb.read(triggers) == before)
        // Edits after them are captured as before.
        try await table.update([Feature(objectID: 1, attributes: ["notes": .string("local")])])
        _ = try await table.add([FeatureTableEditTests.validPoint()])
        try await table.delete(objectIDs: [3])
        #expect(try await table.pendingChanges() == PendingChanges(inserts: 1, updates: 1, deletes: 1))
        try gdb.close()
    }

    /// Edits by GDAL, the sqlite3 shell with SpatiaLite, and a DELETE from the plain shell are
    /// captured by the same triggers (docs/geopackage-extension.md, "Triggers").
    @Test func editsByOtherWritersAreCaptured() async throws {
        let dir = TemporaryDirectory()
        try SampleGeodatabases.fieldInspection(in: dir).close()
        let file = dir.file("field.gpkg")

        // GDAL appends a feature without a global id (the trigger gives it one), and its SQL
        // dialect updates in place.
        let (append, update) = try await OtherWriters.gdalAppendAndUpdate(file, scratch: dir)
        #expect(append.succeeded, "\(append.stderr)")
        #expect(!append.stderr.contains("Warning"), "\(append.stderr)")
        #expect(update.succeeded, "\(update.stderr)")
        // The sqlite3 shell with SpatiaLite (which registers the ST_* functions) inserts and updates.
        let spatialite = try await ExternalTools.run(
            "sqlite3", [file.path],
            input: """
                .bail on
                .load mod_spatialite
                SELECT EnableGpkgAmphibiousMode();
                INSERT INTO inspection_points (geom, asset_id, asset_type, status) VALUES (AsGPB(GeomFromText('POINT(-122.66 45.51)', 4326)), 'SL-1', 'meter', 'open');
                UPDATE inspection_points SET notes = 'moved', geom = AsGPB(GeomFromText('POINT(-122.67 45.52)', 4326)) WHERE asset_id = 'SL-1';
                """)
        #expect(spatialite.succeeded, "\(spatialite.stderr)")
        // The plain shell can only delete (its triggers need no ST_* function).
        let delete = try await ExternalTools.run("sqlite3", [file.path, "DELETE FROM inspection_points WHERE asset_id = 'HY-1002'"])
        #expect(delete.succeeded, "\(delete.stderr)")
        let plainInsert = try await ExternalTools.run("sqlite3", [file.path, "INSERT INTO inspection_points (asset_id, asset_type, status) VALUES ('X-1', 'meter', 'open')"])
        #expect(!plainInsert.succeeded && plainInsert.stderr.contains("ST_IsEmpty"))

        let gdb = try Geodatabase.open(at: file)
        let table = try gdb.table(named: "inspection_points")
        #expect(try await table.pendingChanges() == PendingChanges(inserts: 2, updates: 0, deletes: 1))
        let changes = try await gdb.read { conn in try conn.capturedChanges() }
        #expect(changes.map(\.operation) == [.insert, .update, .insert, .update, .delete])
        #expect(changes[1].changedColumns.sorted() == ["condition", "status"])
        #expect(changes[1].oldValues["status"] == .string("open"))
        #expect(changes[3].changedColumns.sorted() == ["geom", "notes"])
        let gdal = try #require(try await table.features(matching: FeatureQuery(where: "asset_id = 'GD-1'")).first)
        #expect(gdal.globalID.flatMap(GlobalID.normalized) == gdal.globalID)
        #expect(changes[0].globalID == gdal.globalID)
        #expect(gdal["depth_m"] == .double(2.5) && gdal["status"] == .string("closed"))
        let moved = try #require(try await table.features(matching: FeatureQuery(where: "asset_id = 'SL-1'")).first)
        #expect(moved.geometry == .point(try Point(x: -122.67, y: 45.52)))
        // The index followed every writer.
        #expect(try await gdb.string("SELECT rtreecheck('rtree_inspection_points_geom')") == "ok")
        #expect(try await table.objectIDs(matching: FeatureQuery(envelope: Envelope(xmin: -122.671, ymin: 45.519, xmax: -122.669, ymax: 45.521))).contains(moved.objectID!))
        try gdb.close()
        let check = try await ExternalTools.run("/usr/bin/python3", [try #require(ExternalTools.validateGPKG), "-k", "--extra", "--warning-as-error", file.path])
        #expect(check.succeeded, "\(check.stdout)\(check.stderr)")
    }
}
