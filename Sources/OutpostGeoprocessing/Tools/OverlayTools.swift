import OutpostCore

/// Clip: the parts of the input features inside the clip features (their union), with the
/// input's attributes. Features wholly outside are dropped.
public struct ClipTool: GPTool {
    public static let name = "Clip"
    public static let summary = "The parts of input features that fall inside clip features."
    public static let parameters: [GPParameterInfo] = [
        GPParameterInfo(name: "Input_Features", dataType: .featureRecordSetLayer, displayName: "Input Features"),
        GPParameterInfo(name: "Clip_Features", dataType: .featureRecordSetLayer, displayName: "Clip Features"),
        GPParameterInfo(name: "Output_Features", dataType: .featureRecordSetLayer, direction: .output, kind: .derived, displayName: "Output Features"),
    ]

    /// The tool.
    public init() {}

    public func run(_ inputs: [String: GPValue], context: GPToolContext) async throws -> [String: GPValue] {
        let input = try ToolInputs.features(inputs, "Input_Features")
        let clip = try ToolInputs.aligned(input, try ToolInputs.features(inputs, "Clip_Features"))
        let engine = GeometryEngine()
        var out = input
        out.features = []
        guard let area = try engine.unaryUnion(clip.features.compactMap(\.geometry)) else {
            return ["Output_Features": .featureSet(out)]
        }
        for feature in input.features {
            try context.checkCancellation()
            guard let g = feature.geometry, let part = try engine.intersection(g, area) else { continue }
            out.features.append(GPFeatureSet.Feature(geometry: part, attributes: feature.attributes))
        }
        context.message("\(out.features.count) of \(input.features.count) features inside the clip area")
        return ["Output_Features": .featureSet(out)]
    }
}

/// Dissolve: features merged by the values of the dissolve fields (all into one when none),
/// with statistics of other fields per group (`SUM`, `MEAN`, `MIN`, `MAX`, `COUNT`, as
/// `"field SUM;other MEAN"`), written as `SUM_field` and so on.
public struct DissolveTool: GPTool {
    public static let name = "Dissolve"
    public static let summary = "Features merged by shared attribute values, with statistics."
    public static let parameters: [GPParameterInfo] = [
        GPParameterInfo(name: "Input_Features", dataType: .featureRecordSetLayer, displayName: "Input Features"),
        GPParameterInfo(name: "Dissolve_Fields", dataType: .multiValue(.string), kind: .optional, displayName: "Dissolve Fields"),
        GPParameterInfo(name: "Statistics_Fields", dataType: .string, kind: .optional, displayName: "Statistics Fields"),
        GPParameterInfo(name: "Output_Features", dataType: .featureRecordSetLayer, direction: .output, kind: .derived, displayName: "Output Features"),
    ]

    /// A statistic of a field over the features merged.
    public enum Statistic: String, CaseIterable, Sendable {
        /// Sum, mean, least, greatest, and count of non-null values.
        case SUM, MEAN, MIN, MAX, COUNT
    }

    /// The tool.
    public init() {}

    public func run(_ inputs: [String: GPValue], context: GPToolContext) async throws -> [String: GPValue] {
        let input = try ToolInputs.features(inputs, "Input_Features")
        var keys: [String] = []
        if case .multiValue(_, let values)? = inputs["Dissolve_Fields"] {
            keys = values.compactMap { if case .string(let s) = $0 { s } else { nil } }
        }
        let fieldNames = Set(input.fields.map(\.name))
        if let missing = keys.first(where: { !fieldNames.contains($0) }) { throw GPValueError(parameter: "Dissolve_Fields", "the input has no field \(missing)") }
        let statistics = try Self.statistics(ToolInputs.string(inputs, "Statistics_Fields") ?? "", fields: fieldNames)
        // Groups in order of first appearance.
        var order: [[JSONValue]] = []
        var groups: [[JSONValue]: [GPFeatureSet.Feature]] = [:]
        for feature in input.features where feature.geometry != nil {
            let key = keys.map { feature.attributes[$0] ?? .null }
            if groups[key] == nil { order.append(key) }
            groups[key, default: []].append(feature)
        }
        let engine = GeometryEngine()
        var out: [GPFeatureSet.Feature] = []
        for key in order {
            try context.checkCancellation()
            let members = groups[key]!
            let merged: Geometry?
            do {
                merged = try engine.unaryUnion(members.compactMap(\.geometry))
            } catch is GeometryEngine.Failure {
                // An invalid polygon among them: Dissolve repairs its input (GEOSMakeValid) and says so.
                let repaired = try members.compactMap(\.geometry).compactMap { g in try engine.validity(g).valid ? g : try engine.makeValid(g) }
                context.message("Repaired invalid geometries before dissolving")
                merged = try engine.unaryUnion(repaired)
            }
            guard let merged else { continue }
            var attributes: [String: JSONValue] = ["OBJECTID": .integer(Int64(out.count + 1))]
            for (name, value) in zip(keys, key) { attributes[name] = value }
            for (field, statistic) in statistics {
                attributes["\(statistic.rawValue)_\(field)"] = Self.compute(statistic, members.map { $0.attributes[field] ?? .null })
            }
            out.append(GPFeatureSet.Feature(geometry: merged, attributes: attributes))
        }
        var fields = [GPField(name: "OBJECTID", type: "esriFieldTypeOID")]
        fields += keys.compactMap { key in input.fields.first { $0.name == key } }
        fields += statistics.map { field, statistic in
            GPField(name: "\(statistic.rawValue)_\(field)", type: statistic == .COUNT ? "esriFieldTypeInteger" : "esriFieldTypeDouble")
        }
        context.message("Dissolved \(input.features.count) features into \(out.count)")
        return [
            "Output_Features": .featureSet(GPFeatureSet(geometryType: input.geometryType, spatialReference: input.spatialReference, fields: fields, features: out))
        ]
    }

