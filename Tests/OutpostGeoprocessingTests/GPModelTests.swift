import Foundation
import OutpostCore
import OutpostTestSupport
import Testing

@testable import OutpostGeoprocessing

/// Models: loading refuses what a run would trip over; a run equals the tools run by hand.
@Suite("Geoprocessing models")
struct GPModelTests {
    /// Buffer the points, then keep the buffers' parts inside an area.
    static let bufferThenClip: JSONValue = [
        "name": "BufferThenClip",
        "parameters": [
            ["name": "Points", "dataType": "GPFeatureRecordSetLayer"],
            ["name": "Area", "dataType": "GPFeatureRecordSetLayer"],
            ["name": "Reach", "dataType": "GPLinearUnit", "parameterType": "esriGPParameterTypeOptional", "defaultValue": ["distance": 300, "units": "esriMeters"]],
            ["name": "Result", "dataType": "GPFeatureRecordSetLayer", "direction": "esriGPParameterDirectionOutput", "parameterType": "esriGPParameterTypeDerived"],
        ],
        // Listed out of order on purpose: the clip step needs the buffer step first.
        "steps": [
            ["id": "clip", "tool": "Clip", "inputs": ["Input_Features": ["step": "buffer", "output": "Output_Features"], "Clip_Features": ["parameter": "Area"]]],
            ["id": "buffer", "tool": "Buffer", "inputs": ["Input_Features": ["parameter": "Points"], "Distance": ["parameter": "Reach"]]],
        ],
        "outputs": ["Result": ["step": "clip", "output": "Output_Features"]],
    ]

    static func edited(_ edit: (inout [String: JSONValue]) -> Void) -> JSONValue {
        var object = bufferThenClip.objectValue!
        edit(&object)
        return .object(object)
    }

    static func steps(_ steps: [JSONValue]) -> JSONValue { edited { $0["steps"] = .array(steps) } }

    static func refusal(_ json: JSONValue) -> String? {
        do {
            _ = try GPModel(json: json)
            return nil
        } catch let error as GPModelError {
            return error.reason
        } catch {
            return "\(error)"
        }
    }

    static var area: GPFeatureSet {
        get throws {
        GPFeatureSet(
            geometryType: "esriGeometryPolygon", spatialReference: SpatialReference(wkid: 3067), fields: [],
            features: [
                .init(
                    geometry: .polygon(try Polygon(rings: [[
                        Position(x: 385_000, y: 6_671_000), Position(x: 386_000, y: 6_671_000), Position(x: 386_000, y: 6_673_000),
                        Position(x: 385_000, y: 6_673_000), Position(x: 385_000, y: 6_671_000),
                    ]])), attributes: [:])
            ])
        }
    }

    static var points: GPFeatureSet {
        get throws {
        try GPFeatureSet(
            geometryType: "esriGeometryPoint", spatialReference: SpatialReference(wkid: 3067), fields: [GPField(name: "id", type: "esriFieldTypeInteger")],
            features: [(385_500, 6_672_000), (386_200, 6_672_000), (384_000, 6_672_000)].enumerated().map { i, p in
                .init(geometry: .point(try Point(Position(x: Double(p.0), y: Double(p.1)))), attributes: ["id": .integer(Int64(i))])
            })
        }
    }

    @Test func aRunEqualsTheToolsRunOneAfterTheOther() async throws {
        let model = try GPModel(json: Self.bufferThenClip)
        #expect(model.steps.map(\.id) == ["buffer", "clip"])
        let messages = MessageBox()
        let result = try await model.task.execute(
            ["Points": .featureSet(try Self.points), "Area": .featureSet(try Self.area)], context: GPToolContext { messages.add($0) })
        let buffered = try await BufferTool().execute(["Input_Features": .featureSet(try Self.points), "Distance": .linearUnit(distance: 300, units: .esriMeters)])
        let clipped = try await ClipTool().execute(["Input_Features": buffered["Output_Features"]!, "Clip_Features": .featureSet(try Self.area)])
        #expect(result["Result"] == clipped["Output_Features"])
        guard case .featureSet(let set)? = result["Result"] else { throw GPValueError("no result") }
        // The third point's buffer lies wholly outside the area, the second's partly inside.
        #expect(set.features.count == 2)
        #expect(messages.all.contains { $0.hasPrefix("buffer: ") } && messages.all.contains { $0.hasPrefix("clip: ") })
        // A model parameter left out takes its default; one given overrides it.
        let wider = try await model.task.execute(
            ["Points": .featureSet(try Self.points), "Area": .featureSet(try Self.area), "Reach": .linearUnit(distance: 0.5, units: .esriKilometers)])
        #expect(wider != result)
    }

