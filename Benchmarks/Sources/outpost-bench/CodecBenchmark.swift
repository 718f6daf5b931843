import Foundation
import OutpostCore
import OutpostProtocol
import OutpostStorage

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
        let hash = best(repetitions) { _ = UploadBatch.hash(data) }
        let mb = Double(text.count) / 1_048_576
        printTable(
            "Wire codecs: one 5,000-edit upload batch (\(format(mb, 2)) MB of JSON), best of \(repetitions)",
            ["", "ms", "MB/s"],
            [
                ["JSON write (JSONValue.jsonBytes)", format(write * 1000, 1), format(mb / write)],
                ["batch bytes from its edits through a JSONValue tree", format(treeWrite * 1000, 1), format(mb / treeWrite)],
                ["batch bytes written straight from its edits (UploadBatch.encoded)", format(directWrite * 1000, 1), format(mb / directWrite)],
                ["JSON parse (JSONValue.parse)", format(parse * 1000, 1), format(mb / parse)],
                ["SHA-256 content hash", format(hash * 1000, 1), format(mb / hash)],
            ])
    }
}
