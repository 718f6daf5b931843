import Foundation
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import OutpostCore
import OutpostTestSupport
import Testing

/// `outpost locator`, `geocode`, `reverse`, `suggest` and GeocodeServer in `outpost serve`, with
/// geopy's ArcGIS geocoder as the third-party client.
@Suite struct LocatorCommandTests {
    static let fields = "house=house_number,street=street,city=city,postal=postcode,name=name"

    /// The Helsinki sample and a locator built from it by the CLI, named `name`.
    static func locator(in directory: TemporaryDirectory, name: String = "helsinki") async throws -> URL {
        let gpkg = directory.file("helsinki.gpkg")
        let created = try await outpost(["service", "create", Repository.sampleData("helsinki").path, "--out", gpkg.path])
        #expect(created.succeeded, "\(created.stderr)")
        let services = directory.file("services")
        try FileManager.default.createDirectory(at: services, withIntermediateDirectories: true)
        let url = services.appendingPathComponent("\(name).locator")
        let built = try await outpost([
            "locator", "create", gpkg.path, "--layer", "addresses", "--fields", fields, "--layer", "streets", "--fields", "street=name",
            "--where", "streets: name IS NOT NULL", "--out", url.path, "--json",
        ])
        #expect(built.succeeded, "\(built.stderr)")
        let summary = try JSONValue.parse(built.stdout)
        #expect(summary["entries"] == 1_451 && summary["segments"]?.integerValue ?? 0 > 700)
        return url
    }

    @Test func theCLIGeocodesReversesAndSuggestsOfflineAndThroughTheServerAlike() async throws {
        let directory = TemporaryDirectory("outpost-locator-cli")
        let locator = try await Self.locator(in: directory)
        let offline = try await outpost(["geocode", locator.path, "Mannerheimintie 12, 00100 Helsinki", "--json", "--max", "3"])
        #expect(offline.succeeded, "\(offline.stderr)")
        let candidates = try JSONValue.parse(offline.stdout)["candidates"]?.arrayValue ?? []
        #expect(candidates.first?["address"] == "Mannerheimintie 12, 00100 Helsinki" && candidates.first?["score"] == 100)

        let server = try await ServeProcess.start(service: locator.deletingLastPathComponent())
        defer { Task { await server.stop() } }
        let service = server.url.appendingPathComponent("arcgis/rest/services/helsinki/GeocodeServer").absoluteString
        let online = try await outpost(["geocode", service, "Mannerheimintie 12, 00100 Helsinki", "--json", "--max", "3"])
        #expect(online.succeeded, "\(online.stderr)")
        let remote = try JSONValue.parse(online.stdout)["candidates"]?.arrayValue ?? []
        #expect(remote.map { $0["address"] } == candidates.map { $0["address"] })
        #expect(remote.map { $0["score"] } == candidates.map { $0["score"] })

        for target in [locator.path, service] {
            let reverse = try await outpost(["reverse", target, "24.9405705,60.1680605"])
            #expect(reverse.succeeded && reverse.stdout.hasPrefix("Mannerheimintie 12, 00100 Helsinki"), "\(reverse.stdout) \(reverse.stderr)")
            let suggest = try await outpost(["suggest", target, "12 Mannerh", "--json"])
            let suggestions = try JSONValue.parse(suggest.stdout)["suggestions"]?.arrayValue ?? []
            #expect(suggestions.first?["text"] == "Mannerheimintie 12, 00100 Helsinki", "\(suggest.stdout)")
            let far = try await outpost(["reverse", target, "0,0"])
            #expect(!far.succeeded && far.stderr.contains("no address within"))
            let nothing = try await outpost(["geocode", target, "\"*:-^"])
            #expect(!nothing.succeeded && nothing.stderr.contains("no candidates"))
        }
        let info = try await outpost(["locator", "info", service, "--json"])
        #expect(try JSONValue.parse(info.stdout)["supportsReverseGeocoding"] == true)
        let missing = try await outpost(["geocode", directory.file("none.locator").path, "x"])
        #expect(!missing.succeeded && missing.stderr.contains("no locator at"))
    }

