import Foundation
import OutpostCore
import OutpostTestSupport
import Testing

@testable import OutpostGeoprocessing

/// IDW and Contour: the surface against a numpy IDW (rasterio reads our GeoTIFF), the
/// georeferencing as gdalinfo reports it, the contours against gdal_contour on the same file.
@Suite("Raster tools")
struct RasterToolTests {
    /// Spot heights on two hills in EPSG:3067 (central Helsinki), from a fixed sequence.
    static func spotHeights(_ count: Int = 80) throws -> GPFeatureSet {
        var state: UInt64 = 0x2545_F491_4F6C_DD1D
        func next() -> Double {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Double(state >> 11) / Double(1 << 53)
        }
        let features = try (0..<count).map { i -> GPFeatureSet.Feature in
            let x = 385_000 + next() * 2_000, y = 6_671_000 + next() * 1_500
            let z = 20 + 45 * exp(-(pow(x - 385_700, 2) + pow(y - 6_671_900, 2)) / (2 * 300 * 300)) + 30 * exp(-(pow(x - 386_500, 2) + pow(y - 6_671_400, 2)) / (2 * 250 * 250))
            return .init(geometry: .point(try Point(x: x, y: y)), attributes: ["id": .integer(Int64(i)), "height": .number((z * 100).rounded() / 100)])
        }
        return GPFeatureSet(
            geometryType: "esriGeometryPoint", spatialReference: SpatialReference(wkid: 3067),
            fields: [GPField(name: "id", type: "esriFieldTypeInteger"), GPField(name: "height", type: "esriFieldTypeDouble")], features: features)
    }

    static func points(_ set: GPFeatureSet) -> JSONValue {
        .array(set.features.map { f in
            guard case .point(let p)? = f.geometry, let pos = p.position else { return .null }
            return [.number(pos.x), .number(pos.y), f.attributes["height"]!]
        })
    }

    /// TIFFs the fuzzer made trap (size and layout tags holding doubles past Int.max, a width
    /// and height whose product overflowed; kept in its corpus) are refused with a reason; so is
    /// a cell size of zero.
    @Test func damagedGeoTIFFsAreRefusedNotTrapped() throws {
        let corpus = Repository.root.appendingPathComponent("Tests/Fuzz/corpus/geotiff")
        let error = #expect(throws: GeoTIFFError.self) { try GeoTIFF.read(corpus.appendingPathComponent("regression-double-tags")) }
        #expect(error?.description.contains("not a whole number") == true, "\(String(describing: error))")
        // Width and height each near UInt32.max: their product overflowed before it was checked.
        let huge = #expect(throws: GeoTIFFError.self) { try GeoTIFF.read(corpus.appendingPathComponent("regression-size-overflow")) }
        #expect(huge?.description.contains("no sensible size") == true, "\(String(describing: huge))")
        let flat = GPRaster(width: 2, height: 1, xmin: 0, ymax: 0, cellSize: 0, spatialReference: SpatialReference(wkid: 3067), values: [1, 2])
        let zero = #expect(throws: GeoTIFFError.self) { try GeoTIFF.decode(try GeoTIFF.encode(flat)) }
        #expect(zero?.description.contains("cell size") == true, "\(String(describing: zero))")
    }