    /// `"population SUM;area MEAN"` as (field, statistic) pairs.
    static func statistics(_ text: String, fields: Set<String>, parameter: String = "Statistics_Fields") throws -> [(String, Statistic)] {
        try text.split(separator: ";").map { entry in
            let parts = entry.split(separator: " ").map(String.init)
            guard parts.count == 2, let statistic = Statistic(rawValue: parts[1].uppercased()) else {
                throw GPValueError(parameter: parameter, "\"\(entry)\" is not \"field STATISTIC\" (\(Statistic.allCases.map(\.rawValue).joined(separator: ", ")))")
            }
            guard fields.contains(parts[0]) else { throw GPValueError(parameter: parameter, "the input has no field \(parts[0])") }
            return (parts[0], statistic)
        }
    }

    /// A statistic of some attribute values (nulls and non-numbers left out; COUNT counts the
    /// values that are not null).
    static func compute(_ statistic: Statistic, _ values: [JSONValue]) -> JSONValue {
        let numbers = values.compactMap(\.doubleValue)
        switch statistic {
        case .COUNT: return .integer(Int64(values.filter { !$0.isNull }.count))
        case .SUM: return .number(numbers.reduce(0, +))
        case .MEAN: return numbers.isEmpty ? .null : .number(numbers.reduce(0, +) / Double(numbers.count))
        case .MIN: return numbers.min().map(JSONValue.number) ?? .null
        case .MAX: return numbers.max().map(JSONValue.number) ?? .null
        }
    }
}

/// Select Layer By Location: the input features that relate to the selecting features —
/// intersect them, lie within a distance of them, contain them or are within them.
public struct SelectLayerByLocationTool: GPTool {
    public static let name = "SelectLayerByLocation"
    public static let summary = "Input features selected by their spatial relation to other features."
    public static let parameters: [GPParameterInfo] = [
        GPParameterInfo(name: "Input_Features", dataType: .featureRecordSetLayer, displayName: "Input Features"),
        GPParameterInfo(
            name: "Overlap_Type", dataType: .string, kind: .optional, displayName: "Relationship", defaultValue: .string("INTERSECT"),
            choiceList: ["INTERSECT", "WITHIN_A_DISTANCE", "CONTAINS", "WITHIN"]),
        GPParameterInfo(name: "Select_Features", dataType: .featureRecordSetLayer, displayName: "Selecting Features"),
        GPParameterInfo(name: "Search_Distance", dataType: .linearUnit, kind: .optional, displayName: "Search Distance"),
        GPParameterInfo(name: "Output_Features", dataType: .featureRecordSetLayer, direction: .output, kind: .derived, displayName: "Selected Features"),
    ]

    /// The tool.
    public init() {}

