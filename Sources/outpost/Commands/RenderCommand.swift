import ArgumentParser
import Foundation
import OutpostCore
import OutpostStorage
import OutpostTiles

struct RenderCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "render",
        abstract: "Draw a geodatabase's layers into a PNG, for a quick look.")

    @Argument(help: "The geodatabase (.gpkg).") var geodatabase: String
    @Option(help: "The PNG to write.") var out: String
    @Option(parsing: .unconditional, help: "Area: xmin,ymin,xmax,ymax in longitude/latitude (default: all layers).") var extent: String?
    @Option(help: "Image size, WIDTHxHEIGHT.") var size = "1024x768"

    func run() async throws {
        let parts = size.lowercased().split(separator: "x").compactMap { Int($0) }
        guard parts.count == 2, (16...8192).contains(parts[0]), (16...8192).contains(parts[1]) else {
            throw CLIFailure(message: "--size must be WIDTHxHEIGHT, each 16–8192")
        }
        let gdb = try Geodatabase.open(at: URL(fileURLWithPath: geodatabase), readOnly: true)
        defer { try? gdb.close() }
        let renderer = MapRenderer(geodatabase: gdb)
        var area: Envelope
        if let extent {
            area = try WebMercator.convert(try parseExtent(extent), from: .wgs84, to: .webMercator)
        } else {
            guard let all = try await renderer.extent() else { throw CLIFailure(message: "\(geodatabase) has no features to draw") }
            area = all
        }
        // Fit the area to the image's proportions, with a 5% margin.
        let width = parts[0], height = parts[1]
        let scale = max((area.xmax - area.xmin) / Double(width), (area.ymax - area.ymin) / Double(height), 1e-6) * 1.05
        let cx = (area.xmin + area.xmax) / 2, cy = (area.ymin + area.ymax) / 2
        area = Envelope(xmin: cx - scale * Double(width) / 2, ymin: cy - scale * Double(height) / 2, xmax: cx + scale * Double(width) / 2, ymax: cy + scale * Double(height) / 2)
        let pixels = try await renderer.render(envelope: area, width: width, height: height)
        try Data(try PNGEncoder.encode(pixels: pixels, width: width, height: height)).write(to: URL(fileURLWithPath: out))
        print("wrote \(out) (\(width)×\(height))")
    }
}
