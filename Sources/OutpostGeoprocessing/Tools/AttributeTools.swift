import Foundation
import GRDB
import OutpostCore
import OutpostStorage

/// Select Layer By Attribute: the input features a where clause matches (or, inverted, does
/// not). The clause is the one feature-service queries take (`WhereClause`: SQL-92 subset,
/// dates, LIKE, IN, functions), run by SQLite over the features' attributes in memory, so a
/// clause selects here exactly what it selects in a query.
public struct SelectLayerByAttributeTool: GPTool {
    public static let name = "SelectLayerByAttribute"
    public static let summary = "Features whose attributes match a where clause."
    public static let parameters: [GPParameterInfo] = [
        GPParameterInfo(name: "Input_Features", dataType: .featureRecordSetLayer, displayName: "Input Features"),
        GPParameterInfo(name: "Where_Clause", dataType: .string, displayName: "Expression"),
        GPParameterInfo(name: "Invert_Where_Clause", dataType: .boolean, kind: .optional, displayName: "Invert Where Clause", defaultValue: .boolean(false)),
        GPParameterInfo(name: "Output_Features", dataType: .featureRecordSetLayer, direction: .output, kind: .derived, displayName: "Output Features"),
    ]

    /// The tool.
    public init() {}

    public func run(_ inputs: [String: GPValue], context: GPToolContext) async throws -> [String: GPValue] {
        let input = try ToolInputs.features(inputs, "Input_Features")
        let text = ToolInputs.string(inputs, "Where_Clause") ?? "1=1"
        let invert = inputs["Invert_Where_Clause"] == .boolean(true)
        let selected = try Self.matching(input, text, parameter: "Where_Clause", context: context)
        var out = input
        out.features = input.features.indices.filter { selected.contains($0) != invert }.map { input.features[$0] }
        context.message("Selected \(out.features.count) of \(input.features.count) features")
        return ["Output_Features": .featureSet(out)]
    }

    /// The indices of the features `clause` matches.
    static func matching(_ set: GPFeatureSet, _ clause: String, parameter: String, context: GPToolContext) throws -> Set<Int> {
        var columns: [(name: String, type: FieldType)] = []
        for field in set.fields {
            guard let type = FieldType(name: field.type) else { continue }
            if !columns.contains(where: { $0.name.lowercased() == field.name.lowercased() }) { columns.append((field.name, type)) }
        }
        let parsed: WhereClause
        do {
            parsed = try WhereClause(clause) { name in
                columns.first { $0.name.lowercased() == name.lowercased() }.map { WhereClause.FieldInfo(name: $0.name, type: $0.type) }
            }
        } catch let error as StorageError {
            throw GPValueError(parameter: parameter, error.message)
        }
        let (sql, arguments) = parsed.sql(dialect: .sqlite)
        let queue = try DatabaseQueue()
        return try queue.write { db in
            let quoted = columns.map { "\"\($0.name.replacingOccurrences(of: "\"", with: "\"\""))\"" }
            try db.execute(sql: "CREATE TABLE t(rid INTEGER PRIMARY KEY\(quoted.map { ", \($0)" }.joined()))")
            let insert = try db.makeStatement(
                sql: "INSERT INTO t(rid\(quoted.map { ", \($0)" }.joined())) VALUES (?\(String(repeating: ", ?", count: columns.count)))")
            for (index, feature) in set.features.enumerated() {
                if index % 1_024 == 0 { try context.checkCancellation() }
                var values: [DatabaseValue] = [Int64(index).databaseValue]
                for column in columns {
                    values.append(Self.databaseValue(feature.attributes[column.name] ?? .null, type: column.type))
                }
                try insert.execute(arguments: StatementArguments(values))
            }
            let bound = arguments.map { literal -> DatabaseValue in
                switch literal {
                case .null: .null
                case .integer(let i): i.databaseValue
                case .double(let d): d.databaseValue
                case .text(let s): s.databaseValue
                case .blob(let b): Data(b).databaseValue
                }
            }
            return Set(try Int.fetchAll(db, sql: "SELECT rid FROM t WHERE \(sql)", arguments: StatementArguments(bound)))
        }
    }

    /// An attribute as the geodatabase stores it: dates as GeoPackage text (the form the
    /// parser's date literals take), the rest as they are.
    static func databaseValue(_ value: JSONValue, type: FieldType) -> DatabaseValue {
        switch value {
        case .null: return .null
        case .bool(let b): return (b ? 1 : 0).databaseValue
        case .integer(let i):
            if type.isDate {
                let text = GeoPackageDate.format(Date(timeIntervalSince1970: Double(i) / 1000))
                return (type == .dateOnly ? String(text.prefix(10)) : text).databaseValue
            }
            return i.databaseValue
        case .number(let d): return d.databaseValue
        case .string(let s): return s.databaseValue
        default: return value.jsonString.databaseValue
        }
    }
}

