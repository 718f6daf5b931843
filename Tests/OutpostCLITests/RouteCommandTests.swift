import Foundation
import OutpostCore
import OutpostTestSupport
import Testing

/// `outpost network create` and `outpost route` on the Helsinki sample.
@Suite struct RouteCommandTests {
    @Test func aNetworkIsBuiltAndADriveIsPrintedAndWrittenAsGeoJSON() async throws {
        let directory = TemporaryDirectory("outpost-route-cli")
        let gpkg = directory.file("helsinki.gpkg")
        #expect(try await outpost(["service", "create", Repository.sampleData("helsinki").path, "--out", gpkg.path]).succeeded)
        let network = directory.file("helsinki.network")
        let built = try await outpost([
            "network", "create", gpkg.path, "--layer", "streets", "--name-field", "name", "--oneway-field", "oneway", "--speed-field", "maxspeed",
            "--class-field", "highway", "--out", network.path, "--json",
        ])
        #expect(built.succeeded, "\(built.stderr)")
        let summary = try JSONValue.parse(built.stdout)
        #expect((summary["edges"]?.integerValue ?? 0) > 4_000 && (summary["nodes"]?.integerValue ?? 0) > 3_000)

        let stops = "24.941428,60.167769;24.947429,60.168943"
        let geojson = directory.file("route.geojson")
        let text = try await outpost(["route", network.path, "--stops", stops, "--mode", "driving-distance", "--geojson", geojson.path])
        #expect(text.succeeded, "\(text.stderr)")
        #expect(text.stdout.contains("Turn right onto Aleksanterinkatu") && text.stdout.contains("Finish at stop 2"), "\(text.stdout)")
        #expect(text.stdout.contains("Total: "))
        let json = try JSONValue.parse(try await outpost(["route", network.path, "--stops", stops, "--mode", "driving-distance", "--json"]).stdout)
        let lengths = (json["directions"]?.arrayValue ?? []).compactMap { $0["length"]?.doubleValue }
        #expect(abs(lengths.reduce(0, +) - (json["totalLength"]?.doubleValue ?? 0)) < 1e-6)
        // The GeoJSON is what GDAL reads: a line and two stops.
        let read = try await ExternalTools.python("""
            import sys, pyogrio.raw as raw
            meta, fids, geometry, fields = raw.read(sys.argv[1])
            print(meta["geometry_type"], len(geometry))
            """, [geojson.path])
        #expect(read.succeeded, "\(read.stderr)")
        #expect(read.stdout.contains("3"), "\(read.stdout)")

        // Four stops in the best order, with the first kept; a barrier on the way.
        let four = try await outpost([
            "route", network.path, "--stops", "24.9414,60.1678;24.9520,60.1690;24.9450,60.1710;24.9474,60.1689", "--mode", "walking",
            "--best-sequence", "--barriers", "24.9474,60.16894", "--json",
        ])
        #expect(four.succeeded, "\(four.stderr)")
        let ordered = try JSONValue.parse(four.stdout)
        let names = (ordered["stops"]?.arrayValue ?? []).compactMap { $0["name"]?.stringValue }
        #expect(names.first == "stop 1" && Set(names) == ["stop 1", "stop 2", "stop 3", "stop 4"], "\(names)")
        let far = try await outpost(["route", network.path, "--stops", "24.94,60.16;25.5,60.5"])
        #expect(!far.succeeded && far.stderr.contains("stop 2 is more than 500 m from any street"), "\(far.stderr)")
        let one = try await outpost(["route", network.path, "--stops", "24.94,60.16"])
        #expect(!one.succeeded && one.stderr.contains("at least two stops"))
        let garbage = try await outpost(["route", network.path, "--stops", "north;south"])
        #expect(!garbage.succeeded && garbage.stderr.contains("is not lon,lat"))
        let notNetwork = try await outpost(["route", gpkg.path, "--stops", stops])
        #expect(!notNetwork.succeeded && notNetwork.stderr.contains("not an Outpost network file"), "\(notNetwork.stderr)")
    }

    /// A street layer with no features, or only lines no travel mode uses, is refused at build
    /// time: one line naming the layer, exit 1, no file (an existing network left as it was).
    @Test func aNetworkNoModeCanUseIsRefusedAndNothingIsWritten() async throws {
        let directory = TemporaryDirectory("outpost-route-empty")
        let sample = Repository.sampleData("helsinki")
        for (name, lines) in [("empty", [String]()), ("closed", ["construction", "proposed"])] {
            let service = directory.file(name)
            try FileManager.default.createDirectory(at: service.appendingPathComponent("data"), withIntermediateDirectories: true)
            try FileManager.default.copyItem(at: sample.appendingPathComponent("service.json"), to: service.appendingPathComponent("service.json"))
            let features = lines.enumerated().map { i, highway in
                #"{"type":"Feature","properties":{"highway":"\#(highway)","name":"Works \#(i)"},"geometry":{"type":"LineString","coordinates":[[24.94,60.16\#(i)],[24.95,60.16\#(i)]]}}"#
            }
            try Data(#"{"type":"FeatureCollection","features":[\#(features.joined(separator: ","))]}"#.utf8)
                .write(to: service.appendingPathComponent("data/streets.geojson"))
            try Data(#"{"type":"FeatureCollection","features":[]}"#.utf8).write(to: service.appendingPathComponent("data/addresses.geojson"))
            let gpkg = directory.file("\(name).gpkg")
            let created = try await outpost(["service", "create", service.path, "--out", gpkg.path])
            #expect(created.succeeded, "\(created.stderr)")
            let out = directory.file("\(name).network")
            let arguments = ["network", "create", gpkg.path, "--layer", "streets", "--class-field", "highway", "--out", out.path]
            let refused = try await outpost(arguments)
            #expect(refused.status == 1, "\(refused.stdout)")
            #expect(refused.stderr.hasPrefix("outpost: layer streets has ") && refused.stderr.split(separator: "\n").count == 1, "\(refused.stderr)")
            #expect(!FileManager.default.fileExists(atPath: out.path))
            #expect(try FileManager.default.contentsOfDirectory(atPath: directory.url.path).allSatisfy { !$0.contains(".building") })
            // Over an existing network: refused the same way, the old file kept.
            try Data("old network".utf8).write(to: out)
            let over = try await outpost(arguments + ["--overwrite"])
            #expect(over.status == 1 && over.stderr.contains("layer streets"), "\(over.stderr)")
            #expect(try Data(contentsOf: out) == Data("old network".utf8))
        }
    }
}
