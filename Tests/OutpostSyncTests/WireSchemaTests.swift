import Foundation
import OutpostCore
import OutpostHTTPTestSupport
import OutpostProtocol
import OutpostServiceTestSupport
import OutpostStorage
import OutpostTestSupport
import Testing

@testable import OutpostSync

/// The native sync protocol's bodies against their JSON Schemas in `Schemas/`, checked by
/// Python's `jsonschema`: what really crossed the wire in a sync with every kind of edit, and the
/// example files (which also decode).
@Suite("Sync wire formats and their JSON Schemas")
struct WireSchemaTests {
    static let schemas = ["upload-batch", "batch-result", "change-page"]

    /// Validates each (schema, file) pair; fails with jsonschema's messages. Also checks that a
    /// broken copy of the first document of each schema is refused (the schema is not vacuous).
    static func validate(_ documents: [(schema: String, file: URL)]) async throws -> CommandResult {
        let script = """
            import json, sys, copy, jsonschema, referencing
            schemas = {name: json.load(open(sys.argv[1] + "/" + name + ".schema.json")) for name in sys.argv[2].split(",")}
            registry = referencing.Registry().with_resources(
                [(s["$id"], referencing.Resource.from_contents(s)) for s in schemas.values()])
            validators = {}
            for name, schema in schemas.items():
                jsonschema.Draft202012Validator.check_schema(schema)
                validators[name] = jsonschema.Draft202012Validator(schema, registry=registry)
            seen = set()
            for pair in sys.argv[3:]:
                name, path = pair.split("=", 1)
                document = json.load(open(path))
                errors = [f"{list(e.absolute_path)}: {e.message}" for e in validators[name].iter_errors(document)]
                assert not errors, (path, errors[:5])
                if name not in seen:
                    seen.add(name)
                    broken = copy.deepcopy(document)
                    broken["unexpected"] = True
                    assert list(validators[name].iter_errors(broken)), ("a broken", name, "validates")
            print("ok")
            """
        return try await ExternalTools.python(
            script, [Repository.schema("").path, schemas.joined(separator: ",")] + documents.map { "\($0.schema)=\($0.file.path)" })
    }

    /// Collects the bodies of the native sync exchanges a proxy sees.
    final class Capture: Sendable {
        let documents = Locked<[(schema: String, body: Data)]>([])
        let binaryBatches = Locked(0)
        let binaryPages = Locked(0)

        static func json(ofBinaryPage body: Data) throws -> Data {
            var page = try ChangePage.decode(body)
            page.changes = try FeedChange.withJSONValues(page.changes)
            return page.json.jsonData
        }

        func observe(_ method: String, _ uri: String, _ request: Data, _ status: Int, _ response: Data) {
            guard status == 200 else { return }
            // A binary batch carries the same content: its JSON form is what the schema describes.
            var batch = request
            if method == "PUT", UploadBatch.Encoding(of: request) == .binary {
                binaryBatches.withLock { $0 += 1 }
                batch = (try? UploadBatch.decode(request).encoded(as: .json)) ?? request
            }
            documents.withLock { list in
                if method == "PUT", uri.contains("/batches/") {
                    list.append(("upload-batch", batch))
                    list.append(("batch-result", response))
                } else if method == "GET", uri.contains("/changes?") {
                    // So for a binary page (the sync client asks for them), and for the stored
                    // form's values made JSON as the replica makes them.
                    guard ChangePage.isBinary(response) else { return list.append(("change-page", response)) }
                    binaryPages.withLock { $0 += 1 }
                    list.append(("change-page", (try? Self.json(ofBinaryPage: response)) ?? response))
                }
            }
        }
    }

