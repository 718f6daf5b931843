import Foundation
import OutpostCore
import OutpostStorage
import Testing

@testable import OutpostProtocol

/// The framed batch layout (docs/sync.md, "Framed batches"): written frame by frame as a seal
/// makes it, read frame by frame as its bytes arrive, the same batch as the other encodings, and
/// every malformed or cut body refused with a `DecodingError`.
@Suite("Framed upload batches")
struct FramedBatchTests {
    /// `batch` written through the framed writer in frames of about `frameBytes`; the bytes
    /// handed out while writing, and the body with where its unsent tail begins.
    static func framed(_ batch: UploadBatch, frameBytes: Int = 300) throws -> (handed: [UInt8], body: Data, unsentFrom: Int) {
        var handed: [UInt8] = []
        var head = batch
        head.layers = []
        let announced = batch.layers.map { layer in
            UploadBatch.AnnouncedLayer(
                id: layer.id, atMost: layer.edits.count, geometryWrites: layer.edits.count { $0.op == .delete || $0.carriesGeometry })
        }
        // Geometries as blobs when any edit carries one (as the binary encoding writes them).
        let blobs = batch.hasGeometryBlobs
        var writer = try UploadBatch.FramedWriter(
            header: head, layers: announced, capacity: 64, frameBytes: frameBytes, ready: { handed += $0 }, geometryBlobs: blobs)
        for layer in try blobs ? batch.withGeometryBlobs().layers : batch.layers {
            writer.beginLayer(id: layer.id)
            for e in layer.edits {
                let names = e.attributes.map { $0.keys.sorted() }
                writer.edit(
                    e.op, globalId: e.globalId, attributeNames: names, attribute: { e.attributes![names![$0]]! }, geometry: e.geometry,
                    geometryBlob: e.geometryBlob, changedColumns: e.changedColumns, baseValues: e.baseValues, editedAt: e.editedAt, baseGeneration: e.baseGeneration)
            }
        }
        #expect(writer.editCount == batch.editCount)
        let (body, unsentFrom) = writer.finish()
        return (handed, body, unsentFrom)
    }

    static var batches: [UploadBatch] {
        var many = UploadBatch(replicaId: "{R}", batchId: "{B}", seq: 4, schemaVersion: 2, rollbackOnFailure: false, layers: [])
        many.layers = (0..<3).map { layer in
            BatchLayer(id: layer * 5, edits: (0..<200).map {
                BatchEdit(op: .update, globalId: "{\(layer)-\($0)}", attributes: ["n": .integer(Int64($0)), "s": .string("x\($0)")], changedColumns: ["n", "s"], baseValues: ["n": .integer(0)], baseGeneration: 3)
            })
        }
        return [SyncJSONTests.batch, many] + SyncJSONTests.writtenDirectly
    }

