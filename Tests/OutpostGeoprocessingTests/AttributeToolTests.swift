import Foundation
import OutpostCore
import OutpostTestSupport
import Testing

@testable import OutpostGeoprocessing

/// Select Layer By Attribute and Summarize Within, against Python (plain filtering, shapely 2)
/// on the same data.
@Suite("Attribute and summary tools")
struct AttributeToolTests {
    static func countries() throws -> GPFeatureSet {
        var set = try OverlayToolTests.featureSet(OverlayToolTests.countriesFile, type: "esriGeometryPolygon")
        set.fields = set.fields.map { f in f.name == "pop_est" || f.name == "gdp_md_est" ? GPField(name: f.name, type: "esriFieldTypeInteger") : f }
        return set
    }

    static func names(_ result: [String: GPValue]) throws -> Set<String> {
        Set(try OverlayToolTests.output(result).features.compactMap { $0.attributes["name"]?.stringValue })
    }

    @Test func selectByAttributeSelectsWhatAFilterSelects() async throws {
        let countries = try Self.countries()
        let tool = SelectLayerByAttributeTool()
        let clause = "pop_est > 50000000 AND continent IN ('Asia', 'Europe') OR UPPER(name) LIKE 'FIN%'"
        let big = try Self.names(try await tool.execute(["Input_Features": .featureSet(countries), "Where_Clause": .string(clause)]))
        let rest = try Self.names(
            try await tool.execute(["Input_Features": .featureSet(countries), "Where_Clause": .string(clause), "Invert_Where_Clause": .boolean(true)]))
        let run = try await ExternalTools.python("""
            import sys, json
            fs = json.load(open(sys.argv[1]))["features"]
            pick = lambda p: (p["pop_est"] > 50000000 and p["continent"] in ("Asia", "Europe")) or p["name"].upper().startswith("FIN")
            print(json.dumps(sorted(f["properties"]["name"] for f in fs if pick(f["properties"]))))
            """, [OverlayToolTests.countriesFile.path])
        #expect(run.succeeded, "\(run.stderr)")
        let expected = Set((try JSONValue.parse(run.stdout).arrayValue ?? []).compactMap(\.stringValue))
        #expect(big == expected && big.contains("Finland") && big.contains("Germany") && !big.contains("Nigeria"))
        #expect(rest.isDisjoint(with: big) && rest.count + big.count == countries.features.count)

        // Dates: epoch milliseconds compared with DATE literals, as in a query.
        let day: Int64 = 86_400_000
        let visits = GPFeatureSet(
            geometryType: "esriGeometryPoint", spatialReference: .wgs84,
            fields: [GPField(name: "site", type: "esriFieldTypeString"), GPField(name: "visited", type: "esriFieldTypeDate")],
            features: [(0, "a", 19_700), (1, "b", 19_730), (2, "c", 19_800)].map { i, site, days in
                .init(geometry: .point(try! Point(x: Double(i), y: 0)), attributes: ["site": .string(site), "visited": .integer(days * day)])
            })
        let recent = try OverlayToolTests.output(
            try await tool.execute(["Input_Features": .featureSet(visits), "Where_Clause": .string("visited >= DATE '2024-01-01' AND site <> 'c'")]))
        #expect(recent.features.map { $0.attributes["site"] } == [.string("b")])

        // A clause that does not parse, a field that is not there: errors naming the parameter.
        for bad in ["pop_est >", "nosuch = 1", "name = 'x'; DROP TABLE t"] {
            await #expect {
                try await tool.execute(["Input_Features": .featureSet(countries), "Where_Clause": .string(bad)])
            } throws: { ($0 as? GPValueError)?.parameter == "Where_Clause" }
        }
    }

    @Test func summarizeWithinCountsAndMeasuresAsShapelyDoes() async throws {
        let countries = try Self.countries()
        let places = try OverlayToolTests.featureSet(OverlayToolTests.placesFile, type: "esriGeometryPoint")
        let counted = try OverlayToolTests.output(
            try await SummarizeWithinTool().execute([
                "In_Polygons": .featureSet(countries), "In_Sum_Features": .featureSet(places), "Keep_All_Polygons": .boolean(false),
            ]))
        let run = try await ExternalTools.python("""
            import sys, json, shapely
            cs = json.load(open(sys.argv[1]))["features"]; ps = [shapely.geometry.shape(f["geometry"]) for f in json.load(open(sys.argv[2]))["features"]]
            out = {}
            for c in cs:
                g = shapely.geometry.shape(c["geometry"]); n = sum(1 for p in ps if g.intersects(p))
                if n: out[c["properties"]["name"]] = n
            print(json.dumps(out))
            """, [OverlayToolTests.countriesFile.path, OverlayToolTests.placesFile.path])
        #expect(run.succeeded, "\(run.stderr)")
        let expected = (try JSONValue.parse(run.stdout).objectValue ?? [:]).compactMapValues(\.integerValue)
        let ours = Dictionary(uniqueKeysWithValues: counted.features.map { ($0.attributes["name"]!.stringValue!, $0.attributes["Count"]!.integerValue!) })
        #expect(ours == expected)

        // Lines in a projected system: lengths inside each cell, and a statistic of a field.
        let cells = GPFeatureSet(
            geometryType: "esriGeometryPolygon", spatialReference: SpatialReference(wkid: 3067), fields: [GPField(name: "cell", type: "esriFieldTypeString")],
            features: try (0..<3).flatMap { x in
                try (0..<2).map { y -> GPFeatureSet.Feature in
                    let (x0, y0) = (385_000.0 + Double(x) * 1_000, 6_671_000.0 + Double(y) * 1_000)
                    let ring = [(x0, y0), (x0 + 1_000, y0), (x0 + 1_000, y0 + 1_000), (x0, y0 + 1_000), (x0, y0)].map { Position(x: $0.0, y: $0.1) }
                    return .init(geometry: .polygon(try Polygon(rings: [ring])), attributes: ["cell": .string("\(x),\(y)")])
                }
            })
        let streets = GPFeatureSet(
            geometryType: "esriGeometryPolyline", spatialReference: SpatialReference(wkid: 3067), fields: [GPField(name: "lanes", type: "esriFieldTypeInteger")],
            features: try [
                ([(385_100.0, 6_671_100.0), (387_900.0, 6_672_700.0)], 2), ([(385_500.0, 6_670_500.0), (385_500.0, 6_672_500.0), (386_700.0, 6_672_900.0)], 4),
                ([(387_200.0, 6_671_050.0), (387_400.0, 6_671_300.0)], 1),
            ].map { points, lanes in
                .init(geometry: .lineString(try LineString(points.map { Position(x: $0.0, y: $0.1) })), attributes: ["lanes": .integer(Int64(lanes))])
            })
        let measured = try OverlayToolTests.output(
            try await SummarizeWithinTool().execute([
                "In_Polygons": .featureSet(cells), "In_Sum_Features": .featureSet(streets), "Sum_Fields": .string("lanes SUM;lanes MAX"),
            ]))
        #expect(measured.features.count == 6)
        let script = """
            import sys, json, shapely
            cells = json.loads(sys.argv[1]); lines = json.loads(sys.argv[2]); out = {}
            for name, ring in cells.items():
                g = shapely.Polygon(ring); inside = [(shapely.LineString(l).intersection(g).length, n) for l, n in lines]
                inside = [(m, n) for m, n in inside if m > 0]
                out[name] = [len(inside), sum(m for m, _ in inside), sum(n for _, n in inside), max([n for _, n in inside], default=None)]
            print(json.dumps(out))
            """
        func ring(_ f: GPFeatureSet.Feature) -> JSONValue {
            guard case .polygon(let p)? = f.geometry else { return .null }
            return .array(p.rings[0].map { [.number($0.x), .number($0.y)] })
        }
        func line(_ f: GPFeatureSet.Feature) -> JSONValue {
            guard case .lineString(let l)? = f.geometry else { return .null }
            return [.array(l.positions.map { [.number($0.x), .number($0.y)] }), f.attributes["lanes"]!]
        }
        let cellJSON = JSONValue.object(Dictionary(uniqueKeysWithValues: cells.features.map { ($0.attributes["cell"]!.stringValue!, ring($0)) }))
        let check = try await ExternalTools.python(script, [cellJSON.jsonString, JSONValue.array(streets.features.map(line)).jsonString])
        #expect(check.succeeded, "\(check.stderr)")
        let theirs = try JSONValue.parse(check.stdout).objectValue ?? [:]
        for f in measured.features {
            let t = try #require(theirs[f.attributes["cell"]!.stringValue!]?.arrayValue)
            #expect(f.attributes["Count"]?.integerValue == t[0].integerValue)
            let (a, b) = (f.attributes["sum_Length_m"]?.doubleValue ?? -1, t[1].doubleValue ?? -2)
            #expect(abs(a - b) <= 1e-6 * max(1, abs(b)), "\(f.attributes["cell"]!): \(a) vs \(b)")
            #expect(f.attributes["SUM_lanes"]?.doubleValue == t[2].doubleValue)
            #expect((f.attributes["MAX_lanes"]?.doubleValue) == t[3].doubleValue)
        }
        await #expect {
            try await SummarizeWithinTool().execute(["In_Polygons": .featureSet(cells), "In_Sum_Features": .featureSet(streets), "Sum_Fields": .string("width SUM")])
        } throws: { ($0 as? GPValueError)?.parameter == "Sum_Fields" }
    }
}