    @Test func geocodeServerAnswersAsArcGISDoesAndRefusesBadRequests() async throws {
        let directory = TemporaryDirectory("outpost-geocodeserver")
        let locator = try await Self.locator(in: directory)
        let server = try await ServeProcess.start(service: locator.deletingLastPathComponent())
        defer { Task { await server.stop() } }
        let base = server.url.appendingPathComponent("arcgis/rest/services/helsinki/GeocodeServer")
        func get(_ path: String, _ query: [String: String]) async throws -> (Int, JSONValue) {
            var components = URLComponents(url: base.appendingPathComponent(path), resolvingAgainstBaseURL: false)!
            components.queryItems = query.map { URLQueryItem(name: $0.key, value: $0.value) } + [URLQueryItem(name: "f", value: "json")]
            let result = try await ExternalTools.run("curl", ["-s", "-w", "\n%{http_code}", components.url!.absoluteString])
            let lines = result.stdout.split(separator: "\n", omittingEmptySubsequences: false)
            return (Int(lines.last ?? "") ?? 0, try JSONValue.parse(String(lines.dropLast().joined(separator: "\n"))))
        }
        let (_, info) = try await get("", [:])
        #expect(info["singleLineAddressField"]?["name"] == "SingleLine" && info["capabilities"] == "Geocode,ReverseGeocode,Suggest")
        #expect(info["spatialReference"]?["wkid"] == 4326)
        let catalog = try JSONValue.parse(try await ExternalTools.run("curl", ["-s", server.url.appendingPathComponent("arcgis/rest/services").absoluteString + "?f=json"]).stdout)
        #expect((catalog["services"]?.arrayValue ?? []).contains { $0["name"] == "helsinki" && $0["type"] == "GeocodeServer" })

        let (_, found) = try await get("findAddressCandidates", ["SingleLine": "Burger King", "outFields": "*", "location": "24.9470,60.1690", "maxLocations": "3"])
        let first = found["candidates"]?[0]
        #expect(first?["address"] == "Burger King, Aleksanterinkatu 11, 00100 Helsinki" && first?["attributes"]?["Addr_type"] == "POI")
        #expect(first?["extent"]?["xmin"]?.doubleValue ?? 99 < first?["location"]?["x"]?.doubleValue ?? 0)
        // Multi-field input, outSR, and the magicKey of a suggestion.
        let (_, parts) = try await get("findAddressCandidates", ["Address": "Mannerheimintie 12", "City": "Helsinki", "outSR": "3067"])
        #expect(parts["spatialReference"]?["wkid"] == 3067 && (parts["candidates"]?[0]?["location"]?["x"]?.doubleValue ?? 0) > 300_000)
        let (_, suggested) = try await get("suggest", ["text": "Lonnrotinkatu 1", "maxSuggestions": "3"])
        let key = try #require(suggested["suggestions"]?[0]?["magicKey"]?.stringValue)
        let (_, chosen) = try await get("findAddressCandidates", ["SingleLine": suggested["suggestions"]?[0]?["text"]?.stringValue ?? "", "magicKey": key])
        #expect(chosen["candidates"]?[0]?["address"] == suggested["suggestions"]?[0]?["text"] && chosen["candidates"]?[0]?["score"] == 100)
        // Reverse: the ArcGIS address object; nothing near is ArcGIS's 400.
        let (_, reversed) = try await get("reverseGeocode", ["location": #"{"x":24.9405705,"y":60.1680605,"spatialReference":{"wkid":4326}}"#])
        #expect(reversed["address"]?["Match_addr"] == "Mannerheimintie 12, 00100 Helsinki" && reversed["location"]?["spatialReference"]?["wkid"] == 4326)
        let (_, none) = try await get("reverseGeocode", ["location": "0,0"])
        #expect(none["error"]?["code"] == 400 && none["error"]?["details"]?[0] == "Unable to find address for the specified location.")
        // A batch: matched, unmatched, tied, and ids kept. The data holds "Lönnrotinkatu 13,
        // Helsinki" and "Lönnrotinkatu 13, 00120 Helsinki": without a postal code both score 100.
        let records = #"{"records":[{"attributes":{"OBJECTID":7,"SingleLine":"Mannerheimintie 12, Helsinki"}},{"attributes":{"OBJECTID":8,"SingleLine":"qqqq zzzz"}},{"attributes":{"OBJECTID":9,"Address":"Lönnrotinkatu 13","City":"Helsinki"}}]}"#
        let (_, batch) = try await get("geocodeAddresses", ["addresses": records])
        let locations = batch["locations"]?.arrayValue ?? []
        #expect(locations.map { $0["attributes"]?["ResultID"] } == [7, 8, 9])
        #expect(locations.map { $0["attributes"]?["Status"] } == ["M", "U", "T"])

        // Bad requests: 400 naming the parameter, never an FTS5 error or a 500.
        for (path, query, parameter) in [
            ("reverseGeocode", [:], "location"), ("reverseGeocode", ["location": "north"], "location"),
            ("reverseGeocode", ["location": "1,2", "distance": "-5"], "distance"), ("reverseGeocode", ["location": "500,91"], "location"),
            ("reverseGeocode", ["location": "200,100"], "location"), ("reverseGeocode", ["location": "24.9,95"], "location"),
            ("reverseGeocode", ["location": #"{"x":500,"y":500}"#], "location"), ("reverseGeocode", ["location": "24.94,60.17", "outSR": "999999"], "outSR"),
            ("findAddressCandidates", [:], "SingleLine"), ("findAddressCandidates", ["SingleLine": "x", "maxLocations": "0"], "maxLocations"),
            ("findAddressCandidates", ["SingleLine": "x", "maxLocations": "abc"], "maxLocations"),
            ("findAddressCandidates", ["magicKey": "'; DROP TABLE entries; --"], "magicKey"), ("geocodeAddresses", ["addresses": "not json"], "addresses"),
            ("findAddressCandidates", ["SingleLine": "x", "outSR": "999999"], "outSR"), ("findAddressCandidates", ["SingleLine": "x", "outSR": "abc"], "outSR"),
            ("findAddressCandidates", ["SingleLine": "x", "location": "200,100"], "location"),
            ("findAddressCandidates", ["SingleLine": "x", "searchExtent": "1,2"], "searchExtent"),
            ("suggest", ["text": "Mann", "location": #"{"x":24.9,"y":60.1,"spatialReference":{"wkid":999999}}"#], "location"),
            ("geocodeAddresses", ["addresses": #"{"records":[]}"#, "outSR": "999999"], "outSR"),
        ] as [(String, [String: String], String)] {
            let (status, answer) = try await get(path, query)
            #expect(status == 400 && answer["error"]?["code"] == 400, "\(path) \(query): \(answer)")
            #expect(answer["error"]?["message"]?.stringValue?.contains("'\(parameter)'") == true, "\(path) \(query): \(answer)")
        }
        #expect(try await get("nope", [:]).0 == 404)
        for text in [String(repeating: "Mannerheimintie ", count: 625), "\"NEAR(a b)\" * - : ^", "\u{1}\u{2}\u{7f}"] {
            let (status, answer) = try await get("findAddressCandidates", ["SingleLine": text])
            #expect(status == 200 && answer["candidates"] != nil && answer["error"] == nil)
        }
    }

    /// geopy's ArcGIS geocoder calls …/arcgis/rest/services/World/GeocodeServer with its own
    /// parameter names (singleLine, outFields, maxLocations; location for reverse).
    @Test func geopysArcGISGeocoderFindsAndReversesAddresses() async throws {
        let directory = TemporaryDirectory("outpost-geopy")
        let locator = try await Self.locator(in: directory, name: "World")
        let server = try await ServeProcess.start(service: locator.deletingLastPathComponent())
        defer { Task { await server.stop() } }
        let domain = "\(server.url.host ?? "127.0.0.1"):\(server.url.port ?? 0)"
        let script = """
            import sys
            from geopy.geocoders import ArcGIS
            g = ArcGIS(scheme="http", domain=sys.argv[1], timeout=30)
            found = g.geocode("Mannerheimintie 12, 00100 Helsinki")
            print(found.address)
            assert found.raw["score"] == 100, found.raw
            print(round(found.latitude, 6), round(found.longitude, 6))
            many = g.geocode("Burger King", exactly_one=False)
            print(len(many))
            back = g.reverse((60.1680605, 24.9405705))
            print(back.raw["Match_addr"])
            assert back.address.startswith("Mannerheimintie 12, Helsinki") and "00100" in back.address, back.address
            print(g.reverse((0.0, 0.0)))
            """
        let result = try await ExternalTools.python(script, [domain])
        #expect(result.succeeded, "\(result.stderr)")
        let lines = result.stdout.split(separator: "\n").map(String.init)
        #expect(lines.first == "Mannerheimintie 12, 00100 Helsinki")
        #expect(lines.count > 1 && lines[1] == "60.168061 24.94057")
        #expect(lines.count > 2 && Int(lines[2]) == 3)
        #expect(lines.count > 3 && lines[3] == "Mannerheimintie 12, 00100 Helsinki")
        #expect(lines.count > 4 && lines[4] == "None")
    }

    @Test func batchGeocodingACSVWritesAGeoPackageOthersRead() async throws {
        let directory = TemporaryDirectory("outpost-geocode-batch")
        let locator = try await Self.locator(in: directory)
        let csv = directory.file("visits.csv")
        try Data("""
            visit,SingleLine,note
            1,"Mannerheimintie 12, 00100 Helsinki",first
            2,Lonnrotinkatu 13 Helsinki,"with ""quotes"", and a comma"
            3,no such place anywhere,
            4,"Aleksanterinkatu 52, Helsinki",last

            """.utf8).write(to: csv)
        let out = directory.file("visits.gpkg")
        let run = try await outpost(["geocode", locator.path, "--batch", csv.path, "--out", out.path, "--job-dir", directory.file("jobs").path])
        #expect(run.succeeded, "\(run.stderr)")
        #expect(run.stdout.contains("4 rows") && run.stdout.contains("2 matched, 1 tied, 1 unmatched"), "\(run.stdout)")
        let check = try await ExternalTools.python("""
            import sys, pyogrio.raw as raw
            meta, fids, geometry, fields = raw.read(sys.argv[1], layer="matches")
            names = list(meta["fields"])
            rows = sorted(zip(*fields), key=lambda r: r[names.index("row_number")])
            for r in rows:
                print(r[names.index("row_number")], r[names.index("status")], r[names.index("match_addr")], r[names.index("USER_note")])
            print(meta["crs"], sum(1 for g in geometry if g is not None))
            """, [out.path])
        #expect(check.succeeded, "\(check.stderr)")
        let lines = check.stdout.split(separator: "\n").map(String.init)
        #expect(lines == [
            "1 M Mannerheimintie 12, 00100 Helsinki first", "2 T Lönnrotinkatu 13, Helsinki with \"quotes\", and a comma",
            "3 U None ", "4 M Aleksanterinkatu 52, 00100 Helsinki last", "EPSG:4326 3",
        ], "\(check.stdout)")
        let missing = try await outpost(["geocode", locator.path, "--batch", csv.path, "--out", out.path, "--address-field", "nope", "--job-dir", directory.file("jobs").path])
        #expect(!missing.succeeded && missing.stderr.contains("has no column nope"))
        // Killed (SIGKILL) after the file was moved into place and before the job recorded its
        // end: the same command ends the job with what the file holds.
        let again = ["geocode", locator.path, "--batch", csv.path, "--out", directory.file("again.gpkg").path, "--job-dir", directory.file("jobs-again").path]
        let killed = try await ExternalTools.run(Repository.outpostExecutable.path, again, environment: ["OUTPOST_FAULT": "geocode.afterMove:kill"])
        #expect(killed.status == 9 || killed.status == 137, "\(killed.status) \(killed.stderr)")
        #expect(FileManager.default.fileExists(atPath: directory.file("again.gpkg").path))
        let resumed = try await outpost(again)
        #expect(resumed.succeeded && resumed.stderr.contains("resuming batch geocode job") && resumed.stdout.contains("4 rows"), "\(resumed.stderr) \(resumed.stdout)")
    }

    /// A crew's locator follows its replica: after a sync brings an address added at the office,
    /// `locator update` indexes that row alone and the address is found offline.
    @Test(.scaledTimeLimit(minutes: 3))
    func aLocatorBuiltFromAReplicaFollowsItAfterASync() async throws {
        let directory = TemporaryDirectory("outpost-locator-replica")
        let (server, url, replica) = try await helsinkiCrew(in: directory, layer: 0)
        defer { Task { await server.stop() } }
        let locator = directory.file("crew.locator").path
        let built = try await outpost(["locator", "create", replica, "--layer", "addresses", "--fields", Self.fields, "--out", locator])
        #expect(built.succeeded, "\(built.stderr)")
        #expect(try await outpost(["geocode", locator, "Kuusitie 999, Helsinki", "--min-score", "90"]).stderr.contains("no candidates"))

        let adds = #"[{"geometry":{"x":24.93,"y":60.18},"attributes":{"street":"Kuusitie","house_number":"999","city":"Helsinki","osm_id":"office"}}]"#
        let answer = try await applyEdits(url.absoluteString, layer: 0, "adds", adds)
        #expect(answer["addResults"]?[0]?["success"] == true, "\(answer)")

        let sync = try await outpost(["sync", replica])
        #expect(sync.succeeded, "\(sync.stderr)")
        let update = try await outpost(["locator", "update", locator, replica, "--json"])
        #expect(update.succeeded, "\(update.stderr)")
        let summary = try JSONValue.parse(update.stdout)
        #expect(summary["entries"] == 1 && summary["changed"] == 0 && summary["removed"] == 0, "\(update.stdout)")
        let found = try await outpost(["geocode", locator, "Kuusitie 999, Helsinki", "--json"])
        let first = try JSONValue.parse(found.stdout)["candidates"]?[0]
        #expect(first?["address"] == "Kuusitie 999, Helsinki" && first?["score"] == 100, "\(found.stdout)")
    }

    /// geopy signed in: it asks `https://<auth_domain>/sharing/generateToken` with the name and
    /// password in the URL (a GET), which a server takes only when started with
    /// --allow-token-requests-in-url and only over HTTPS; then it geocodes with the token and its
    /// Referer. Without the flag the same client is refused.
    @Test(.scaledTimeLimit(minutes: 3))
    func geopySignsInOverHTTPSAndGeocodesWithItsToken() async throws {
        let directory = TemporaryDirectory("outpost-geopy-secure")
        let locator = try await Self.locator(in: directory, name: "World")
        let (cert, key) = try await TLSServeTests.certificate(in: directory)
        let users = directory.file("users.json")
        let added = try await ExternalTools.run(
            Repository.outpostExecutable.path, ["users", "add", "crew", "--role", "viewer", "--users", users.path, "--password-stdin"], input: "a long pass phrase\n")
        #expect(added.succeeded, "\(added.stderr)")
        let script = """
            import sys, ssl
            from geopy.geocoders import ArcGIS
            from geopy.exc import GeopyError
            domain, ca = sys.argv[1], sys.argv[2]
            context = ssl.create_default_context(cafile=ca)
            g = ArcGIS("crew", "a long pass phrase", referer="https://crew.example", scheme="https", domain=domain, auth_domain=domain,
                       ssl_context=context, timeout=30)
            try:
                found = g.geocode("Mannerheimintie 12, 00100 Helsinki")
                print(found.address)
                print(g.reverse((60.1680605, 24.9405705)).raw["Match_addr"])
            except GeopyError as error:
                print("refused:", type(error).__name__)
            anonymous = ArcGIS(scheme="https", domain=domain, ssl_context=context, timeout=30)
            try:
                print(anonymous.geocode("Mannerheimintie 12"))
            except GeopyError as error:
                print("anonymous refused:", type(error).__name__)
            """
        for allowed in [true, false] {
            let server = try await ServeProcess.start(
                service: locator.deletingLastPathComponent(),
                arguments: ["--tls-cert", cert.path, "--tls-key", key.path, "--users", users.path] + (allowed ? ["--allow-token-requests-in-url"] : []))
            let domain = "\(server.url.host ?? "127.0.0.1"):\(server.url.port ?? 0)"
            let result = try await ExternalTools.python(script, [domain, cert.path])
            await server.stop()
            #expect(result.succeeded, "\(result.stderr)")
            let lines = result.stdout.split(separator: "\n").map(String.init)
            if allowed {
                #expect(lines.first == "Mannerheimintie 12, 00100 Helsinki", "\(result.stdout)")
                #expect(lines.count > 1 && lines[1] == "Mannerheimintie 12, 00100 Helsinki")
            } else {
                #expect(lines.first?.hasPrefix("refused:") == true, "\(result.stdout)")
            }
            #expect(lines.last?.hasPrefix("anonymous refused:") == true, "\(result.stdout)")
        }
    }
}
