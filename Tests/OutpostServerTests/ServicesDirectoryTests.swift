import Foundation
import HTTPTypes

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import OutpostCore
import OutpostServiceTestSupport
import OutpostTestSupport
import Testing

@testable import OutpostServer

/// The Services Directory: `f=html` (or a browser's Accept header) on the resources gives pages
/// built from the same JSON, with escaped user data, forms for the operations, and security
/// headers that allow nothing from elsewhere.
@Suite("Services Directory (HTML)")
struct ServicesDirectoryTests {
    static let htmlAccept: HTTPFields = [.accept: "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"]

    /// `outpost serve` on the sample service (the service's directory lives as long as the value).
    static func serveSample() async throws -> (TestService, ServeProcess) {
        let service = try await TestService.fieldInspection(.sqlite)
        try await service.backend.close()
        return (service, try await ServeProcess.start(service: service.file))
    }

    func expectPage(_ reply: Client.Reply, status: Int = 200, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(reply.status == status, "\(reply.status) \(reply.text.prefix(300))", sourceLocation: sourceLocation)
        #expect(reply.headers[.contentType]?.hasPrefix("text/html") == true, sourceLocation: sourceLocation)
        #expect(reply.headers[HTTPField.Name("Content-Security-Policy")!]?.contains("default-src 'none'") == true, sourceLocation: sourceLocation)
        #expect(reply.text.hasPrefix("<!DOCTYPE html>"), sourceLocation: sourceLocation)
        for attribute in ["href=\"", "src=\"", "action=\""] {
            #expect(!reply.text.contains(attribute + "http") && !reply.text.contains(attribute + "//"), "a page loads and links nothing outside the server", sourceLocation: sourceLocation)
        }
    }

    @Test(arguments: BackendKind.available)
    func browsersGetPagesAndClientsKeepJSON(kind: BackendKind) async throws {
        try await withServer(kind) { client, _ in
            let catalog = try await client.get("/arcgis/rest/services?f=html")
            expectPage(catalog)
            #expect(catalog.text.contains(#"href="./services/field_inspection/FeatureServer?f=html""#))
            expectPage(try await client.get("/arcgis/rest/services", headers: Self.htmlAccept))
            // Scripts and GDAL send no Accept for HTML: JSON, as before.
            let json = try await client.get("/arcgis/rest/services", headers: [.accept: "*/*"])
            #expect(json.headers[.contentType]?.hasPrefix("application/json") == true)
            #expect(try json.json()["services"]?.arrayValue?.count == 1)
            #expect(try await client.get("/arcgis/rest/services?f=json", headers: Self.htmlAccept).headers[.contentType]?.hasPrefix("application/json") == true)

            let service = try await client.get("\(base)?f=html")
            expectPage(service)
            for text in ["inspection_points", "FeatureServer/0?f=html", "FeatureServer/3?f=html", "Query,Create,Update,Delete,Sync", "createReplica?f=html"] {
                #expect(service.text.contains(text), "service page lacks \(text)")
            }
            let layer = try await client.get("\(base)/0?f=html")
            expectPage(layer)
            for text in ["inspection_points (0)", "esriFieldTypeSmallInteger", "<td>in_progress</td><td>In progress</td>", "0/query?f=html", "0/applyEdits?f=html"] {
                #expect(layer.text.contains(text), "layer page lacks \(text)")
            }
            // Other resources show their JSON, readable.
            expectPage(try await client.get("\(base)/layers?f=html"))
            expectPage(try await client.get("\(base)/replicas?f=html"))

            let css = try await client.get("/arcgis/rest/static/directory.css")
            #expect(css.status == 200 && css.headers[.contentType]?.hasPrefix("text/css") == true)
            #expect(try await client.get("/arcgis/rest/static/directory.js").headers[.contentType]?.hasPrefix("text/javascript") == true)
            #expect(try await client.get("/arcgis/rest/static/../../etc/passwd").status == 404)
        }
    }

