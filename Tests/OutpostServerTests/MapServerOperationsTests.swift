import Foundation
import OutpostCore
import OutpostServiceTestSupport
import OutpostTestSupport
import OutpostTiles
import Testing

@testable import OutpostServer

/// A feature service's MapServer as ArcGIS's: layers with their drawing info, export of any area
/// and size (PNG, transparent, a subset of layers), identify, find and legend.
@Suite("MapServer layers, export, identify, find, legend")
struct MapServerOperationsTests {
    static let map = "/arcgis/rest/services/field_inspection/MapServer"
    /// objectid 6 (PO-1005), a pole, inside a service area.
    static let pole = (x: -122.675, y: 45.50592)
    static let area = "-122.71,45.48,-122.59,45.57"

    /// The RGBA pixel at longitude/latitude `(x, y)` of an image of `bbox` (4326) at `w`×`h`.
    static func pixel(_ image: PNGDecoder.Image, bbox: Envelope, at x: Double, _ y: Double) throws -> [UInt8] {
        let box = try WebMercator.convert(bbox, from: .wgs84, to: .webMercator)
        let p = try WebMercator.convert(Envelope(xmin: x, ymin: y, xmax: x, ymax: y), from: .wgs84, to: .webMercator)
        // The box grows to the image's proportions around its centre, as the server does.
        let resolution = max((box.xmax - box.xmin) / Double(image.width), (box.ymax - box.ymin) / Double(image.height))
        let cx = (box.xmin + box.xmax) / 2, cy = (box.ymin + box.ymax) / 2
        let px = Int(((p.xmin - cx) / resolution + Double(image.width) / 2).rounded(.down))
        let py = Int(((cy - p.ymin) / resolution + Double(image.height) / 2).rounded(.down))
        let i = (py * image.width + px) * 4
        return Array(image.pixels[i..<(i + 4)])
    }

    @Test func layersAndTheirDrawingInfo() async throws {
        try await withServer(.sqlite) { client, _ in
            let info = try await client.get("\(Self.map)?f=json").json()
            #expect(info["layers"]?.arrayValue?.map { $0["name"]?.stringValue ?? "" } == ["inspection_points", "pipelines", "service_areas"])
            #expect(info["capabilities"] == "Map,Query,Data" && info["fullExtent"]?["xmin"]?.doubleValue != nil)
            let layer = try await client.get("\(Self.map)/2?f=json").json()
            #expect(layer["type"] == "Feature Layer" && layer["geometryType"] == "esriGeometryPolygon")
            #expect(layer["drawingInfo"]?["renderer"]?["symbol"]?["type"] == "esriSFS")
            #expect(layer["extent"]?["spatialReference"]?["latestWkid"] == 3857)
            #expect(try await client.get("\(Self.map)/layers?f=json").json()["layers"]?.arrayValue?.count == 3)
            #expect(try await client.get("\(Self.map)/3?f=json").status == 404, "a table is not drawn")
        }
    }

    @Test func exportDrawsAnyAreaAndSize() async throws {
        try await withServer(.sqlite) { client, _ in
            let bbox = Envelope(xmin: -122.71, ymin: 45.48, xmax: -122.59, ymax: 45.57)
            let all = try await client.get("\(Self.map)/export?bbox=\(Self.area)&bboxSR=4326&size=600,400&f=image")
            #expect(all.headers[.contentType] == "image/png")
            let image = try PNGDecoder.decode(Array(all.body.readableBytesView))
            #expect(image.width == 600 && image.height == 400)
            let atPole = try Self.pixel(image, bbox: bbox, at: Self.pole.x, Self.pole.y)
            #expect(atPole[3] == 255 && atPole[2] > atPole[0], "the pole's blue symbol: \(atPole)")
            let outside = try Self.pixel(image, bbox: bbox, at: -122.705, 45.565)
            #expect(outside == [242, 239, 233, 255], "the background outside the data")

            // Only the areas, on transparency: the pole's pixel is the area's fill, the outside clear.
            let areas = try PNGDecoder.decode(Array(try await client.get("\(Self.map)/export?bbox=\(Self.area)&bboxSR=4326&size=600,400&layers=show:2&transparent=true&f=image").body.readableBytesView))
            let fill = try Self.pixel(areas, bbox: bbox, at: Self.pole.x, Self.pole.y)
            #expect(fill[1] > fill[0] && fill[1] > fill[2] && fill[3] > 0, "green area fill, not the blue pole: \(fill)")
            #expect(try Self.pixel(areas, bbox: bbox, at: -122.705, 45.565)[3] == 0)

            // f=json: where the image is, its extent and scale.
            let json = try await client.get("\(Self.map)/export?bbox=\(Self.area)&bboxSR=4326&size=300,200&f=json").json()
            let href = try #require(json["href"]?.stringValue)
            #expect(json["width"] == 300 && json["extent"]?["spatialReference"]?["wkid"] == 102100 && (json["scale"]?.doubleValue ?? 0) > 0)
            let fetched = try await client.get(String(href[href.range(of: "/arcgis/")!.lowerBound...]))
            #expect(fetched.status == 200)
            #expect(try PNGDecoder.decode(Array(fetched.body.readableBytesView)).width == 300)

            for bad in ["size=5000,10", "size=abc", "bbox=1,2,3", "bbox=10,10,0,0", "format=jpg", "imageSR=2193", "layers=only:1"] {
                let reply = try await client.get("\(Self.map)/export?bbox=\(Self.area)&bboxSR=4326&f=image&\(bad)")
                #expect(reply.status == 400, "\(bad): \(reply.status) \(reply.text.prefix(200))")
            }
        }
    }