    @Test func loadingRefusesBrokenModels() throws {
        #expect(Self.refusal(Self.bufferThenClip) == nil)
        // A cycle.
        let cycle = Self.steps([
            ["id": "buffer", "tool": "Buffer", "inputs": ["Input_Features": ["step": "clip", "output": "Output_Features"]]],
            ["id": "clip", "tool": "Clip", "inputs": ["Input_Features": ["step": "buffer", "output": "Output_Features"], "Clip_Features": ["parameter": "Area"]]],
        ])
        #expect(Self.refusal(cycle)?.contains("the steps buffer, clip form a cycle") == true)
        // A type mismatch: a linear unit fed into a feature input.
        let mismatch = Self.steps([
            ["id": "buffer", "tool": "Buffer", "inputs": ["Input_Features": ["parameter": "Reach"]]]
        ])
        #expect(Self.refusal(mismatch)?.contains("step buffer input Input_Features expects a GPFeatureRecordSetLayer but is fed a GPLinearUnit") == true)
        // An unknown tool, an unknown step, an unknown output, an unknown input.
        #expect(Self.refusal(Self.steps([["id": "x", "tool": "Teleport"]]))?.contains("there is no tool Teleport") == true)
        let noStep = Self.steps([["id": "buffer", "tool": "Buffer", "inputs": ["Input_Features": ["step": "ghost", "output": "Output_Features"]]]])
        #expect(Self.refusal(noStep)?.contains("there is no step ghost") == true)
        let noOutput = Self.steps([
            ["id": "a", "tool": "Buffer", "inputs": ["Input_Features": ["parameter": "Points"]]],
            ["id": "b", "tool": "Clip", "inputs": ["Input_Features": ["step": "a", "output": "Polygons"], "Clip_Features": ["parameter": "Area"]]],
        ])
        #expect(Self.refusal(noOutput)?.contains("has no output Polygons") == true)
        let noInput = Self.steps([["id": "a", "tool": "Buffer", "inputs": ["Input_Features": ["parameter": "Points"], "Radius": ["parameter": "Reach"]]]])
        #expect(Self.refusal(noInput)?.contains("Radius is not an input of Buffer") == true)
        // A required tool input left unbound (Clip needs its clip features).
        let unbound = Self.steps([
            ["id": "buffer", "tool": "Buffer", "inputs": ["Input_Features": ["parameter": "Points"]]],
            ["id": "clip", "tool": "Clip", "inputs": ["Input_Features": ["step": "buffer", "output": "Output_Features"]]],
        ])
        #expect(Self.refusal(unbound)?.contains("the required input Clip_Features is not bound") == true)
        // A fixed value of the wrong shape, a model output fed by nothing, a duplicate step id.
        let badValue = Self.steps([["id": "a", "tool": "Buffer", "inputs": ["Input_Features": ["parameter": "Points"], "Distance": ["value": ["distance": 5, "units": "esriFurlongs"]]]]])
        #expect(Self.refusal(badValue)?.contains("esriFurlongs") == true)
        #expect(Self.refusal(Self.edited { $0["outputs"] = [:] })?.contains("the output parameter Result is not fed by any step") == true)
        let twice = Self.steps([["id": "a", "tool": "Buffer", "inputs": ["Input_Features": ["parameter": "Points"]]], ["id": "a", "tool": "Buffer"]])
        #expect(Self.refusal(twice)?.contains("two steps have the id a") == true)
    }

