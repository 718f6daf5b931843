import Foundation
import OutpostCore

/// QGIS (Debian's 3.22, headless through PyQGIS) drawing a vector tile layer and the GeoPackage
/// layer it was made from with the same symbol over the same area: the two images should cover
/// the same pixels (each coloured pixel of one within a pixel of one of the other's).
public enum QGISDrawing {
    /// The QGIS data source of an MBTiles file of vector tiles.
    public static func mbtiles(_ url: URL) -> String { "type=mbtiles&url=\(url.path)" }

    /// The QGIS data source of an ArcGIS VectorTileServer.
    public static func vectorTileServer(_ url: URL) -> String { "serviceType=arcgis&type=xyz&url=\(url.absoluteString)" }

    /// Arguments: the vector tile layer's QGIS data source, the GeoPackage, the layer, `line` or
    /// `fill`, and optionally the area drawn (lon/lat). Prints the pixel counts and the shares
    /// near each other.
    static let script = """
        import os, sys, json, traceback
        # An error ends the process at once too: QGIS left alive can hang tearing down.
        sys.excepthook = lambda *e: (traceback.print_exception(*e), sys.stderr.flush(), os._exit(1))
        from qgis.core import (QgsFillSymbol, QgsPointXY, QgsApplication, QgsVectorTileLayer, QgsVectorLayer, QgsMapSettings, QgsMapRendererSequentialJob, QgsVectorTileBasicRenderer,
                               QgsVectorTileBasicRendererStyle, QgsWkbTypes, QgsLineSymbol, QgsSingleSymbolRenderer, QgsCoordinateReferenceSystem,
                               QgsRectangle, QgsCoordinateTransform, QgsProject)
        from qgis.PyQt.QtCore import QSize
        from qgis.PyQt.QtGui import QColor
        uri, gpkg, name, kind = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
        lonlat = [float(v) for v in sys.argv[5].split(",")] if len(sys.argv) > 5 else None
        app = QgsApplication([], False)
        app.initQgis()
        out = {}
        tiles = QgsVectorTileLayer(uri, "tiles")
        out["valid"] = tiles.isValid()
        def symbol():
            if kind == "fill":
                return QgsFillSymbol.createSimple({"color": "255,0,0", "outline_style": "no"})
            return QgsLineSymbol.createSimple({"color": "255,0,0", "width": "0.5"})
        style = QgsVectorTileBasicRendererStyle(name, name, QgsWkbTypes.PolygonGeometry if kind == "fill" else QgsWkbTypes.LineGeometry)
        style.setSymbol(symbol())
        renderer = QgsVectorTileBasicRenderer()
        renderer.setStyles([style])
        tiles.setRenderer(renderer)
        source = QgsVectorLayer(f"{gpkg}|layername={name}", name, "ogr")
        source.setRenderer(QgsSingleSymbolRenderer(symbol()))
        crs = QgsCoordinateReferenceSystem("EPSG:3857")
        toMercator = QgsCoordinateTransform(source.crs(), crs, QgsProject.instance())
        extent = toMercator.transformBoundingBox(QgsRectangle(*lonlat) if lonlat else source.extent())
        out["extent"] = [extent.xMinimum(), extent.yMinimum(), extent.xMaximum(), extent.yMaximum()]
        def draw(layer):
            settings = QgsMapSettings()
            settings.setLayers([layer])
            settings.setDestinationCrs(crs)
            settings.setExtent(extent)
            settings.setOutputSize(QSize(600, 600))
            settings.setBackgroundColor(QColor(255, 255, 255))
            job = QgsMapRendererSequentialJob(settings)
            job.start()
            job.waitForFinished()
            image = job.renderedImage()
            mask = set()
            for y in range(600):
                for x in range(600):
                    c = image.pixelColor(x, y)
                    if c.red() > 150 and c.green() < 120 and c.blue() < 120:
                        mask.add((x, y))
            return mask
        a, b = draw(tiles), draw(source)
        def near(p, m):
            return any((p[0] + dx, p[1] + dy) in m for dx in (-1, 0, 1) for dy in (-1, 0, 1))
        out["tilePixels"], out["sourcePixels"] = len(a), len(b)
        out["tileNearSource"] = sum(1 for p in a if near(p, b)) / max(1, len(a))
        out["sourceNearTile"] = sum(1 for p in b if near(p, a)) / max(1, len(b))
        print(json.dumps(out), flush=True)
        # QGIS 3.22 can crash tearing down with layers alive; the result is out, so leave at once.
        os._exit(0)
        """

    /// Draws the vector tile layer `uri` and the GeoPackage's `layer` as described above.
    public static func compare(_ uri: String, with gpkg: URL, layer: String, kind: String, area: String? = nil) async throws -> JSONValue {
        let home = TemporaryDirectory("outpost-qgis-vt")
        let result = try await ExternalTools.run(
            "/usr/bin/python3", ["-c", script, uri, gpkg.path, layer, kind] + (area.map { [$0] } ?? []),
            environment: ["QT_QPA_PLATFORM": "offscreen", "HOME": home.url.path, "XDG_RUNTIME_DIR": home.url.path])
        guard result.succeeded else { throw ReaderMismatch(description: "QGIS: \(result.stderr.suffix(2000))") }
        return try JSONValue.parse(result.stdout.split(separator: "\n").last.map(String.init) ?? "")
    }

    /// Nil when both drawings are valid, with over `pixels` coloured pixels each, and each's
    /// within a pixel of the other's (98% both ways); else what is wrong.
    public static func problem(_ out: JSONValue, atLeast pixels: Int64) -> String? {
        guard out["valid"] == true else { return "the layer is not valid: \(out)" }
        guard (out["tilePixels"]?.integerValue ?? 0) > pixels && (out["sourcePixels"]?.integerValue ?? 0) > pixels else { return "too little drawn: \(out)" }
        guard (out["tileNearSource"]?.doubleValue ?? 0) > 0.98 && (out["sourceNearTile"]?.doubleValue ?? 0) > 0.98 else { return "the drawings differ: \(out)" }
        return nil
    }
}
