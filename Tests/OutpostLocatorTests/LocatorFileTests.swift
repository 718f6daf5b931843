import Foundation
import OutpostCore
import OutpostLocator
import OutpostStorage
import OutpostTestSupport
import Testing

/// Locator files: spelling forms, names, keys, spatial references, bad input, damaged files and
/// incremental updates.
@Suite struct LocatorFileTests {
    @Test func spellingFormsAbbreviationsPartsAndNamesFindTheirAddress() throws {
        let directory = TemporaryDirectory("outpost-locator-forms")
        let (_, url) = try HelsinkiLocator.build(in: directory)
        let locator = try LocalLocator(url: url)
        func top(_ text: String) throws -> GeocodeResult? { try locator.geocode(text).first }
        // Without the diacritics: an alternative form, scoring just below the exact spelling.
        let folded = try #require(try top("Lonnrotinkatu 13, Helsinki"))
        #expect(folded.label == "Lönnrotinkatu 13, Helsinki")
        #expect(folded.score < 100 && folded.score > 95)
        // House number first, lower case, a Finnish abbreviation, a compound split in two.
        #expect(try top("12 mannerheimintie")?.label.hasPrefix("Mannerheimintie 12") == true)
        #expect(try top("Mannerheimint. 12")?.label.hasPrefix("Mannerheimintie 12") == true)
        #expect(try top("Aleksanterin katu 15")?.label.hasPrefix("Aleksanterinkatu 15") == true)
        // A street alone is the street; a city alone the city; a place by its name.
        let street = try #require(try top("Mannerheimintie"))
        #expect(street.matchType == .streetName && street.label == "Mannerheimintie, Helsinki" && street.score == 100)
        #expect(street.extent.xmax - street.extent.xmin > 0.005)
        #expect(try top("Helsinki")?.matchType == .locality)
        #expect(try top("00100")?.matchType == .postal)
        // Three restaurants of that name: all come back, the nearest to the preferred location first.
        var near = GeocodeParameters()
        near.preferredSearchLocation = Position(x: 24.9470, y: 60.1690)
        near.resultAttributeNames = ["PlaceName", "StAddr"]
        let places = try locator.geocode("Burger King", parameters: near)
        #expect(places.filter { $0.label.hasPrefix("Burger King, ") && $0.score == 100 }.count == 3)
        let place = try #require(places.first)
        #expect(place.matchType == .poi && place.label == "Burger King, Aleksanterinkatu 11, 00100 Helsinki")
        #expect(place.attributes["PlaceName"] == "Burger King" && place.attributes["Addr_type"] == "POI")
        #expect(place.attributes["StAddr"] == "Aleksanterinkatu 11")

        // A suggestion's key geocodes to exactly that candidate.
        var around = SuggestParameters()
        around.preferredSearchLocation = near.preferredSearchLocation
        let suggestion = try #require(try locator.suggest("Burger K", parameters: around).first)
        #expect(suggestion.label == place.label)
        let chosen = try #require(try locator.geocode(magicKey: suggestion.magicKey).first)
        #expect(chosen.label == place.label && chosen.score == 100)
        #expect(throws: LocatorError.self) { try locator.geocode(magicKey: "x; DROP TABLE entries") }
    }

    @Test func parametersFilterRankAndProject() throws {
        let directory = TemporaryDirectory("outpost-locator-parameters")
        let (_, url) = try HelsinkiLocator.build(in: directory)
        let locator = try LocalLocator(url: url)
        var parameters = GeocodeParameters()
        parameters.outputSpatialReference = SpatialReference(wkid: 3067)
        parameters.resultAttributeNames = ["*"]
        let projected = try #require(try locator.geocode("Mannerheimintie 12, 00100 Helsinki", parameters: parameters).first)
        let plain = try #require(try locator.geocode("Mannerheimintie 12, 00100 Helsinki").first)
        #expect(projected.spatialReference.wkid == 3067)
        // ETRS-TM35FIN near Helsinki: about 385 km east, 6,672 km north.
        #expect(abs(projected.location.x - 385_500) < 2_000 && abs(projected.location.y - 6_672_000) < 3_000)
        #expect(projected.attributes["X"]?.doubleValue == projected.location.x)
        #expect(plain.attributes.keys.sorted() == ["Addr_type", "Match_addr", "Score"])

        var streets = GeocodeParameters()
        streets.categories = ["StreetName"]
        #expect(try locator.geocode("Mannerheimintie 12", parameters: streets).allSatisfy { $0.matchType == .streetName })
        var high = GeocodeParameters()
        high.minScore = 99
        #expect(try locator.geocode("Mannerheimintie 9999", parameters: high).isEmpty)
        // A search area away from every address leaves nothing.
        var away = GeocodeParameters()
        away.searchArea = Envelope(xmin: 10, ymin: 50, xmax: 11, ymax: 51)
        #expect(try locator.geocode("Mannerheimintie 12", parameters: away).isEmpty)

        // Reverse in another spatial reference; far from everything gives nothing.
        var reverse = ReverseGeocodeParameters()
        reverse.locationSpatialReference = SpatialReference(wkid: 3067)
        let back = try #require(try locator.reverseGeocode(projected.location, parameters: reverse).first)
        #expect(back.label == plain.label)
        #expect(back.attributes["Distance"]?.doubleValue ?? 99 < 1)
        #expect(try locator.reverseGeocode(Position(x: 0, y: 0)).isEmpty)
        // Only streets: the street under the point, however near an address is.
        var onlyStreets = ReverseGeocodeParameters()
        onlyStreets.featureTypes = ["StreetName"]
        let lines = try JSONValue.parse(try Data(contentsOf: Repository.sampleData("helsinki/data/streets.geojson")))
        let features = lines["features"]?.arrayValue ?? []
        let line = try #require(features.first { $0["properties"]?["name"]?.stringValue == "Mannerheimintie" })
        let coordinates: [JSONValue] = line["geometry"]?["coordinates"]?.arrayValue ?? []
        let a = coordinates[0].arrayValue?.compactMap(\.doubleValue) ?? [], b = coordinates[1].arrayValue?.compactMap(\.doubleValue) ?? []
        let middle = Position(x: (a[0] + b[0]) / 2, y: (a[1] + b[1]) / 2)
        let road = try #require(try locator.reverseGeocode(middle, parameters: onlyStreets).first)
        #expect(road.matchType == .streetName && road.label.hasPrefix("Mannerheimintie"), "\(road.label)")
        #expect(throws: LocatorError.self) { try locator.reverseGeocode(Position(x: 500, y: 91)) }
    }

