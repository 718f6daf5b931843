import Foundation
import OutpostCore
import OutpostServer
import OutpostStorage
import OutpostTestSupport
import Testing

@testable import OutpostVectorTiles

/// QGIS (Debian's 3.22, headless through PyQGIS) draws our vector tile MBTiles as a vector tile
/// layer: the image of the tiles and the image of the source layer drawn with the same symbol
/// cover the same pixels (each coloured pixel of one within a pixel of one of the other's).
@Suite("QGIS draws our vector tiles")
struct QGISVectorTileTests {
    /// Invalid source polygons repaired with GEOS, as `outpost` and the server do.
    init() { GEOSPolygonRepair.install() }

    @Test(.scaledTimeLimit(minutes: 3)) func helsinkiStreetsAndNaturalEarthCountriesDrawAsTheirSources() async throws {
        let dir = TemporaryDirectory("outpost-vt-qgis")
        for (sample, layer, maxZoom) in [("helsinki", "streets", 14), ("natural_earth", "countries", 6)] {
            let gdb = try VectorTileExportTests.service(sample, in: dir)
            let generator = try VectorTileGenerator(geodatabase: gdb, definition: VectorTileDefinition(layers: [.init(source: layer)], maxZoom: maxZoom))
            try await VectorTileMBTiles.export(generator, to: dir.file("\(sample).mbtiles"))
            try gdb.close()
        }
        for (sample, layer, kind, area, pixels) in [
            ("helsinki", "streets", "line", nil, Int64(20_000)), ("natural_earth", "countries", "fill", "15,50,35,70", 100_000),
            ("natural_earth", "countries", "fill", "-20,-50,60,60", 50_000),
        ] {
            let drawn = try await QGISDrawing.compare(QGISDrawing.mbtiles(dir.file("\(sample).mbtiles")), with: dir.file("\(sample).gpkg"), layer: layer, kind: kind, area: area)
            #expect(QGISDrawing.problem(drawn, atLeast: pixels) == nil, "\(sample) \(area ?? "")")
        }
    }
}
