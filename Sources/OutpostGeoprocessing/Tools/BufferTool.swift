import OutpostCore

/// Buffer: polygons at a distance around the input features. Planar in a projected system (the
/// distance converted to its units); geodesic (metres on the WGS 84 ellipsoid) when asked, or
/// when the features are in longitude/latitude, by buffering each feature in an azimuthal
/// equidistant projection centred on it. A distance field gives each feature its own distance
/// (in the distance's units); `Dissolve` ALL merges the buffers into one.
public struct BufferTool: GPTool {
    public static let name = "Buffer"
    public static let summary = "Polygons at a given distance around input features."
    public static let parameters: [GPParameterInfo] = [
        GPParameterInfo(name: "Input_Features", dataType: .featureRecordSetLayer, displayName: "Input Features"),
        GPParameterInfo(name: "Distance", dataType: .linearUnit, displayName: "Distance", defaultValue: .linearUnit(distance: 100, units: .esriMeters)),
        GPParameterInfo(name: "Distance_Field", dataType: .string, kind: .optional, displayName: "Distance Field"),
        GPParameterInfo(name: "Method", dataType: .string, kind: .optional, displayName: "Method", defaultValue: .string("PLANAR"), choiceList: ["PLANAR", "GEODESIC"]),
        GPParameterInfo(name: "Dissolve", dataType: .string, kind: .optional, displayName: "Dissolve Type", defaultValue: .string("NONE"), choiceList: ["NONE", "ALL"]),
        GPParameterInfo(name: "Output_Features", dataType: .featureRecordSetLayer, direction: .output, kind: .derived, displayName: "Output Features"),
    ]

    /// Segments per quarter circle of a round buffer.
    public var quadrantSegments = 8

    /// The tool.
    public init() {}

    public func run(_ inputs: [String: GPValue], context: GPToolContext) async throws -> [String: GPValue] {
        guard case .featureSet(let input)? = inputs["Input_Features"] else { throw GPValueError(parameter: "Input_Features", "is required") }
        guard input.url == nil else { throw GPValueError(parameter: "Input_Features", "a layer URL must be resolved to features before the tool runs") }
        guard case .linearUnit(let distance, let units)? = inputs["Distance"] else { throw GPValueError(parameter: "Distance", "is required") }
        let reference = input.spatialReference ?? SpatialReference(wkid: 4326)
        let system = try CoordinateSystemInfo(reference)
        let geodesic = system.isGeographic || inputs["Method"] == .string("GEODESIC")
        guard let unitMetres = units.metres else {
            throw GPValueError(parameter: "Distance", "decimal degrees are not a distance; give metres, feet or another length")
        }
        var field: String?
        if case .string(let name)? = inputs["Distance_Field"], !name.isEmpty {
            guard input.fields.contains(where: { $0.name == name }) else { throw GPValueError(parameter: "Distance_Field", "the input has no field \(name)") }
            field = name
        }
        let engine = GeometryEngine()
        let geodesicBuffer = geodesic ? try GeodesicBuffer(reference: reference, quadrantSegments: quadrantSegments) : nil
        var out: [GPFeatureSet.Feature] = []
        for (index, feature) in input.features.enumerated() {
            try context.checkCancellation()
            if index > 0, index % 20_000 == 0 { context.message("Buffered \(index) of \(input.features.count) features") }
            guard let geometry = feature.geometry else { continue }
            var metres = distance * unitMetres
            if let field {
                guard let value = feature.attributes[field]?.doubleValue, value.isFinite else { continue }
                metres = value * unitMetres
            }
            let buffered: Geometry?
            if let geodesicBuffer {
                buffered = try geodesicBuffer.buffer(geometry, metres: metres, engine: engine)
            } else {
                buffered = try engine.buffer(geometry, distance: metres / (system.metresPerUnit ?? 1), quadrantSegments: quadrantSegments)
            }
            if let buffered { out.append(GPFeatureSet.Feature(geometry: buffered, attributes: feature.attributes)) }
        }
        var fields = input.fields
        if inputs["Dissolve"] == .string("ALL") {
            let merged = try engine.unaryUnion(out.compactMap(\.geometry))
            out = merged.map { [GPFeatureSet.Feature(geometry: $0, attributes: ["OBJECTID": .integer(1)])] } ?? []
            fields = [GPField(name: "OBJECTID", type: "esriFieldTypeOID")]
        }
        context.message("Buffered \(input.features.count) features into \(out.count) polygons (\(geodesic ? "geodesic" : "planar"))")
        return ["Output_Features": .featureSet(GPFeatureSet(geometryType: "esriGeometryPolygon", spatialReference: reference, fields: fields, features: out))]
    }
}

/// Buffers on the ellipsoid: each geometry in an azimuthal equidistant projection centred on its
/// envelope (distances from the centre are true), buffered there, and brought back. The
/// transforms to and from longitude/latitude are made once per run.
struct GeodesicBuffer {
    let toGeographic: CoordinateTransform?
    let fromGeographic: CoordinateTransform?
    let projections: LocalProjections
    let quadrantSegments: Int

    init(reference: SpatialReference, quadrantSegments: Int) throws {
        let geographic = SpatialReference(wkid: 4326)
        toGeographic = reference == geographic ? nil : try CoordinateTransform(from: reference, to: geographic)
        fromGeographic = reference == geographic ? nil : try CoordinateTransform(from: geographic, to: reference)
        projections = try LocalProjections()
        self.quadrantSegments = quadrantSegments
    }

    func buffer(_ geometry: Geometry, metres: Double, engine: GeometryEngine) throws -> Geometry? {
        let lonLat = try toGeographic?.transform(geometry) ?? geometry
        guard let envelope = lonLat.envelope else { return nil }
        let centre = Position(x: (envelope.xmin + envelope.xmax) / 2, y: (envelope.ymin + envelope.ymax) / 2)
        let local = try projections.azimuthalEquidistant(lonLat, centre: centre)
        guard let buffered = try engine.buffer(local, distance: metres, quadrantSegments: quadrantSegments) else { return nil }
        let back = try projections.azimuthalEquidistant(buffered, centre: centre, inverse: true)
        return try fromGeographic?.transform(back) ?? back
    }
}