/// Summarize Within: for each polygon, how many of the summary features lie in it (a point
/// inside, a line or polygon intersecting), statistics of their fields (`"pop SUM;pop MEAN"`:
/// SUM, MEAN, MIN, MAX), and for lines and polygons the length or area of their parts inside
/// (metres, in the polygons' projected system, or in an azimuthal equidistant projection centred
/// on each part for longitude/latitude). Written as `Count`, `SUM_pop`, `sum_Length_m`/`sum_Area_m2`.
public struct SummarizeWithinTool: GPTool {
    public static let name = "SummarizeWithin"
    public static let summary = "Counts and statistics of the features inside each polygon."
    public static let parameters: [GPParameterInfo] = [
        GPParameterInfo(name: "In_Polygons", dataType: .featureRecordSetLayer, displayName: "Input Polygons"),
        GPParameterInfo(name: "In_Sum_Features", dataType: .featureRecordSetLayer, displayName: "Input Summary Features"),
        GPParameterInfo(name: "Sum_Fields", dataType: .string, kind: .optional, displayName: "Summary Fields"),
        GPParameterInfo(name: "Keep_All_Polygons", dataType: .boolean, kind: .optional, displayName: "Keep All Polygons", defaultValue: .boolean(true)),
        GPParameterInfo(name: "Output_Features", dataType: .featureRecordSetLayer, direction: .output, kind: .derived, displayName: "Output Features"),
    ]

    /// The tool.
    public init() {}

    public func run(_ inputs: [String: GPValue], context: GPToolContext) async throws -> [String: GPValue] {
        // The work is synchronous: kept out of the async function (the release compiler's
        // coroutine splitting crashed on these loops inside it).
        try Self.summarize(inputs, context: context)
    }

    static func summarize(_ inputs: [String: GPValue], context: GPToolContext) throws -> [String: GPValue] {
        let polygons = try ToolInputs.features(inputs, "In_Polygons")
        let summary = try ToolInputs.aligned(polygons, try ToolInputs.features(inputs, "In_Sum_Features"))
        let statistics = try DissolveTool.statistics(ToolInputs.string(inputs, "Sum_Fields") ?? "", fields: Set(summary.fields.map(\.name)), parameter: "Sum_Fields")
        let keepAll = inputs["Keep_All_Polygons"] != .boolean(false)
        let engine = GeometryEngine()
        let sr = polygons.spatialReference ?? SpatialReference(wkid: 4326)
        let system = try CoordinateSystemInfo(sr)
        let local = system.isGeographic ? try LocalProjections() : nil
        // What kind of summary features: points are counted, lines and polygons also measured.
        let shape = summary.features.lazy.compactMap(\.geometry).first.map { g -> String in
            switch g {
            case .lineString, .multiLineString: "Length_m"
            case .polygon, .multiPolygon: "Area_m2"
            default: ""
            }
        } ?? ""
        let boxes = summary.features.map { $0.geometry?.envelope }
        var out = polygons
        out.fields += [GPField(name: "Count", type: "esriFieldTypeInteger")]
        if !shape.isEmpty { out.fields.append(GPField(name: "sum_\(shape)", type: "esriFieldTypeDouble")) }
        out.fields += statistics.map { field, statistic in
            GPField(name: "\(statistic.rawValue)_\(field)", type: statistic == .COUNT ? "esriFieldTypeInteger" : "esriFieldTypeDouble")
        }
        out.features = []
        for polygon in polygons.features {
            try context.checkCancellation()
            guard let area = polygon.geometry, let box = area.envelope else { continue }
            var members: [GPFeatureSet.Feature] = []
            var measured = 0.0
            for (i, feature) in summary.features.enumerated() {
                guard let g = feature.geometry, let b = boxes[i], b.intersects(box), try engine.test(area, .intersects, g) else { continue }
                if shape.isEmpty {
                    // A point on the boundary counts in both polygons, as in ArcGIS.
                    members.append(feature)
                    continue
                }
                guard let part = try engine.intersection(area, g) else { continue }
                let value = try Self.measure(part, area: shape == "Area_m2", engine: engine, system: system, local: local)
                // Lines that only touch the polygon (nothing of them inside) do not count.
                if value > 0 {
                    members.append(feature)
                    measured += value
                }
            }
            guard keepAll || !members.isEmpty else { continue }
            var attributes = polygon.attributes
            attributes["Count"] = .integer(Int64(members.count))
            if !shape.isEmpty { attributes["sum_\(shape)"] = .number(measured) }
            for (field, statistic) in statistics {
                attributes["\(statistic.rawValue)_\(field)"] = DissolveTool.compute(statistic, members.map { $0.attributes[field] ?? .null })
            }
            out.features.append(GPFeatureSet.Feature(geometry: area, attributes: attributes))
        }
        context.message("Summarized \(summary.features.count) features within \(out.features.count) polygons")
        return ["Output_Features": .featureSet(out)]
    }