    /// A crew inserts, moves, updates, deletes, adds and removes a photo, and edits a field the
    /// office edited too (a conflict in the result); the office's sync downloads all of it
    /// (upserts with attachments, leaves). Every body validates.
    @Test(.scaledTimeLimit(minutes: 2), arguments: BackendKind.syncing)
    func whatCrossesTheWireValidates(kind: BackendKind) async throws {
        let h = try await SyncHarness.start(kind)
        let capture = Capture()
        let proxy = try await LoopbackProxy.start(upstream: h.live.baseURL, observer: capture.observe) { _, _ in .forward }
        let url = proxy.url(for: h.url)
        let crew = try await h.replica("crew", layers: [0, 1], url: url, attachments: .bidirectional)
        let office = try await h.replica("office", layers: [0, 1], url: url, attachments: .bidirectional)

        let officePoints = try office.table(named: "inspection_points")
        var contested = try #require(try await officePoints.feature(objectID: 5))
        contested.attributes = ["notes": .string("office: replace the cap")]
        try await officePoints.update([contested])
        try await h.sync(office, url: url)

        let points = try crew.table(named: "inspection_points")
        let added = try await points.add([
            Feature(
                attributes: ["asset_id": .string("HY-WIRE"), "asset_type": .string("hydrant"), "status": .string("open"), "inspected_at": .date(Date())],
                geometry: .point(try Point(x: -122.66, y: 45.51)))
        ])[0]
        var moved = try #require(try await points.feature(objectID: 3))
        moved.attributes = ["condition": .integer(2)]
        moved.geometry = .point(try Point(x: -122.651, y: 45.521))
        var mine = try #require(try await points.feature(objectID: 5))
        mine.attributes = ["notes": .string("crew: cap replaced")]
        try await points.update([moved, mine])
        try await points.delete(objectIDs: [7])
        _ = try await points.addAttachment(toFeature: added.objectID!, name: "hydrant.png", contentType: "image/png", data: Data(repeating: 9, count: 5000))
        let old = try await points.addAttachment(toFeature: 3, name: "old.txt", contentType: "text/plain", data: Data("old".utf8))
        try await h.sync(crew, url: url)
        try await points.deleteAttachment(id: old.id)
        try await crew.table(named: "pipelines").delete(objectIDs: [1])
        try await h.sync(crew, url: url)
        try await h.sync(office, url: url)

        let dir = TemporaryDirectory()
        let documents = capture.documents.withLock { $0 }
        var pairs: [(schema: String, file: URL)] = []
        for (i, document) in documents.enumerated() {
            let file = dir.file("\(i)-\(document.schema).json")
            try document.body.write(to: file)
            pairs.append((document.schema, file))
        }
        // What the sync sent covers every shape the schemas describe.
        let text = documents.map { String(decoding: $0.body, as: UTF8.self) }.joined(separator: "\n")
        for shape in [#""op":"insert""#, #""op":"update""#, #""op":"delete""#, #""attachments":[{"#, #""kind":"upsert""#, #""kind":"leave""#, #""conflicts":[{"#, #""changedColumns""#] {
            #expect(text.contains(shape), "no \(shape) in the captured exchanges")
        }
        #expect(capture.binaryBatches.withLock { $0 } > 0, "the replicas sealed binary batches, which their server reads")
        #expect(capture.binaryPages.withLock { $0 } > 0, "the replicas asked for binary change pages")
        let validation = try await Self.validate(pairs)
        #expect(validation.succeeded, "\(validation.stderr)")
        try await proxy.stop()
        try await h.stop()
    }

    /// The examples in `Schemas/examples` validate and decode into the wire types.
    @Test func examplesValidateAndDecode() async throws {
        var pairs: [(schema: String, file: URL)] = []
        for name in Self.schemas {
            let file = Repository.schema("examples/\(name).json")
            pairs.append((name, file))
            let json = try JSONValue.parse(try Data(contentsOf: file))
            switch name {
            case "upload-batch": #expect(try UploadBatch(json: json).editCount > 0)
            case "batch-result": #expect(try !BatchResult(json: json).layers.isEmpty)
            default: #expect(try !ChangePage(json: json).changes.isEmpty)
            }
        }
        let validation = try await Self.validate(pairs)
        #expect(validation.succeeded, "\(validation.stderr)")
    }
}