    @Test func idwMatchesNumpyAndGDALReadsTheGeoTIFF() async throws {
        let directory = TemporaryDirectory("outpost-idw")
        let heights = try Self.spotHeights()
        let context = GPToolContext(outputDirectory: directory.url)
        let result = try await IDWTool().execute(
            ["In_Features": .featureSet(heights), "Z_Field": .string("height"), "Cell_Size": .double(25), "Number_Of_Points": .long(12)], context: context)
        guard case .rasterDataLayer(let file)? = result["Output_Raster"], let url = URL(string: file.url ?? "") else { throw GPValueError("no raster") }
        #expect(url.path.hasPrefix(directory.url.path) && file.format == "tif")
        let raster = try GeoTIFF.read(url)
        #expect(raster.spatialReference.wkid == 3067 && raster.cellSize == 25)

        let info = try await ExternalTools.run("gdalinfo", ["-json", url.path])
        #expect(info.succeeded, "\(info.stderr)")
        let json = try JSONValue.parse(info.stdout)
        #expect(json["size"] == [.integer(Int64(raster.width)), .integer(Int64(raster.height))])
        let transform = (json["geoTransform"]?.arrayValue ?? []).compactMap(\.doubleValue)
        #expect(transform == [raster.xmin, 25, 0, raster.ymax, 0, -25])
        #expect(json["coordinateSystem"]?["wkt"]?.stringValue?.contains("ETRS89 / TM35FIN") == true)
        #expect(json["bands"]?[0]?["type"] == "Float64")

        let script = """
            import sys, json, numpy as np, rasterio
            pts = np.array(json.loads(sys.argv[2]))
            with rasterio.open(sys.argv[1]) as src:
                ours = src.read(1); t = src.transform
            rows, cols = ours.shape
            xs = t.c + (np.arange(cols) + 0.5) * t.a; ys = t.f + (np.arange(rows) + 0.5) * t.e
            gx, gy = np.meshgrid(xs, ys)
            d2 = (gx[..., None] - pts[:, 0]) ** 2 + (gy[..., None] - pts[:, 1]) ** 2
            k = 12
            idx = np.argpartition(d2, k - 1, axis=2)[..., :k]
            dk = np.take_along_axis(d2, idx, axis=2); zk = pts[:, 2][idx]
            w = 1 / dk
            ref = (w * zk).sum(axis=2) / w.sum(axis=2)
            print(float(np.abs(ref - ours).max()))
            """
        let run = try await ExternalTools.python(script, [url.path, Self.points(heights).jsonString])
        #expect(run.succeeded, "\(run.stderr)")
        let difference = try #require(Double(run.stdout.trimmingCharacters(in: .whitespacesAndNewlines)))
        #expect(difference <= 1e-6, "max difference \(difference)")

        // Bad input: no such field, a grid too fine.
        await #expect { try await IDWTool().execute(["In_Features": .featureSet(heights), "Z_Field": .string("depth")]) } throws: {
            ($0 as? GPValueError)?.parameter == "Z_Field"
        }
        await #expect {
            try await IDWTool().execute(["In_Features": .featureSet(heights), "Z_Field": .string("height"), "Cell_Size": .double(0.01)])
        } throws: { ($0 as? GPValueError)?.parameter == "Cell_Size" }
    }

    @Test func contoursMatchGDALContourOnTheSameRaster() async throws {
        let directory = TemporaryDirectory("outpost-contour")
        let context = GPToolContext(outputDirectory: directory.url)
        let surface = try await IDWTool().execute(
            ["In_Features": .featureSet(try Self.spotHeights()), "Z_Field": .string("height"), "Cell_Size": .double(20)], context: context)
        guard case .rasterDataLayer(let file)? = surface["Output_Raster"], let url = URL(string: file.url ?? "") else { throw GPValueError("no raster") }
        let contours = try OverlayToolTests.output(
            try await ContourTool().execute(["In_Raster": .rasterDataLayer(file), "Contour_Interval": .double(5), "Base_Contour": .double(0)]))
        #expect(contours.spatialReference?.wkid == 3067 && !contours.features.isEmpty)
        // Length per level, ours and gdal_contour's on the same file.
        let engine = GeometryEngine()
        var ours: [Double: Double] = [:]
        for f in contours.features { ours[f.attributes["Contour"]!.doubleValue!, default: 0] += try engine.length(f.geometry!) }
        let gdal = directory.file("gdal.geojson")
        let traced = try await ExternalTools.run("gdal_contour", ["-i", "5", "-off", "0", "-a", "Contour", url.path, gdal.path])
        #expect(traced.succeeded, "\(traced.stderr)")
        let run = try await ExternalTools.python("""
            import sys, json, shapely
            from collections import defaultdict
            out = defaultdict(float)
            for f in json.load(open(sys.argv[1]))["features"]:
                out[f["properties"]["Contour"]] += shapely.geometry.shape(f["geometry"]).length
            print(json.dumps({str(k): v for k, v in out.items()}))
            """, [gdal.path])
        #expect(run.succeeded, "\(run.stderr)")
        let theirs = (try JSONValue.parse(run.stdout).objectValue ?? [:]).reduce(into: [Double: Double]()) { $0[Double($1.key)!] = $1.value.doubleValue }
        #expect(Set(ours.keys) == Set(theirs.keys), "\(ours.keys.sorted()) vs \(theirs.keys.sorted())")
        for (level, length) in ours {
            let other = theirs[level] ?? 0
            #expect(abs(length - other) <= 1e-6 * other, "level \(level): ours \(length) m, gdal_contour \(other) m")
        }
        await #expect {
            try await ContourTool().execute(["In_Raster": .rasterDataLayer(file), "Contour_Interval": .double(0)])
        } throws: { ($0 as? GPValueError)?.parameter == "Contour_Interval" }
        try Data("not a tiff".utf8).write(to: directory.file("bad.tif"))
        await #expect {
            try await ContourTool().execute([
                "In_Raster": .rasterDataLayer(GPFileReference(url: directory.file("bad.tif").absoluteString)), "Contour_Interval": .double(5),
            ])
        } throws: { ($0 as? GPValueError)?.parameter == "In_Raster" }
    }
}