    /// Field values and names are user data: shown as text, never as markup.
    @Test(arguments: BackendKind.available)
    func theQueryFormRunsAndEscapesWhatItShows(kind: BackendKind) async throws {
        try await withServer(kind) { client, _ in
            let hostile = "<script>alert('x')</script>"
            let adds = #"[{"attributes":{"asset_id":"<b>X-1</b>","asset_type":"valve","notes":"\#(hostile)"},"geometry":{"x":-122.65,"y":45.52}}]"#
            let added = try await client.post("\(base)/0/applyEdits", ["adds": adds, "f": "json"])
            #expect(try added.json()["addResults"]?[0]?["success"] == true, "\(added.text)")

            let form = try await client.get("\(base)/0/query?f=html")
            expectPage(form)
            #expect(form.text.contains(#"<form class="operation" method="get" action="query">"#) && !form.text.contains("<h2>Result</h2>"))

            let ran = try await client.get("\(base)/0/query?f=html&where=\(q("asset_id LIKE '<b>%'"))&outFields=*")
            expectPage(ran)
            #expect(ran.text.contains("<h2>Result</h2>") && ran.text.contains("1 features"))
            #expect(ran.text.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;") && ran.text.contains("&lt;b&gt;X-1&lt;/b&gt;"))
            #expect(!ran.text.contains("<script>") && !ran.text.contains("<b>"), "no user text becomes markup")
            #expect(ran.text.contains("Point (-122.65, 45.52)"))
            #expect(ran.text.contains(#"value="asset_id LIKE &#39;&lt;b&gt;%&#39;""#), "the form keeps what was asked, escaped")

            let count = try await client.get("\(base)/0/query?f=html&where=1%3D1&returnCountOnly=true")
            #expect(count.text.contains("301 features"))
            let capped = try await client.get("\(base)/0/query?f=html&where=1%3D1&outFields=objectid")
            #expect(capped.text.contains("100 features shown; more match"))
            #expect(capped.text.components(separatedBy: "<tr><td>").count - 1 == 100)
        }
    }