    @Test func framedReadsBackAsTheOtherEncodingsDo() throws {
        for batch in Self.batches {
            let (handed, body, unsentFrom) = try Self.framed(batch)
            var expected = batch
            expected.layers.removeAll { $0.edits.isEmpty }
            #expect(UploadBatch.isFramed(body) && UploadBatch.Encoding(of: body) == .binary)
            // (A null geometry reads as none, as from the other encodings.)
            #expect(try UploadBatch.decode(body) == (try UploadBatch.decode(try expected.encoded(as: .binary))))
            #expect(try UploadBatch.decode(body) == (try UploadBatch.decode(try expected.encoded(as: .json))))
            // Everything but the end mark was handed out, in order.
            #expect(Array(body.prefix(unsentFrom)) == handed && unsentFrom == body.count - 1)
            #expect(body.last == 0, "a zero length ends the batch")
        }
        // Frames go out as they are closed: in frames of 300 bytes, each is handed out alone; in
        // one frame, the head first, then all the rest at the end.
        let many = Self.batches[1]
        var pieces: [Int] = []
        var writer = try UploadBatch.FramedWriter(
            header: UploadBatch(replicaId: "{R}", batchId: "{B}", seq: 1, schemaVersion: 1, rollbackOnFailure: true, layers: []),
            layers: [UploadBatch.AnnouncedLayer(id: 0, atMost: 200, geometryWrites: 0)], capacity: 64, frameBytes: 300) { pieces.append($0.count) }
        writer.beginLayer(id: 0)
        for e in many.layers[0].edits {
            let names = e.attributes!.keys.sorted()
            writer.edit(
                e.op, globalId: e.globalId, attributeNames: names, attribute: { e.attributes![names[$0]]! }, geometry: nil,
                geometryBlob: nil, changedColumns: e.changedColumns, baseValues: e.baseValues, editedAt: nil, baseGeneration: e.baseGeneration)
            if e.globalId == "{0-1}" { #expect(pieces.count == 1, "only the head before the first frame is full") }
        }
        #expect(pieces.count > 10 && pieces.dropFirst().dropLast().allSatisfy { $0 >= 280 && $0 < 400 }, "\(pieces)")
        let (whole, from) = writer.finish()
        #expect(from == whole.count - 1 && pieces.reduce(0, +) == from)
    }

    /// The reader fed in pieces of every size (one byte at a time too) gives the frames the
    /// whole body holds, in order, and nothing before its bytes are there.
    @Test func aReaderFedInPiecesReadsTheSameFrames() throws {
        let batch = Self.batches[1]
        let (_, body, _) = try Self.framed(batch)
        for piece in [1, 2, 7, 100, 4096] {
            var reader = UploadBatch.FramedReader()
            var frames: [UploadBatch.FramedReader.Frame] = []
            var offset = 0
            while offset < body.count {
                let end = min(offset + piece, body.count)
                body[offset..<end].withUnsafeBytes { reader.append($0) }
                offset = end
                if try reader.readHead() != nil {
                    while let frame = try reader.nextFrame() { frames.append(frame) }
                }
            }
            try reader.finish()
            #expect(reader.ended && reader.head?.batch.seq == 4 && reader.head?.layers.map(\.id) == [0, 5, 10])
            #expect(frames.count > 3, "several frames per layer")
            #expect(frames.map(\.position) == frames.map(\.position).sorted())
            for (position, layer) in batch.layers.enumerated() {
                #expect(frames.filter { $0.position == position }.flatMap(\.edits) == layer.edits)
            }
            // Read so that a frame joins the last one of its layer (up to a cap): the same edits
            // in fewer frames, none past the cap unless a frame of its own holds more.
            let cap = frames.map(\.edits.count).max()! * 2
            var joining = UploadBatch.FramedReader()
            var joined: [UploadBatch.FramedReader.Frame] = []
            body.withUnsafeBytes { joining.append($0) }
            if try joining.readHead() != nil {
                while try joining.nextFrame(into: &joined, joiningUpTo: cap) {}
            }
            try joining.finish()
            #expect(joined.count < frames.count && joined.allSatisfy { $0.edits.count <= cap })
            for (position, layer) in batch.layers.enumerated() {
                #expect(joined.filter { $0.position == position }.flatMap(\.edits) == layer.edits)
            }
        }
    }

    /// Every cut of a framed body is refused, by the whole-body reader and by the streaming
    /// reader when the body ends there; the whole body is not.
    @Test func everyCutIsRefused() throws {
        // Small frames: a cut falls in lengths, heads of frames and edits alike.
        let (_, body, _) = try Self.framed(Self.batches[0], frameBytes: 16)
        #expect(body.count > 200)
        // Three bytes and more are a binary body (fewer are not a batch of any kind).
        for cut in 3..<body.count {
            let part = body.prefix(cut)
            #expect(throws: DecodingError.self, "cut at \(cut)") { try UploadBatch.decode(part) }
            var reader = UploadBatch.FramedReader()
            part.withUnsafeBytes { reader.append($0) }
            #expect(throws: DecodingError.self, "cut at \(cut)") {
                if try reader.readHead() != nil { while try reader.nextFrame() != nil {} }
                try reader.finish()
            }
        }
        _ = try UploadBatch.decode(body)
    }

    /// A framed body: the magic, a head announcing `layers` (id, at most, geometry writes), then
    /// the frames `frames` writes (each returns its bytes, without the length), then `tail`.
    static func body(layers: [(Int, UInt64, UInt64)], frames: [(inout BinaryWireWriter) -> Void], tail: [UInt8] = [0]) -> Data {
        var w = BinaryWireWriter(capacity: 64, magic: UploadBatch.framedMagic)
        let head = w.beginCount()
        try! w.batchHead(UploadBatch(replicaId: "{R}", batchId: "{B}", seq: 1, schemaVersion: 1, rollbackOnFailure: true, layers: []), geometryBlobs: false)
        w.unsigned(UInt64(layers.count))
        for (id, atMost, writes) in layers {
            w.signed(Int64(id))
            w.unsigned(atMost)
            w.unsigned(writes)
        }
        w.endLength(head)
        for frame in frames {
            let length = w.beginCount()
            frame(&w)
            w.endLength(length)
        }
        w.out += tail
        return Data(w.out)
    }

