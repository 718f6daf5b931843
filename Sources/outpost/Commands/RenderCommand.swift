import ArgumentParser
import Foundation
import OutpostCore
import OutpostStorage
import OutpostTiles
import OutpostVectorTiles

struct RenderCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "render",
        abstract: "Draw a geodatabase's layers, or a file of vector tiles by its style, into a PNG, for a quick look.",
        discussion: """
            A geodatabase is drawn as its MapServer draws it. A vector tile package (.vtpk), PMTiles \
            archive or vector MBTiles is drawn from its tiles at the zoom matching the image's scale, \
            by the style it carries (a file without one gets each layer in the MapServer's colours; \
            docs/tiles.md, "Drawing vector tiles").
            """)

    @Argument(help: "The geodatabase (.gpkg), or vector tiles (.vtpk, .pmtiles, .mbtiles).") var source: String
    @Option(help: "The PNG to write.") var out: String
    @Option(parsing: .unconditional, help: "Area: xmin,ymin,xmax,ymax in longitude/latitude (default: all of it).") var extent: String?
    @Option(help: "Image size, WIDTHxHEIGHT.") var size = "1024x768"

    func run() async throws {
        let parts = size.lowercased().split(separator: "x").compactMap { Int($0) }
        guard parts.count == 2, (16...8192).contains(parts[0]), (16...8192).contains(parts[1]) else {
            throw CLIFailure(message: "--size must be WIDTHxHEIGHT, each 16–8192")
        }
        let url = URL(fileURLWithPath: source)
        let kind = url.pathExtension.lowercased()
        let draw: (Envelope, Int, Int) async throws -> [UInt8]
        let whole: Envelope?
        if kind == "vtpk" || kind == "pmtiles" || (kind == "mbtiles" && VectorTileArchive.holdsVectorTiles(mbtiles: url)) {
            let archive = try await VectorTileArchive(url: url)
            let renderer = try await VectorTileRenderer(service: archive)
            draw = { try await renderer.render(envelope: $0, width: $1, height: $2) }
            whole = archive.bounds
        } else {
            let gdb = try Geodatabase.open(at: url, readOnly: true)
            let renderer = MapRenderer(geodatabase: gdb)
            draw = { try await renderer.render(envelope: $0, width: $1, height: $2) }
            whole = try await renderer.extent()
        }
        var area: Envelope
        if let extent {
            area = try WebMercator.convert(try parseExtent(extent), from: .wgs84, to: .webMercator)
        } else {
            guard let whole else { throw CLIFailure(message: "\(source) has no features to draw") }
            area = whole
        }
        // Fit the area to the image's proportions, with a 5% margin.
        let width = parts[0], height = parts[1]
        let scale = max((area.xmax - area.xmin) / Double(width), (area.ymax - area.ymin) / Double(height), 1e-6) * 1.05
        let cx = (area.xmin + area.xmax) / 2, cy = (area.ymin + area.ymax) / 2
        area = Envelope(xmin: cx - scale * Double(width) / 2, ymin: cy - scale * Double(height) / 2, xmax: cx + scale * Double(width) / 2, ymax: cy + scale * Double(height) / 2)
        let pixels = try await draw(area, width, height)
        try Data(try PNGEncoder.encode(pixels: pixels, width: width, height: height)).write(to: URL(fileURLWithPath: out))
        print("wrote \(out) (\(width)×\(height))")
    }
}
