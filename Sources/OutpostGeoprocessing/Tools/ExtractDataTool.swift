import Foundation
import OutpostCore
import OutpostStorage

/// Extract Data: layers clipped to an area (whole when no area is given), written as one
/// GeoPackage, or a GeoJSON file, a CSV file (geometry as WKT) or a Shapefile per layer, in a
/// ZIP archive handed back as a GPDataFile.
public struct ExtractDataTool: GPTool {
    public static let name = "ExtractData"
    public static let summary = "Layers clipped to an area, as GeoPackage, GeoJSON, CSV or Shapefile in a ZIP file."
    /// The output formats, as the `Feature_Format` choice list spells them.
    public static let formats = ["GeoPackage - GPKG - .gpkg", "GeoJSON - .geojson", "CSV - .csv", "Shapefile - SHP - .shp"]
    public static let parameters: [GPParameterInfo] = [
        GPParameterInfo(name: "Layers_to_Clip", dataType: .multiValue(.featureRecordSetLayer), displayName: "Layers to Clip"),
        GPParameterInfo(name: "Layer_Names", dataType: .multiValue(.string), kind: .optional, displayName: "Layer Names"),
        GPParameterInfo(name: "Area_of_Interest", dataType: .featureRecordSetLayer, kind: .optional, displayName: "Area of Interest"),
        GPParameterInfo(name: "Feature_Format", dataType: .string, kind: .optional, displayName: "Feature Format", defaultValue: .string(formats[0]), choiceList: formats),
        GPParameterInfo(name: "Output_Zip_File", dataType: .dataFile, direction: .output, kind: .derived, displayName: "Output Zip File"),
    ]

    /// The tool.
    public init() {}

    public func run(_ inputs: [String: GPValue], context: GPToolContext) async throws -> [String: GPValue] {
        guard case .multiValue(_, let values)? = inputs["Layers_to_Clip"], !values.isEmpty else { throw GPValueError(parameter: "Layers_to_Clip", "give one layer or more") }
        var layers = try values.map { value -> GPFeatureSet in
            guard case .featureSet(let set) = value, set.url == nil else { throw GPValueError(parameter: "Layers_to_Clip", "every layer must be a feature set") }
            return set
        }
        var names: [String] = []
        if case .multiValue(_, let given)? = inputs["Layer_Names"] { names = given.compactMap { if case .string(let s) = $0 { s } else { nil } } }
        names = layers.indices.map { i in Self.safe(i < names.count ? names[i] : "layer\(i + 1)") }
        guard Set(names.map { $0.lowercased() }).count == names.count else { throw GPValueError(parameter: "Layer_Names", "two layers would have one name") }
        if case .featureSet(let area)? = inputs["Area_of_Interest"], !area.features.isEmpty {
            for (i, layer) in layers.enumerated() {
                try context.checkCancellation()
                let clipped = try await ClipTool().run(["Input_Features": .featureSet(layer), "Clip_Features": .featureSet(area)], context: context)
                guard case .featureSet(let set)? = clipped["Output_Features"] else { continue }
                layers[i] = set
            }
        }
        let format = ToolInputs.string(inputs, "Feature_Format") ?? Self.formats[0]
        var files: [(name: String, data: Data)] = []
        switch format {
        case Self.formats[0]:
            let scratch = try context.outputFile("extract-\(UUID().uuidString.prefix(8).lowercased()).gpkg")
            defer { try? FileManager.default.removeItem(at: scratch) }
            try await Self.geoPackage(layers, names: names, at: scratch)
            files = [("extract.gpkg", try Data(contentsOf: scratch))]
        case Self.formats[1]:
            files = try zip(names, layers).map { ("\($0).geojson", try FeatureFiles.geoJSON($1)) }
        case Self.formats[2]:
            files = zip(names, layers).map { ("\($0).csv", FeatureFiles.csv($1)) }
        default:
            for (name, layer) in zip(names, layers) {
                do {
                    files += try Shapefile.files(layer).map { ("\(name).\($0.ext)", $0.data) }
                } catch let error as GPValueError {
                    throw GPValueError(parameter: "Layers_to_Clip", "\(name): \(error.reason)")
                }
            }
        }
        let archive = try context.outputFile("extract.zip")
        try FeatureFiles.zip(files, to: archive)
        context.message("Extracted \(layers.map(\.features.count).reduce(0, +)) features of \(layers.count) layers as \(format)")
        return ["Output_Zip_File": .dataFile(GPFileReference(url: archive.absoluteString, format: "zip"))]
    }

