import Foundation
import OutpostCore
import OutpostTestSupport
import Testing

@testable import OutpostStorage

@Suite("Service schema")
struct SchemaTests {
    @Test(arguments: ["field_inspection", "natural_earth"])
    func sampleSchemasLoadAndRoundTrip(service: String) async throws {
        let schema = try ServiceSchema.load(from: Repository.sampleData("\(service)/service.json"))
        #expect(!schema.layers.isEmpty)
        for layer in schema.allLayers {
            #expect(layer.fields.filter { $0.type == .oid }.count == 1)
            #expect(layer.globalIDField != nil)
        }
        let again = try ServiceSchema.decode(try schema.encoded())
        #expect(again == schema)
    }

    @Test func implicitFieldsAreAdded() async throws {
        let json = #"{"name":"s","layers":[{"id":0,"name":"pts","geometryType":"Point","fields":[{"name":"a","type":"String"}]}],"tables":[{"id":1,"name":"t","sync":false,"fields":[]}]}"#
        let schema = try ServiceSchema.decode(Data(json.utf8))
        #expect(schema.layers[0].fields.map(\.name) == ["objectid", "globalid", "a"])
        #expect(schema.layers[0].geometryType?.type == .point)
        #expect(schema.tables[0].fields.map(\.name) == ["objectid"])
    }

    @Test func esriGeometryNamesMapToMultiTypes() async throws {
        for (name, type) in [
            ("esriGeometryPoint", GeometryType.point), ("esriGeometryMultipoint", .multiPoint),
            ("esriGeometryPolyline", .multiLineString), ("esriGeometryPolygon", .multiPolygon), ("LineString", .lineString),
        ] {
            #expect(LayerGeometryType(name: name)?.type == type)
        }
        #expect(LayerGeometryType(name: "esriGeometryEnvelope") == nil)
    }

