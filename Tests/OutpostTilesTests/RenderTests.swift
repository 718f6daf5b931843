import Foundation
import OutpostCore
import OutpostStorage
import OutpostTestSupport
import Testing

@testable import OutpostTiles

@Suite("Rendering")
struct RenderTests {
    func pixel(_ pixels: [UInt8], _ width: Int, _ x: Int, _ y: Int) -> RGBA {
        let i = (y * width + x) * 4
        return RGBA(pixels[i], pixels[i + 1], pixels[i + 2], pixels[i + 3])
    }

    func close(_ a: RGBA, _ b: RGBA, _ tolerance: Int = 12) -> Bool {
        abs(Int(a.r) - Int(b.r)) <= tolerance && abs(Int(a.g) - Int(b.g)) <= tolerance && abs(Int(a.b) - Int(b.b)) <= tolerance
    }

    /// Edges ending on the canvas's left side, crossing its first row: rounding put the row's
    /// crossing a hair left of column 0, and the coverage buffer was written before its start
    /// (a map tile server stopped on such a tile). Then shapes anywhere, of any size: every fill
    /// stays within the canvas.
    @Test func canvasFillsAnyShapeWithinItsBuffer() {
        var canvas = Canvas(width: 256, height: 256, background: RGBA(255, 255, 255))
        let edges: [(Canvas.Point, Canvas.Point)] = [
            ((0.80390760541889, -1.1670451693088), (0.0, 0.0445618327971)), ((0.32839468128783467, -0.72919443833226), (0.0, 0.4307233706164)),
            ((1.453444171600986, -0.822023981670192), (0.0, 0.800746912753223)), ((1.8252845535357185, -0.87492338447706), (0.0, 0.75926388664612)),
            ((0.0, 0.58250663937403), (20.392903317136835, -31.54227159427366)), ((0.0, 0.0927372396514), (27.87985647273105, -0.90966828458158)),
        ]
        for (p, q) in edges { canvas.fill([[p, q, (p.x + 3, min(p.y, q.y) - 4)]], color: RGBA(0, 0, 0)) }
        var rng = SystemRandomNumberGenerator()
        for n in 0..<3_000 {
            let scale = [1.0, 10, 300, 1e5, 1e9][n % 5]
            let center = (x: Double.random(in: -2 * scale...(256 + 2 * scale), using: &rng), y: Double.random(in: -2 * scale...(256 + 2 * scale), using: &rng))
            let radius = Double.random(in: 0.001...scale, using: &rng)
            let sides = Int.random(in: 3...24, using: &rng)
            let turn = Double.random(in: 0...1, using: &rng)
            let ring = (0..<sides).map { i -> Canvas.Point in
                let a = (Double(i) + turn) / Double(sides) * 2 * .pi
                return (center.x + radius * cos(a), center.y + radius * sin(a) * (n % 7 == 0 ? 1e-12 : 1))
            }
            canvas.fill([ring], color: RGBA(200, 40, 40, 200))
            canvas.stroke(ring, width: Double(n % 4) + 0.5, color: RGBA(20, 20, 20))
        }
        #expect(canvas.pixels.count == 256 * 256 * 4)
    }

    @Test func canvasCoversShapesExactlyAndAntialiasesEdges() {
        var canvas = Canvas(width: 20, height: 20, background: RGBA(255, 255, 255))
        // A square from (4,4) to (12,12) with a hole (6,6)-(8,8), and one reaching off the canvas.
        let outer: [Canvas.Point] = [(4, 4), (12, 4), (12, 12), (4, 12)], hole: [Canvas.Point] = [(6, 6), (6, 8), (8, 8), (8, 6)]
        canvas.fill([Canvas.counterClockwise(outer), Canvas.counterClockwise(hole).reversed()], color: RGBA(0, 0, 0))
        canvas.fill([[(-30, 15), (50, 15), (50, 40), (-30, 40)]], color: RGBA(255, 0, 0))
        let px = canvas.pixels
        #expect(pixel(px, 20, 5, 5) == RGBA(0, 0, 0))
        #expect(pixel(px, 20, 7, 7) == RGBA(255, 255, 255))  // the hole
        #expect(pixel(px, 20, 13, 5) == RGBA(255, 255, 255))
        #expect(pixel(px, 20, 0, 19) == RGBA(255, 0, 0) && pixel(px, 20, 19, 16) == RGBA(255, 0, 0))
        // A half-covered pixel is half way between.
        var edge = Canvas(width: 4, height: 1, background: RGBA(255, 255, 255))
        edge.fill([[(0, 0), (1.5, 0), (1.5, 1), (0, 1)]], color: RGBA(0, 0, 0))
        #expect(edge.pixels[4] == 128 || edge.pixels[4] == 127)
    }

