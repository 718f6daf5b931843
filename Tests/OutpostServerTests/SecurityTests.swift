import Foundation
import NIOCore
import OutpostCore
import OutpostTestSupport
import OutpostServiceTestSupport
import Testing

@testable import OutpostServer

@Suite("Tokens, limits and hostile input")
struct SecurityTests {
    @Test(arguments: BackendKind.available)
    func tokensGuardEveryEndpointButHealth(kind: BackendKind) async throws {
        let policy = TokenPolicy(tokens: ["editor-secret": .edit, "reader-secret": .read])
        try await withServer(kind, configuration: ServerConfiguration(port: 0, tokens: policy)) { client, service in
            #expect(try await client.get("/health").status == 200)
            // ArcGIS's codes in the body: 499 token required, 498 invalid token.
            let missing = try await client.get("\(base)?f=json")
            #expect(missing.status == 401 && missing.errorMessage == "Token Required" && missing.errorCode == 499)
            let wrong = try await client.get("\(base)?f=json&token=wrong")
            #expect(wrong.status == 401 && wrong.errorCode == 498)
            #expect(try await client.get("\(base)?f=json&token=reader-secret").status == 200)
            #expect(try await client.get("\(base)/0/query?where=1%3D1&returnCountOnly=true", headers: [.authorization: "Bearer reader-secret"]).status == 200)

            let before = try await service.snapshot()
            let adds = #"[{"attributes":{"asset_id":"T-1","asset_type":"valve"},"geometry":{"x":-122.65,"y":45.52}}]"#
            #expect(try await client.post("\(base)/0/applyEdits", ["adds": adds]).status == 401)
            let reader = try await client.post("\(base)/0/applyEdits", ["adds": adds, "token": "reader-secret"])
            #expect(reader.status == 403 && reader.errorMessage?.contains("do not have permissions") == true)
            #expect(try await service.snapshot() == before)
            #expect(try await client.post("\(base)/0/applyEdits", ["adds": adds], headers: [.authorization: "Bearer editor-secret"]).status == 200)
        }
    }

    @Test(arguments: BackendKind.available)
    func oversizedBodiesGet413(kind: BackendKind) async throws {
        try await withServer(kind, configuration: ServerConfiguration(port: 0, maxBodyBytes: 64 * 1024)) { client, service in
            let before = try await service.snapshot()
            let big = String(repeating: "x", count: 200_000)
            let reply = try await client.post("\(base)/0/applyEdits", ["adds": "[]", "padding": big])
            #expect(reply.status == 413, "\(reply.status) \(reply.text)")
            #expect(reply.errorMessage?.contains("larger than") == true)
            #expect(try await service.snapshot() == before)
            // A batch's body is read as it arrives (not collected first), under the same limit.
            let info = try await registerReplica(service)
            let batch = try await client.put("\(native)/replicas/\(q(info.replicaID))/batches/1", json: Data(repeating: 0x20, count: 200_000))
            #expect(batch.status == 413 && batch.errorMessage?.contains("larger than") == true, "\(batch.status) \(batch.text)")
            #expect(try await service.snapshot() == before)
        }
    }