    /// A frame of `count` delete edits of the layer at `position`.
    static func deletes(_ position: UInt64, _ count: Int, from first: Int = 0) -> (inout BinaryWireWriter) -> Void {
        { w in
            w.unsigned(position)
            w.unsigned(UInt64(count))
            for i in first..<first + count {
                w.batchEdit(.delete, globalId: "{\(i)}", attributeNames: nil, attribute: { _ in .null }, geometry: nil, geometryBlob: nil, blobs: false, changedColumns: nil, baseValues: nil, editedAt: nil, baseGeneration: nil)
            }
        }
    }

    @Test func malformedFramedBodiesAreRefused() throws {
        let good = Self.body(layers: [(3, 2, 2), (4, 1, 1)], frames: [Self.deletes(0, 1), Self.deletes(0, 1, from: 1), Self.deletes(1, 1, from: 2)])
        let read = try UploadBatch.decode(good)
        #expect(read.layers.map(\.id) == [3, 4] && read.layers.map(\.edits.count) == [2, 1], "consecutive frames of a layer make one")
        let malformed: [(String, Data)] = [
            ("a layer after the next", Self.body(layers: [(3, 2, 2), (4, 1, 1)], frames: [Self.deletes(1, 1), Self.deletes(0, 1)])),
            ("a position not announced", Self.body(layers: [(3, 2, 2)], frames: [Self.deletes(1, 1)])),
            ("more edits than announced", Self.body(layers: [(3, 2, 2)], frames: [Self.deletes(0, 2), Self.deletes(0, 1, from: 2)])),
            ("a frame without edits", Self.body(layers: [(3, 2, 2)], frames: [Self.deletes(0, 0)])),
            ("a frame with bytes after its edits", Self.body(layers: [(3, 2, 2)], frames: [{ w in Self.deletes(0, 1)(&w); w.byte(9) }])),
            ("bytes after the end", Self.body(layers: [(3, 2, 2)], frames: [Self.deletes(0, 1)], tail: [0, 0])),
            ("no end mark", Self.body(layers: [(3, 2, 2)], frames: [Self.deletes(0, 1)], tail: [])),
            ("a layer announced twice", Self.body(layers: [(3, 2, 2), (3, 1, 1)], frames: [])),
            ("more geometry writes than edits", Self.body(layers: [(3, 2, 3)], frames: [])),
            ("a frame longer than allowed", Self.body(layers: [(3, 2, 2)], frames: [], tail: [0xFF, 0xFF, 0xFF, 0xFF, 0x7F])),
            ("another layout", Data([0x4F, 0x50, 0x42, 0x03, 0])),
        ]
        for (what, body) in malformed {
            #expect(throws: DecodingError.self, "\(what)") { try UploadBatch.decode(body) }
        }
        // A malformed frame that would have joined the last one leaves that one as it was.
        let joinsBadly = Self.body(layers: [(3, 3, 3)], frames: [Self.deletes(0, 1), { w in Self.deletes(0, 2, from: 1)(&w); w.byte(9) }])
        var reader = UploadBatch.FramedReader()
        var frames: [UploadBatch.FramedReader.Frame] = []
        joinsBadly.withUnsafeBytes { reader.append($0) }
        _ = try reader.readHead()
        #expect(try reader.nextFrame(into: &frames, joiningUpTo: 10))
        #expect(throws: DecodingError.self) { try reader.nextFrame(into: &frames, joiningUpTo: 10) }
        #expect(frames.count == 1 && frames[0].edits.map(\.globalId) == ["{0}"])
    }

    /// Framed bodies with random bytes changed (seeded) are read or refused, never a crash.
    @Test func randomlyDamagedFramedBodiesAreReadOrRefused() throws {
        var random = FastRandomGenerator(seed: 41)
        let (_, batch, _) = try Self.framed(SyncJSONTests.writtenDirectly[2], frameBytes: 64)
        var refused = 0
        for _ in 0..<3000 {
            var body = batch
            for _ in 0..<Int.random(in: 1...4, using: &random) {
                body[Int.random(in: 4..<body.count, using: &random)] = UInt8.random(in: 0...255, using: &random)
            }
            do { _ = try UploadBatch.decode(body) } catch is DecodingError { refused += 1 }
        }
        #expect(refused > 1000, "most damaged bodies are refused (\(refused) of 3000)")
    }
}