    @Test(arguments: BackendKind.available)
    func operationsHaveFormsAndShowTheirAnswers(kind: BackendKind) async throws {
        try await withServer(kind) { client, service in
            let before = try await service.snapshot()
            let form = try await client.get("\(base)/0/applyEdits?f=html")
            expectPage(form)
            #expect(form.text.contains(#"method="post" action="applyEdits?f=html""#) && form.text.contains(#"name="adds""#))
            #expect(try await service.snapshot() == before, "showing the form edits nothing")

            let applied = try await client.post(
                "\(base)/0/applyEdits?f=html", ["adds": #"[{"attributes":{"asset_id":"F-1","asset_type":"meter"},"geometry":{"x":-122.6,"y":45.5}}]"#, "f": "html"])
            expectPage(applied)
            #expect(applied.text.contains("&quot;addResults&quot;") && applied.text.contains("&quot;success&quot; : true"))

            let refused = try await client.post("\(base)/0/applyEdits?f=html", ["adds": "[{", "f": "html"])
            expectPage(refused, status: 400)
            #expect(refused.text.contains("Error 400") && refused.text.contains("&#39;adds&#39;"))

            let replicaForm = try await client.get("\(base)/createReplica?f=html")
            expectPage(replicaForm)
            #expect(replicaForm.text.contains(#"name="layers""#) && replicaForm.text.contains(#"<option value="sqlite">"#))
            let replica = try await client.post("\(base)/createReplica?f=html", ["layers": "0", "dataFormat": "json", "replicaName": "from a browser", "f": "html"])
            expectPage(replica)
            #expect(replica.text.contains("&quot;replicaID&quot;") && replica.text.contains("from a browser"))
        }
    }

    @Test(arguments: BackendKind.available)
    func errorsArePagesWithTheirStatus(kind: BackendKind) async throws {
        try await withServer(kind) { client, _ in
            let missing = try await client.get("/arcgis/rest/services/nope/FeatureServer?f=html")
            expectPage(missing, status: 404)
            #expect(missing.text.contains("Error 404"))
            let bad = try await client.get("\(base)/0/query?f=html&where=\(q("<img src=x onerror=alert(1)>"))")
            expectPage(bad, status: 400)
            #expect(!bad.text.contains("<img"), "an echoed parameter is escaped")
            #expect(try await client.get("\(base)?f=xml").status == 400)
        }
    }

    @Test func drawnMapServersHaveAPreview() async throws {
        try await withServer(.sqlite) { client, _ in
            let page = try await client.get("/arcgis/rest/services/field_inspection/MapServer?f=html")
            expectPage(page)
            #expect(page.text.contains(#"<script src="../../static/directory.js" defer></script>"#))
            #expect(page.text.contains(#"data-tiles="MapServer/tile""#) && page.text.contains("data-extent=\"-1365"))
            #expect(try await client.get("/arcgis/rest/services/field_inspection/MapServer/tile/12/1465/650").headers[.contentType] == "image/png")
        }
    }

    /// A real browser (headless Chromium driven by Selenium) walks from the catalog to a layer's
    /// query form by its links, submits it, and sees the features, a hostile value as text and no
    /// script run; the MapServer preview draws tiles with non-empty pixels; the console stays
    /// free of errors (a Content-Security-Policy violation would be one).
    @Test(.scaledTimeLimit(minutes: 3))
    func aBrowserUsesTheDirectory() async throws {
        let (service, server) = try await Self.serveSample()
        defer { Task { await server.stop() } }
        let hostile = #"[{"attributes":{"asset_id":"XSS-1","asset_type":"valve","notes":"<script>document.title='owned'</script><img src=x onerror=alert(1)>"},"geometry":{"x":-122.65,"y":45.52}}]"#
        var request = URLRequest(url: server.featureServer("field_inspection").appendingPathComponent("0/applyEdits"))
        request.httpMethod = "POST"
        request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
        request.httpBody = Data("f=json&adds=\(q(hostile))".utf8)
        _ = try await URLSession.shared.data(for: request)
        let directory = TemporaryDirectory()
        let shot = directory.file("preview.png")
        let run = try await ExternalTools.python(Self.browserScript, [server.url.appendingPathComponent("arcgis/rest/services").absoluteString + "?f=html", shot.path])
        #expect(run.succeeded, "\(run.stdout)\(run.stderr)")
        let png = try Data(contentsOf: shot)
        #expect(png.starts(with: [0x89, 0x50, 0x4E, 0x47]) && png.count > 2_000, "a screenshot of the preview with something in it")
        withExtendedLifetime(service) {}
    }

    static let browserScript = HeadlessChromium.prelude + """
        from selenium.common.exceptions import NoAlertPresentException
        driver.set_page_load_timeout(60)
        wait = WebDriverWait(driver, 30)
        errors = []
        def page(url=None):
            if url:
                driver.get(url)
            errors.extend(e for e in driver.get_log("browser") if e["level"] == "SEVERE")
        # Distinct colours in the preview's loaded tiles (same origin, so a canvas may read them).
        DRAWN = (
            "const imgs = [...document.querySelectorAll('#map img')].filter(i => i.complete && i.naturalWidth > 0);"
            "if (imgs.length === 0) return 0;"
            "const canvas = document.createElement('canvas'); canvas.width = 256; canvas.height = 256;"
            "const g = canvas.getContext('2d'); const colours = new Set();"
            "for (const img of imgs) { g.clearRect(0, 0, 256, 256); g.drawImage(img, 0, 0); const p = g.getImageData(0, 0, 256, 256).data;"
            "  for (let i = 0; i < p.length; i += 4 * 97) colours.add(p[i] + ',' + p[i+1] + ',' + p[i+2] + ',' + p[i+3]); }"
            "return colours.size;")
        try:
            page(sys.argv[1])
            assert "Services" in driver.title, driver.title
            driver.find_element(By.LINK_TEXT, "field_inspection").click(); page()
            driver.find_element(By.LINK_TEXT, "inspection_points").click(); page()
            assert "esriFieldTypeSmallInteger" in driver.page_source
            driver.find_element(By.LINK_TEXT, "Query").click(); page()
            where = driver.find_element(By.ID, "where")
            where.clear()
            where.send_keys("asset_id = 'XSS-1'")
            driver.find_element(By.CSS_SELECTOR, "form.operation button").click()
            wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "table.features tbody tr")); page()
            rows = driver.find_elements(By.CSS_SELECTOR, "table.features tbody tr")
            assert len(rows) == 1, len(rows)
            assert "<script>document.title='owned'</script>" in rows[0].text, rows[0].text
            assert "owned" not in driver.title, driver.title
            try:
                driver.switch_to.alert
                raise SystemExit("a script in a field value ran")
            except NoAlertPresentException:
                pass
            page(sys.argv[1].replace("services?f=html", "services/field_inspection/MapServer?f=html"))
            wait.until(lambda d: d.execute_script(DRAWN) >= 2)
            driver.find_element(By.CSS_SELECTOR, "#map .zoom button").click()
            wait.until(lambda d: d.execute_script(DRAWN) >= 2)
            driver.find_element(By.ID, "map").screenshot(sys.argv[2]); page()
            assert not errors, errors
            print("ok", driver.execute_script(DRAWN))
        finally:
            driver.quit()
        """

    /// A crawler with Python's HTML parser follows every link, style sheet, script and GET form
    /// from the catalog of a live server: every one answers 200, and nothing points elsewhere.
    @Test(.scaledTimeLimit(minutes: 2))
    func everyLinkOfTheDirectoryResolves() async throws {
        let (service, server) = try await Self.serveSample()
        defer { Task { await server.stop() } }
        let script = """
            import sys, urllib.request, urllib.parse, urllib.error
            from html.parser import HTMLParser
            start = sys.argv[1]
            origin = urllib.parse.urlsplit(start)
            class Links(HTMLParser):
                def __init__(self):
                    super().__init__(); self.found = []
                def handle_starttag(self, tag, attrs):
                    a = dict(attrs)
                    for key in ("href", "src"):
                        if a.get(key): self.found.append(a[key])
                    if tag == "form" and a.get("method", "get") == "get": self.found.append(a["action"] + "?f=html")
            seen, queue, pages = set(), [start], 0
            while queue:
                url = queue.pop()
                if url in seen or len(seen) > 400: continue
                seen.add(url)
                try:
                    reply = urllib.request.urlopen(url)
                except urllib.error.HTTPError as e:
                    raise SystemExit(f"{url}: {e.code}")
                body = reply.read().decode()
                if not reply.headers.get("Content-Type", "").startswith("text/html"): continue
                pages += 1
                parser = Links(); parser.feed(body)
                for link in parser.found:
                    target = urllib.parse.urljoin(url, link)
                    parts = urllib.parse.urlsplit(target)
                    assert (parts.scheme, parts.netloc) == (origin.scheme, origin.netloc), (url, link)
                    # Tiles and replica files are data; pages, assets and forms are followed.
                    if "/tile/" not in parts.path and "replicafiles" not in parts.path: queue.append(target)
            print(pages)
            """
        let crawl = try await ExternalTools.python(script, [server.url.appendingPathComponent("arcgis/rest/services").absoluteString + "?f=html"])
        #expect(crawl.succeeded, "\(crawl.stderr)")
        #expect((Int(crawl.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0) >= 12, "pages crawled: \(crawl.stdout)")
        withExtendedLifetime(service) {}
    }
}