    /// Every request here is refused with a 400 that names the parameter, and leaves the
    /// service exactly as it was.
    static let hostile: [(String, String)] = [
        ("query?where=\(q("1=1; DROP TABLE inspection_points"))", "where"),
        ("query?where=\(q("1=1) OR (1=1"))", "where"),
        ("query?where=\(q("objectid IN (SELECT objectid FROM inspection_points)"))", "where"),
        ("query?where=\(q("load_extension('x') = 1"))", "where"),
        ("query?where=\(q("asset_id = 'x' --"))", "where"),
        ("query?where=\(q(String(repeating: "(", count: 500)))", "where"),
        ("query?outFields=\(q("asset_id, (SELECT 1)"))", "outFields"),
        ("query?outFields=\(q("*; DELETE FROM inspection_points"))", "outFields"),
        ("query?outFields=\(q("*, (SELECT 1)"))", "outFields"),
        ("query?outFields=\(q("asset_id,*,nope"))", "outFields"),
        ("query?orderByFields=\(q("asset_id; DROP TABLE x"))", "orderByFields"),
        ("query?orderByFields=\(q("asset_id SIDEWAYS"))", "orderByFields"),
        ("query?objectIds=\(q("1,2,three"))", "objectIds"),
        ("query?objectIds=\(q("1 OR 1=1"))", "objectIds"),
        ("query?resultRecordCount=-5", "resultRecordCount"),
        ("query?resultOffset=abc", "resultOffset"),
        ("query?returnGeometry=maybe", "returnGeometry"),
        ("query?geometry=\(q("{not json"))", "geometry"),
        ("query?geometry=\(q("10,10,0,0"))", "geometry"),
        ("query?geometry=\(q("{\"x\":1,\"y\":2}"))&geometryType=esriGeometryCircle", "geometryType"),
        ("query?geometry=\(q("1,2,3,4"))&spatialRel=esriSpatialRelTouches", "spatialRel"),
        ("query?geometry=\(q("1,2,3,4"))&inSR=2193", "inSR"),
        ("query?outSR=2193", "outSR"),
        ("query?inSR=\(q("{\"nope\":1}"))&geometry=1,2,3,4", "inSR"),
    ]

    static let hostileEdits: [([String: String], String)] = [
        (["adds": "[{\"attributes\":"], "adds"),
        (["adds": "{\"attributes\":{}}"], "adds"),
        (["adds": #"[{"attributes":{"asset_id":"X","asset_type":"valve","colour":"red"}}]"#], "adds"),
        (["adds": #"[{"attributes":{"asset_id":"X","asset_type":"valve"},"geometry":{"paths":[[[0,0],[1,1]]]}}]"#], "inspection_points"),
        (["adds": #"[{"attributes":{"asset_id":"X","asset_type":"valve"},"geometry":{"x":"a","y":1}}]"#], "adds"),
        (["adds": #"[{"attributes":{"asset_id":"X'); DROP TABLE inspection_points; --","asset_type":"valve"}}]"#], "longer"),
        (["updates": #"[{"attributes":{"notes":"no id"}}]"#], "updates"),
        (["deletes": "1,2,x"], "deletes"),
        (["deletes": "[\"not-a-guid\"]", "useGlobalIds": "true"], "deletes"),
        (["rollbackOnFailure": "perhaps"], "rollbackOnFailure"),
    ]

    @Test(arguments: BackendKind.available)
    func hostileRequestsAre400sThatChangeNothing(kind: BackendKind) async throws {
        try await withServer(kind) { client, service in
            let before = try await service.snapshot()
            for (suffix, parameter) in Self.hostile {
                let reply = try await client.get("\(base)/0/\(suffix)")
                #expect(reply.status == 400, "\(suffix): \(reply.text)")
                #expect(reply.errorMessage?.contains("'\(parameter)'") == true, "\(suffix): \(reply.text)")
                #expect(!reply.text.lowercased().contains("sqlite"), "no SQL error leaks: \(reply.text)")
            }
            for (form, mention) in Self.hostileEdits {
                let reply = try await client.post("\(base)/0/applyEdits", form)
                #expect(reply.status == 400, "\(form): \(reply.text)")
                #expect(reply.text.contains(mention), "\(form): \(reply.text)")
            }
            #expect(try await client.get("\(base)/0/query?where=\(q("notes = 'x''); DELETE FROM inspection_points; --'"))&returnCountOnly=true").json() == ["count": 0])
            // A `*` beside other entries checks them and names the bad one; valid ones still mean every field.
            let invalid = try await client.get("\(base)/0/query?outFields=\(q("*, (SELECT 1)"))")
            #expect(invalid.errorMessage?.contains("Invalid field \"(SELECT 1)\"") == true, "\(invalid.text)")
            let starAndName = try await client.get("\(base)/0/query?objectIds=1&outFields=\(q("asset_id, *"))&returnGeometry=false").json()
            let attributes = try #require(starAndName["features"]?[0]?["attributes"]?.objectValue)
            let fieldCount = try await service.backend.schema().layer(id: 0)?.fields.count
            #expect(attributes.count == fieldCount, "\(attributes.keys.sorted())")
            #expect(try await service.snapshot() == before)
        }
    }
}