    static let invalid: [(json: String, expected: String)] = [
        (#"{"layers":[]}"#, "missing \"name\""),
        (#"{"name":"s","layers":[]}"#, "at least one layer"),
        (#"{"name":"s","formatVersion":9,"layers":[]}"#, "newer"),
        (#"{"name":"s","spatialReference":{"wkid":2193},"layers":[{"id":0,"name":"a","geometryType":"Point","fields":[]}]}"#, "2193"),
        (#"{"name":"s","layers":[{"id":0,"name":"a","geometryType":"Point","fields":[]},{"id":0,"name":"b","geometryType":"Point","fields":[]}]}"#, "used twice"),
        (#"{"name":"s","layers":[{"id":0,"name":"Bad-Name","geometryType":"Point","fields":[]}]}"#, "not a valid table name"),
        (#"{"name":"s","layers":[{"id":0,"name":"gpkg_x","geometryType":"Point","fields":[]}]}"#, "not a valid table name"),
        (#"{"name":"s","layers":[{"id":0,"name":"a","fields":[]}]}"#, "needs a geometry type"),
        (#"{"name":"s","tables":[{"id":0,"name":"a","geometryType":"Point","fields":[]}]}"#, "has no geometry"),
        (#"{"name":"s","layers":[{"id":0,"name":"a","geometryType":"Geometry","fields":[]}]}"#, "one geometry type"),
        (#"{"name":"s","layers":[{"id":0,"name":"a","geometryType":"Curve","fields":[]}]}"#, "geometryType"),
        (#"{"name":"s","layers":[{"id":0,"name":"a","geometryType":"Point","fields":[{"name":"select","type":"String"}]}]}"#, "not a valid field name"),
        (#"{"name":"s","layers":[{"id":0,"name":"a","geometryType":"Point","fields":[{"name":"geom","type":"String"}]}]}"#, "not a valid field name"),
        (#"{"name":"s","layers":[{"id":0,"name":"a","geometryType":"Point","fields":[{"name":"x","type":"String"},{"name":"X","type":"Integer"}]}]}"#, "used twice"),
        (#"{"name":"s","layers":[{"id":0,"name":"a","geometryType":"Point","fields":[{"name":"x","type":"Text"}]}]}"#, "unknown field type"),
        (#"{"name":"s","layers":[{"id":0,"name":"a","geometryType":"Point","fields":[{"name":"x","type":"Integer","length":3}]}]}"#, "length"),
        (#"{"name":"s","layers":[{"id":0,"name":"a","geometryType":"Point","fields":[{"name":"x","type":"String","domain":"nope"}]}]}"#, "no domain named"),
        (#"{"name":"s","layers":[{"id":0,"name":"a","geometryType":"Point","fields":[{"name":"x","type":"String","domain":{"type":"range","name":"r","range":[0,1]}}]}]}"#, "numeric field"),
        (#"{"name":"s","layers":[{"id":0,"name":"a","geometryType":"Point","fields":[{"name":"x","type":"Integer","domain":{"type":"codedValue","name":"c","codedValues":[{"name":"A","code":"a"}]}}]}]}"#, "is not a Integer"),
        (#"{"name":"s","layers":[{"id":0,"name":"a","geometryType":"Point","fields":[{"name":"x","type":"Integer","domain":{"type":"range","name":"r","range":[5,1]}}]}]}"#, "min ≤ max"),
        (#"{"name":"s","layers":[{"id":0,"name":"a","geometryType":"Point","fields":[{"name":"x","type":"Integer","defaultValue":99,"domain":{"type":"range","name":"r","range":[0,10]}}]}]}"#, "default"),
        (#"{"name":"s","layers":[{"id":0,"name":"a","geometryType":"Point","fields":[{"name":"x","type":"String","length":2,"defaultValue":"abc"}]}]}"#, "default"),
        (#"{"name":"s","layers":[{"id":0,"name":"a","geometryType":"Point","fields":[{"name":"o1","type":"OID"},{"name":"o2","type":"OID"}]}]}"#, "exactly one OID"),
        (#"{"name":"s","layers":[{"id":0,"name":"a","geometryType":"Point","displayField":"zz","fields":[]}]}"#, "displayField"),
        (#"{"name":"s","layers":[{"id":"zero","name":"a","geometryType":"Point","fields":[]}]}"#, "wrong type at layers[0].id"),
        (#"{"name":"s","layers":"#, "invalid JSON"),
    ]

    @Test(arguments: invalid)
    func invalidSchemasAreRejectedWithTheReason(json: String, expected: String) {
        do {
            _ = try ServiceSchema.decode(Data(json.utf8))
            Issue.record("accepted: \(json)")
        } catch let error as StorageError {
            #expect(error.code == .invalidSchema)
            #expect(error.message.contains(expected), "\(error.message)")
        } catch {
            Issue.record("unexpected \(error)")
        }
    }

    @Test func jsonSchemaAcceptsTheSamplesAndRejectsBadOnes() async throws {
        let script = """
            import json, sys, jsonschema
            schema = json.load(open(sys.argv[1]))
            jsonschema.Draft202012Validator.check_schema(schema)
            v = jsonschema.Draft202012Validator(schema)
            for path in sys.argv[2:]:
                errors = list(v.iter_errors(json.load(open(path))))
                assert not errors, (path, [e.message for e in errors])
            bad = [
                {"name": "s"},
                {"name": "s", "layers": [{"id": 0, "name": "a", "geometryType": "Point", "fields": [{"name": "x", "type": "Text"}]}]},
                {"name": "s", "layers": [{"id": 0, "name": "a", "fields": [], "colour": "red"}]},
            ]
            for doc in bad:
                assert list(v.iter_errors(doc)), doc
            print("ok")
            """
        let result = try await ExternalTools.python(
            script,
            [Repository.schema("service.schema.json").path]
                + ["field_inspection", "natural_earth", "street_inspections", "helsinki", "planning"].map { Repository.sampleData("\($0)/service.json").path })
        #expect(result.succeeded, "\(result.stderr)")
        // What the Swift encoder writes validates too.
        let dir = TemporaryDirectory()
        let schema = try ServiceSchema.load(from: Repository.sampleData("field_inspection/service.json"))
        try schema.encoded().write(to: dir.file("normalized.json"))
        let again = try await ExternalTools.python(
            "import json,sys,jsonschema; jsonschema.validate(json.load(open(sys.argv[2])), json.load(open(sys.argv[1]))); print('ok')",
            [Repository.schema("service.schema.json").path, dir.file("normalized.json").path])
        #expect(again.succeeded, "\(again.stderr)")
    }
}
