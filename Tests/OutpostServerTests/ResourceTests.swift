import Foundation
import OutpostCore
import OutpostTestSupport
import OutpostServiceTestSupport
import Testing

@testable import OutpostServer

@Suite("Service, layer and catalog resources")
struct ResourceTests {
    @Test(arguments: BackendKind.available)
    func catalogServiceAndLayers(kind: BackendKind) async throws {
        try await withServer(kind) { client, _ in
            let health = try await client.get("/health")
            #expect(health.status == 200)
            #expect(try health.json()["status"] == "ok")

            let catalog = try await client.get("/arcgis/rest/services?f=json").json()
            #expect(catalog["services"] == [["name": "field_inspection", "type": "FeatureServer"]])

            let info = try await client.get("\(base)?f=json").json()
            #expect(info["syncEnabled"] == true)
            #expect(info["capabilities"] == "Query,Create,Update,Delete,Sync")
            #expect(info["syncCapabilities"]?["supportsPerLayerSync"] == true)
            #expect(info["maxRecordCount"] == 2000)
            #expect(info["spatialReference"]?["wkid"] == 4326)
            #expect(info["layers"]?.arrayValue?.map { $0["name"]!.stringValue! } == ["inspection_points", "pipelines", "service_areas"])
            #expect(info["tables"]?.arrayValue?.map { $0["id"]! } == [3])
            let full = try #require(info["fullExtent"])
            #expect((full["xmin"]?.doubleValue ?? 0) < -122.69 && (full["ymax"]?.doubleValue ?? 0) > 45.55)

            let layer = try await client.get("\(base)/0?f=json").json()
            #expect(layer["objectIdField"] == "objectid" && layer["globalIdField"] == "globalid")
            #expect(layer["geometryType"] == "esriGeometryPoint" && layer["hasAttachments"] == true)
            let fields = try #require(layer["fields"]?.arrayValue)
            let byName = Dictionary(uniqueKeysWithValues: fields.map { ($0["name"]!.stringValue!, $0) })
            #expect(byName["objectid"]?["type"] == "esriFieldTypeOID")
            #expect(byName["globalid"]?["type"] == "esriFieldTypeGlobalID")
            #expect(byName["inspected_at"]?["type"] == "esriFieldTypeDate")
            #expect(byName["asset_id"]?["length"] == 16 && byName["asset_id"]?["nullable"] == false)
            #expect(byName["status"]?["domain"]?["codedValues"]?.arrayValue?.count == 3)
            #expect(byName["depth_m"]?["domain"]?["range"] == [0, 30])
            #expect(layer["extent"]?["spatialReference"]?["wkid"] == 4326)
            #expect(layer["advancedQueryCapabilities"]?["supportsPagination"] == true)

            let lines = try await client.get("\(base)/1").json()
            #expect(lines["geometryType"] == "esriGeometryPolyline")
            let table = try await client.get("\(base)/3").json()
            #expect(table["type"] == "Table" && table["geometryType"] == nil)
            let all = try await client.get("\(base)/layers?f=json").json()
            #expect(all["layers"]?.arrayValue?.count == 3 && all["tables"]?.arrayValue?.count == 1)

            let pretty = try await client.get("\(base)/0?f=pjson")
            #expect(pretty.text.contains("\n  \"capabilities\" : "))
        }
    }

    @Test(arguments: BackendKind.available)
    func errorsAreArcGISShapedWithTheRightStatus(kind: BackendKind) async throws {
        try await withServer(kind) { client, _ in
            let cases: [(String, Int, String)] = [
                ("/nowhere", 404, "not found"),
                ("/arcgis/rest/services/other/FeatureServer?f=json", 404, "service other"),
                ("/arcgis/rest/services/field_inspection/MapServer/frobnicate", 404, "not found"),
                ("/arcgis/rest/services/other/MapServer", 404, "map service other"),
                ("\(base)/9?f=json", 404, "layer 9"),
                ("\(base)/abc", 404, "layer abc"),
                ("\(base)/0/frobnicate", 404, "not found"),
                ("\(base)/0?f=xml", 400, "'f'"),
                ("\(base)/0/query?f=kml", 400, "'f'"),
            ]
            for (uri, status, text) in cases {
                let reply = try await client.get(uri)
                #expect(reply.status == status, "\(uri)")
                let error = try reply.json()["error"]
                #expect(error?["code"]?.integerValue == Int64(status), "\(uri)")
                #expect(error?["message"]?.stringValue?.contains(text) == true, "\(uri): \(reply.text)")
                #expect(error?["details"]?.arrayValue != nil)
            }
            // A method a route does not answer is a 405 saying which it does, before anything
            // is read or a token asked for; a path no route takes stays a 404.
            let refused: [(Client.Reply, String)] = [
                (try await client.put("\(base)/0/query", json: Data("{}".utf8)), "PUT is not allowed; use GET or POST"),
                (try await client.delete("/arcgis/rest/services"), "DELETE is not allowed; use GET or POST"),
                (try await client.post("/arcgis/rest/maps", [:]), "POST is not allowed; use GET"),
                (try await client.delete("/outpost/v1/locators/nowhere/file"), "DELETE is not allowed; use GET"),
                (try await client.post("\(base)/0/3/attachments/1", [:]), ""),
            ]
            for (reply, message) in refused.dropLast() {
                let said = try reply.json()["error"]?["message"]?.stringValue
                #expect(reply.status == 405 && said == message, "\(reply.text)")
                #expect(reply.headers[.allow]?.isEmpty == false, "a 405 names the methods the path answers (RFC 9110)")
            }
            #expect(refused.last!.0.status != 405, "a listed method reaches its handler")
            #expect(try await client.get("\(base)/0/1/2/3/4").status == 404)
            #expect(try await client.delete("\(base)/0/1/2/3/4").status == 405)
        }
    }

    /// The routes each service type registers are the router's, and none hides another (the
    /// router checks only in debug builds; this holds in every build).
    @Test func noRouteHidesAnother() throws {
        let responder = FeatureServerResponder(services: ServiceDirectory([]), configuration: ServerConfiguration(port: 0))
        try responder.validateRoutes()
        let routes = Set(responder.routes.map { "\($0.method) \($0.path)" })
        for expected in [
            "GET /arcgis/rest/services/{service}/FeatureServer/{layer}/query", "POST /arcgis/rest/services/{service}/FeatureServer/{layer}/applyEdits",
            "GET /arcgis/rest/services/{service}/MapServer/tile/{level}/{row}/{col}", "POST /arcgis/rest/services/{service}/GPServer/{task}/submitJob",
            "GET /arcgis/rest/services/{service}/GeocodeServer/findAddressCandidates", "GET /arcgis/rest/services/{service}/NAServer/Route/solve",
            "PUT /outpost/v1/services/{service}/replicas/{replica}/batches/{seq}", "GET /health", "POST /arcgis/tokens/generateToken",
        ] {
            #expect(routes.contains(expected), "\(expected)")
        }
    }
}