    @Test func drawsTheSampleLayersWhereTheyAre() async throws {
        let dir = TemporaryDirectory()
        let gdb = try SampleGeodatabases.fieldInspection(in: dir)
        defer { try? gdb.close() }
        let renderer = MapRenderer(geodatabase: gdb)
        let extent = try #require(try await renderer.extent())
        let size = 400
        let pixels = try await renderer.render(envelope: extent, width: size, height: size)
        func at(_ p: Position) -> RGBA {
            let m = WebMercator.project(longitude: p.x, latitude: p.y)
            let x = Int((m.x - extent.xmin) / (extent.xmax - extent.xmin) * Double(size)), y = Int((extent.ymax - m.y) / (extent.ymax - extent.ymin) * Double(size))
            return pixel(pixels, size, min(max(x, 0), size - 1), min(max(y, 0), size - 1))
        }
        // A point feature is drawn in the first layer's colour.
        let point = try #require(try await gdb.table(named: "inspection_points").features(matching: FeatureQuery(objectIDs: [1])).first?.geometry)
        guard case .point(let p) = point, let position = p.position else { Issue.record("not a point"); return }
        #expect(close(at(position), MapRenderer.palette[0]), "\(at(position))")
        // The image is not blank: most pixels are the service areas' fill.
        let coloured = stride(from: 0, to: pixels.count, by: 4).filter { pixels[$0] != 242 || pixels[$0 + 1] != 239 }.count
        #expect(coloured > size * size / 2)
        // A tile far away is background only.
        let empty = try await renderer.render(envelope: Envelope(xmin: 0, ymin: 0, xmax: 1000, ymax: 1000), width: 8, height: 8)
        #expect(Set(stride(from: 0, to: empty.count, by: 4).map { empty[$0] }) == [242])
    }

    /// An export task drawing the sample field-inspection geodatabase, and its full extent.
    static func sampleExportTask(in dir: TemporaryDirectory) async throws -> (ExportTileCacheTask, Envelope) {
        let gdb = try SampleGeodatabases.fieldInspection(in: dir)
        try gdb.close()
        let task = ExportTileCacheTask(source: .geodatabase(dir.file("field.gpkg")))
        try await task.load()
        return (task, try #require(task.tileCacheInfo?.fullExtent))
    }

    /// Tiles drawn from a geodatabase, exported into an exploded cache that GDAL reads: real PNGs
    /// in the right places.
    @Test func renderedTilesExportAndGDALReadsThem() async throws {
        let dir = TemporaryDirectory()
        let (task, full) = try await Self.sampleExportTask(in: dir)
        let job = task.makeExportTileCacheJob(
            parameters: ExportTileCacheParameters(areaOfInterest: .envelope(full, .webMercator), levelIDs: [12, 13, 14]), downloadFileURL: dir.file("cache"))
        try job.start()
        let cache = try await job.output
        let summary = try cache.summary()
        #expect(summary.map(\.level) == [12, 13, 14] && summary.allSatisfy { $0.tiles > 0 })
        let info = try await ExternalTools.run("gdalinfo", ["-json", dir.file("cache/conf.xml").path])
        #expect(info.succeeded, "\(info.stderr)")
        #expect(try JSONValue.parse(info.stdout)["bands"]?.arrayValue?.count == 4)
        // GDAL decodes a rendered tile's PNG (a corrupt one would fail the read).
        let read = try await ExternalTools.run("gdal_translate", ["-q", "-of", "PNG", "-outsize", "64", "64", dir.file("cache/conf.xml").path, dir.file("whole.png").path])
        #expect(read.succeeded, "\(read.stderr)")
    }

    /// `optimizeTilesForSize` re-encodes drawn tiles smaller without changing a pixel, and travels
    /// in the job's JSON.
    @Test func optimizingShrinksTilesLosslessly() async throws {
        let dir = TemporaryDirectory()
        let (task, full) = try await Self.sampleExportTask(in: dir)
        var caches: [TileCache] = []
        for (name, optimize) in [("plain.tpkx", false), ("small.tpkx", true)] {
            let parameters = ExportTileCacheParameters(areaOfInterest: .envelope(full, .webMercator), levelIDs: [13, 14], optimizeTilesForSize: optimize)
            let job = task.makeExportTileCacheJob(parameters: parameters, downloadFileURL: dir.file(name))
            let json = try job.toJSON()
            let compact = String(decoding: json, as: UTF8.self).filter { !$0.isWhitespace }
            #expect(compact.contains("\"optimizeTilesForSize\":\(optimize)"))
            var registry = JobRegistry()
            registry.withTileJobs(TileJobEnvironment())
            let rebuilt = try registry.makeJob(from: try JobSnapshot.decode(json))
            try rebuilt.start()
            #expect(await rebuilt.waitUntilFinished() == .succeeded)
            let cache = TileCache(fileURL: dir.file(name))
            try await cache.load()
            caches.append(cache)
        }
        let plain = try caches[0].summary(), small = try caches[1].summary()
        #expect(plain.map(\.tiles) == small.map(\.tiles))
        #expect(small.map(\.bytes).reduce(0, +) < plain.map(\.bytes).reduce(0, +))
        let full14 = try #require(TilingScheme.webMercator.tileRange(level: 14, covering: full))
        for key in full14.inBundleOrder().prefix(8) {
            let a = try caches[0].tile(level: key.level, row: key.row, col: key.col)
            let b = try caches[1].tile(level: key.level, row: key.row, col: key.col)
            #expect((a == nil) == (b == nil))
            if let a, let b { #expect(try PNGDecoder.decode(a).pixels == (try PNGDecoder.decode(b).pixels)) }
        }
    }
}
