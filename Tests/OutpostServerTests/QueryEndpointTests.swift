import Foundation
import OutpostCore
import OutpostStorage
import OutpostTestSupport
import OutpostServiceTestSupport
import Testing

@testable import OutpostServer

@Suite("query endpoint")
struct QueryEndpointTests {
    func ids(_ reply: Client.Reply) throws -> [Int64] {
        try reply.json()["features"]!.arrayValue!.map { $0["attributes"]!["objectid"]!.integerValue! }
    }

    @Test(arguments: BackendKind.available)
    func filtersFieldsAndFormats(kind: BackendKind) async throws {
        try await withServer(kind) { client, service in
            let open = try await client.get("\(base)/0/query?where=\(q("status = 'open' AND condition >= 3"))&outFields=asset_id,status&f=json")
            let features = try #require(try open.json()["features"]?.arrayValue)
            #expect(!features.isEmpty)
            #expect(features.allSatisfy { $0["attributes"]?["status"] == "open" && $0["attributes"]?.objectValue?.keys.sorted() == ["asset_id", "objectid", "status"] })
            #expect(features.allSatisfy { $0["geometry"]?["x"] != nil })
            #expect(try open.json()["fields"]?.arrayValue?.count == 3)

            let byIDs = try await client.get("\(base)/0/query?objectIds=5,3,999999&outFields=*&returnGeometry=false")
            #expect(try ids(byIDs) == [3, 5])
            #expect(try byIDs.json()["features"]?.arrayValue?.first?["geometry"] == nil)

            let count = try await client.get("\(base)/0/query?where=1%3D1&returnCountOnly=true&f=json").json()
            #expect(count == ["count": 300])
            let idsOnly = try await client.get("\(base)/0/query?where=\(q("condition = 5"))&returnIdsOnly=true").json()
            #expect(idsOnly["objectIdFieldName"] == "objectid")
            let countFive = try await client.get("\(base)/0/query?where=\(q("condition = 5"))&returnCountOnly=true").json()["count"]?.integerValue
            #expect(Int64(idsOnly["objectIds"]?.arrayValue?.count ?? -1) == countFive)

            let sorted = try await client.get("\(base)/0/query?where=\(q("status='closed'"))&orderByFields=\(q("asset_id DESC"))&outFields=asset_id&resultRecordCount=20")
            let names = try sorted.json()["features"]!.arrayValue!.map { $0["attributes"]!["asset_id"]!.stringValue! }
            #expect(names == names.sorted(by: >) && names.count == 20)

            // GeoJSON output: RFC 7946 FeatureCollection with ids and ISO dates.
            let geojson = try await client.get("\(base)/0/query?objectIds=1&outFields=*&f=geojson")
            #expect(geojson.headers[.contentType]?.contains("geo+json") == true)
            let collection = try geojson.json()
            #expect(collection["type"] == "FeatureCollection")
            let first = try #require(collection["features"]?.arrayValue?.first)
            #expect(first["id"] == 1 && first["geometry"]?["type"] == "Point")
            if let when = first["properties"]?["inspected_at"]?.stringValue { #expect(when.hasSuffix("Z")) }

            // An object-id range (keyset pages, a checksum's halves) in the backend's own SQL.
            var range = FeatureQuery(where: "status = 'open'", returnGeometry: false)
            range.afterObjectID = 10
            range.throughObjectID = 60
            let inRange = try await service.backend.features(layerID: 0, query: range).compactMap(\.objectID)
            let openIDs = try await service.backend.features(layerID: 0, query: FeatureQuery(where: "status = 'open'", returnGeometry: false)).compactMap(\.objectID)
            #expect(!inRange.isEmpty && inRange.sorted() == openIDs.filter { $0 > 10 && $0 <= 60 }.sorted())
            #expect(!range.selectsEveryFeature)

            // POST with a form body answers the same as GET.
            let posted = try await client.post("\(base)/0/query", ["where": "status = 'open' AND condition >= 3", "outFields": "asset_id,status", "f": "json"])
            #expect(try posted.json()["features"] == (try open.json())["features"])
        }
    }

    @Test(arguments: BackendKind.available)
    func pagesWithExceededTransferLimit(kind: BackendKind) async throws {
        try await withServer(kind) { client, _ in
            var collected: [Int64] = []
            var offset = 0
            while true {
                let page = try await client.get("\(base)/0/query?where=1%3D1&outFields=objectid&returnGeometry=false&resultOffset=\(offset)&resultRecordCount=70")
                let pageIDs = try ids(page)
                collected += pageIDs
                let exceeded = try page.json()["exceededTransferLimit"]?.boolValue ?? false
                #expect(exceeded == (offset + 70 < 300), "offset \(offset)")
                if !exceeded { break }
                offset += 70
            }
            #expect(collected == Array(1...300))
            // Asking for more than maxRecordCount is clamped, and says so.
            let big = try await client.get("\(base)/0/query?where=1%3D1&outFields=objectid&resultRecordCount=100000000")
            #expect(try ids(big).count == 300)
            #expect(try big.json()["exceededTransferLimit"] == false)
        }
    }

    @Test(arguments: BackendKind.available)
    func spatialFiltersAndProjections(kind: BackendKind) async throws {
        try await withServer(kind) { client, service in
            let all = try await service.backend.features(layerID: 0, query: .all)
            let box = Envelope(xmin: -122.68, ymin: 45.50, xmax: -122.64, ymax: 45.53)
            let expected = all.filter { f in f.geometry.map { GeometryRelations.intersects(box, $0) } ?? false }.compactMap(\.objectID)
            let envelope = try await client.get("\(base)/0/query?geometry=\(q("-122.68,45.50,-122.64,45.53"))&geometryType=esriGeometryEnvelope&outFields=objectid")
            #expect(try ids(envelope) == expected)
            #expect(!expected.isEmpty)

            // The same box as Web Mercator input (inSR) and as an Esri JSON envelope.
            let lower = WebMercator.project(longitude: -122.68, latitude: 45.50), upper = WebMercator.project(longitude: -122.64, latitude: 45.53)
            let mercator = "{\"xmin\":\(lower.x),\"ymin\":\(lower.y),\"xmax\":\(upper.x),\"ymax\":\(upper.y),\"spatialReference\":{\"wkid\":102100}}"
            let projected = try await client.get("\(base)/0/query?geometry=\(q(mercator))&geometryType=esriGeometryEnvelope&outFields=objectid")
            #expect(try ids(projected) == expected)

            // A polygon filter is exact: a triangle over half of the box.
            let triangle = "{\"rings\":[[[-122.68,45.50],[-122.68,45.53],[-122.64,45.50],[-122.68,45.50]]]}"
            let polygon = try await client.get("\(base)/0/query?geometry=\(q(triangle))&geometryType=esriGeometryPolygon&spatialRel=esriSpatialRelIntersects&outFields=objectid")
            let shape = try EsriJSON.decodeGeometry(try JSONValue.parse(triangle))
            let inTriangle = all.filter { f in f.geometry.map { GeometryRelations.intersects(shape, $0) } ?? false }.compactMap(\.objectID)
            #expect(try ids(polygon) == inTriangle)
            #expect(inTriangle.count < expected.count && !inTriangle.isEmpty)

            // A point hits the service area that contains it.
            let point = try await client.get("\(base)/2/query?geometry=\(q("-122.66,45.515"))&geometryType=esriGeometryPoint&outFields=name")
            #expect(try point.json()["features"]?.arrayValue?.count == 1)

            // outSR 3857 returns projected coordinates.
            let out = try await client.get("\(base)/0/query?objectIds=1&outSR=3857&outFields=objectid").json()
            #expect(out["spatialReference"]?["latestWkid"] == 3857)
            let x = try #require(out["features"]?.arrayValue?.first?["geometry"]?["x"]?.doubleValue)
            #expect(abs(x) > 1_000_000)
        }
    }

    @Test(arguments: BackendKind.available)
    func gzipWhenAsked(kind: BackendKind) async throws {
        try await withServer(kind) { client, _ in
            let plain = try await client.get("\(base)/0/query?where=1%3D1&outFields=*")
            let zipped = try await client.get("\(base)/0/query?where=1%3D1&outFields=*", headers: [.acceptEncoding: "gzip, deflate"])
            #expect(zipped.headers[.contentEncoding] == "gzip")
            #expect(zipped.body.readableBytes < plain.body.readableBytes / 3)
            #expect(plain.headers[.contentEncoding] == nil)
            // It is real gzip: the bytes start with the gzip magic number.
            #expect(zipped.body.getBytes(at: zipped.body.readerIndex, length: 2) == [0x1F, 0x8B])
        }
    }

    /// A whole JSON answer (not streamed) is gzipped in one piece; gzip(1) restores it exactly.
    @Test(arguments: BackendKind.available)
    func aWholeAnswerGzipsToWhatGzipRestores(kind: BackendKind) async throws {
        try await withServer(kind) { client, _ in
            let plain = try await client.get("\(base)/0?f=json")
            let zipped = try await client.get("\(base)/0?f=json", headers: [.acceptEncoding: "gzip"])
            #expect(plain.body.readableBytes > 512)
            #expect(zipped.headers[.contentEncoding] == "gzip")
            #expect(zipped.body.readableBytes < plain.body.readableBytes)
            let dir = TemporaryDirectory()
            let file = dir.file("answer.json.gz")
            try Data(zipped.body.readableBytesView).write(to: file)
            let restored = try await ExternalTools.run("gzip", ["-dc", file.path])
            #expect(restored.succeeded, "\(restored.stderr)")
            #expect(restored.stdout == String(buffer: plain.body))
        }
    }
}
