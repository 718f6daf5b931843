import Foundation
import OutpostCore
import OutpostServer
import OutpostStorage
import OutpostTestSupport
import OutpostTiles
import Testing

@testable import OutpostVectorTiles

/// Images drawn from vector tiles by their style, against the same layers drawn from the
/// geodatabase by `MapRenderer`: the same places inked, no seam where tiles meet, and the style
/// read as Mapbox GL styles mean it.
@Suite("Drawing vector tiles")
struct VectorTileRendererTests {
    init() { GEOSPolygonRepair.install() }

    /// Pixels with any ink (alpha above a few percent), by index.
    static func inked(_ rgba: [UInt8]) -> Set<Int> {
        Set(stride(from: 3, to: rgba.count, by: 4).filter { rgba[$0] > 12 }.map { $0 / 4 })
    }

    static func overlap(_ a: Set<Int>, _ b: Set<Int>) -> Double { Double(a.intersection(b).count) / Double(max(1, a.union(b).count)) }

    @Test(.scaledTimeLimit(minutes: 3)) func tilesAreDrawnWhereTheLayersAreAndWithoutSeams() async throws {
        let dir = TemporaryDirectory("outpost-vt-render")
        // Central Helsinki, drawn past the tiles' last zoom (overzoomed) and at it.
        let helsinki = try VectorTileExportTests.service("helsinki", in: dir)
        defer { try? helsinki.close() }
        let streets = dir.file("streets.vtpk")
        _ = try await VectorTilePackage.export(try VectorTileGenerator(geodatabase: helsinki, definition: VectorTileDefinition(layers: [.init(source: "streets")], maxZoom: 14)), to: streets)
        let renderer = try await VectorTileRenderer(service: try await VectorTileArchive(url: streets))
        let layers = MapRenderer(geodatabase: helsinki)
        let streetsLayer = try #require(helsinki.schema.layer(named: "streets")).id
        for (lon, lat, km) in [(24.945, 60.169, 1.2), (24.94, 60.17, 4.0)] {
            let c = try WebMercator.convert(Envelope(xmin: lon, ymin: lat, xmax: lon, ymax: lat), from: .wgs84, to: .webMercator)
            let half = km * 1000 / cos(lat * .pi / 180)
            let area = Envelope(xmin: c.xmin - half, ymin: c.ymin - half * 0.75, xmax: c.xmin + half, ymax: c.ymin + half * 0.75)
            let fromTiles = Self.inked(try await renderer.render(envelope: area, width: 400, height: 300, transparent: true))
            let fromLayers = Self.inked(try await layers.render(envelope: area, width: 400, height: 300, layers: [streetsLayer], transparent: true))
            // Lines 1.5 pixels wide from the style, 2 from the renderer: most ink is shared.
            #expect(fromTiles.count > 3_000 && Self.overlap(fromTiles, fromLayers) > 0.6, "\(km) km: \(fromTiles.count) and \(fromLayers.count) inked, \(Self.overlap(fromTiles, fromLayers))")
        }

        // Natural Earth's countries: areas filled from tiles fill where the layer's do, and the
        // rows where tiles meet are filled as the rows beside them.
        let world = try VectorTileExportTests.service("natural_earth", in: dir)
        defer { try? world.close() }
        let countries = dir.file("countries.pmtiles")
        _ = try await VectorTilePMTiles.export(try VectorTileGenerator(geodatabase: world, definition: VectorTileDefinition(layers: [.init(source: "countries")], maxZoom: 5)), to: countries)
        let map = try await VectorTileRenderer(service: try await VectorTileArchive(url: countries))
        let europe = try WebMercator.convert(Envelope(xmin: -30, ymin: 30, xmax: 40, ymax: 70), from: .wgs84, to: .webMercator)
        let (width, height) = (700, 500)
        let pixels = try await map.render(envelope: europe, width: width, height: height, transparent: true)
        let drawn = try await MapRenderer(geodatabase: world).render(
            envelope: europe, width: width, height: height, layers: [try #require(world.schema.layer(named: "countries")).id], transparent: true)
        #expect(Self.overlap(Self.inked(pixels), Self.inked(drawn)) > 0.95)
        // The seams, seen by a style of fills alone (borders would cross them): areas cut at a
        // seam fill its rows as the rows beside them.
        let fills: JSONValue = ["version": 8, "layers": [["id": "land", "type": "fill", "source-layer": "countries", "paint": ["fill-color": "rgba(0,0,255,0.43)"]]]]
        let filled = try await VectorTileRenderer(service: try await VectorTileArchive(url: countries), style: fills).render(envelope: europe, width: width, height: height, transparent: true)
        let zoom = Int(VectorTileRenderer.zoom(of: europe, width: width).rounded())
        let span = 2 * VectorTileGenerator.halfWorld / Double(1 << zoom)
        var checked = 0, seams = 0
        var edge = (europe.ymax / span).rounded(.down) * span
        while edge > europe.ymin {
            let row = Int(((europe.ymax - edge) / (europe.ymax - europe.ymin) * Double(height)).rounded(.down))
            if row >= 3, row < height - 3 {
                for x in 0..<width {
                    let above = filled[((row - 3) * width + x) * 4 + 3], on = filled[(row * width + x) * 4 + 3], below = filled[((row + 3) * width + x) * 4 + 3]
                    // Inside the land (no coast within three rows): the seam row alike.
                    guard above == below, above > 0, (row - 3...row + 3).allSatisfy({ $0 == row || filled[($0 * width + x) * 4 + 3] == above }) else { continue }
                    checked += 1
                    if abs(Int(on) - Int(above)) > 2 { seams += 1 }
                }
            }
            edge -= span
        }
        #expect(checked > 200 && seams == 0, "\(seams) seam pixels of \(checked)")

        // An area needing too many tiles of the first zoom is refused, not fetched.
        var deep = VectorTileDefinition(layers: [.init(source: "streets")], minZoom: 12, maxZoom: 14)
        deep.minZoom = 12
        let deepFile = dir.file("deep.mbtiles")
        _ = try await VectorTileMBTiles.export(try VectorTileGenerator(geodatabase: helsinki, definition: deep), to: deepFile)
        let refused = await #expect(throws: VectorTileError.self) {
            _ = try await VectorTileRenderer(service: try await VectorTileArchive(url: deepFile)).render(envelope: europe, width: 400, height: 300)
        }
        #expect(refused?.code == .invalidArea, "\(String(describing: refused))")
    }

    @Test func theStyleIsReadAsMapboxGLStylesMeanIt() throws {
        #expect(VectorTileRenderer.parseColor("#f80") == RGBA(255, 136, 0))
        #expect(VectorTileRenderer.parseColor("#10203040") == RGBA(16, 32, 48, 64))
        #expect(VectorTileRenderer.parseColor("rgba(10, 20, 30, 0.5)") == RGBA(10, 20, 30, 128))
        #expect(VectorTileRenderer.parseColor("hsl(120, 100%, 25%)") == RGBA(0, 128, 0))
        #expect(VectorTileRenderer.parseColor("White") == RGBA(255, 255, 255) && VectorTileRenderer.parseColor("#12") == nil)
        #expect(VectorTileRenderer.color(.string("#000000"), zoom: 3, opacity: 0.5)?.a == 128)
        let stops: JSONValue = ["stops": [[10, 1], [14, 5]]]
        #expect(VectorTileRenderer.number(stops, zoom: 8) == 1 && VectorTileRenderer.number(stops, zoom: 12) == 3 && VectorTileRenderer.number(stops, zoom: 16) == 5)
        let interpolate: JSONValue = ["interpolate", ["linear"], ["zoom"], 0, 2, 10, 12]
        #expect(VectorTileRenderer.number(interpolate, zoom: 5) == 7)
        let step: JSONValue = ["step", ["zoom"], 1, 10, 3]
        #expect(VectorTileRenderer.number(step, zoom: 9.9) == 1 && VectorTileRenderer.number(step, zoom: 10) == 3)
        #expect(VectorTileRenderer.color(["stops": [[0, "#ff0000"], [10, "#0000ff"]]], zoom: 12, opacity: nil) == RGBA(0, 0, 255))

        let road = VectorTileFeature(id: 7, properties: ["kind": .string("primary"), "lanes": .int(2)], geometry: .lines([[TilePoint(0, 0), TilePoint(10, 10)]]))
        for (filter, expected) in [
            (["==", "$type", "LineString"], true), (["==", "$type", "Polygon"], false), (["==", "kind", "primary"], true),
            (["!=", "kind", "primary"], false), (["in", "kind", "minor", "primary"], true), (["!in", "kind", "primary"], false),
            ([">=", "lanes", 2], true), (["<", "lanes", 2], false), (["has", "lanes"], true), (["!has", "name"], true),
            (["all", ["==", "kind", "primary"], [">", "lanes", 3]], false), (["any", ["==", "kind", "x"], ["==", "$id", 7]], true),
            (["none", ["==", "kind", "primary"]], false), (["==", ["get", "kind"], "primary"], true),
            (["==", ["geometry-type"], "LineString"], true), (["within", ["some": "thing"]], true),
        ] as [(JSONValue, Bool)] {
            #expect(VectorTileRenderer.passes(filter, road) == expected, "\(filter)")
        }
        #expect(VectorTileRenderer.visible(["minzoom": 5, "maxzoom": 10], zoom: 9.9) && !VectorTileRenderer.visible(["maxzoom": 10], zoom: 10))
        #expect(!VectorTileRenderer.visible(["layout": ["visibility": "none"]], zoom: 3))

        // Values past their range are taken as its nearest end (an opacity of 1.8 trapped when
        // the fuzzer gave it), and what is not a number takes the default.
        #expect(VectorTileRenderer.measure(1.8, zoom: 3, default: 1, within: 0...1) == 1)
        #expect(VectorTileRenderer.measure(-2, zoom: 3, default: 1, within: 0...1) == 0)
        #expect(VectorTileRenderer.measure(1e300, zoom: 3, default: 1, within: 0...VectorTileRenderer.maxPixels) == VectorTileRenderer.maxPixels)
        #expect(VectorTileRenderer.measure("wide", zoom: 3, default: 5, within: 0...VectorTileRenderer.maxPixels) == 5)
        #expect(VectorTileRenderer.measure(["stops": [[1, 1], [1, 9]]], zoom: 3, default: 2, within: 0...10) == 9)
    }
}