    public func run(_ inputs: [String: GPValue], context: GPToolContext) async throws -> [String: GPValue] {
        let input = try ToolInputs.features(inputs, "Input_Features")
        let selecting = try ToolInputs.aligned(input, try ToolInputs.features(inputs, "Select_Features")).features.compactMap(\.geometry)
        let relation = ToolInputs.string(inputs, "Overlap_Type") ?? "INTERSECT"
        var distance = 0.0
        if relation == "WITHIN_A_DISTANCE" {
            guard case .linearUnit(let d, let units)? = inputs["Search_Distance"], let metres = units.metres else {
                throw GPValueError(parameter: "Search_Distance", "WITHIN_A_DISTANCE needs a distance in a length unit")
            }
            let system = try CoordinateSystemInfo(input.spatialReference ?? SpatialReference(wkid: 4326))
            guard let perUnit = system.metresPerUnit else {
                throw GPValueError(parameter: "Search_Distance", "a distance needs projected input; project the features first")
            }
            distance = d * metres / perUnit
        }
        let engine = GeometryEngine()
        var out = input
        out.features = try input.features.filter { feature in
            try context.checkCancellation()
            guard let g = feature.geometry else { return false }
            return try selecting.contains { s in
                switch relation {
                case "WITHIN_A_DISTANCE": return try engine.distance(g, s) <= distance
                case "CONTAINS": return try engine.test(g, .contains, s)
                case "WITHIN": return try engine.test(g, .within, s)
                default: return try engine.test(g, .intersects, s)
                }
            }
        }
        context.message("Selected \(out.features.count) of \(input.features.count) features")
        return ["Output_Features": .featureSet(out)]
    }
}

/// Intersect: the areas (or lines, or points) that all the input layers share, each piece with
/// the attributes of the features it came from (later names that clash get `_1`, `_2`, …).
/// The output has the lowest dimension among the inputs; lower-dimensional touches are dropped.
public struct IntersectTool: GPTool {
    public static let name = "Intersect"
    public static let summary = "The geometry all input layers share, with their attributes."
    public static let parameters: [GPParameterInfo] = [
        GPParameterInfo(name: "Input_Features", dataType: .multiValue(.featureRecordSetLayer), displayName: "Input Features"),
        GPParameterInfo(name: "Output_Features", dataType: .featureRecordSetLayer, direction: .output, kind: .derived, displayName: "Output Features"),
    ]

    /// The tool.
    public init() {}

    public func run(_ inputs: [String: GPValue], context: GPToolContext) async throws -> [String: GPValue] {
        guard case .multiValue(_, let values)? = inputs["Input_Features"] else { throw GPValueError(parameter: "Input_Features", "is required") }
        var sets: [GPFeatureSet] = []
        for value in values {
            guard case .featureSet(let set) = value, set.url == nil else {
                throw GPValueError(parameter: "Input_Features", "every input must be a feature set with its features")
            }
            sets.append(sets.isEmpty ? set : try ToolInputs.aligned(sets[0], set))
        }
        guard sets.count >= 2 else { throw GPValueError(parameter: "Input_Features", "needs at least two feature sets") }
        let dimension = sets.compactMap { Self.dimension($0.geometryType) }.min() ?? 2
        let engine = GeometryEngine()
        var result = sets[0]
        for next in sets.dropFirst() {
            let (fields, renames) = Self.merge(result.fields, next.fields)
            var pieces: [GPFeatureSet.Feature] = []
            let envelopes = next.features.map { $0.geometry?.envelope }
            for a in result.features {
                try context.checkCancellation()
                guard let ga = a.geometry, let ea = ga.envelope else { continue }
                for (b, eb) in zip(next.features, envelopes) {
                    guard let gb = b.geometry, let eb, ea.intersects(eb) else { continue }
                    guard let shared = try engine.intersection(ga, gb), let kept = Self.keep(shared, dimension: dimension) else { continue }
                    var attributes = a.attributes
                    for (name, value) in b.attributes { attributes[renames[name] ?? name] = value }
                    pieces.append(GPFeatureSet.Feature(geometry: kept, attributes: attributes))
                }
            }
            result = GPFeatureSet(geometryType: Self.typeName(dimension), spatialReference: result.spatialReference, fields: fields, features: pieces)
        }
        context.message("\(result.features.count) intersecting pieces")
        return ["Output_Features": .featureSet(result)]
    }

    static func dimension(_ geometryType: String?) -> Int? {
        switch geometryType {
        case "esriGeometryPoint", "esriGeometryMultipoint": 0
        case "esriGeometryPolyline": 1
        case "esriGeometryPolygon": 2
        default: nil
        }
    }

    static func typeName(_ dimension: Int) -> String { ["esriGeometryMultipoint", "esriGeometryPolyline", "esriGeometryPolygon"][min(max(dimension, 0), 2)] }

    /// The parts of `g` of the given dimension (a polygon pair that also touches along an edge
    /// gives a collection; the edge goes).
    static func keep(_ g: Geometry, dimension: Int) -> Geometry? {
        func dim(_ g: Geometry) -> Int {
            switch g {
            case .point, .multiPoint: 0
            case .lineString, .multiLineString: 1
            case .polygon, .multiPolygon: 2
            case .geometryCollection: -1
            }
        }
        if case .geometryCollection(let c) = g {
            let parts = c.geometries.flatMap { part -> [Geometry] in
                if case .geometryCollection = part { return keep(part, dimension: dimension).map { [$0] } ?? [] }
                return dim(part) == dimension ? [part] : []
            }
            switch parts.count {
            case 0: return nil
            case 1: return parts[0]
            default:
                let polygons = parts.flatMap { p -> [Polygon] in
                    if case .polygon(let x) = p { return [x] }
                    if case .multiPolygon(let m) = p { return m.polygons }
                    return []
                }
                if dimension == 2, let multi = try? MultiPolygon(polygons) { return .multiPolygon(multi) }
                return (try? GeometryCollection(parts)).map { .geometryCollection($0) }
            }
        }
        return dim(g) == dimension ? g : nil
    }