/// Extract Data: every format read back by GDAL (pyogrio, through /vsizip/), with the clipped
/// features, their attributes and their coordinate system.
@Suite("Extract Data")
struct ExtractDataTests {
    @Test(arguments: ExtractDataTool.formats)
    func everyFormatOpensInGDAL(format: String) async throws {
        let directory = TemporaryDirectory("outpost-extract")
        let countries = try AttributeToolTests.countries()
        let places = try OverlayToolTests.featureSet(OverlayToolTests.placesFile, type: "esriGeometryPoint")
        // Roughly the Nordic countries.
        let area = GPFeatureSet(
            geometryType: "esriGeometryPolygon", spatialReference: .wgs84,
            features: [.init(geometry: .polygon(try Polygon(rings: [[Position(x: 4, y: 54), Position(x: 32, y: 54), Position(x: 32, y: 71), Position(x: 4, y: 71), Position(x: 4, y: 54)]])), attributes: [:])])
        let result = try await ExtractDataTool().execute(
            [
                "Layers_to_Clip": .multiValue(.featureRecordSetLayer, [.featureSet(countries), .featureSet(places)]),
                "Layer_Names": .multiValue(.string, [.string("countries"), .string("places")]), "Area_of_Interest": .featureSet(area),
                "Feature_Format": .string(format),
            ], context: GPToolContext(outputDirectory: directory.url))
        guard case .dataFile(let file)? = result["Output_Zip_File"], let zip = URL(string: file.url ?? "") else { throw GPValueError("no zip") }
        let clippedCountries = try OverlayToolTests.output(try await ClipTool().execute(["Input_Features": .featureSet(countries), "Clip_Features": .featureSet(area)]))
        let clippedPlaces = try OverlayToolTests.output(try await ClipTool().execute(["Input_Features": .featureSet(places), "Clip_Features": .featureSet(area)]))
        let script = """
            import sys, json, pyogrio, pyogrio.raw
            zip, fmt = sys.argv[1], sys.argv[2]
            if fmt.startswith("GeoPackage"): sources = {"countries": ("/vsizip/" + zip + "/extract.gpkg", "countries"), "places": ("/vsizip/" + zip + "/extract.gpkg", "places")}
            else:
                ext = {"GeoJSON": "geojson", "CSV": "csv", "Shapefile": "shp"}[fmt.split(" ")[0]]
                sources = {n: ("/vsizip/" + zip + "/" + n + "." + ext, None) for n in ("countries", "places")}
            out = {}
            for name, (path, layer) in sources.items():
                meta, _, geometry, fields = pyogrio.raw.read(path, layer=layer) if layer else pyogrio.raw.read(path)
                names = list(meta["fields"])
                key = "name" if "name" in names else names[0]
                out[name] = {"count": len(geometry), "crs": meta["crs"], "names": sorted(str(v) for v in fields[names.index(key)]),
                             "geometry": meta.get("geometry_type")}
            print(json.dumps(out))
            """
        let run = try await ExternalTools.python(script, [zip.path, format])
        #expect(run.succeeded, "\(run.stderr)")
        let read = try JSONValue.parse(run.stdout)
        for (name, set) in [("countries", clippedCountries), ("places", clippedPlaces)] {
            #expect(read[name]?["count"]?.integerValue == Int64(set.features.count), "\(format) \(name)")
            let expected = set.features.compactMap { $0.attributes["name"]?.stringValue }.sorted()
            #expect(read[name]?["names"]?.arrayValue?.compactMap(\.stringValue) == expected, "\(format) \(name)")
            if !format.hasPrefix("CSV") { #expect(read[name]?["crs"]?.stringValue?.contains("4326") == true, "\(format) \(name): \(read[name]?["crs"] ?? .null)") }
        }
        #expect(clippedCountries.features.contains { $0.attributes["name"] == "Finland" })
    }
}

/// An invalid polygon where GEOS cannot work with it: an error naming the parameter, the feature
/// and GEOS's reason (or, for Dissolve, a repair it reports).
@Suite("Invalid geometries")
struct InvalidGeometryTests {
    static var bowtie: GPFeatureSet {
        get throws {
            GPFeatureSet(
                geometryType: "esriGeometryPolygon", spatialReference: SpatialReference(wkid: 3067), fields: [GPField(name: "OBJECTID", type: "esriFieldTypeOID")],
                features: [
                    .init(geometry: .polygon(try Polygon(rings: [[Position(x: 0, y: 0), Position(x: 10, y: 0), Position(x: 10, y: 10), Position(x: 0, y: 10), Position(x: 0, y: 0)]])), attributes: ["OBJECTID": 1]),
                    .init(geometry: .polygon(try Polygon(rings: [[Position(x: 0, y: 0), Position(x: 10, y: 10), Position(x: 10, y: 0), Position(x: 0, y: 10), Position(x: 0, y: 0)]])), attributes: ["OBJECTID": 2]),
                ])
        }
    }

