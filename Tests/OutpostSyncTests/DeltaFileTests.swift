import Foundation
import OutpostCore
import OutpostProtocol
import OutpostServer
import OutpostStorage
import OutpostSyncService
import OutpostTestSupport
import OutpostServiceTestSupport
import Testing

@testable import OutpostSync

/// Delta files on either backend (the CLI tests run SQLite): a round trip by file converges,
/// a replayed file is answered from the ledger, and an update package reaches a second replica.
@Suite("Delta files, both backends")
struct DeltaFileTests {
    @Test(.scaledTimeLimit(minutes: 2), arguments: BackendKind.syncing)
    func aRoundTripByFileConvergesAndAnUpdatePackageFollows(kind: BackendKind) async throws {
        let h = try await SyncHarness.start(kind)
        let backend = try #require(h.service.backend as? any SyncBackend)
        let gdb = try await h.replica("crew"), reader = try await h.replica("reader")
        let points = try gdb.table(named: "inspection_points")
        var first = try #require(try await points.features(matching: FeatureQuery(where: "objectid = 1")).first)
        first.attributes = ["notes": .string("by file")]
        try await points.update([first])
        let dir = TemporaryDirectory("outpost-delta-\(kind)")
        let since = try #require(try await reader.read { try $0.replicaState() }).cursor

        try await DeltaSync.exportEdits(from: gdb, to: dir.file("e.delta"))
        let applied = try await DeltaImport.importEdits(dir.file("e.delta"), into: backend, service: "field_inspection", reply: dir.file("r.delta"))
        #expect(applied.edits == 1 && !applied.replayed)
        let again = try await DeltaImport.importEdits(dir.file("e.delta"), into: backend, service: "field_inspection", reply: dir.file("r2.delta"))
        #expect(again.replayed)
        let reply = try await DeltaSync.importReply(into: gdb, from: dir.file("r.delta"))
        #expect(reply.acknowledged)
        try await h.expectConverged(gdb, table: "inspection_points", layerID: 0)
        await #expect(throws: DeltaError.self) { try await DeltaSync.importReply(into: gdb, from: dir.file("r2.delta")) }

        // The other replica, with nothing to upload, takes the change from an update package.
        let upto = try await h.service.backend.generation()
        let count = try await DeltaImport.exportUpdates(
            from: backend, service: "field_inspection", layers: [0], area: nil, since: since, upto: upto, to: dir.file("u.delta"))
        #expect(count >= 1)
        let updated = try await DeltaSync.importReply(into: reader, from: dir.file("u.delta"))
        #expect(updated.changes >= 1 && updated.upto == upto)
        try await h.expectConverged(reader, table: "inspection_points", layerID: 0)
        try await h.stop()
    }

    /// Photos travel by file both ways: the crew's content goes with its edits (once per content,
    /// in chunks), the office's comes back with the reply, and only what the replica lacks.
    @Test(.scaledTimeLimit(minutes: 2), arguments: BackendKind.syncing)
    func attachmentContentTravelsByFileBothWays(kind: BackendKind) async throws {
        let h = try await SyncHarness.start(kind)
        let backend = try #require(h.service.backend as? any SyncBackend)
        let crew = try await h.replica("crew", layers: [0], attachments: .bidirectional)
        let office = try await h.replica("office", layers: [0], attachments: .bidirectional)
        let points = try crew.table(named: "inspection_points")
        let one = try #require(try await points.feature(objectID: 1))
        // 2.5 chunks of content, twice (one content), and a small one.
        let photo = AttachmentSyncTests.randomBytes(DeltaContent.chunkSize * 5 / 2, seed: 11), note = AttachmentSyncTests.randomBytes(900, seed: 12)
        let added = try await points.addAttachment(toFeature: 1, name: "valve.jpg", contentType: "image/jpeg", data: photo)
        _ = try await points.addAttachment(toFeature: 2, name: "valve-again.jpg", contentType: "image/jpeg", data: photo)
        _ = try await points.addAttachment(toFeature: 3, name: "note.txt", contentType: "text/plain", data: note)
        let dir = TemporaryDirectory("outpost-delta-attachments-\(kind)")

        let export = GeodatabaseSyncTask.makeExportDeltaJob(geodatabase: crew, deltaFileURL: dir.file("e.delta"))
        try export.start()
        let exported = try await export.output
        #expect(exported.header.attachments == 2 && exported.edits == 3)
        let size = try #require(try FileManager.default.attributesOfItem(atPath: dir.file("e.delta").path)[.size] as? Int)
        #expect(size > photo.count && size < 2 * photo.count, "one copy of the shared content: \(size) bytes")
        let applied = try await DeltaImport.importEdits(dir.file("e.delta"), into: backend, service: "field_inspection", reply: dir.file("r.delta"))
        #expect(applied.edits == 3 && applied.attachments == 0, "the crew's own photos do not come back")
        #expect(try await AttachmentSyncTests.serverAttachments(h, featureGlobalID: one.globalID!) == [added.globalID: photo])
        // Imported again: replayed, the content passed over.
        let again = try await DeltaImport.importEdits(dir.file("e.delta"), into: backend, service: "field_inspection", reply: dir.file("r2.delta"))
        #expect(again.replayed)
        let importJob = GeodatabaseSyncTask.makeImportDeltaJob(geodatabase: crew, deltaFileURL: dir.file("r.delta"))
        try importJob.start()
        #expect(try await importJob.output.acknowledged)

        // The office's replica, with no link either, gets all three by file.
        try await DeltaSync.exportEdits(from: office, to: dir.file("o.delta"))
        let reply = try await DeltaImport.importEdits(dir.file("o.delta"), into: backend, service: "field_inspection", reply: dir.file("or.delta"))
        #expect(reply.attachments == 2, "two contents for three attachments")
        let downloaded = try await DeltaSync.importReply(into: office, from: dir.file("or.delta"))
        #expect(downloaded.changes >= 3)
        #expect(try await AttachmentSyncTests.localAttachments(office, featureGlobalID: one.globalID!) == [added.globalID: photo])
        let officeTable = try office.table(named: "inspection_points")
        let crewThree = try #require(try await points.feature(objectID: 3))
        let three = try #require(try await officeTable.feature(globalID: crewThree.globalID!))
        #expect(try await officeTable.attachments(forFeature: three.objectID!).count == 1)
        #expect(!FileManager.default.fileExists(atPath: office.url.path + ".attachments"), "the staged content is gone once applied")
        // A later reply to the office leaves out what it now holds.
        try await DeltaSync.exportEdits(from: office, to: dir.file("o2.delta"))
        let later = try await DeltaImport.importEdits(dir.file("o2.delta"), into: backend, service: "field_inspection", reply: dir.file("or2.delta"))
        #expect(later.attachments == 0)
        try await h.stop()
    }
}