    @Test func badTextGivesNoCandidatesNeverAnError() throws {
        let directory = TemporaryDirectory("outpost-locator-bad")
        let (_, url) = try HelsinkiLocator.build(in: directory)
        let locator = try LocalLocator(url: url)
        let long = String(repeating: "Mannerheimintie ", count: 625)
        #expect(long.count == 10_000)
        for text in ["", "   ", ",,,", "\u{0}\u{7}\u{1b}[31m", "\"", "\"Mannerheimintie", "*", "Mann*", "NEAR(a b)", "a NEAR b",
                     "-Mannerheimintie", "street:Mannerheimintie", "^12", "(((", "AND OR NOT", long, "\u{202e}12 eitnimiehrennaM", "🙂"]
        {
            _ = try locator.geocode(text)
            _ = try locator.suggest(text)
        }
        #expect(try locator.geocode("").isEmpty)
        #expect(try locator.geocode("\"*:-^").isEmpty)
        // FTS5 words in the text are words, not operators.
        #expect(try locator.geocode("Mannerheimintie NEAR 12").first?.label.hasPrefix("Mannerheimintie") == true)
        #expect(try locator.geocode("Mannerheimintie -12").first?.label.hasPrefix("Mannerheimintie 12") == true)
        #expect(try locator.geocode(long).first?.label.hasPrefix("Mannerheimintie") == true)
    }

