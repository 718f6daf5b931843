import Foundation
import OutpostCore
import OutpostStorage
import Testing

@testable import OutpostProtocol

/// The binary batch encoding must read back as the JSON body of the same batch does (the server
/// applies either alike), be canonical, and refuse every malformed body with a `DecodingError`.
@Suite("Binary upload batches and change pages")
struct BinaryBatchTests {
    @Test func binaryReadsBackAsJSONDoes() throws {
        for batch in [SyncJSONTests.batch] + SyncJSONTests.writtenDirectly {
            let binary = try batch.encoded(as: .binary), json = try batch.encoded(as: .json)
            #expect(UploadBatch.Encoding(of: binary) == .binary && UploadBatch.Encoding(of: json) == .json)
            #expect(try UploadBatch.decode(binary) == (try UploadBatch.decode(json)))
            #expect(try batch.encoded(as: .binary) == binary, "the same batch, the same bytes")
            if batch.editCount > 100 { #expect(binary.count * 2 < json.count, "\(binary.count) bytes against \(json.count)") }
        }
        // Integers and doubles keep their kind and every bit; names repeat by number.
        let values: [String: JSONValue] = [
            "min": .integer(.min), "max": .integer(.max), "neg": .integer(-1), "tiny": .number(.leastNonzeroMagnitude), "big": .number(-1.7976931348623157e308),
            "zero": .number(-0.0), "text": .string("ä\u{0}😀"), "list": [[], [:], .null, true, false],
        ]
        let batch = UploadBatch(
            replicaId: "{R}", batchId: "{B}", seq: .max, schemaVersion: 3, rollbackOnFailure: true,
            layers: [BatchLayer(id: -1, edits: [BatchEdit(op: .insert, globalId: "{1}", attributes: values, geometry: ["rings": [[[1.5, 2.5]]]])])])
        let read = try UploadBatch.decode(try batch.encoded(as: .binary))
        #expect(read == batch)
        #expect(read.layers[0].edits[0].attributes?["max"] == .integer(.max))
        #expect(read.layers[0].edits[0].attributes?["zero"]?.doubleValue?.sign == .minus)
    }

    /// Geometries as GeoPackage blobs (for a server that lists `binary-gpkg-geometry`): each
    /// blob reads back byte for byte from either binary layout, the batch is the one its Esri
    /// JSON makes, and the JSON forms (text and Codable) write that Esri JSON. An edit given as
    /// Esri JSON in a batch of blobs goes as a blob too; a blob that cannot be read cannot be
    /// written as JSON.
    @Test func geometryBlobsReadBackAsTheirEsriJSON() throws {
        let shapes: [JSONValue] = [
            ["x": 24.94, "y": 60.17], ["x": 24.94, "y": 60.17, "z": 12.5],
            ["rings": [[[24.9, 60.1], [25.0, 60.1], [25.0, 60.2], [24.9, 60.1]]]], ["paths": [[[24.9, 60.1], [25.0, 60.2]], [[25.1, 60.3], [25.2, 60.3]]]],
        ]
        let esri = try shapes.map { try EsriJSON.value(EsriJSON.decodeGeometry($0)) }
        let blobs = try shapes.map { GeoPackageBinary.encode(try EsriJSON.decodeGeometry($0), srsID: 4326) }
        func edits(asBlobs: Bool) -> [BatchEdit] {
            var out = esri.indices.map { i in
                BatchEdit(op: i == 0 ? .insert : .update, globalId: "{\(i)}", attributes: ["n": .integer(Int64(i))], geometry: esri[i], changedColumns: i == 0 ? nil : ["geom", "n"])
            }
            if asBlobs {
                for i in out.indices {
                    out[i].geometry = nil
                    out[i].geometryBlob = blobs[i]
                }
            }
            // A geometry cleared, and a delete: neither carries one.
            out.append(BatchEdit(op: .update, globalId: "{c}", attributes: [:], changedColumns: ["geom"], baseGeneration: 4))
            out.append(BatchEdit(op: .delete, globalId: "{d}", baseValues: ["n": 1]))
            return out
        }
        func batch(_ edits: [BatchEdit]) -> UploadBatch {
            UploadBatch(replicaId: "{R}", batchId: "{B}", seq: 2, schemaVersion: 1, rollbackOnFailure: true, layers: [BatchLayer(id: 0, edits: edits)])
        }
        let asBlobs = batch(edits(asBlobs: true)), asJSON = batch(edits(asBlobs: false))
        #expect(asBlobs.hasGeometryBlobs && !asJSON.hasGeometryBlobs)
        #expect(try asBlobs.withEsriGeometries() == asJSON)
        // The JSON forms write the Esri JSON.
        #expect(try asBlobs.encoded(as: .json) == (try asJSON.encoded(as: .json)))
        #expect(try JSONValueEncoder().encodeToData(asBlobs) == (try asJSON.encoded()))
        #expect(asBlobs.json == asJSON.json)
        // Both binary layouts carry the blobs as they are.
        let binary = try asBlobs.encoded(as: .binary)
        let framed = try FramedBatchTests.framed(asBlobs).body
        for body in [binary, framed] {
            let read = try UploadBatch.decode(body)
            #expect(read == asBlobs)
            #expect(read.layers[0].edits.prefix(blobs.count).map(\.geometryBlob) == blobs.map { Optional($0) })
            #expect(read.layers[0].edits.allSatisfy { $0.geometry == nil })
        }
        #expect(try UploadBatch.decode(try asJSON.encoded(as: .binary)) == asJSON, "without blobs, Esri JSON as before")
        // One edit of Esri JSON among blobs: written as a blob (its header's srs id 0).
        var mixed = asBlobs
        mixed.layers[0].edits[1].geometryBlob = nil
        mixed.layers[0].edits[1].geometry = esri[1]
        let mixedRead = try UploadBatch.decode(try mixed.encoded(as: .binary))
        #expect(mixedRead.layers[0].edits[1].geometryBlob == GeoPackageBinary.encode(try EsriJSON.decodeGeometry(esri[1]), srsID: 0))
        #expect(try mixedRead.withEsriGeometries() == asJSON)
        // A blob that is not a geometry: no Esri JSON, so no JSON body.
        var damaged = asBlobs
        damaged.layers[0].edits[2].geometryBlob = Array(blobs[2].prefix(12))
        #expect(throws: GeometryError.self) { try damaged.encoded(as: .json) }
        #expect(throws: GeometryError.self) { try damaged.withEsriGeometries() }
        #expect(try UploadBatch.decode(try damaged.encoded(as: .binary)) == damaged, "binary carries it as it is: the server refuses the edit")
    }

    /// Counts are written before what they count is known (the seal skips features deleted
    /// again, and layers left without edits): counts of one byte and of several read back.
    @Test func countsWrittenAfterTheirItemsReadBack() throws {
        func edits(_ n: Int, _ layer: Int) -> [BatchEdit] {
            (0..<n).map { BatchEdit(op: .update, globalId: "{\(layer)-\($0)}", attributes: ["n": .integer(Int64($0))], changedColumns: ["n"], baseValues: [:]) }
        }
        // 130 layers (a count of two bytes), one of 300 edits, some empty.
        let layers = (0..<130).map { BatchLayer(id: $0, edits: edits($0 == 7 ? 300 : $0 % 3, $0)) }
        let batch = UploadBatch(replicaId: "{R}", batchId: "{B}", seq: 9, schemaVersion: 1, rollbackOnFailure: false, layers: layers)
        let body = try batch.encoded(as: .binary)
        #expect(try UploadBatch.decode(body) == batch)
        #expect(try UploadBatch.decode(body) == (try UploadBatch.decode(try batch.encoded(as: .json))))

        // Edit by edit, the empty layers dropped: the same batch without them.
        var writer = try UploadBatch.BinaryWriter(header: UploadBatch(replicaId: "{R}", batchId: "{B}", seq: 9, schemaVersion: 1, rollbackOnFailure: false, layers: []), capacity: 16)
        for layer in layers {
            writer.beginLayer(id: layer.id)
            for e in layer.edits {
                let names = e.attributes!.keys.sorted()
                writer.edit(
                    e.op, globalId: e.globalId, attributeNames: names, attribute: { e.attributes![names[$0]]! }, geometry: nil, geometryBlob: nil, changedColumns: e.changedColumns,
                    baseValues: e.baseValues, editedAt: nil, baseGeneration: nil)
            }
            writer.endLayer(droppingEmpty: true)
        }
        #expect(writer.editCount == batch.editCount)
        var kept = batch
        kept.layers.removeAll { $0.edits.isEmpty }
        #expect(kept.layers.count == 86)
        let written = writer.finish()
        #expect(try UploadBatch.decode(written) == kept)
        #expect(written == (try kept.encoded(as: .binary)))
        // No layer at all.
        let none = try UploadBatch.BinaryWriter(header: batch, capacity: 0).finish()
        #expect(try UploadBatch.decode(none).layers.isEmpty)
    }

    /// A batch with one layer of one edit whose bytes `edit` writes (after a valid head).
    static func body(flags: UInt8 = 1, _ edit: (inout BinaryWireWriter) -> Void) -> Data {
        var w = BinaryWireWriter(capacity: 64, magic: UploadBatch.binaryMagic)
        w.unsigned(1)
        w.string("{R}")
        w.string("{B}")
        w.signed(1)
        w.signed(1)
        w.byte(flags)
        w.unsigned(1)
        w.signed(0)
        w.unsigned(1)
        edit(&w)
        return Data(w.out)
    }

    static let malformed: [(String, Data)] = [
        ("unknown batch flags", body(flags: 0x41) { w in w.byte(0); w.string("{1}") }),
        ("unknown op", body { w in w.byte(3); w.string("{1}") }),
        ("unknown value tag", body { w in w.byte(0x04); w.string("{1}"); w.unsigned(1); w.name("n"); w.byte(9) }),
        ("a number that is not finite", body { w in w.byte(0x04); w.string("{1}"); w.unsigned(1); w.name("n"); w.byte(4); w.double(.nan) }),
        ("invalid UTF-8", body { w in w.byte(0); w.unsigned(2); w.out += [0xC3, 0x28] }),
        ("an undefined name", body { w in w.byte(0x04); w.string("{1}"); w.unsigned(1); w.unsigned(5) }),
        ("a count larger than the body", body { w in w.byte(0x04); w.string("{1}"); w.unsigned(1 << 40) }),
        ("a string longer than the body", body { w in w.byte(0); w.unsigned(1 << 62) }),
        ("a key given twice", body { w in w.byte(0x04); w.string("{1}"); w.unsigned(2); w.name("n"); w.value(1); w.name("n"); w.value(2) }),
        ("an integer of eleven bytes", body { w in w.byte(0x80); w.string("{1}"); w.out += [UInt8](repeating: 0xFF, count: 10) + [1] }),
        ("an integer past 64 bits", body { w in w.byte(0x80); w.string("{1}"); w.out += [UInt8](repeating: 0xFF, count: 9) + [2] }),
        ("values nested too deeply", body { w in
            w.byte(0x08); w.string("{1}")
            for _ in 0..<100 { w.byte(BinaryWireWriter.Tag.array.rawValue); w.unsigned(1) }
            w.byte(0)
        }),
        ("bytes after the batch", body { w in w.byte(0); w.string("{1}"); w.byte(0) }),
        ("a wrong layout version", Data([0x4F, 0x50, 0x42, 0x02, 1])),
    ]

    @Test func malformedBodiesAreRefused() throws {
        // The head the cases share is itself fine.
        let fine = Self.body { w in w.byte(0x04); w.string("{1}"); w.unsigned(1); w.name("n"); w.value(1) }
        #expect(try UploadBatch.decode(fine).layers[0].edits[0].attributes == ["n": 1])
        for (what, data) in Self.malformed {
            #expect(throws: DecodingError.self, "\(what)") { try UploadBatch.decode(data) }
        }
        // Every cut of a real batch is refused, never read as a shorter one.
        let whole = try SyncJSONTests.writtenDirectly[2].encoded(as: .binary)
        for length in stride(from: 0, to: whole.count, by: max(1, whole.count / 500)) where length > 0 {
            #expect(throws: DecodingError.self) { try UploadBatch.decode(whole.prefix(length)) }
        }
    }

    /// Objects that share their names reuse the last order and numbers of their size: the bytes
    /// are those of names sorted for each object, whatever sets of names follow each other
    /// (same size with other names, one member, none, a nested object).
    @Test func objectsThatShareTheirNamesWriteTheSameBytes() throws {
        let shapes: [[String]] = [["b", "a", "c"], ["a", "b", "d"], ["z"], [], ["a", "b", "c"], ["x", "y"], ["name", "a", "b", "c", "d", "e", "f"]]
        var random = SystemRandomNumberGenerator()
        var objects: [[String: JSONValue]] = []
        for i in 0..<400 {
            let names = shapes[Int.random(in: 0..<shapes.count, using: &random)]
            var o: [String: JSONValue] = [:]
            for (k, name) in names.enumerated() { o[name] = k % 2 == 0 ? .integer(Int64(i)) : .string("v\(i)") }
            objects.append(o)
        }
        var fast = BinaryWireWriter(capacity: 0, magic: ChangePage.binaryMagic)
        var sorted = BinaryWireWriter(capacity: 0, magic: ChangePage.binaryMagic)
        for o in objects {
            fast.object(o)
            sorted.unsigned(UInt64(o.count))
            for key in o.keys.sorted() {
                sorted.name(key)
                sorted.value(o[key]!)
            }
        }
        #expect(fast.out == sorted.out)
        // Nested objects, of the same size as the one holding them, read back whole.
        let nested: JSONValue = ["p": ["p": 1, "q": 2], "q": ["q": ["r": 3], "p": .null]]
        var w = BinaryWireWriter(capacity: 0, magic: ChangePage.binaryMagic)
        for _ in 0..<3 { w.value(nested) }
        try w.out.withUnsafeBytes { raw in
            var r = try BinaryWireReader(raw, after: ChangePage.binaryMagic)
            for _ in 0..<3 { #expect(try r.value() == nested) }
            #expect(r.atEnd)
        }
    }

    /// Pages of every change shape (attachments, leaves, inserted or not, null geometry), with and
    /// without `next` and `windowRows`, read back as their JSON does.
    @Test func binaryPagesReadBackAsJSONDoes() throws {
        var changes = SyncJSONTests.changes
        changes.append(FeedChange(kind: .upsert, globalId: "{D}", generation: 10, attributes: ["a": 1], geometry: .null, inserted: false))
        changes.append(FeedChange(kind: .upsert, globalId: "{E}", generation: .max, attributes: nil, geometry: ["paths": [[[1, 2], [3.5, 4]]]], inserted: true))
        for (next, rows) in [(String?.none, Int?.none), ("{E}", 1_000_001)] {
            var page = ChangePage(layerId: 3, since: 4, upto: 11, changes: changes, next: next)
            page.windowRows = rows
            let binary = Data(page.binaryEncoded())
            #expect(ChangePage.isBinary(binary) && !ChangePage.isBinary(page.json.jsonData))
            #expect(try ChangePage.decode(binary) == (try ChangePage.decode(page.json.jsonData)))
        }
        #expect(try ChangePage.decode(Data(ChangePage(layerId: 0, since: 0, upto: 0, changes: [], next: nil).binaryEncoded())).changes.isEmpty)
    }

    /// Pages of the stored form: values of every storage class, rows of two column sets (the
    /// second set written where it begins), a layer without geometry, leaves and attachments,
    /// read back as written; a REAL that is not finite reads back as NULL, as its JSON does.
    static let storedPage: ChangePage = {
        let points = FeedColumns(names: ["name", "count", "depth", "photo", "note"], types: ["String", "Integer", "Double", "Blob", "String"], globalIDFields: ["globalid"], spatial: true)
        let table = FeedColumns(names: ["label"], types: ["String"], globalIDFields: [], spatial: false)
        let blob = GeoPackageBinary.encode(.point(try! Point(x: -122.5, y: 45.5)), srsID: 4326)
        func change(_ gid: String, _ row: FeedRow, inserted: Bool? = nil) -> FeedChange {
            var c = FeedChange(kind: .upsert, globalId: gid, generation: 12, inserted: inserted)
            c.stored = row
            return c
        }
        var withAttachments = change("{A}", FeedRow(columns: points, values: [.text("pump \"A\" ✓"), .integer(-3), .real(2.5), .blob([0, 255, 7]), .null], geometry: blob), inserted: true)
        withAttachments.attachments = SyncJSONTests.changes[0].attachments
        return ChangePage(layerId: 2, since: 4, upto: 12, changes: [
            withAttachments,
            change("{B}", FeedRow(columns: points, values: [.null, .integer(.max), .real(-0.0), .blob([]), .text("")], geometry: nil), inserted: false),
            FeedChange(kind: .leave, globalId: "{C}", generation: 11),
            change("{D}", FeedRow(columns: table, values: [.text("x")], geometry: nil)),
            change("{E}", FeedRow(columns: points, values: [.integer(.min), .integer(0), .real(1e300), .null, .text("again")], geometry: blob)),
        ], next: "{E}")
    }()

    @Test func storedPagesReadBackAsWritten() throws {
        var page = Self.storedPage
        page.windowRows = 40
        let binary = Data(page.binaryEncoded())
        #expect(ChangePage.isBinary(binary) && ChangePage.storedMagic.marksLayout(of: binary) && page.isStoredForm)
        let read = try ChangePage.decode(binary)
        #expect(read == page)
        #expect(read.changes[0].stored!.columns === read.changes[1].stored!.columns, "rows of one column set share it")
        #expect(read.changes[3].stored!.columns.spatial == false)
        // The columns are written where a set begins: three times for the rows above.
        #expect(binary.ranges(of: Data("count".utf8)).count == 2, "the points' columns twice, the table's once")
        // Not finite: NULL, as JSON sends it.
        var infinite = Self.storedPage
        infinite.changes[1].stored!.values[2] = .real(.infinity)
        #expect(try ChangePage.decode(Data(infinite.binaryEncoded())).changes[1].stored!.values[2] == .null)
        // A page of leaves only is the first layout.
        let leaves = ChangePage(layerId: 2, since: 4, upto: 12, changes: [FeedChange(kind: .leave, globalId: "{C}", generation: 11)], next: nil)
        #expect(ChangePage.binaryMagic.marksLayout(of: Data(leaves.binaryEncoded())))
    }

    @Test func malformedStoredPagesAreRefused() throws {
        let whole = Data(Self.storedPage.binaryEncoded())
        for length in 3..<whole.count {
            #expect(throws: DecodingError.self) { try ChangePage.decode(whole.prefix(length)) }
        }
        #expect(throws: DecodingError.self) { try ChangePage.decode(whole + [0]) }
        // The first change's flags: after the header (layer, since, upto, flags, next "{E}", count).
        let first = ChangePage.storedMagic.bytes.count + 3 + 1 + 1 + 3 + 1
        #expect(whole[first] & 0xC0 == 0xC0, "stored, with its columns")
        func with(_ flags: UInt8, at offset: Int = first, _ body: Data = whole) -> Data {
            var data = body
            data[offset] = flags
            return data
        }
        let damaged = [
            with(whole[first] & ~0x80),  // stored values before any columns
            with(whole[first] | 0x02),  // stored values and JSON attributes at once
            with(whole[first] & ~0x40),  // columns without stored values
            with(0x01, at: 3),  // the stored form's flags in the first layout
        ]
        for data in damaged {
            #expect(throws: DecodingError.self) { try ChangePage.decode(data) }
        }
        // An unknown value tag.
        let text = "pump \"A\" ✓"
        let tag = try #require(whole.firstRange(of: Data([3, UInt8(text.utf8.count)]) + Data(text.utf8))).lowerBound
        #expect(throws: DecodingError.self) { try ChangePage.decode(with(9, at: tag)) }
    }

    @Test func malformedPagesAreRefused() throws {
        var page = ChangePage(layerId: 3, since: 4, upto: 11, changes: SyncJSONTests.changes, next: "{C}")
        page.windowRows = 7
        let whole = Data(page.binaryEncoded())
        // Cut inside the magic, a page is not binary and not JSON either.
        for length in 1..<3 {
            #expect(throws: (any Error).self) { try ChangePage.decode(whole.prefix(length)) }
        }
        for length in 3..<whole.count {
            #expect(throws: DecodingError.self) { try ChangePage.decode(whole.prefix(length)) }
        }
        var unknownFlag = whole
        unknownFlag[ChangePage.binaryMagic.bytes.count + 3] |= 0x40
        var wrongLayout = whole
        wrongLayout[3] = 9
        for data in [whole + [0], unknownFlag, wrongLayout] {
            #expect(throws: DecodingError.self) { try ChangePage.decode(data) }
        }
    }

    /// Bodies with random bytes changed (seeded): each reads as some batch or page or is refused
    /// with an error, never a crash or a hang (the server reads whatever a client sends).
    @Test func randomlyDamagedBodiesAreReadOrRefused() throws {
        var random = FastRandomGenerator(seed: 27)
        let batch = try SyncJSONTests.writtenDirectly[2].encoded(as: .binary)
        var page = ChangePage(layerId: 3, since: 4, upto: 11, changes: SyncJSONTests.changes, next: "{C}")
        page.windowRows = 7
        let pageBytes = Data(page.binaryEncoded()), storedBytes = Data(Self.storedPage.binaryEncoded())
        var refused = 0
        for round in 0..<3000 {
            var body = round % 2 == 0 ? batch : round % 4 == 1 ? pageBytes : storedBytes
            for _ in 0..<Int.random(in: 1...4, using: &random) {
                body[Int.random(in: 4..<body.count, using: &random)] = UInt8.random(in: 0...255, using: &random)
            }
            do {
                if round % 2 == 0 { _ = try UploadBatch.decode(body) } else { _ = try ChangePage.decode(body) }
            } catch is DecodingError {
                refused += 1
            }
        }
        #expect(refused > 1000, "most damaged bodies are refused (\(refused) of 3000)")
    }
}

