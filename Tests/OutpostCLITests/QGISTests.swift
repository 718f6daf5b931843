import Foundation
import OutpostCore
import OutpostServiceTestSupport
import OutpostTestSupport
import Testing

/// QGIS (Debian's 3.22, headless through PyQGIS) as a client of `outpost serve`: its ArcGIS
/// Feature Service provider loads a layer with the right count, fields and extent; its ArcGIS
/// Map Service provider loads the MapServer with the right extent and renders the features; over
/// HTTPS with a token from generateToken through QGIS's own authentication store.
@Suite("QGIS as a client")
struct QGISTests {
    static let script = """
        import os, sys, json, ssl, tempfile, traceback, urllib.request, urllib.parse
        # An error ends the process at once: QGIS left alive can hang tearing down.
        sys.excepthook = lambda *e: (traceback.print_exception(*e), sys.stderr.flush(), os._exit(1))
        base, ca = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else None)
        os.environ["QGIS_AUTH_DB_DIR_PATH"] = tempfile.mkdtemp()
        from qgis.core import (QgsApplication, QgsVectorLayer, QgsRasterLayer, QgsMapSettings, QgsMapRendererSequentialJob,
                               QgsAuthMethodConfig)
        from qgis.PyQt.QtCore import QSize
        from qgis.PyQt.QtGui import QColor
        from qgis.PyQt.QtNetwork import QSslCertificate
        app = QgsApplication([], False)
        app.initQgis()
        out = {}
        auth = ""
        if ca:
            body = urllib.parse.urlencode({"username": "crew", "password": "a long pass phrase", "client": "none", "f": "json"}).encode()
            token = json.load(urllib.request.urlopen(base + "/arcgis/tokens/generateToken", body, context=ssl.create_default_context(cafile=ca)))["token"]
            manager = QgsApplication.authManager()
            manager.setMasterPassword("outpost-test", True)
            for cert in QSslCertificate.fromPath(ca):
                manager.storeCertAuthority(cert)
            manager.rebuildCaCertsCache()
            manager.rebuildTrustedCaCertsCache()
            config = QgsAuthMethodConfig("EsriToken")
            config.setName("outpost")
            config.setConfig("token", token)
            manager.storeAuthenticationConfig(config)
            auth = f"authcfg='{config.id()}' "
            refused = QgsVectorLayer(f"crs='EPSG:4326' url='{base}/arcgis/rest/services/field_inspection/FeatureServer/0'", "x", "arcgisfeatureserver")
            out["withoutToken"] = refused.isValid() and refused.featureCount() > 0
        url = base + "/arcgis/rest/services/field_inspection"
        layer = QgsVectorLayer(f"crs='EPSG:4326' {auth}url='{url}/FeatureServer/0'", "points", "arcgisfeatureserver")
        e = layer.extent()
        out["features"] = {"valid": layer.isValid(), "count": layer.featureCount(), "fields": [f.name() for f in layer.fields()],
                           "extent": [e.xMinimum(), e.yMinimum(), e.xMaximum(), e.yMaximum()]}
        raster = QgsRasterLayer(f"crs='EPSG:3857' format='PNG' layer='0' {auth}url='{url}/MapServer'", "map", "arcgismapserver")
        e = raster.extent()
        out["map"] = {"valid": raster.isValid(), "extent": [e.xMinimum(), e.yMinimum(), e.xMaximum(), e.yMaximum()]}
        if raster.isValid():
            settings = QgsMapSettings()
            settings.setLayers([raster])
            settings.setDestinationCrs(raster.crs())
            settings.setExtent(raster.extent())
            settings.setOutputSize(QSize(400, 400))
            settings.setBackgroundColor(QColor(255, 255, 255))
            job = QgsMapRendererSequentialJob(settings)
            job.start()
            job.waitForFinished()
            image = job.renderedImage()
            blue = green = 0
            for y in range(0, 400, 2):
                for x in range(0, 400, 2):
                    c = image.pixelColor(x, y)
                    if c.blue() > c.red() + 60 and c.blue() > c.green(): blue += 1
                    if c.green() > c.red() + 30 and c.green() > c.blue() + 30: green += 1
            out["map"]["bluePixels"], out["map"]["greenPixels"] = blue, green
        app.exitQgis()
        print(json.dumps(out))
        """

    /// Runs the script with Debian's Python (PyQGIS), headless, with a home of its own (QGIS
    /// keeps a network disk cache there).
    static func run(_ arguments: [String]) async throws -> JSONValue {
        let home = TemporaryDirectory("outpost-qgis")
        let result = try await ExternalTools.run(
            "/usr/bin/python3", ["-c", script] + arguments,
            environment: ["QT_QPA_PLATFORM": "offscreen", "HOME": home.url.path, "XDG_RUNTIME_DIR": home.url.path])
        #expect(result.succeeded, "\(result.stderr.suffix(2000))")
        let last = result.stdout.split(separator: "\n").last.map(String.init) ?? ""
        return try JSONValue.parse(last)
    }

    static func expectWholeLayer(_ out: JSONValue, sourceLocation: SourceLocation = #_sourceLocation) {
        let features = out["features"]
        #expect(features?["valid"] == true && features?["count"] == 300, "\(out)", sourceLocation: sourceLocation)
        #expect(features?["fields"]?.arrayValue?.compactMap(\.stringValue).contains("asset_type") == true, sourceLocation: sourceLocation)
        let e = features?["extent"]?.arrayValue?.compactMap(\.doubleValue) ?? []
        #expect(e.count == 4 && abs(e[0] + 122.7) < 0.001 && abs(e[3] - 45.56) < 0.001, "extent \(e)", sourceLocation: sourceLocation)
        let map = out["map"]
        let m = map?["extent"]?.arrayValue?.compactMap(\.doubleValue) ?? []
        #expect(map?["valid"] == true && m.count == 4 && abs(m[0] + 13_658_901) < 100 && abs(m[3] - 5_710_117) < 100, "map \(String(describing: map))", sourceLocation: sourceLocation)
        #expect((map?["bluePixels"]?.integerValue ?? 0) > 300 && (map?["greenPixels"]?.integerValue ?? 0) > 3000, "the drawn points and areas: \(String(describing: map))", sourceLocation: sourceLocation)
    }

    @Test(.scaledTimeLimit(minutes: 3))
    func qgisLoadsTheFeatureServiceAndDrawsTheMapService() async throws {
        let service = try await TestService.fieldInspection(.sqlite)
        try await service.backend.close()
        let server = try await ServeProcess.start(service: service.file)
        Self.expectWholeLayer(try await Self.run([server.url.absoluteString]))
        await server.stop()
        withExtendedLifetime(service) {}
    }

    @Test(.scaledTimeLimit(minutes: 3))
    func qgisOverHTTPSWithATokenFromGenerateToken() async throws {
        let dir = TemporaryDirectory()
        let secured = try await TLSServeTests.securedSample(in: dir, role: "viewer")
        let out = try await Self.run([secured.server.url.absoluteString, secured.certificate.path])
        #expect(out["withoutToken"] == false, "without the token QGIS gets nothing")
        Self.expectWholeLayer(out)
        await secured.stop()
    }
}