    @Test func damagedForeignAndNewerFilesAreRefusedOnOpen() throws {
        let directory = TemporaryDirectory("outpost-locator-damaged")
        let (gdb, url) = try HelsinkiLocator.build(in: directory)
        #expect(throws: LocatorError(.notFound, "no locator at \(directory.file("none.locator").path)")) {
            try LocalLocator(url: directory.file("none.locator"))
        }
        // A GeoPackage is SQLite but not a locator.
        #expect { try LocalLocator(url: gdb.url) } throws: { ($0 as? LocatorError)?.code == .notALocator }
        let text = directory.file("text.locator")
        try Data("not a database at all".utf8).write(to: text)
        #expect { try LocalLocator(url: text) } throws: { ($0 as? LocatorError)?.code == .notALocator }
        // Pages overwritten in the middle of the file.
        let damaged = directory.file("damaged.locator")
        try FileManager.default.copyItem(at: url, to: damaged)
        let handle = try FileHandle(forWritingTo: damaged)
        let size = try handle.seekToEnd()
        try handle.seek(toOffset: size / 2)
        try handle.write(contentsOf: Data(repeating: 0xA5, count: 16_384))
        try handle.close()
        #expect { try LocalLocator(url: damaged) } throws: { ($0 as? LocatorError)?.code == .notALocator }
        // A layout from a newer version.
        let newer = directory.file("newer.locator")
        try FileManager.default.copyItem(at: url, to: newer)
        // The SQLite header keeps user_version at byte 60, big-endian.
        let header = try FileHandle(forWritingTo: newer)
        try header.seek(toOffset: 60)
        try header.write(contentsOf: Data([0, 0, 0, 99]))
        try header.close()
        #expect { try LocalLocator(url: newer) } throws: { ($0 as? LocatorError)?.message.contains("layout 99") == true }
        // Building over an existing file needs overwrite.
        #expect { try HelsinkiLocator.build(in: directory) } throws: { _ in true }
    }

    @Test func anUpdateIndexesOnlyWhatChangedInTheGeodatabase() async throws {
        let directory = TemporaryDirectory("outpost-locator-update")
        let (gdb, url) = try HelsinkiLocator.build(in: directory)
        let addresses = try gdb.table(named: "addresses")
        let before = try LocalLocator(url: url)
        #expect(try before.geocode("Kuusitie 999, Helsinki").first?.label != "Kuusitie 999, Helsinki")

        // Three new addresses (one on a new street), one renumbered, two deleted.
        let added = try await addresses.add((0..<3).map { i in
            Feature(
                attributes: ["street": .string("Kuusitie"), "house_number": .string("\(999 - i)"), "city": .string("Helsinki"), "osm_id": .string("x\(i)")],
                geometry: .point(try! Point(Position(x: 24.93, y: 60.18 + Double(i) * 0.0001))))
        })
        var renumbered = try #require(try await addresses.features(matching: FeatureQuery(where: "street = 'Mannerheimintie' AND house_number = '12'")).first)
        renumbered["house_number"] = .string("12 K")
        try await addresses.update([renumbered])
        let gone = try #require(try await addresses.features(matching: FeatureQuery(where: "name = 'Burger King' AND street = 'Aleksanterinkatu'")).first)
        let other = try #require(try await addresses.features(matching: FeatureQuery(where: "street = 'Mannerheimintie' AND house_number = '14'")).first)
        try await addresses.delete(objectIDs: [gone.objectID!, other.objectID!])

        // Rows added count as entries; a changed row as changed only (docs/cli.md).
        let summary = try LocatorBuilder.update(url, from: gdb)
        #expect(summary.entries == 3 && summary.changed == 1 && summary.removed == 2, "\(summary)")
        let after = try LocalLocator(url: url)
        let new = try #require(try after.geocode("Kuusitie 999, Helsinki").first)
        #expect(new.label == "Kuusitie 999, Helsinki" && new.score == 100)
        #expect(abs(new.location.x - 24.93) < 1e-9)
        #expect(try after.geocode("Kuusitie").first?.label == "Kuusitie, Helsinki")
        #expect(try after.geocode("Mannerheimintie 12 K").first?.label.hasPrefix("Mannerheimintie 12 K") == true)
        let kings = try after.geocode("Burger King").filter { $0.label.hasPrefix("Burger King") }
        #expect(kings.count == 2 && !kings.contains { $0.label.contains("Aleksanterinkatu") })
        // Nothing changed: nothing indexed.
        let again = try LocatorBuilder.update(url, from: gdb)
        #expect(again.entries == 0 && again.changed == 0 && again.removed == 0)

        // One address moved, alone: one change, nothing added; it is found where it went.
        var moved = try #require(try await addresses.features(matching: FeatureQuery(where: "street = 'Kuusitie' AND house_number = '999'")).first)
        moved.geometry = .point(try Point(Position(x: 24.94, y: 60.17)))
        try await addresses.update([moved])
        let move = try LocatorBuilder.update(url, from: gdb)
        #expect(move.entries == 0 && move.changed == 1 && move.removed == 0, "\(move)")
        let there = try #require(try LocalLocator(url: url).geocode("Kuusitie 999, Helsinki").first)
        #expect(abs(there.location.x - 24.94) < 1e-9 && abs(there.location.y - 60.17) < 1e-9)
        #expect(added.count == 3)
    }
}

/// Batch geocoding as a job: pausing, rebuilding from JSON and resuming geocodes every row once.
@Suite struct BatchGeocodeJobTests {
    @Test func aPausedBatchRebuiltFromItsJSONFinishesWithEveryRowOnce() async throws {
        let directory = TemporaryDirectory("outpost-batch-job")
        let (_, url) = try HelsinkiLocator.build(in: directory)
        let addresses = try HelsinkiLocator.addresses()
        var csv = "id,SingleLine\n"
        for (i, a) in addresses.enumerated() { csv += "\(i + 1),\"\(a.houseFirst.replacingOccurrences(of: "\"", with: "\"\""))\"\n" }
        let input = directory.file("addresses.csv")
        try Data(csv.utf8).write(to: input)
        let output = directory.file("matches.gpkg")
        let job = Job(BatchGeocodeJob(locator: url.path, input: input, output: output))
        let updates = job.progressUpdates
        try job.start()
        for await progress in updates where (progress.phases.last?.done ?? 0) >= 500 { break }
        try job.pause()
        for await status in job.statusUpdates where status == .paused || status.isFinished { break }
        #expect(job.status == .paused)
        #expect(!FileManager.default.fileExists(atPath: output.path))

        let resumed = try Job<BatchGeocodeJob>.fromJSON(try job.toJSON())
        try resumed.start()
        let result = try await resumed.output
        #expect(result.rows == 1_451)
        #expect(result.matched + result.tied + result.unmatched == 1_451)
        // House number first, the same text crews type: nearly all match outright.
        #expect(result.unmatched == 0, "\(result)")
        let gdb = try Geodatabase.open(at: output, readOnly: true)
        defer { try? gdb.close() }
        let rows = try await gdb.table(named: "matches").features(matching: FeatureQuery(outFields: ["row_number", "status"], returnGeometry: false))
        #expect(rows.count == 1_451)
        #expect(Set(rows.compactMap { $0["row_number"] }).count == 1_451)
    }
}
