import CDeflateBench
import CZlibBench
import Foundation
import OutpostCore
import OutpostProtocol
import OutpostServer
import OutpostStorage
import OutpostSyncService

/// The wire codecs every batch and change page goes through: JSON writing and parsing of a
/// 5,000-edit upload batch (the sync benchmark's edit shape: moved point, changed attributes,
/// base values), and SHA-256 over it (the batch's content hash). Best of `repetitions` runs.
enum CodecBenchmark {
    static func batch() -> UploadBatch {
        var random = FastRandomGenerator(seed: 3)
        var edits: [BatchEdit] = []
        for i in 0..<5000 {
            let n = Double(i)
            let attributes: [String: JSONValue] = ["value": .number(n + 0.25), "label": .string("edited-\(i)"), "id_int": .integer(Int64(i))]
            let geometry: JSONValue = .object(["x": .number(-122.123456789 + n * 1e-5), "y": .number(45.987654321 - n * 1e-5)])
            let base: [String: JSONValue] = ["value": .number(n), "label": .string("base-\(i)"), "geom": .object(["x": .number(1.5), "y": .number(2.5)])]
            edits.append(BatchEdit(
                op: .update, globalId: GlobalID.make(using: &random), attributes: attributes, geometry: geometry,
                changedColumns: ["geom", "label", "value"], baseValues: base, editedAt: "2026-11-23T10:00:00.000Z", baseGeneration: 7))
        }
        return UploadBatch(
            replicaId: GlobalID.make(using: &random), batchId: GlobalID.make(using: &random), seq: 1, schemaVersion: 1, rollbackOnFailure: true,
            layers: [BatchLayer(id: 0, edits: edits)])
    }

    static func best(_ repetitions: Int, _ body: () throws -> Void) rethrows -> Double {
        var best = Double.infinity
        for _ in 0..<repetitions {
            let started = Date()
            try body()
            best = min(best, Date().timeIntervalSince(started))
        }
        return best
    }