    /// The fields of both, the second's clashing names renamed `name_1`, `name_2`, …
    static func merge(_ a: [GPField], _ b: [GPField]) -> ([GPField], [String: String]) {
        var names = Set(a.map(\.name)), out = a, renames: [String: String] = [:]
        for field in b {
            var name = field.name, n = 0
            while names.contains(name) {
                n += 1
                name = "\(field.name)_\(n)"
            }
            names.insert(name)
            if name != field.name { renames[field.name] = name }
            var renamed = field
            renamed.name = name
            out.append(renamed)
        }
        return (out, renames)
    }
}

/// Union: the polygon overlay of two layers, every piece of either with the attributes of the
/// features it lies in (null for the layer it is outside of). Each layer's own polygons are
/// taken not to overlap one another (as parcels, zones or countries do).
public struct UnionTool: GPTool {
    public static let name = "Union"
    public static let summary = "The overlay of two polygon layers, every piece with the attributes of both."
    public static let parameters: [GPParameterInfo] = [
        GPParameterInfo(name: "Input_Features", dataType: .featureRecordSetLayer, displayName: "Input Features"),
        GPParameterInfo(name: "Union_Features", dataType: .featureRecordSetLayer, displayName: "Union Features"),
        GPParameterInfo(name: "Output_Features", dataType: .featureRecordSetLayer, direction: .output, kind: .derived, displayName: "Output Features"),
    ]

    /// The tool.
    public init() {}

    public func run(_ inputs: [String: GPValue], context: GPToolContext) async throws -> [String: GPValue] {
        let a = try ToolInputs.features(inputs, "Input_Features")
        let b = try ToolInputs.aligned(a, try ToolInputs.features(inputs, "Union_Features"))
        for (set, name) in [(a, "Input_Features"), (b, "Union_Features")] where set.geometryType != "esriGeometryPolygon" {
            throw GPValueError(parameter: name, "Union overlays polygons; this set holds \(set.geometryType ?? "no geometry type")")
        }
        let (fields, renames) = IntersectTool.merge(a.fields, b.fields)
        let nullsOfA = Dictionary(uniqueKeysWithValues: a.fields.map { ($0.name, JSONValue.null) })
        let nullsOfB = Dictionary(uniqueKeysWithValues: b.fields.map { (renames[$0.name] ?? $0.name, JSONValue.null) })
        func rename(_ attributes: [String: JSONValue]) -> [String: JSONValue] {
            Dictionary(uniqueKeysWithValues: attributes.map { (renames[$0.key] ?? $0.key, $0.value) })
        }
        let engine = GeometryEngine()
        let wholeA = try engine.unaryUnion(a.features.compactMap(\.geometry)), wholeB = try engine.unaryUnion(b.features.compactMap(\.geometry))
        var pieces: [GPFeatureSet.Feature] = []
        func add(_ g: Geometry?, _ attributes: [String: JSONValue]) {
            if let g, let kept = IntersectTool.keep(g, dimension: 2) { pieces.append(GPFeatureSet.Feature(geometry: kept, attributes: attributes)) }
        }
        let envelopes = b.features.map { $0.geometry?.envelope }
        for fa in a.features {
            try context.checkCancellation()
            guard let ga = fa.geometry, let ea = ga.envelope else { continue }
            for (fb, eb) in zip(b.features, envelopes) {
                guard let gb = fb.geometry, let eb, ea.intersects(eb) else { continue }
                add(try engine.intersection(ga, gb), fa.attributes.merging(rename(fb.attributes)) { $1 })
            }
            add(try wholeB.map { try engine.difference(ga, $0) } ?? ga, fa.attributes.merging(nullsOfB) { old, _ in old })
        }
        for fb in b.features {
            guard let gb = fb.geometry else { continue }
            add(try wholeA.map { try engine.difference(gb, $0) } ?? gb, nullsOfA.merging(rename(fb.attributes)) { $1 })
        }
        context.message("\(pieces.count) pieces")
        return [
            "Output_Features": .featureSet(GPFeatureSet(geometryType: "esriGeometryPolygon", spatialReference: a.spatialReference, fields: fields, features: pieces))
        ]
    }
}
