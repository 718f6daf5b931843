import Foundation
import OutpostCore
import OutpostTestSupport
import Testing

@testable import OutpostGeoprocessing

/// Clip, Dissolve and Select Layer By Location on Natural Earth, against shapely 2 doing the
/// same on the same file.
@Suite("Overlay tools")
struct OverlayToolTests {
    static let countriesFile = Repository.sampleData("natural_earth/data/countries.geojson")
    static let placesFile = Repository.sampleData("natural_earth/data/populated_places.geojson")

    static func featureSet(_ file: URL, type: String) throws -> GPFeatureSet {
        var reader = try GeoJSONFeatureReader(data: try Data(contentsOf: file))
        var features: [GPFeatureSet.Feature] = []
        var names: Set<String> = []
        while let f = try reader.next() {
            features.append(GPFeatureSet.Feature(geometry: f.geometry, attributes: f.properties))
            names.formUnion(f.properties.keys)
        }
        let fields = names.sorted().map { GPField(name: $0, type: $0.hasPrefix("pop") || $0.hasPrefix("gdp") ? "esriFieldTypeDouble" : "esriFieldTypeString") }
        return GPFeatureSet(geometryType: type, spatialReference: SpatialReference(wkid: 4326), fields: fields, features: features)
    }

    static func output(_ result: [String: GPValue]) throws -> GPFeatureSet {
        guard case .featureSet(let set)? = result["Output_Features"] else { throw GPValueError("no output") }
        return set
    }

    /// `name → area` of a result, areas by GEOS in the data's degrees (as shapely gives them).
    static func areas(_ set: GPFeatureSet, key: String) throws -> [String: Double] {
        let engine = GeometryEngine()
        var out: [String: Double] = [:]
        for f in set.features {
            guard case .string(let name)? = f.attributes[key], let g = f.geometry else { continue }
            out[name, default: 0] += try engine.area(g)
        }
        return out
    }

    static func expectClose(_ ours: [String: Double], _ theirs: [String: Double]) {
        #expect(Set(ours.keys) == Set(theirs.keys), "\(Set(ours.keys).symmetricDifference(theirs.keys))")
        for (k, a) in ours {
            let b = theirs[k] ?? .nan
            #expect(abs(a - b) <= 1e-6 * max(abs(a), abs(b)), "\(k): ours \(a), shapely \(b)")
        }
    }

    @Test func clipMatchesShapely() async throws {
        let countries = try Self.featureSet(Self.countriesFile, type: "esriGeometryPolygon")
        let box = GPFeatureSet(
            geometryType: "esriGeometryPolygon", spatialReference: SpatialReference(wkid: 4326),
            features: [.init(geometry: .polygon(try Polygon(rings: [[
                Position(x: 10, y: 50), Position(x: 10, y: 62), Position(x: 32, y: 62), Position(x: 32, y: 50), Position(x: 10, y: 50),
            ]])), attributes: [:])])
        let clipped = try Self.output(try await ClipTool().execute(["Input_Features": .featureSet(countries), "Clip_Features": .featureSet(box)]))
        let run = try await ExternalTools.python("""
            import sys, json, shapely
            data = json.load(open(sys.argv[1]))
            box = shapely.box(10, 50, 32, 62)
            out = {}
            for f in data["features"]:
                g = shapely.geometry.shape(f["geometry"]).intersection(box)
                if not g.is_empty and g.area > 0: out[f["properties"]["name"]] = g.area
            print(json.dumps(out))
            """, [Self.countriesFile.path])
        #expect(run.succeeded, "\(run.stderr)")
        let theirs = (try JSONValue.parse(run.stdout).objectValue ?? [:]).compactMapValues(\.doubleValue)
        #expect(theirs.count > 8)
        Self.expectClose(try Self.areas(clipped, key: "name").filter { $0.value > 0 }, theirs)
    }

