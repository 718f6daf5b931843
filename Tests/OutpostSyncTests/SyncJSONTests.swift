import Foundation
import OutpostCore
import OutpostProtocol
import Testing

/// The change feed's and upload batches' direct JSON reading and writing must agree with their
/// Codable form (the canonical batch bytes are hashed by the server's ledger), and refuse what the
/// Codable decoding refuses.
@Suite("Sync JSON: change pages and upload batches")
struct SyncJSONTests {
    static let changes: [FeedChange] = {
        var withAttachments = FeedChange(
            kind: .upsert, globalId: "{11111111-2222-4333-8444-555555555555}", generation: 7,
            attributes: ["name": .string("pump \"A\"\n"), "depth": .number(2.5), "count": .integer(-3), "note": .null],
            geometry: .object(["x": .number(-122.5), "y": .number(45.5)]), inserted: true)
        withAttachments.attachments = [
            AttachmentInfo(globalId: "{A1}", name: "photo.jpg", contentType: "image/jpeg", size: 12, sha256: "ab", keywords: "before"),
            AttachmentInfo(globalId: "{A2}", name: "x.bin", contentType: "application/octet-stream", size: 0, sha256: "cd"),
        ]
        return [
            withAttachments,
            FeedChange(kind: .upsert, globalId: "{B}", generation: 8, attributes: [:], geometry: nil),
            FeedChange(kind: .leave, globalId: "{C}", generation: 9),
        ]
    }()

    @Test func directJSONMatchesCodable() throws {
        for next in [nil, "{C}"] as [String?] {
            let page = ChangePage(layerId: 2, since: 3, upto: 9, changes: Self.changes, next: next)
            #expect(page.json == (try JSONValueEncoder().encode(page)))
            let text = page.json.jsonString
            #expect(try ChangePage(json: JSONValue.parse(text)) == page)
            #expect(try JSONValueDecoder().decode(ChangePage.self, from: Data(text.utf8)) == page)
        }
    }

