import Foundation
import OutpostCore
import OutpostTiles

/// Vector tiles in a PMTiles v3 archive: gzipped MVT, the metadata's `vector_layers`, bounds and
/// centre in the header; clustered (tiles in Hilbert order), identical tiles stored once.
public enum VectorTilePMTiles {
    /// Writes the tiles `generator` makes over `area` (the data's extent when nil) to `url`; the
    /// archive appears only when complete.
    @discardableResult
    public static func export(_ generator: VectorTileGenerator, area: Envelope? = nil, to url: URL, name: String? = nil) async throws -> VectorTileGenerator.Summary {
        try await VectorTileOutput.export(generator, area: area, to: url, format: .pmtiles, name: name)
    }

    static func write(_ spool: TileSpool, _ d: TileSetDescription, to url: URL) throws {
        let (name, bounds) = (d.name, d.bounds)
        let writer = PMTilesWriter(at: url, tileType: .mvt, tileCompression: .gzip, spool: spool)
        let world = Envelope(xmin: -180, ymin: -85.0511287798066, xmax: 180, ymax: 85.0511287798066)
        let lonLat = try bounds.map { try WebMercator.convert($0, from: .webMercator, to: .wgs84) } ?? world
        var metadata = d.vectorLayers.objectValue ?? [:]
        metadata["name"] = .string(name)
        metadata["description"] = "written by outpost"
        metadata["type"] = "overlay"
        try writer.finish(
            metadata: .object(metadata), minZoom: d.minZoom, maxZoom: d.maxZoom, bounds: lonLat,
            center: ((lonLat.xmin + lonLat.xmax) / 2, (lonLat.ymin + lonLat.ymax) / 2, max(d.minZoom, min(d.maxZoom, 12))))
    }
}
