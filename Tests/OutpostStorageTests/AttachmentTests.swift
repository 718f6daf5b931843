import Foundation
import GRDB
import OutpostCore
import OutpostTestSupport
import Testing

@testable import OutpostStorage

@Suite("Attachments")
struct AttachmentTests {
    @Test func addListReadDelete() async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.fieldInspection(in: dir)
        let table = try gdb.table(named: "inspection_points")
        let photo = Data((0..<5000).map { UInt8(truncatingIfNeeded: $0 * 7) })
        let a = try await table.addAttachment(toFeature: 3, name: "valve.jpg", contentType: "image/jpeg", data: photo, keywords: "before")
        let b = try await table.addAttachment(toFeature: 3, name: "notes.txt", contentType: "text/plain", data: Data("hello".utf8))
        _ = try await table.addAttachment(toFeature: 4, name: "other.txt", contentType: "text/plain", data: Data("x".utf8))
        let listed = try await table.attachments(forFeature: 3)
        #expect(listed.map(\.name) == ["valve.jpg", "notes.txt"])
        #expect(listed[0].size == 5000 && listed[0].keywords == "before" && listed[0].featureObjectID == 3)
        #expect(listed[0].featureGlobalID == (try await table.feature(objectID: 3))?.globalID)
        #expect(try await table.attachmentData(id: a.id) == photo)
        try await table.deleteAttachment(id: b.id)
        #expect(try await table.attachments(forFeature: 3).map(\.id) == [a.id])
        await #expect(throws: StorageError.self) { try await table.attachmentData(id: b.id) }
        await #expect(throws: StorageError.self) { try await table.deleteAttachment(id: b.id) }
        await #expect(throws: StorageError.self) {
            try await table.addAttachment(toFeature: 99_999, name: "x", contentType: "text/plain", data: Data())
        }
        let pipes = try gdb.table(named: "pipelines")
        let notEnabled = await #expect(throws: StorageError.self) {
            try await pipes.addAttachment(toFeature: 1, name: "x", contentType: "text/plain", data: Data())
        }
        #expect(notEnabled?.message.contains("attachments") == true)
        // Deleting the feature deletes its attachments, whoever deletes it.
        try await table.delete(objectIDs: [3])
        #expect(try await gdb.int("SELECT count(*) FROM attachments") == 1)
        #expect(try await gdb.int("SELECT count(*) FROM inspection_points_attachments") == 1)
        try gdb.close()
        let shell = try await ExternalTools.run("sqlite3", [dir.file("field.gpkg").path, "DELETE FROM inspection_points WHERE objectid = 4; SELECT count(*) FROM attachments;"])
        #expect(shell.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "0")
    }

    /// A file whose layers have no attachments has no media table (readers would list it as an
    /// empty layer); a schema change that gives a layer attachments makes it, and a replica that
    /// uploads attachments captures them from then on. Taking attachments away is refused.
    @Test func theMediaTableComesWithTheFirstLayerThatHasAttachments() async throws {
        let dir = TemporaryDirectory()
        let gdb = try ServiceDirectoryImport.createGeodatabase(from: Repository.sampleData("natural_earth"), at: dir.file("world.gpkg")).0
        var schema = gdb.schema
        #expect(try await gdb.int("SELECT count(*) FROM sqlite_master WHERE name LIKE '%attachments%' OR name = 'gpkgext_relations'") == 0)
        #expect(try await gdb.int("SELECT count(*) FROM gpkg_contents WHERE data_type = 'attributes'") == 0)
        let countries = try #require(schema.layers.firstIndex { $0.name == "countries" })
        try await gdb.write { conn in
            try conn.setReplicaState(ReplicaState(
                replicaID: "{00000000-0000-0000-0000-000000000001}", replicaName: "world", serviceURL: "http://127.0.0.1:1/x/FeatureServer",
                syncModel: .perReplica, cursor: 0, layers: [], attachmentsDirection: .bidirectional))
        }
        #expect(try await gdb.int("SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'outpost_attachments_%'") == 0)

        schema.layers[countries].hasAttachments = true
        schema.schemaVersion += 1
        let withAttachments = schema
        let steps = try await gdb.write { conn in try conn.migrateSchema(to: withAttachments, allowDrop: false, addLayers: false) }
        #expect(steps.map(\.kind) == [.addAttachments])
        #expect(try await gdb.int("SELECT count(*) FROM gpkg_contents WHERE table_name IN ('attachments', 'countries_attachments')") == 2)
        #expect(try await gdb.int("SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'outpost_attachments_%'") == 2)
        let table = try gdb.table(named: "countries")
        let added = try await table.addAttachment(toFeature: 1, name: "flag.png", contentType: "image/png", data: Data([1, 2, 3]))
        #expect(try await table.attachmentData(id: added.id) == Data([1, 2, 3]))
        #expect(try await gdb.int("SELECT count(*) FROM outpost_changes WHERE table_name = 'attachments' AND op = 'insert'") == 1)

        var stripped = schema
        stripped.layers[countries].hasAttachments = false
        let without = stripped
        let refused = await #expect(throws: StorageError.self) {
            try await gdb.write { conn in try conn.migrateSchema(to: without, allowDrop: true, addLayers: false) }
        }
        #expect(refused?.message.contains("loses its attachments") == true)
        try gdb.close()
    }

    @Test func largeAttachmentsStreamThroughFiles() async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.fieldInspection(in: dir)
        let table = try gdb.table(named: "inspection_points")
        // 24 MB of non-repeating bytes, written and read back in 1 MB chunks.
        let source = dir.file("big.bin")
        _ = FileManager.default.createFile(atPath: source.path, contents: nil)
        let handle = try FileHandle(forWritingTo: source)
        var rng = FastRandomGenerator(seed: 42)
        for _ in 0..<24 {
            var chunk = [UInt8](repeating: 0, count: 1 << 20)
            for i in stride(from: 0, to: chunk.count, by: 8) {
                withUnsafeBytes(of: rng.next()) { chunk.replaceSubrange(i..<i + 8, with: $0) }
            }
            try handle.write(contentsOf: chunk)
        }
        try handle.close()
        let attachment = try await table.addAttachment(toFeature: 1, name: "scan.tif", contentType: "image/tiff", contentsOf: source)
        #expect(attachment.size == 24 << 20)
        let copy = dir.file("copy.bin")
        try await table.readAttachment(id: attachment.id, to: copy)
        #expect(try Data(contentsOf: copy) == (try Data(contentsOf: source)))
        #expect(!FileManager.default.fileExists(atPath: dir.file(".copy.bin.partial").path))
        try gdb.close()
    }
}