    @Test func identifyFindAndLegend() async throws {
        try await withServer(.sqlite) { client, _ in
            let display = "mapExtent=\(Self.area)&imageDisplay=600,400,96&sr=4326&geometry=\(Self.pole.x),\(Self.pole.y)&tolerance=4"
            let top = try await client.get("\(Self.map)/identify?\(display)&layers=top&f=json").json()["results"]?.arrayValue ?? []
            #expect(top.count == 1 && top.first?["attributes"]?["objectid"] == 6 && top.first?["value"] == "PO-1005", "\(top)")
            #expect(top.first?["geometry"]?["x"]?.doubleValue == Self.pole.x, "geometry in sr=4326")
            let all = try await client.get("\(Self.map)/identify?\(display)&layers=all&f=json").json()["results"]?.arrayValue ?? []
            let layers = Set(all.compactMap { $0["layerId"]?.integerValue })
            #expect(layers.isSuperset(of: [0, 2]), "the pole and the area it lies in")
            #expect(try await client.get("\(Self.map)/identify?geometry=1,2&f=json").status == 400, "a point needs the map it was clicked on")

            let found = try await client.get("\(Self.map)/find?searchText=PO-100&searchFields=asset_id&layers=0&returnGeometry=false&f=json").json()
            let values = found["results"]?.arrayValue?.compactMap { $0["value"]?.stringValue }.sorted()
            #expect(values == ["PO-1001", "PO-1004", "PO-1005", "PO-1008"])
            #expect(found["results"]?[0]?["foundFieldName"] == "asset_id" && found["results"]?[0]?["geometry"] == nil)
            let exact = try await client.get("\(Self.map)/find?searchText=PO-1005&contains=false&f=json").json()["results"]?.arrayValue
            #expect(exact?.count == 1)
            let quoted = try await client.get("\(Self.map)/find?searchText=\(q("x' OR '1'='1"))&f=json")
            #expect(quoted.status == 200)
            #expect(try quoted.json()["results"]?.arrayValue?.isEmpty == true, "the text is a value, never SQL")

            let legend = try await client.get("\(Self.map)/legend?f=json").json()
            #expect(legend["layers"]?.arrayValue?.count == 3)
            let swatch = try #require(Data(base64Encoded: legend["layers"]?[0]?["legend"]?[0]?["imageData"]?.stringValue ?? ""))
            let decoded = try PNGDecoder.decode([UInt8](swatch))
            #expect(decoded.width == 20 && decoded.pixels[(10 * 20 + 10) * 4 + 3] == 255, "a drawn symbol in the swatch's middle")
        }
    }

    /// A spatial reference a map service or a layer query cannot use is a 400 naming the
    /// parameter that gave it (docs/cli.md, the server's error rules), never another's name.
    @Test func badSpatialReferencesAreRefusedNamingTheirParameter() async throws {
        try await withServer(.sqlite) { client, _ in
            let display = "mapExtent=\(Self.area)&imageDisplay=600,400,96&geometry=\(Self.pole.x),\(Self.pole.y)&tolerance=4"
            let layer = "/arcgis/rest/services/field_inspection/FeatureServer/0"
            for (path, parameter) in [
                ("\(Self.map)/identify?\(display)&sr=999999&f=json", "sr"), ("\(Self.map)/find?searchText=PO&sr=999999&f=json", "sr"),
                ("\(Self.map)/find?searchText=PO&sr=abc&f=json", "sr"), ("\(Self.map)/export?bbox=\(Self.area)&bboxSR=999999&f=json", "bboxSR"),
                ("\(Self.map)/export?bbox=\(Self.area)&bboxSR=4326&imageSR=999999&f=json", "imageSR"),
                ("\(layer)/query?where=1%3D1&outSR=999999&f=json", "outSR"), ("\(layer)/query?where=1%3D1&outSR=abc&f=json", "outSR"),
                ("\(layer)/query?where=1%3D1&geometry=1,2,3,4&inSR=999999&f=json", "inSR"),
                ("\(layer)/query?where=1%3D1&geometry=\(q(#"{"x":1,"y":2,"spatialReference":{"wkid":999999}}"#))&geometryType=esriGeometryPoint&f=json", "geometry"),
            ] {
                let answer = try await client.get(path)
                #expect(answer.status == 400 && answer.text.contains("'\(parameter)'"), "\(path): \(answer.status) \(answer.text)")
            }
        }
    }
}