    static func run(repetitions: Int = 60) throws {
        let edits = batch()
        let json = try JSONValue.parse(try edits.encoded())
        var text: [UInt8] = []
        let write = best(repetitions) { text = json.jsonBytes }
        // What sealing does: the batch's bytes from its edits (tree built and written before).
        let treeWrite = best(repetitions) { _ = edits.json.jsonData }
        let directWrite = try best(repetitions) { _ = try edits.encoded() }
        let data = Data(text)
        let parse = try best(repetitions) { _ = try JSONValue.parse(data) }
        // What the server does with a body: the batch read whole, from JSON and from binary.
        let readJSON = try best(repetitions) { _ = try UploadBatch.decode(data) }
        var binary = Data()
        let binaryWrite = try best(repetitions) { binary = try edits.encoded(as: .binary) }
        let readBinary = try best(repetitions) { _ = try UploadBatch.decode(binary) }
        let binaryMB = Double(binary.count) / 1_048_576
        let binaryHash = best(repetitions) { _ = UploadBatch.hash(binary) }
        let hash = best(repetitions) { _ = UploadBatch.hash(data) }
        // Gzip at level 6 as the server sends whole answers (libdeflate) and as it did (zlib's stream).
        var zlibSize = 0, deflateSize = 0
        let zlib = best(repetitions) { zlibSize = gzipWithZlib(text) }
        let deflate = best(repetitions) { deflateSize = gzipWithLibdeflate(text) }
        let mb = Double(text.count) / 1_048_576
        // The server's answer to the batch: one result per edit, as JSON text (kept in the ledger
        // and sent back), through a JSONValue tree and written straight.
        let result = BatchResult(seq: 1, batchId: edits.batchId, generation: 9, layers: [
            BatchLayerResult(id: 0, results: edits.layers[0].edits.enumerated().map { i, edit in
                BatchEditResult(globalId: edit.globalId, op: edit.op, success: true, objectId: Int64(i + 1))
            })
        ])
        var answer = ""
        let answerTree = best(repetitions) { answer = result.json.jsonString }
        let answerDirect = best(repetitions) { answer = result.jsonText }
        let answerMB = Double(answer.utf8.count) / 1_048_576
        // The server's planning of the batch's edits (every feature present, no others' changes):
        // the decisions alone, before any row is written.
        let layer = SyncBenchmark.schema.layers[0]
        var planner = BatchPlanner(layer: layer, generation: 9, origin: (edits.replicaId, 1), requestedRule: nil, droppedFields: [], now: BatchPlanner.timestamp(Date()))
        for (i, edit) in edits.layers[0].edits.enumerated() { planner.objectIDs[GlobalID.normalized(edit.globalId)!] = Int64(i + 1) }
        let plan = try best(repetitions) { [planner] in
            var p = planner
            for edit in edits.layers[0].edits { _ = try p.plan(edit) }
        }
        // Then each planned update through the validator every written feature passes.
        var updates: [Feature] = []
        var p = planner
        for edit in edits.layers[0].edits {
            for case .update(_, let feature, _) in try p.plan(edit).steps { updates.append(feature) }
        }
        let validator = FeatureValidator(layer: layer, schema: SyncBenchmark.schema)
        let validate = try best(repetitions) {
            for (i, feature) in updates.enumerated() { _ = try validator.update(feature, index: i) }
        }
        printTable(
            "Wire codecs: one 5,000-edit upload batch (\(format(mb, 2)) MB of JSON), best of \(repetitions)",
            ["", "ms", "MB/s"],
            [
                ["JSON write (JSONValue.jsonBytes)", format(write * 1000, 1), format(mb / write)],
                ["batch bytes from its edits through a JSONValue tree", format(treeWrite * 1000, 1), format(mb / treeWrite)],
                ["batch bytes written straight from its edits (UploadBatch.encoded)", format(directWrite * 1000, 1), format(mb / directWrite)],
                ["JSON parse (JSONValue.parse)", format(parse * 1000, 1), format(mb / parse)],
                ["batch read from JSON (UploadBatch.decode)", format(readJSON * 1000, 1), format(mb / readJSON)],
                ["batch bytes in binary (\(binary.count >> 10) KB, encoded(as: .binary))", format(binaryWrite * 1000, 1), format(binaryMB / binaryWrite)],
                ["batch read from binary (UploadBatch.decode)", format(readBinary * 1000, 1), format(binaryMB / readBinary)],
                ["SHA-256 of the binary batch (swift-crypto)", format(binaryHash * 1000, 1), format(binaryMB / binaryHash)],
                ["gzip level 6, zlib (\(zlibSize >> 10) KB)", format(zlib * 1000, 1), format(mb / zlib)],
                ["gzip level 6, libdeflate (\(deflateSize >> 10) KB)", format(deflate * 1000, 1), format(mb / deflate)],
                ["SHA-256 content hash (swift-crypto, client and server)", format(hash * 1000, 1), format(mb / hash)],
                ["batch answer (\(answer.utf8.count >> 10) KB of JSON) through a JSONValue tree", format(answerTree * 1000, 1), format(answerMB / answerTree)],
                ["batch answer written straight (BatchResult.jsonText)", format(answerDirect * 1000, 1), format(answerMB / answerDirect)],
                ["the server's plans for the batch's edits (BatchPlanner.plan)", format(plan * 1000, 1), ""],
                ["the planned updates checked (FeatureValidator.update)", format(validate * 1000, 1), ""],
            ])
        try checksum(repetitions: max(3, repetitions / 10), updates: updates)
    }