    /// A layer or file name of letters, digits, `_` and `-`.
    static func safe(_ name: String) -> String {
        let cleaned = String(name.map { $0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" ? $0 : "_" }.prefix(60))
        return cleaned.isEmpty ? "layer" : cleaned
    }

    /// The layers as one GeoPackage (an OGC GeoPackage as `outpost` writes its geodatabases,
    /// without change tracking): each layer's fields, its system, multi-part geometry columns.
    static func geoPackage(_ layers: [GPFeatureSet], names: [String], at url: URL) async throws {
        var definitions: [LayerDefinition] = []
        var mappings: [[(source: String, field: FieldDefinition)]] = []
        for (i, set) in layers.enumerated() {
            var fields = [FieldDefinition(name: "fid", type: .oid)]
            var mapping: [(String, FieldDefinition)] = []
            for f in set.fields {
                let type: FieldType
                switch f.type {
                case "esriFieldTypeOID", "esriFieldTypeGeometry", "esriFieldTypeBlob", "esriFieldTypeRaster": continue
                case "esriFieldTypeInteger", "esriFieldTypeSmallInteger": type = .integer
                case "esriFieldTypeBigInteger": type = .bigInteger
                case "esriFieldTypeDouble", "esriFieldTypeSingle": type = .double
                case "esriFieldTypeDate": type = .date
                default: type = .string
                }
                guard f.name.lowercased() != "fid", !fields.contains(where: { $0.name.lowercased() == f.name.lowercased() }) else { continue }
                let field = FieldDefinition(name: f.name, type: type, alias: f.alias)
                fields.append(field)
                mapping.append((f.name, field))
            }
            let kind: GeometryType? =
                switch set.geometryType {
                case "esriGeometryPoint": .point
                case "esriGeometryMultipoint": .multiPoint
                case "esriGeometryPolyline": .multiLineString
                case "esriGeometryPolygon": .multiPolygon
                default: set.features.contains { $0.geometry != nil } ? .geometryCollection : nil
                }
            definitions.append(
                LayerDefinition(id: i, name: names[i], geometryType: kind, fields: fields, spatialReference: set.spatialReference ?? .wgs84, sync: false))
            mappings.append(mapping)
        }
        let schema = ServiceSchema(name: "extract", layers: definitions.filter(\.isSpatial), tables: definitions.filter { !$0.isSpatial })
        let gdb = try Geodatabase.create(at: url, schema: schema, overwrite: true, changeCapture: false)
        defer { try? gdb.close() }
        for (i, set) in layers.enumerated() {
            let table = try gdb.table(named: names[i])
            let kind = definitions[i].geometryType?.type
            var batch: [Feature] = []
            for feature in set.features {
                var attributes: [String: FieldValue] = [:]
                for (source, field) in mappings[i] { attributes[field.name] = Self.value(feature.attributes[source] ?? .null, type: field.type) }
                batch.append(Feature(attributes: attributes, geometry: try feature.geometry.map { try Self.multi($0, to: kind) }))
                if batch.count == 1_000 {
                    _ = try await table.add(batch)
                    batch.removeAll(keepingCapacity: true)
                }
            }
            if !batch.isEmpty { _ = try await table.add(batch) }
        }
    }

    static func value(_ v: JSONValue, type: FieldType) -> FieldValue {
        switch v {
        case .null: return .null
        case .bool(let b): return .integer(b ? 1 : 0)
        case .integer(let i): return type == .date ? .date(Date(timeIntervalSince1970: Double(i) / 1000)) : type == .string ? .string(String(i)) : .integer(i)
        case .number(let d): return type == .string ? .string("\(d)") : .double(d)
        case .string(let s): return .string(s)
        default: return .string(v.jsonString)
        }
    }

    /// A single part as its multi-part type when the column is multi-part.
    static func multi(_ g: Geometry, to kind: GeometryType?) throws -> Geometry {
        switch (kind, g) {
        case (.multiPolygon?, .polygon(let p)): return .multiPolygon(try MultiPolygon([p]))
        case (.multiLineString?, .lineString(let l)): return .multiLineString(try MultiLineString([l]))
        case (.multiPoint?, .point(let p)): return .multiPoint(try MultiPoint([p]))
        default: return g
        }
    }
}