    @Test func dissolveByContinentWithStatisticsMatchesShapely() async throws {
        let countries = try Self.featureSet(Self.countriesFile, type: "esriGeometryPolygon")
        let dissolved = try Self.output(
            try await DissolveTool().execute([
                "Input_Features": .featureSet(countries), "Dissolve_Fields": .multiValue(.string, [.string("continent")]),
                "Statistics_Fields": .string("pop_est SUM;pop_est MAX;name COUNT"),
            ]))
        let run = try await ExternalTools.python("""
            import sys, json, shapely
            from collections import defaultdict
            data = json.load(open(sys.argv[1]))
            groups = defaultdict(list)
            for f in data["features"]: groups[f["properties"]["continent"]].append(f)
            print(json.dumps({c: [shapely.union_all([shapely.geometry.shape(f["geometry"]) for f in fs]).area,
                                  sum(f["properties"]["pop_est"] for f in fs), max(f["properties"]["pop_est"] for f in fs), len(fs)]
                              for c, fs in groups.items()}))
            """, [Self.countriesFile.path])
        #expect(run.succeeded, "\(run.stderr)")
        let theirs = try JSONValue.parse(run.stdout).objectValue ?? [:]
        #expect(dissolved.features.count == theirs.count)
        Self.expectClose(try Self.areas(dissolved, key: "continent"), theirs.compactMapValues { $0.arrayValue?.first?.doubleValue })
        for f in dissolved.features {
            guard case .string(let continent)? = f.attributes["continent"], let t = theirs[continent]?.arrayValue else { continue }
            #expect(f.attributes["SUM_pop_est"]?.doubleValue == t[1].doubleValue, "\(continent)")
            #expect(f.attributes["MAX_pop_est"]?.doubleValue == t[2].doubleValue, "\(continent)")
            #expect(f.attributes["COUNT_name"]?.integerValue == t[3].integerValue, "\(continent)")
        }
        await #expect(throws: GPValueError.self) {
            try await DissolveTool().execute(["Input_Features": .featureSet(countries), "Statistics_Fields": .string("pop_est MEDIAN")])
        }
    }

    /// Places within 300 km of Helsinki (in EPSG:3067), and countries containing a place:
    /// the same selections as shapely's.
    @Test func selectByLocationMatchesShapely() async throws {
        let places = try Self.featureSet(Self.placesFile, type: "esriGeometryPoint")
        let countries = try Self.featureSet(Self.countriesFile, type: "esriGeometryPolygon")
        let toFinland = try CoordinateTransform(from: SpatialReference(wkid: 4326), to: SpatialReference(wkid: 3067))
        var projected = places
        projected.spatialReference = SpatialReference(wkid: 3067)
        projected.features = try places.features.filter { ($0.geometry?.envelope?.xmin ?? 0) > -40 && ($0.geometry?.envelope?.ymin ?? 0) > 30 }.map {
            GPFeatureSet.Feature(geometry: try $0.geometry.map(toFinland.transform), attributes: $0.attributes)
        }
        let helsinki = GPFeatureSet(
            geometryType: "esriGeometryPoint", spatialReference: SpatialReference(wkid: 4326),
            features: [.init(geometry: .point(try Point(x: 24.9384, y: 60.1699)), attributes: [:])])
        let near = try Self.output(
            try await SelectLayerByLocationTool().execute([
                "Input_Features": .featureSet(projected), "Overlap_Type": .string("WITHIN_A_DISTANCE"), "Select_Features": .featureSet(helsinki),
                "Search_Distance": .linearUnit(distance: 300, units: .esriKilometers),
            ]))
        let containing = try Self.output(
            try await SelectLayerByLocationTool().execute([
                "Input_Features": .featureSet(countries), "Overlap_Type": .string("CONTAINS"), "Select_Features": .featureSet(places),
            ]))
        let run = try await ExternalTools.python("""
            import sys, json, shapely
            from pyproj import Transformer
            t = Transformer.from_crs(4326, 3067, always_xy=True)
            places = json.load(open(sys.argv[1]))["features"]; countries = json.load(open(sys.argv[2]))["features"]
            hel = shapely.Point(*t.transform(24.9384, 60.1699))
            near = sorted(p["properties"]["name"] for p in places
                          if p["geometry"]["coordinates"][0] > -40 and p["geometry"]["coordinates"][1] > 30
                          and shapely.Point(*t.transform(*p["geometry"]["coordinates"])).distance(hel) <= 300000)
            pts = [shapely.geometry.shape(p["geometry"]) for p in places]
            containing = sorted(c["properties"]["name"] for c in countries if any(shapely.geometry.shape(c["geometry"]).contains(p) for p in pts))
            print(json.dumps([near, containing]))
            """, [Self.placesFile.path, Self.countriesFile.path])
        #expect(run.succeeded, "\(run.stderr)")
        let theirs = try JSONValue.parse(run.stdout).arrayValue?.map { $0.arrayValue?.compactMap(\.stringValue) ?? [] } ?? []
        let names = { (set: GPFeatureSet) in set.features.compactMap { $0.attributes["name"]?.stringValue }.sorted() }
        #expect(names(near) == theirs.first, "\(names(near))")
        #expect(names(near).contains("Tallinn") && !names(near).contains("Stockholm"))
        #expect(names(containing) == theirs.last)
    }

    /// Countries intersected with a 10° grid over Europe: the same pieces and areas as shapely's
    /// pairwise intersections (polygonal parts only), the grid's clashing `name` as `name_1`.
    @Test func intersectMatchesShapely() async throws {
        let countries = try Self.featureSet(Self.countriesFile, type: "esriGeometryPolygon")
        var cells: [GPFeatureSet.Feature] = []
        for x in stride(from: -10, to: 40, by: 10) {
            for y in stride(from: 35, to: 70, by: 10) {
                let ring = [(x, y), (x, y + 10), (x + 10, y + 10), (x + 10, y), (x, y)].map { Position(x: Double($0.0), y: Double($0.1)) }
                cells.append(.init(geometry: .polygon(try Polygon(rings: [ring])), attributes: ["name": .string("\(x),\(y)")]))
            }
        }
        let grid = GPFeatureSet(geometryType: "esriGeometryPolygon", spatialReference: SpatialReference(wkid: 4326), fields: [GPField(name: "name", type: "esriFieldTypeString")], features: cells)
        let result = try Self.output(try await IntersectTool().execute(["Input_Features": .multiValue(.featureRecordSetLayer, [.featureSet(countries), .featureSet(grid)])]))
        #expect(result.fields.map(\.name).contains("name_1"))
        let engine = GeometryEngine()
        var ours: [String: Double] = [:]
        for f in result.features {
            guard case .string(let country)? = f.attributes["name"], case .string(let cell)? = f.attributes["name_1"], let g = f.geometry else { continue }
            ours["\(country)|\(cell)", default: 0] += try engine.area(g)
        }
        let run = try await ExternalTools.python("""
            import sys, json, shapely
            countries = json.load(open(sys.argv[1]))["features"]
            out = {}
            for c in countries:
                g = shapely.geometry.shape(c["geometry"])
                for x in range(-10, 40, 10):
                    for y in range(35, 70, 10):
                        piece = g.intersection(shapely.box(x, y, x + 10, y + 10))
                        area = sum(p.area for p in getattr(piece, "geoms", [piece]) if p.geom_type in ("Polygon", "MultiPolygon"))
                        if area > 0: out[f"{c['properties']['name']}|{x},{y}"] = area
            print(json.dumps(out))
            """, [Self.countriesFile.path])
        #expect(run.succeeded, "\(run.stderr)")
        let theirs = (try JSONValue.parse(run.stdout).objectValue ?? [:]).compactMapValues(\.doubleValue)
        #expect(theirs.count > 40)
        Self.expectClose(ours.filter { $0.value > 0 }, theirs)
        await #expect(throws: GPValueError.self) {
            try await IntersectTool().execute(["Input_Features": .multiValue(.featureRecordSetLayer, [.featureSet(countries)])])
        }
    }

    /// Four Baltic countries overlaid with two circles: every piece (inside both, only a
    /// country, only a circle) with the same area as shapely's intersections and differences.
    @Test func unionMatchesShapely() async throws {
        let all = try Self.featureSet(Self.countriesFile, type: "esriGeometryPolygon")
        var countries = all
        countries.features = all.features.filter { ["Finland", "Estonia", "Latvia", "Sweden"].contains($0.attributes["name"]?.stringValue ?? "") }
        let engine = GeometryEngine()
        let circles = GPFeatureSet(
            geometryType: "esriGeometryPolygon", spatialReference: SpatialReference(wkid: 4326), fields: [GPField(name: "name", type: "esriFieldTypeString")],
            features: try [("Helsinki", 24.94, 60.17), ("Riga", 24.11, 56.95)].map { name, x, y in
                .init(geometry: try engine.buffer(.point(try Point(x: x, y: y)), distance: 1.5), attributes: ["name": .string(name)])
            })
        let result = try Self.output(try await UnionTool().execute(["Input_Features": .featureSet(countries), "Union_Features": .featureSet(circles)]))
        var ours: [String: Double] = [:]
        for f in result.features {
            let key = "\(f.attributes["name"]?.stringValue ?? "")|\(f.attributes["name_1"]?.stringValue ?? "")"
            ours[key, default: 0] += try engine.area(try #require(f.geometry))
        }
        let run = try await ExternalTools.python("""
            import sys, json, shapely
            cs = [f for f in json.load(open(sys.argv[1]))["features"] if f["properties"]["name"] in ("Finland", "Estonia", "Latvia", "Sweden")]
            countries = [(f["properties"]["name"], shapely.geometry.shape(f["geometry"])) for f in cs]
            circles = [(n, shapely.Point(x, y).buffer(1.5, quad_segs=8)) for n, x, y in (("Helsinki", 24.94, 60.17), ("Riga", 24.11, 56.95))]
            def poly_area(g): return sum(p.area for p in getattr(g, "geoms", [g]) if p.geom_type in ("Polygon", "MultiPolygon"))
            out = {}
            A = shapely.union_all([g for _, g in countries]); B = shapely.union_all([g for _, g in circles])
            for a, ga in countries:
                for b, gb in circles:
                    if poly_area(ga.intersection(gb)) > 0: out[f"{a}|{b}"] = poly_area(ga.intersection(gb))
                if poly_area(ga.difference(B)) > 0: out[f"{a}|"] = poly_area(ga.difference(B))
            for b, gb in circles:
                if poly_area(gb.difference(A)) > 0: out[f"|{b}"] = poly_area(gb.difference(A))
            print(json.dumps(out))
            """, [Self.countriesFile.path])
        #expect(run.succeeded, "\(run.stderr)")
        let theirs = (try JSONValue.parse(run.stdout).objectValue ?? [:]).compactMapValues(\.doubleValue)
        #expect(theirs.keys.contains("Finland|Helsinki") && theirs.keys.contains("|Riga") && theirs.keys.contains("Sweden|"))
        Self.expectClose(ours.filter { $0.value > 0 }, theirs)
        await #expect(throws: GPValueError.self) {
            try await UnionTool().execute(["Input_Features": .featureSet(countries), "Union_Features": .featureSet(try Self.featureSet(Self.placesFile, type: "esriGeometryPoint"))])
        }
    }
}