    /// A verify's work on each side: the checksum of the sync benchmark's 100,000-point layer
    /// (every row read and hashed, FeatureTable.checksum); then the same rows read as features, as
    /// a feed page reads them.
    static func checksum(repetitions: Int, updates: [Feature]) throws {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-bench-checksum-\(getpid()).gpkg")
        defer { Geodatabase.removeFiles(at: url) }
        try SyncBenchmark.createService(count: 100_000, at: url)
        // The planned updates' attributes written as the server writes them (one
        // FeatureTable.update each), in a transaction rolled back after: the per-edit path without
        // the R-tree's work (a moved point costs its triggers ~23 µs, or a share of a pack).
        struct RolledBack: Error {}
        let writable = try Geodatabase.open(at: url)
        let write = try best(repetitions) {
            do {
                try writable.write { conn in
                    let table = try conn.geodatabase.table(named: "points")
                    // As the server's batch does: gpkg_contents touched once at the end.
                    try conn.deferringContentsUpdates {
                        for var feature in updates {
                            feature.geometry = nil
                            try table.update([feature], in: conn)
                        }
                    }
                    throw RolledBack()
                }
            } catch is RolledBack {}
        }
        try writable.close()
        let gdb = try Geodatabase.open(at: url, readOnly: true)
        defer { try? gdb.close() }
        var sum = FeatureDigest.Accumulator()
        let seconds = try best(repetitions) {
            sum = try gdb.read { conn in try conn.geodatabase.table(named: "points").checksum(matching: .all, in: conn) }
        }
        // What a feed page does with each feature it sends: read into a Feature, then made the
        // page's change (attributes as JSON values, the geometry as Esri JSON).
        let schema = SyncBenchmark.schema, layer = schema.layers[0]
        var read = 0
        let decode = try best(repetitions) {
            read = 0
            try gdb.read { conn in try conn.geodatabase.table(named: "points").forEach(matching: .all, in: conn) { _ in read += 1 } }
        }
        let asChanges = try best(repetitions) {
            try gdb.read { conn in
                try conn.geodatabase.table(named: "points").forEach(matching: .all, in: conn) { feature in
                    _ = try ReplicaRows.upsert(feature, fields: layer.fields.filter { $0.type != .oid }, generation: 1)
                }
            }
        }
        // What a feed page does now: the same values read straight from the rows.
        let asSyncRows = try best(repetitions) {
            try gdb.read { conn in try conn.geodatabase.table(named: "points").forEachSyncRow(matching: .all, in: conn) { _ in } }
        }
        printTable(
            "Layer checksum (a verify's work on each side), best of \(repetitions)", ["", "ms", "rows/s"],
            [
                ["100,000 points, 5 attributes (\(sum.count) rows, \(sum.hex))", format(seconds * 1000, 1), format(Double(sum.count) / seconds)],
                ["the same rows read as features (FeatureTable.forEach, \(read) rows)", format(decode * 1000, 1), format(Double(read) / decode)],
                ["and made feed changes (ReplicaRows.upsert)", format(asChanges * 1000, 1), format(Double(read) / asChanges)],
                ["the same values read straight from the rows (FeatureTable.forEachSyncRow)", format(asSyncRows * 1000, 1), format(Double(read) / asSyncRows)],
                ["\(updates.count) planned updates' attributes written (FeatureTable.update each)", format(write * 1000, 1), format(Double(updates.count) / write)],
            ])
    }

    /// The gzip size of `bytes` through zlib's stream API (level 6, gzip wrapper).
    static func gzipWithZlib(_ bytes: [UInt8]) -> Int {
        var stream = z_stream()
        guard deflateInit2_(&stream, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else { return -1 }
        defer { deflateEnd(&stream) }
        var out = [UInt8](repeating: 0, count: Int(deflateBound(&stream, uLong(bytes.count))) + 64)
        var input = bytes
        let rc = input.withUnsafeMutableBufferPointer { src in
            out.withUnsafeMutableBufferPointer { dst in
                stream.next_in = src.baseAddress
                stream.avail_in = uInt(src.count)
                stream.next_out = dst.baseAddress
                stream.avail_out = uInt(dst.count)
                return deflate(&stream, Z_FINISH)
            }
        }
        return rc == Z_STREAM_END ? Int(stream.total_out) : -1
    }

    /// The gzip size of `bytes` through libdeflate (level 6).
    static func gzipWithLibdeflate(_ bytes: [UInt8]) -> Int {
        guard let compressor = libdeflate_alloc_compressor(6) else { return -1 }
        defer { libdeflate_free_compressor(compressor) }
        var out = [UInt8](repeating: 0, count: libdeflate_gzip_compress_bound(compressor, bytes.count))
        return bytes.withUnsafeBufferPointer { src in
            out.withUnsafeMutableBufferPointer { dst in libdeflate_gzip_compress(compressor, src.baseAddress, src.count, dst.baseAddress, dst.count) }
        }
    }
}
