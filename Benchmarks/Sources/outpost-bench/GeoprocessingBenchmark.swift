import Foundation
import OutpostCore
import OutpostGeoprocessing

/// The geoprocessing tools next to shapely 2 on the same data in the same run (both are GEOS,
/// so the figure is Outpost's overhead around it): Buffer of 100,000 points by 200 m with
/// Dissolve ALL, and Clip of 10,000 small polygons by a polygon, in EPSG:3067. One core each;
/// the dissolve once each (it takes many seconds), the rest best of three. shapely's wheel
/// carries its own, newer GEOS, which the table names: the union's speed is mostly GEOS's.
enum GeoprocessingBenchmark {
    static func run(workDirectory: URL) async throws {
        var random = FastRandom(seed: 7)
        let points = (0..<100_000).map { _ in (380_000 + random.unit() * 100_000, 6_660_000 + random.unit() * 100_000) }
        let squares = (0..<10_000).map { _ -> [(Double, Double)] in
            let x = 380_000 + random.unit() * 100_000, y = 6_660_000 + random.unit() * 100_000, r = 200 + random.unit() * 800
            return [(x - r, y - r), (x - r, y + r), (x + r, y + r), (x + r, y - r), (x - r, y - r)]
        }
        let clipRing = (0...64).map { i -> (Double, Double) in
            let a = -Double(i) / 64 * 2 * Double.pi
            return (430_000 + 40_000 * cos(a) * (1 + 0.2 * sin(5 * a)), 6_710_000 + 40_000 * sin(a))
        }
        let folder = workDirectory.appendingPathComponent("gp")
        try? FileManager.default.removeItem(at: folder)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Data(points.map { "\($0.0),\($0.1)" }.joined(separator: "\n").utf8).write(to: folder.appendingPathComponent("points.csv"))
        try Data(squares.map { $0.map { "\($0.0) \($0.1)" }.joined(separator: ",") }.joined(separator: "\n").utf8).write(to: folder.appendingPathComponent("squares.txt"))
        try Data(clipRing.map { "\($0.0) \($0.1)" }.joined(separator: ",").utf8).write(to: folder.appendingPathComponent("clip.txt"))

        let sr = SpatialReference(wkid: 3067)
        let pointSet = GPFeatureSet(
            geometryType: "esriGeometryPoint", spatialReference: sr, fields: [GPField(name: "OBJECTID", type: "esriFieldTypeOID")],
            features: try points.enumerated().map { .init(geometry: .point(try Point(x: $1.0, y: $1.1)), attributes: ["OBJECTID": .integer(Int64($0 + 1))]) })
        let squareSet = GPFeatureSet(
            geometryType: "esriGeometryPolygon", spatialReference: sr, fields: [GPField(name: "OBJECTID", type: "esriFieldTypeOID")],
            features: try squares.enumerated().map {
                .init(geometry: .polygon(try Polygon(rings: [$1.map { Position(x: $0.0, y: $0.1) }])), attributes: ["OBJECTID": .integer(Int64($0 + 1))])
            })
        let clipSet = GPFeatureSet(
            geometryType: "esriGeometryPolygon", spatialReference: sr,
            features: [.init(geometry: .polygon(try Polygon(rings: [clipRing.map { Position(x: $0.0, y: $0.1) }])), attributes: [:])])

        let engine = GeometryEngine()
        var ours: [(seconds: Double, area: Double)] = []
        for (tool, inputs, runs) in [
            (BufferTool() as any GPTool, ["Input_Features": GPValue.featureSet(pointSet), "Distance": .linearUnit(distance: 200, units: .esriMeters)], 3),
            (BufferTool() as any GPTool, [
                "Input_Features": GPValue.featureSet(pointSet), "Distance": .linearUnit(distance: 200, units: .esriMeters), "Dissolve": .string("ALL"),
            ], 1),
            (ClipTool() as any GPTool, ["Input_Features": .featureSet(squareSet), "Clip_Features": .featureSet(clipSet)], 3),
        ] {
            var best = Double.infinity, area = 0.0
            for _ in 0..<runs {
                let start = ContinuousClock.now
                let result = try await tool.execute(inputs)
                let elapsed = ContinuousClock.now - start
                best = min(best, Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
                guard case .featureSet(let out)? = result["Output_Features"] else { throw BenchError("no output") }
                area = try out.features.reduce(0) { $0 + (try engine.area($1.geometry!)) }
            }
            ours.append((best, area))
        }
        let python = ProcessInfo.processInfo.environment["OUTPOST_PYTHON"] ?? "python3"
        // shapely's wheel carries its own GEOS; OUTPOST_SHAPELY_DEBIAN_GEOS names a shapely built
        // on Debian's (pip install --no-binary shapely --target DIR shapely) for a same-GEOS peer.
        var peers: [(label: String, path: String?)] = [("shapely 2", nil)]
        if let path = ProcessInfo.processInfo.environment["OUTPOST_SHAPELY_DEBIAN_GEOS"] { peers.append(("shapely 2 on Debian's GEOS", path)) }
        var peerRows: [[[String]]] = [[], [], []]
        for peer in peers {
            let run = try measure(["/usr/bin/env"] + (peer.path.map { ["PYTHONPATH=\($0)"] } ?? []) + [python, "-c", """
            import sys, time, shapely, numpy
            folder = sys.argv[1]
            xy = numpy.loadtxt(f"{folder}/points.csv", delimiter=",")
            squares = [shapely.Polygon([tuple(map(float, p.split())) for p in line.split(",")]) for line in open(f"{folder}/squares.txt")]
            clip = shapely.Polygon([tuple(map(float, p.split())) for p in open(f"{folder}/clip.txt").read().split(",")])
            def best(f):
                b = None
                for _ in range(3):
                    t = time.perf_counter(); r = f(); e = time.perf_counter() - t
                    b = e if b is None or e < b else b
                return b, r
            ta, buffers = best(lambda: shapely.buffer(shapely.points(xy), 200, quad_segs=8))
            t = time.perf_counter(); merged = shapely.union_all(shapely.buffer(shapely.points(xy), 200, quad_segs=8)); tb = time.perf_counter() - t
            tc, clipped = best(lambda: [g for g in shapely.intersection(numpy.array(squares), clip) if not g.is_empty])
            print(ta, sum(shapely.area(buffers)), tb, merged.area, tc, sum(g.area for g in clipped), ".".join(map(str, shapely.geos_version)))
            """, folder.path])
            let parts = run.output.split(whereSeparator: \.isWhitespace).map(String.init)
            let p = parts.compactMap { Double($0) }
            guard p.count >= 6 else { throw BenchError("shapely printed \(run.output)") }
            let version = parts.count > 6 ? parts[6] : "?"
            for (i, count) in [100_000.0, 100_000, 10_000].enumerated() {
                peerRows[i].append([
                    "\(peer.label) (GEOS \(version))", format(p[2 * i], 3), format(count / p[2 * i]), format(p[2 * i] / ours[i].seconds, 2),
                    format(p[2 * i + 1] / 1e6, 3),
                ])
            }
        }
        var rows: [[String]] = []
        for (i, label) in ["Buffer 200 m, 100,000 points", "Buffer 200 m + Dissolve ALL, 100,000 points", "Clip 10,000 polygons"].enumerated() {
            let count = i == 2 ? 10_000.0 : 100_000
            rows.append(["\(label): Outpost (GEOS \(GeometryEngine.geosVersion))", format(ours[i].seconds, 3), format(count / ours[i].seconds), "1.00", format(ours[i].area / 1e6, 3)])
            rows += peerRows[i].map { ["  " + $0[0]] + $0.dropFirst() }
        }
        printTable(
            "Geoprocessing tools vs shapely 2 (both GEOS), one core, EPSG:3067", ["", "seconds", "features/s", "Outpost's speed vs this", "result km²"], rows)
    }

    /// A small deterministic generator (splitmix64).
    struct FastRandom {
        var state: UInt64
        init(seed: UInt64) { state = seed }
        mutating func unit() -> Double {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return Double((z ^ (z >> 31)) >> 11) / Double(1 << 53)
        }
    }
}