    @Test func serviceDefinitionsReadToolsAndModels() throws {
        let directory = TemporaryDirectory("outpost-gp")
        try Self.bufferThenClip.jsonData.write(to: directory.file("buffer-clip.model.json"))
        let json: JSONValue = [
            "version": 1, "executionType": "esriExecutionTypeSynchronous", "maximumRecords": 500,
            "tasks": [["tool": "Buffer"], ["tool": "Clip", "name": "ClipToArea"], ["modelFile": "buffer-clip.model.json"]],
        ]
        try json.jsonData.write(to: directory.file("analysis.gp.json"))
        let service = try GPServiceDefinition(contentsOf: directory.file("analysis.gp.json"))
        #expect(service.name == "analysis")
        #expect(service.tasks.map(\.name) == ["Buffer", "ClipToArea", "BufferThenClip"])
        #expect(service.executionType == .synchronous && service.maximumRecords == 500)

        func refusal(_ json: JSONValue) -> String? {
            do {
                _ = try GPServiceDefinition(json: json, name: "bad", directory: directory.url)
                return nil
            } catch {
                return "\(error)"
            }
        }
        #expect(refusal(["tasks": [["tool": "Teleport"]]])?.contains("there is no tool Teleport") == true)
        #expect(refusal(["tasks": [["tool": "Buffer"], ["tool": "Buffer"]]])?.contains("two tasks are named Buffer") == true)
        #expect(refusal(["version": 2, "tasks": [["tool": "Buffer"]]])?.contains("version 2 is not known") == true)
        #expect(refusal(["executionType": "soon", "tasks": [["tool": "Buffer"]]])?.contains("executionType soon") == true)
        #expect(refusal(["tasks": [["modelFile": "../etc/passwd"]]])?.contains("cannot read the model file") == true)
        #expect(refusal(["tasks": []])?.contains("at least one task") == true)
        #expect(refusal(["maximumRecords": 0, "tasks": [["tool": "Buffer"]]])?.contains("maximumRecords must be a positive integer") == true)
    }
}

final class MessageBox: @unchecked Sendable {
    private var items: [String] = []
    private let lock = NSLock()
    func add(_ s: String) { lock.withLock { items.append(s) } }
    var all: [String] { lock.withLock { items } }
}

@Suite("Geoprocessing service schema")
struct GPServiceSchemaTests {
    /// The checked-in example and the test suites' definitions validate against
    /// Schemas/gp-service.schema.json (jsonschema), and Outpost reads the example.
    @Test func definitionsValidateAgainstTheSchema() async throws {
        let example = Repository.schema("examples/analysis.gp.json")
        let service = try GPServiceDefinition(contentsOf: example)
        #expect(service.name == "analysis" && service.tasks.map(\.name) == ["Buffer", "ClipToArea", "BufferThenClip"])
        let directory = TemporaryDirectory("outpost-gp-schema")
        let inline: JSONValue = ["tasks": [["tool": "Buffer"], ["model": GPModelTests.bufferThenClip]]]
        try inline.jsonData.write(to: directory.file("inline.gp.json"))
        let planning = Repository.sampleData("planning/planning.gp.json")
        #expect(try GPServiceDefinition(contentsOf: planning).tasks.map(\.name).contains("MailingList"))
        // Invalid: a task with both a tool and a model; an execution type that does not exist.
        var both = try JSONValue.parse(try Data(contentsOf: example)).objectValue ?? [:]
        var unknownType = both
        var tasks = both["tasks"]?.arrayValue ?? []
        tasks[0] = ["tool": "Buffer", "model": ["name": "x", "steps": [["id": "a", "tool": "Clip"]]]]
        both["tasks"] = .array(tasks)
        unknownType["executionType"] = "soon"
        let result = try await ExternalTools.checkJSONSchema(
            Repository.schema("gp-service.schema.json"), valid: [example, directory.file("inline.gp.json"), planning],
            invalid: [.object(both), .object(unknownType)])
        #expect(result.succeeded, "\(result.stderr)")
    }
}