    @Test func overlayToolsNameTheInvalidFeatureAndDissolveRepairs() async throws {
        let square = GPFeatureSet(
            geometryType: "esriGeometryPolygon", spatialReference: SpatialReference(wkid: 3067),
            features: [.init(geometry: .polygon(try Polygon(rings: [[Position(x: 2, y: 2), Position(x: 8, y: 2), Position(x: 8, y: 8), Position(x: 2, y: 8), Position(x: 2, y: 2)]])), attributes: [:])])
        do {
            let out = try await UnionTool().execute(["Input_Features": .featureSet(try Self.bowtie), "Union_Features": .featureSet(square)])
            Issue.record("Union over a bowtie answered \(out.keys.sorted()) instead of an error")
        } catch let error as GPValueError {
            #expect(error.parameter == "Input_Features" && error.reason.contains("feature 1 (object id 2)") && error.reason.contains("Self-intersection"), "\(error)")
        }
        let messages = MessageBox()
        let dissolved = try await DissolveTool().execute(["Input_Features": .featureSet(try Self.bowtie)], context: GPToolContext { messages.add($0) })
        guard case .featureSet(let set)? = dissolved["Output_Features"], let g = set.features.first?.geometry else { throw GPValueError("no output") }
        #expect(abs(try GeometryEngine().area(g) - 100) < 1e-9, "the bowtie's two triangles lie within the square")
        #expect(messages.all.contains { $0.contains("Repaired invalid geometries") })
    }
}