    /// Length or area in metres: planar in a projected system (by its unit), in an azimuthal
    /// equidistant projection centred on the part for longitude/latitude.
    static func measure(_ part: Geometry, area: Bool, engine: GeometryEngine, system: CoordinateSystemInfo, local: LocalProjections?) throws -> Double {
        var g = part
        var unit = system.metresPerUnit ?? 1
        if let local, let box = part.envelope {
            g = try local.azimuthalEquidistant(part, centre: Position(x: (box.xmin + box.xmax) / 2, y: (box.ymin + box.ymax) / 2))
            unit = 1
        }
        return area ? try engine.area(g) * unit * unit : try engine.length(g) * unit
    }
}

/// Export Table: the attributes of features as a record set (only `Fields` when given, in that
/// order) and as a CSV file (RFC 4180, UTF-8, a header row): a report to hand on.
public struct ExportTableTool: GPTool {
    public static let name = "ExportTable"
    public static let summary = "Feature attributes as a table and a CSV file."
    public static let parameters: [GPParameterInfo] = [
        GPParameterInfo(name: "Input_Rows", dataType: .featureRecordSetLayer, displayName: "Input Rows"),
        GPParameterInfo(name: "Fields", dataType: .multiValue(.string), kind: .optional, displayName: "Fields"),
        GPParameterInfo(name: "File_Name", dataType: .string, kind: .optional, displayName: "File Name", defaultValue: .string("table.csv")),
        GPParameterInfo(name: "Output_Table", dataType: .recordSet, direction: .output, kind: .derived, displayName: "Output Table"),
        GPParameterInfo(name: "Output_File", dataType: .dataFile, direction: .output, kind: .derived, displayName: "Output File"),
    ]

    /// The tool.
    public init() {}

    public func run(_ inputs: [String: GPValue], context: GPToolContext) async throws -> [String: GPValue] {
        let input = try ToolInputs.features(inputs, "Input_Rows")
        var fields = input.fields
        if case .multiValue(_, let names)? = inputs["Fields"], !names.isEmpty {
            fields = try names.compactMap { value -> GPField? in
                guard case .string(let name) = value else { return nil }
                guard let field = input.fields.first(where: { $0.name.lowercased() == name.lowercased() }) else {
                    throw GPValueError(parameter: "Fields", "the input has no field \(name)")
                }
                return field
            }
        }
        var name = ToolInputs.string(inputs, "File_Name") ?? "table.csv"
        name = String(name.map { $0.isLetter || $0.isNumber || "-_.".contains($0) ? $0 : "_" }).trimmingCharacters(in: CharacterSet(charactersIn: "."))
        if !name.lowercased().hasSuffix(".csv") { name += ".csv" }
        var csv = fields.map { FeatureFiles.cell(.string($0.name)) }.joined(separator: ",") + "\r\n"
        var rows: [GPFeatureSet.Feature] = []
        for (index, feature) in input.features.enumerated() {
            if index % 1_024 == 0 { try context.checkCancellation() }
            var attributes: [String: JSONValue] = [:]
            for field in fields { attributes[field.name] = feature.attributes[field.name] ?? .null }
            rows.append(GPFeatureSet.Feature(geometry: nil, attributes: attributes))
            csv += fields.map { FeatureFiles.cell(attributes[$0.name] ?? .null) }.joined(separator: ",") + "\r\n"
        }
        let file = try context.outputFile(name)
        try Data(csv.utf8).write(to: file)
        context.message("Exported \(rows.count) rows of \(fields.count) fields")
        return [
            "Output_Table": .recordSet(GPFeatureSet(fields: fields, features: rows)),
            "Output_File": .dataFile(GPFileReference(url: file.absoluteString)),
        ]
    }
}
