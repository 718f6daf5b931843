import Foundation
import OutpostCore
import OutpostTiles
import OutpostVectorTiles

/// Where the tile-package target writes each input (one per process).
let packageScratch = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-fuzz-\(getpid()).tpkx")

func pngSeeds() throws -> [Data] {
    var rgba: [UInt8] = []
    var rgb: [UInt8] = []
    for i in 0..<64 {
        let pixel: [UInt8] = [UInt8(i * 4), UInt8(255 - i * 4), 128]
        rgb += pixel
        rgba += pixel + [i % 2 == 0 ? 255 : 100]
    }
    let flat = [UInt8](repeating: 200, count: 4 * 4 * 4)
    return [
        Data(try PNGEncoder.encode(pixels: rgba, width: 8, height: 8)),
        Data(try PNGEncoder.encode(pixels: rgb, width: 8, height: 8, channels: 3)),
        Data(try PNGEncoder.encodeTile(rgba: flat, width: 4, height: 4)),
    ]
}

func packageSeeds() throws -> [Data] {
    let file = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-fuzz-seed-\(getpid()).tpkx")
    defer { try? FileManager.default.removeItem(at: file) }
    try? FileManager.default.removeItem(at: file)
    let info = TileCacheInfo(name: "seed", scheme: .webMercator, minLevel: 0, maxLevel: 1, format: "PNG", fullExtent: nil)
    let writer = try TileCacheWriter(format: .tilePackage, at: file, info: info)
    let tile = try pngSeeds()[2]
    for key in [TileKey(level: 0, row: 0, col: 0), TileKey(level: 1, row: 0, col: 1), TileKey(level: 1, row: 1, col: 0)] {
        try writer.add(key, data: [UInt8](tile))
    }
    try writer.finish()
    return [try Data(contentsOf: file)]
}

/// Where the pmtiles target writes each input (one per process).
let pmtilesScratch = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-fuzz-\(getpid()).pmtiles")

/// A tile of each geometry kind and value type (made anew each time: a global's buffers would
/// count as leaked when the process ends).
func sampleTile() -> VectorTile {
    let square = [TilePoint(0, 0), TilePoint(4096, 0), TilePoint(4096, 4096), TilePoint(0, 4096)]
    let hole = [TilePoint(100, 100), TilePoint(100, 200), TilePoint(200, 200), TilePoint(200, 100)]
    return VectorTile(layers: [
        VectorTileLayer(name: "areas", features: [
            VectorTileFeature(id: 1, properties: ["name": .string("land"), "pop": .int(42)], geometry: .polygons([[square, hole]]))
        ]),
        VectorTileLayer(name: "roads", extent: 512, features: [
            VectorTileFeature(id: nil, properties: ["kind": .string("primary"), "width": .double(7.5), "oneway": .bool(true)],
                geometry: .lines([[TilePoint(-80, 10), TilePoint(300, 400), TilePoint(600, 100)]]))
        ]),
        VectorTileLayer(name: "places", features: [
            VectorTileFeature(id: 3, properties: ["point_count": .int(12)], geometry: .points([TilePoint(2048, 2048), TilePoint(10, 4000)]))
        ]),
    ])
}

func mvtSeeds() -> [Data] {
    [Data(sampleTile().encoded()), Data(VectorTile(layers: [sampleTile().layers[2]]).encoded()), Data()]
}

func pmtilesSeeds() throws -> [Data] {
    let file = FileManager.default.temporaryDirectory.appendingPathComponent("outpost-fuzz-seed-\(getpid()).pmtiles")
    defer { try? FileManager.default.removeItem(at: file) }
    try? FileManager.default.removeItem(at: file)
    let writer = try PMTilesWriter(at: file, tileType: .mvt, tileCompression: .gzip)
    let tile = VectorTileCompression.gzip(sampleTile().encoded())
    for key in [TileKey(level: 0, row: 0, col: 0), TileKey(level: 1, row: 0, col: 1), TileKey(level: 1, row: 1, col: 1), TileKey(level: 2, row: 3, col: 0)] {
        try writer.add(key, data: tile)
    }
    try writer.finish(
        metadata: ["vector_layers": [["id": "areas"], ["id": "roads"]]], minZoom: 0, maxZoom: 2,
        bounds: Envelope(xmin: -180, ymin: -85, xmax: 180, ymax: 85), center: (lon: 0, lat: 0, zoom: 1))
    return [try Data(contentsOf: file)]
}

func styleSeeds() -> [Data] {
    let styles: [String] = [
        ##"{"version": 8, "layers": [{"id": "bg", "type": "background", "paint": {"background-color": "#f2efe9"}}, {"id": "a", "type": "fill", "source-layer": "areas", "filter": ["all", ["==", "$type", "Polygon"], [">", "pop", 10]], "paint": {"fill-color": "rgba(31,119,180,0.43)", "fill-outline-color": "#123"}}]}"##,
        ##"{"layers": [{"id": "r", "type": "line", "source-layer": "roads", "minzoom": 0, "maxzoom": 22, "filter": ["in", "kind", "primary", "secondary"], "paint": {"line-color": {"stops": [[0, "red"], [10, "hsl(200, 50%, 40%)"]]}, "line-width": ["interpolate", ["linear"], ["zoom"], 0, 1, 14, 6], "line-opacity": 0.8}}]}"##,
        ##"{"layers": [{"id": "p", "type": "circle", "source-layer": "places", "filter": ["any", ["has", "point_count"], ["==", ["get", "name"], "x"]], "paint": {"circle-radius": ["step", ["zoom"], 2, 5, 6], "circle-color": "#ff8800cc", "circle-stroke-width": 1, "circle-stroke-color": "white"}}]}"##,
    ]
    return styles.map { Data($0.utf8) }
}

/// A service of one tile (``sampleTile``) at every zoom, to draw by any style.
struct OneTileService: VectorTileService {
    let name = "fuzz"
    let gzipped = VectorTileCompression.gzip(sampleTile().encoded())
    func zooms() async throws -> ClosedRange<Int> { 0...3 }
    func extent() async throws -> Envelope? { nil }
    func tile(_ key: TileKey) async throws -> [UInt8]? { gzipped }
    func style(with sourceValue: JSONValue) async throws -> JSONValue { [:] }
    func tileMap() async throws -> String? { nil }
    var hasTileMap: Bool { false }
}

/// Draws the one-tile service by `style` at two scales (errors are the renderer's to give).
func drawWithStyle(_ style: JSONValue) {
    let done = DispatchSemaphore(value: 0)
    Task {
        if let renderer = try? await VectorTileRenderer(service: OneTileService(), style: style) {
            let half = 20_037_508.342789244
            _ = try? await renderer.render(envelope: Envelope(xmin: -half, ymin: -half, xmax: half, ymax: half), width: 32, height: 32)
            _ = try? await renderer.render(envelope: Envelope(xmin: 0, ymin: 0, xmax: half / 8, ymax: half / 8), width: 48, height: 32, transparent: true)
        }
        done.signal()
    }
    done.wait()
}
