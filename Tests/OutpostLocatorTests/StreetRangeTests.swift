import Foundation
import OutpostCore
import OutpostLocator
import OutpostStorage
import OutpostTestSupport
import Testing

/// House numbers interpolated on street lines that carry ranges, when no address points exist.
@Suite struct StreetRangeTests {
    /// One street, 0.01° due east (about 555 m at 60°N): odd numbers 1–99 on its left (north),
    /// even 2–100 on its right; and a second street with a descending range.
    static func locator(in directory: TemporaryDirectory) throws -> URL {
        let fields = [
            FieldDefinition(name: "objectid", type: .oid), FieldDefinition(name: "name", type: .string), FieldDefinition(name: "city", type: .string),
            FieldDefinition(name: "l_f", type: .integer), FieldDefinition(name: "l_t", type: .integer),
            FieldDefinition(name: "r_f", type: .integer), FieldDefinition(name: "r_t", type: .integer),
        ]
        let layer = LayerDefinition(id: 0, name: "streets", geometryType: .multiLineString, fields: fields, spatialReference: .wgs84, sync: false)
        let gdb = try Geodatabase.create(at: directory.file("streets.gpkg"), schema: ServiceSchema(name: "streets", layers: [layer], tables: []), changeCapture: false)
        let table = try gdb.table(named: "streets")
        func line(_ points: [(Double, Double)]) throws -> Geometry {
            .multiLineString(try MultiLineString([try LineString(points.map { Position(x: $0.0, y: $0.1) })]))
        }
        try gdb.write { conn in
            _ = try table.add([
                Feature(
                    attributes: ["name": .string("Koetie"), "city": .string("Testilä"), "l_f": .integer(1), "l_t": .integer(99), "r_f": .integer(2), "r_t": .integer(100)],
                    geometry: try line([(24.90, 60.20), (24.905, 60.20), (24.91, 60.20)])),
                Feature(
                    attributes: ["name": .string("Alamäki"), "city": .string("Testilä"), "l_f": .integer(40), "l_t": .integer(2), "r_f": .integer(39), "r_t": .integer(1)],
                    geometry: try line([(24.90, 60.21), (24.90, 60.215)])),
            ], in: conn)
        }
        let url = directory.file("streets.locator")
        try LocatorBuilder.create(
            from: gdb,
            sources: [LocatorSource(layer: "streets", fields: try LocatorFieldMap(parsing: "street=name,city=city,left_from=l_f,left_to=l_t,right_from=r_f,right_to=r_t"))],
            at: url)
        try gdb.close()
        return url
    }

    @Test func houseNumbersAreInterpolatedOnTheirSideOfTheStreet() throws {
        let directory = TemporaryDirectory("outpost-street-ranges")
        let locator = try LocalLocator(url: try Self.locator(in: directory))
        let north = 5 / 111_320.0
        let odd = try #require(try locator.geocode("Koetie 51, Testilä").first)
        #expect(odd.matchType == .streetAddress && odd.label == "Koetie 51, Testilä" && odd.score == 100)
        // (51 − 1) / 98 of the way along, five metres to the left (north) of the line.
        #expect(abs(odd.location.x - (24.90 + 0.01 * 50 / 98)) < 1e-6, "\(odd.location)")
        #expect(abs(odd.location.y - (60.20 + north)) < 1e-7, "\(odd.location)")
        let even = try #require(try locator.geocode("50 Koetie").first)
        #expect(even.label == "Koetie 50, Testilä" && abs(even.location.y - (60.20 - north)) < 1e-7)
        #expect(abs(even.location.x - (24.90 + 0.01 * 48 / 98)) < 1e-6)
        // A descending range: 40 at the south end, 2 at the north.
        let descending = try #require(try locator.geocode("Alamaki 40").first)
        #expect(descending.label == "Alamäki 40, Testilä" && abs(descending.location.y - 60.21) < 1e-6)
        // Outside every range: the street, not a made-up address.
        let beyond = try #require(try locator.geocode("Koetie 101").first)
        #expect(beyond.matchType == .streetName && beyond.score < 100)
        #expect(try locator.geocode("Koetie 101").allSatisfy { $0.matchType != .streetAddress })
    }

    @Test func aPointBesideALineIsGivenTheNumberItsPlaceStandsFor() throws {
        let directory = TemporaryDirectory("outpost-street-ranges-reverse")
        let locator = try LocalLocator(url: try Self.locator(in: directory))
        // A quarter of the way along, 10 m north: an odd number near 1 + 0.25 × 98.
        let north = try #require(try locator.reverseGeocode(Position(x: 24.9025, y: 60.20 + 10 / 111_320.0)).first)
        #expect(north.matchType == .streetAddress)
        let number = Int(north.attributes["AddNum"]?.stringValue ?? "") ?? 0
        #expect(number % 2 == 1 && (23...29).contains(number), "\(north.label)")
        let south = try #require(try locator.reverseGeocode(Position(x: 24.9075, y: 60.20 - 10 / 111_320.0)).first)
        let southNumber = Int(south.attributes["AddNum"]?.stringValue ?? "") ?? 0
        #expect(southNumber % 2 == 0 && (72...78).contains(southNumber), "\(south.label)")
        var streets = ReverseGeocodeParameters()
        streets.featureTypes = ["StreetName"]
        #expect(try locator.reverseGeocode(Position(x: 24.9025, y: 60.2001), parameters: streets).first?.label == "Koetie, Testilä")
        // Half the ranges missing is refused when the locator is built.
        #expect(throws: LocatorError.self) { try LocatorFieldMap(parsing: "street=name,left_from=l_f") }
    }
}
