import Foundation
import OutpostCore
import OutpostTiles

/// The files vector tiles are written to, by the output's extension.
public enum VectorTileFormat: String, Sendable, Codable, CaseIterable {
    /// MBTiles (`format` `pbf`), a PMTiles v3 archive, a vector tile package.
    case mbtiles, pmtiles, vtpk

    /// The format `url`'s extension names, nil for any other.
    public init?(url: URL) { self.init(rawValue: url.pathExtension.lowercased()) }
}

/// The one way tiles reach a file: the generator's tiles go to a spool as they are made, then
/// into the format's file beside the output (`.partial`), which is renamed into place. The
/// exports of ``VectorTileMBTiles``, ``VectorTilePMTiles`` and ``VectorTilePackage`` and the
/// export job all take it.
enum VectorTileOutput {
    static func partialURL(_ url: URL) -> URL { url.deletingLastPathComponent().appendingPathComponent(url.lastPathComponent + ".partial") }

    /// Makes the tiles over `area` and writes them as `format` at `url`.
    static func export(
        _ generator: VectorTileGenerator, area: Envelope?, to url: URL, format: VectorTileFormat, name: String?
    ) async throws -> VectorTileGenerator.Summary {
        var bounds = area
        if bounds == nil { bounds = try await generator.dataExtent() }
        let spool = try TileSpool(beside: url)
        let box = SendableBox(spool)
        let summary = try await generator.generate(area: area) { key, bytes in try box.value.add(key, data: bytes) }
        let description = TileSetDescription(generator, name: name ?? url.deletingPathExtension().lastPathComponent, bounds: bounds)
        try write(spool, description, format: format, to: url)
        return summary
    }

    /// Writes the spool's tiles as `format` beside `url` and renames the file into place; the
    /// spool's files go once it is.
    static func write(_ spool: TileSpool, _ description: TileSetDescription, format: VectorTileFormat, to url: URL) throws {
        let partial = partialURL(url)
        do {
            try writeFile(spool, description, format: format, to: partial)
            if FileManager.default.fileExists(atPath: url.path) { try FileManager.default.removeItem(at: url) }
            try FileManager.default.moveItem(at: partial, to: url)
            spool.discard()
        } catch {
            try? FileManager.default.removeItem(at: partial)
            if let error = error as? VectorTileError { throw error }
            if let error = error as? TileCacheError { throw VectorTileError(.io, error.message) }
            throw VectorTileError(.io, "cannot write \(url.lastPathComponent): \(error.localizedDescription)")
        }
    }
}

extension VectorTileOutput {
    /// Writes the spool's tiles as `format` at `url` itself (no renaming).
    static func writeFile(_ spool: TileSpool, _ description: TileSetDescription, format: VectorTileFormat, to url: URL) throws {
        try? FileManager.default.removeItem(at: url)
        switch format {
        case .vtpk: try VectorTilePackage.write(spool, description, to: url)
        case .pmtiles: try VectorTilePMTiles.write(spool, description, to: url)
        case .mbtiles: try VectorTileMBTiles.write(spool, description, to: url)
        }
    }
}

/// What a file of tiles says of them besides the tiles: name, zooms, bounds (Web Mercator),
/// the layers (`{"vector_layers": …}`) and a style whose source is the file (`"url": "../../"`).
struct TileSetDescription {
    var name: String
    var minZoom: Int
    var maxZoom: Int
    var bounds: Envelope?
    var vectorLayers: JSONValue
    var style: JSONValue

    /// The description of `generator`'s tiles.
    init(_ generator: VectorTileGenerator, name: String, bounds: Envelope?) {
        self.name = name
        (minZoom, maxZoom) = (generator.definition.minZoom, generator.definition.maxZoom)
        self.bounds = bounds
        vectorLayers = (try? JSONValue.parse(Data(VectorTileMBTiles.vectorLayersJSON(generator.tileLayers).utf8))) ?? ["vector_layers": []]
        style = VectorTileStyle.make(generator, name: name, source: ["type": "vector", "url": "../../"])
    }

    init(name: String, minZoom: Int, maxZoom: Int, bounds: Envelope?, vectorLayers: JSONValue, style: JSONValue) {
        (self.name, self.minZoom, self.maxZoom, self.bounds, self.vectorLayers, self.style) = (name, minZoom, maxZoom, bounds, vectorLayers, style)
    }
}

/// A class instance handed to the generator's sink, which runs on the one reading thread.
final class SendableBox<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