    @Test func nullOptionalsReadAsAbsent() throws {
        let change = try FeedChange(json: JSONValue.parse(#"{"kind":"upsert","globalId":"{X}","generation":1,"attributes":null,"geometry":null,"inserted":null,"attachments":null}"#))
        #expect(change == FeedChange(kind: .upsert, globalId: "{X}", generation: 1))
    }

    @Test(arguments: [
        #"[]"#,
        #"{"globalId":"{X}","generation":1}"#,
        #"{"kind":"move","globalId":"{X}","generation":1}"#,
        #"{"kind":"upsert","generation":1}"#,
        #"{"kind":"upsert","globalId":"{X}","generation":"1"}"#,
        #"{"kind":"upsert","globalId":"{X}","generation":1,"attributes":[1]}"#,
        #"{"kind":"upsert","globalId":"{X}","generation":1,"inserted":"yes"}"#,
        #"{"kind":"upsert","globalId":"{X}","generation":1,"attachments":[{"globalId":"{A}"}]}"#,
    ])
    func malformedChangesAreRefused(text: String) throws {
        let json = try JSONValue.parse(text)
        #expect(throws: DecodingError.self) { try FeedChange(json: json) }
        #expect(throws: (any Error).self) { try JSONValueDecoder().decode(FeedChange.self, from: json) }
    }

    @Test func malformedPagesAreRefused() throws {
        for text in [#"{"layerId":0,"since":0,"upto":1}"#, #"{"layerId":0,"since":0,"upto":1,"changes":[],"next":3}"#] {
            #expect(throws: DecodingError.self) { try ChangePage(json: JSONValue.parse(text)) }
        }
    }

    static var batch: UploadBatch {
        var b = UploadBatch(
            replicaId: "{R}", batchId: "{B}", seq: 4, schemaVersion: 2, rollbackOnFailure: false,
            layers: [
                BatchLayer(id: 0, edits: [
                    BatchEdit(op: .insert, globalId: "{1}", attributes: ["name": .string("é \"q\""), "n": .integer(1), "v": .number(0.1)], geometry: .object(["x": .number(1), "y": .number(2)]), editedAt: "2026-11-22T10:00:00Z"),
                    BatchEdit(op: .update, globalId: "{2}", attributes: ["n": .null], geometry: .null, changedColumns: ["n", "geom"], baseValues: ["n": .integer(3)], baseGeneration: 9),
                    BatchEdit(op: .delete, globalId: "{3}", baseValues: [:], baseGeneration: 0),
                ]),
                BatchLayer(id: 1, edits: []),
            ], conflictPolicy: "latestEditWins", resolvedConflicts: [5, 6])
        b.attachments = [AttachmentEdit(op: .insert, layerId: 0, featureGlobalId: "{1}", attachment: AttachmentInfo(globalId: "{A}", name: "a", contentType: "text/plain", size: 1, sha256: "ff"), globalId: "{A}")]
        return b
    }

    /// Batches without attachment edits are written straight from the edits: every optional
    /// field present or absent, escapes, several layers.
    static var writtenDirectly: [UploadBatch] {
        var withoutAttachments = batch
        withoutAttachments.attachments = nil
        var random = SystemRandomNumberGenerator()
        let edits = (0..<200).map { i -> BatchEdit in
            func maybe<T>(_ value: T) -> T? { Bool.random(using: &random) ? value : nil }
            return BatchEdit(
                op: [.insert, .update, .delete][i % 3], globalId: "{\(i)\\\"}",
                attributes: maybe(["a\(i)": .integer(Int64(i)), "b": .number(Double(i) / 3), "c": .string("line\nbreak \u{1}"), "d": .null, "e": .bool(true)]),
                geometry: maybe(i % 2 == 0 ? .null : .object(["x": .number(24.9 + Double(i)), "y": .number(-60.1), "spatialReference": ["wkid": 4326]])),
                changedColumns: maybe(["b", "a\(i)", "geom"]), baseValues: maybe(["b": .array([.integer(1), .string("x")])]),
                editedAt: maybe("2026-11-26T10:00:00.\(i)Z"), baseGeneration: maybe(Int64(i) * 7))
        }
        return [
            withoutAttachments,
            UploadBatch(replicaId: "{R}", batchId: "{B}", seq: 1, schemaVersion: 1, rollbackOnFailure: true, layers: []),
            UploadBatch(
                replicaId: "{R}", batchId: "{B}", seq: 12, schemaVersion: 3, rollbackOnFailure: false,
                layers: [BatchLayer(id: 2, edits: Array(edits[..<120])), BatchLayer(id: 0, edits: Array(edits[120...])), BatchLayer(id: 5, edits: [])],
                conflictPolicy: nil, resolvedConflicts: []),
            { var b = withoutAttachments; b.compactAnswer = true; return b }(),
        ]
    }

    @Test func batchBytesMatchCodable() throws {
        for batch in [Self.batch, UploadBatch(replicaId: "{R}", batchId: "{B}", seq: 1, schemaVersion: 1, rollbackOnFailure: true, layers: [])] + Self.writtenDirectly {
            let bytes = try batch.encoded()
            #expect(bytes == batch.json.jsonData)
            #expect(bytes == (try JSONValueEncoder().encodeToData(batch)))
            #expect(try UploadBatch.decode(bytes) == (try JSONValueDecoder().decode(UploadBatch.self, from: bytes)))
        }
        // A geometry cleared by an update reads back as absent, as with the Codable decoding.
        #expect(try UploadBatch.decode(try Self.batch.encoded()).layers[0].edits[1].geometry == nil)
    }

    @Test(arguments: [
        #"{"replicaId":"{R}","batchId":"{B}","seq":1,"schemaVersion":1,"rollbackOnFailure":true,"layers":[]}"#,
        #"{"formatVersion":1,"replicaId":"{R}","batchId":"{B}","seq":"1","schemaVersion":1,"rollbackOnFailure":true,"layers":[]}"#,
        #"{"formatVersion":1,"replicaId":"{R}","batchId":"{B}","seq":1,"schemaVersion":1,"rollbackOnFailure":true}"#,
        #"{"formatVersion":1,"replicaId":"{R}","batchId":"{B}","seq":1,"schemaVersion":1,"rollbackOnFailure":true,"layers":[{"id":0,"edits":[{"op":"merge","globalId":"{1}"}]}]}"#,
        #"{"formatVersion":1,"replicaId":"{R}","batchId":"{B}","seq":1,"schemaVersion":1,"rollbackOnFailure":true,"layers":[{"id":0,"edits":[{"op":"update","globalId":"{1}","changedColumns":[1]}]}]}"#,
        #"{"formatVersion":1,"replicaId":"{R}","batchId":"{B}","seq":1,"schemaVersion":1,"rollbackOnFailure":true,"layers":[{"id":0,"edits":[{"op":"update","globalId":"{1}","attributes":[]}]}]}"#,
        #"{"formatVersion":1,"replicaId":"{R}","batchId":"{B}","seq":1,"schemaVersion":1,"rollbackOnFailure":"yes","layers":[]}"#,
        #"[1]"#,
    ])
    func malformedBatchesAreRefused(text: String) throws {
        #expect(throws: DecodingError.self) { try UploadBatch.decode(Data(text.utf8)) }
        #expect(throws: (any Error).self) { try JSONValueDecoder().decode(UploadBatch.self, from: Data(text.utf8)) }
    }

    @Test func batchResultsMatchCodable() throws {
        let conflict = ConflictRecord(
            id: 3, layerId: 0, globalId: "{2}", kind: .updateUpdate, columns: ["n"], base: ["n": .integer(1)], ours: ["n": .integer(2)], theirs: ["n": .integer(3)],
            policy: "serverWins", winner: "theirs", replicaId: "{R}", seq: 4, generation: 9, oursEditedAt: "2026-11-22T10:00:00Z", state: "open")
        var result = BatchResult(seq: 4, batchId: "{B}", generation: 9, layers: [
            BatchLayerResult(id: 0, results: [
                BatchEditResult(globalId: "{1}", op: .insert, success: true, objectId: 12),
                BatchEditResult(globalId: "{2}", op: .update, success: true, objectId: 13, resolution: "conflict", conflicts: [conflict]),
                BatchEditResult(globalId: "{3}", op: .delete, success: false, error: EditResult.Failure(code: 1018, description: "no feature \"{3}\"")),
            ])
        ], replayed: true)
        result.attachments = [BatchEditResult(globalId: "{A}", op: .insert, success: true)]
        var plain = BatchResult(seq: 7, batchId: "{B}", generation: 2, layers: [
            BatchLayerResult(id: 3, results: [BatchEditResult(globalId: "{\u{1}\"é}", op: .update, success: true, objectId: -1, resolution: "merged")]),
            BatchLayerResult(id: 4, results: []),
        ])
        plain.replayed = false
        // Compact: the plain successes counted, the rest listed; attachments stay listed.
        let compact = result.compacted
        #expect(compact.layers[0].results.map(\.globalId) == ["{2}", "{3}"])
        #expect(compact.layers[0].applied == BatchLayerResult.Applied(inserts: 1, updates: 1, deletes: 0))
        #expect(compact.attachments == result.attachments)
        #expect(compact.layers[0].succeeded("{1}") && compact.layers[0].succeeded("{2}") && !compact.layers[0].succeeded("{3}"))
        #expect(!result.layers[0].succeeded("{9}") && compact.layers[0].succeeded("{9}"), "unlisted: applied only in a compact answer")
        // Applied edits counted alike in both forms (attachments left out).
        #expect(result.appliedEditCount == 2 && compact.appliedEditCount == 2)
        #expect(plain.appliedEditCount == 1 && plain.compacted.appliedEditCount == 1)
        for value in [result, plain, BatchResult(seq: 1, batchId: "{B}", generation: nil, layers: []), compact, plain.compacted] {
            #expect(value.json == (try JSONValueEncoder().encode(value)))
            #expect(try BatchResult(json: value.json) == value)
            // The text written straight (what a server answers and keeps in its ledger) is the
            // tree's text, byte for byte.
            #expect(value.jsonText == value.json.jsonString)
        }
        #expect(throws: DecodingError.self) { try BatchResult(json: JSONValue.parse(#"{"seq":1,"batchId":"{B}","layers":[{"id":0,"results":[{"globalId":"{1}","op":"insert"}]}]}"#)) }
    }
}
