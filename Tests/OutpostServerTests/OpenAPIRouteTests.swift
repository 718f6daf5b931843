import Foundation
import OutpostCore
import OutpostTestSupport
import Testing

@testable import OutpostServer

/// `Schemas/openapi.json` and the router agree: every route a handler answers is described
/// (with its methods), every described path is a route (or served by the wider route its
/// `x-outpost-route` names), and the description is valid OpenAPI 3.1.
@Suite("The OpenAPI description of the routes")
struct OpenAPIRouteTests {
    static func description() throws -> JSONValue {
        try JSONValue.parse(Data(contentsOf: Repository.schema("openapi.json")))
    }

    @Test func everyRouteIsDescribedAndEveryDescribedPathIsARoute() throws {
        let responder = FeatureServerResponder(services: ServiceDirectory([]), configuration: ServerConfiguration(port: 0))
        var answered: [String: Set<String>] = [:]
        for route in responder.answeredRoutes { answered[route.path, default: []].formUnion(route.methods) }

        let document = try Self.description()
        var described: [String: Set<String>] = [:]
        for (path, item) in document["paths"]?.objectValue ?? [:] {
            let pattern = item["x-outpost-route"]?.stringValue ?? path
            let methods = (item.objectValue ?? [:]).keys.filter { !$0.hasPrefix("x-") }.map { $0.uppercased() }
            described[pattern, default: []].formUnion(methods)
        }
        let fallbacks = Set((document["x-outpost-fallback-routes"]?.objectValue ?? [:]).keys)

        for (path, methods) in answered.sorted(by: { $0.key < $1.key }) {
            if fallbacks.contains(path) { continue }
            guard let documented = described[path] else {
                Issue.record("\(path) (\(methods.sorted().joined(separator: ", "))) is not in Schemas/openapi.json")
                continue
            }
            #expect(documented == methods, "\(path): the router answers \(methods.sorted()), the description says \(documented.sorted())")
        }
        for path in described.keys.sorted() where answered[path] == nil {
            Issue.record("Schemas/openapi.json describes \(path), which no route serves")
        }
        for path in fallbacks.sorted() where answered[path] == nil {
            Issue.record("x-outpost-fallback-routes names \(path), which no route serves")
        }
        #expect(described.count > 60)
    }

    /// openapi-spec-validator (PyPI) accepts it as OpenAPI 3.1, each operation id is unique, and
    /// every link (what schemathesis's stateful phase follows) names an operation there is.
    @Test func theDescriptionIsValidOpenAPI() async throws {
        let check = try await ExternalTools.python(
            """
            import sys, json
            from openapi_spec_validator import validate
            from openapi_spec_validator.readers import read_from_filename
            document, _ = read_from_filename(sys.argv[1])
            validate(document)
            ids = [op["operationId"] for item in document["paths"].values() for key, op in item.items() if not key.startswith("x-")]
            assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})
            links = [l for item in document["paths"].values() for key, op in item.items() if not key.startswith("x-")
                     for r in op["responses"].values() for l in r.get("links", {}).values()]
            assert links and all(l["operationId"] in ids for l in links), [l["operationId"] for l in links if l["operationId"] not in ids]
            print(len(ids))
            """, [Repository.schema("openapi.json").path])
        #expect(check.succeeded, "\(check.stderr)")
    }
}
