import Foundation
import OutpostCore
import OutpostRouting
import Testing

/// Stops and barriers as text (NAServer's `stops`, the command line's `--stops`): both forms
/// read, names and systems kept, and every kind of bad item refused naming the item and the
/// input it came in.
@Suite("Route points")
struct RoutePointsTests {
    @Test func pairsAndFeaturesAreRead() throws {
        let pairs = try RoutePoints(parsing: " 24.94,60.16 ; 24.95, 60.17 ", as: .stops)
        #expect(pairs.stops == [RouteStop(Position(x: 24.94, y: 60.16)), RouteStop(Position(x: 24.95, y: 60.17))])
        #expect(pairs.spatialReference.wkid == 4326)

        let features = try RoutePoints(
            parsing: #"{"features": [{"geometry": {"x": 2776000, "y": 8437000}, "attributes": {"NAME": "Depot"}}, {"geometry": {"x": 2777000, "y": 8438000}}], "spatialReference": {"wkid": 102100}}"#,
            as: .stops)
        // 102100 is Web Mercator's older number.
        #expect(features.stops.map(\.name) == ["Depot", nil] && [102100, 3857].contains(features.spatialReference.wkid))
        let bare = try RoutePoints(parsing: #"[{"geometry": {"x": 1, "y": 2}}]"#, as: .barriers)
        #expect(bare.stops == [RouteStop(Position(x: 1, y: 2))] && bare.spatialReference.wkid == 4326)
    }

    /// Web Mercator points come to the network's system (ETRS-TM35FIN here) with their names,
    /// where a WGS 84 reading of the same place lands within a metre.
    @Test func pointsAreProjectedToTheNetworksSystem() throws {
        let mercator = try RoutePoints(
            parsing: #"{"features": [{"geometry": {"x": 2776463.9, "y": 8437952.7}, "attributes": {"Name": "Rautatientori"}}], "spatialReference": {"wkid": 3857}}"#,
            as: .stops)
        let inTM35 = try mercator.stops(in: SpatialReference(wkid: 3067), as: .stops)
        let fromDegrees = try RoutePoints(parsing: "24.9414,60.1712", as: .stops).stops(in: SpatialReference(wkid: 3067), as: .stops)
        #expect(inTM35[0].name == "Rautatientori")
        #expect(hypot(inTM35[0].location.x - fromDegrees[0].location.x, inTM35[0].location.y - fromDegrees[0].location.y) < 1)
        #expect(try mercator.stops(in: SpatialReference(wkid: 3857), as: .stops) == mercator.stops)
    }

    @Test func badItemsAreRefusedNamingTheItemAndTheInput() {
        let cases: [(String, RoutingError.Input, String)] = [
            ("north;south", .stops, "item 1 \"north\" is not lon,lat"),
            ("24.9,60.1;24.9", .barriers, "item 2 \"24.9\" is not lon,lat"),
            ("24.9,60.1;nan,60", .stops, "item 2"),
            ("24.9,60.1;inf,60", .stops, "item 2"),
            ("200,100", .stops, "item 1 (200.0, 100.0) is not a longitude and latitude"),
            ("{\"features\": ", .stops, "not valid JSON"),
            ("{\"type\": \"features\"}", .stops, "expected {\"features\""),
            (#"{"features": [{"geometry": {"x": "a"}}]}"#, .stops, "feature 1 has no point geometry"),
            (#"{"features": [{"geometry": {"x": 1, "y": 1e999}}]}"#, .stops, "not valid JSON"),
            ((0...RouteOptions.maximumStops).map { _ in "1,2" }.joined(separator: ";"), .stops, "10001 points are more than the 10000"),
        ]
        for (text, input, needle) in cases {
            #expect(throws: RoutingError.self, "\(text.prefix(60))") {
                do {
                    _ = try RoutePoints(parsing: text, as: input)
                } catch let error as RoutingError {
                    #expect(error.code == .invalidInput && error.input == input && error.message.contains(needle), "\(text.prefix(60)): \(error.message)")
                    throw error
                }
            }
        }
        let unknown = try? RoutePoints(parsing: #"{"features": [{"geometry": {"x": 1, "y": 2}}], "spatialReference": {"wkid": 999999}}"#, as: .barriers)
        #expect(throws: RoutingError.self) { try unknown?.stops(in: SpatialReference(wkid: 3067), as: .barriers) }
    }
}
