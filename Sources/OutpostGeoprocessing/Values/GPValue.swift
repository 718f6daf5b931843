import OutpostCore

/// A value that names a parameter and what is wrong with it (the server answers 400 with it).
public struct GPValueError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The parameter at fault, when one is.
    public var parameter: String?
    /// What is wrong.
    public var reason: String

    /// An error about `parameter` saying `reason`.
    public init(parameter: String? = nil, _ reason: String) {
        self.parameter = parameter
        self.reason = reason
    }

    public var description: String { parameter.map { "parameter \($0): \(reason)" } ?? reason }
}

/// A field of a feature or record set (ArcGIS JSON `fields` entries).
public struct GPField: Hashable, Sendable {
    /// The field's name.
    public var name: String
    /// `esriFieldTypeString`, `esriFieldTypeDouble`, `esriFieldTypeOID`, …
    public var type: String
    /// Its name as people see it.
    public var alias: String?
    /// The longest text it holds, for a string field.
    public var length: Int?

    /// A field of these values.
    public init(name: String, type: String, alias: String? = nil, length: Int? = nil) {
        self.name = name
        self.type = type
        self.alias = alias
        self.length = length
    }
}

/// Features with attributes (and, for a feature set, geometry in one spatial reference), or a
/// reference to a layer query that yields them.
public struct GPFeatureSet: Hashable, Sendable {
    /// A feature or row of a set.
    public struct Feature: Hashable, Sendable {
        /// Its geometry (nil in a record set, or for a feature without one).
        public var geometry: Geometry?
        /// Its attribute values by field name.
        public var attributes: [String: JSONValue]

        /// A feature of these values.
        public init(geometry: Geometry?, attributes: [String: JSONValue]) {
            self.geometry = geometry
            self.attributes = attributes
        }
    }

    /// `esriGeometryPoint`, … (nil for a record set).
    public var geometryType: String?
    /// The spatial reference of the geometries.
    public var spatialReference: SpatialReference?
    /// The fields of the rows.
    public var fields: [GPField]
    /// The features or rows.
    public var features: [Feature]
    /// A layer (query) URL in place of inline features.
    public var url: String?

    /// A set of these values.
    public init(geometryType: String? = nil, spatialReference: SpatialReference? = nil, fields: [GPField] = [], features: [Feature] = [], url: String? = nil) {
        self.geometryType = geometryType
        self.spatialReference = spatialReference
        self.fields = fields
        self.features = features
        self.url = url
    }
}

/// A file or raster by URL or by the item id an upload gave (`uploads/upload`).
public struct GPFileReference: Hashable, Sendable {
    /// The file's URL.
    public var url: String?
    /// The item id an upload gave.
    public var itemID: String?
    /// Rasters: the file format (`tif`, `png`, …).
    public var format: String?

    /// A reference of these values (a URL or an item id).
    public init(url: String? = nil, itemID: String? = nil, format: String? = nil) {
        self.url = url
        self.itemID = itemID
        self.format = format
    }
}

/// A typed geoprocessing value, with its ArcGIS REST JSON encoding both ways.
public enum GPValue: Hashable, Sendable {
    /// A GPBoolean.
    case boolean(Bool)
    /// A GPLong.
    case long(Int64)
    /// A GPDouble.
    case double(Double)
    /// A GPString.
    case string(String)
    /// Milliseconds since 1970-01-01 UTC, as GPDate travels.
    case date(milliseconds: Int64)
    /// A GPLinearUnit: a distance and its unit.
    case linearUnit(distance: Double, units: LinearUnit)
    /// A GPArealUnit: an area and its unit.
    case arealUnit(area: Double, units: ArealUnit)
    /// A GPFeatureRecordSetLayer.
    case featureSet(GPFeatureSet)
    /// A GPRecordSet.
    case recordSet(GPFeatureSet)
    /// A GPDataFile.
    case dataFile(GPFileReference)
    /// A GPRasterData.
    case rasterData(GPFileReference)
    /// A GPRasterDataLayer.
    case rasterDataLayer(GPFileReference)
    /// A GPMultiValue: a list of values of one type.
    case multiValue(GPDataType, [GPValue])

    /// The value's data type.
    public var dataType: GPDataType {
        switch self {
        case .boolean: .boolean
        case .long: .long
        case .double: .double
        case .string: .string
        case .date: .date
        case .linearUnit: .linearUnit
        case .arealUnit: .arealUnit
        case .featureSet: .featureRecordSetLayer
        case .recordSet: .recordSet
        case .dataFile: .dataFile
        case .rasterData: .rasterData
        case .rasterDataLayer: .rasterDataLayer
        case .multiValue(let element, _): .multiValue(element)
        }
    }

    // MARK: - Encoding

    /// The value as ArcGIS REST JSON.
    public var json: JSONValue {
        get throws {
            switch self {
            case .boolean(let b): return .bool(b)
            case .long(let n): return .integer(n)
            case .double(let d): return .number(d)
            case .string(let s): return .string(s)
            case .date(let ms): return .integer(ms)
            case .linearUnit(let distance, let units): return ["distance": .number(distance), "units": .string(units.rawValue)]
            case .arealUnit(let area, let units): return ["area": .number(area), "units": .string(units.rawValue)]
            case .featureSet(let set), .recordSet(let set): return try Self.encode(set)
            case .dataFile(let file), .rasterData(let file), .rasterDataLayer(let file):
                var out: [String: JSONValue] = [:]
                if let url = file.url { out["url"] = .string(url) }
                if let item = file.itemID { out["itemID"] = .string(item) }
                if let format = file.format { out["format"] = .string(format) }
                return .object(out)
            case .multiValue(_, let values): return .array(try values.map { try $0.json })
            }
        }
    }

    static func encode(_ set: GPFeatureSet) throws -> JSONValue {
        if let url = set.url { return ["url": .string(url)] }
        var out: [String: JSONValue] = [:]
        if let type = set.geometryType { out["geometryType"] = .string(type) }
        if let sr = set.spatialReference { out["spatialReference"] = ["wkid": .integer(Int64(sr.wkid))] }
        out["fields"] = .array(set.fields.map { field in
            var f: [String: JSONValue] = ["name": .string(field.name), "type": .string(field.type)]
            if let alias = field.alias { f["alias"] = .string(alias) }
            if let length = field.length { f["length"] = .integer(Int64(length)) }
            return .object(f)
        })
        out["features"] = .array(try set.features.enumerated().map { index, feature in
            // Tens of thousands of polygons take seconds: a cancelled job stops here too.
            if index % 1_024 == 0 { try Task.checkCancellation() }
            var f: [String: JSONValue] = ["attributes": .object(feature.attributes)]
            if let g = feature.geometry { f["geometry"] = try EsriJSON.value(g) }
            return .object(f)
        })
        return .object(out)
    }

    // MARK: - Decoding

    /// Reads `json` as a value of `type`; `parameter` names the parameter in errors.
    public init(json: JSONValue, as type: GPDataType, parameter: String? = nil) throws {
        func bad(_ reason: String) -> GPValueError { GPValueError(parameter: parameter, reason) }
        switch type {
        case .boolean:
            guard let b = json.boolValue else { throw bad("a GPBoolean must be true or false") }
            self = .boolean(b)
        case .long:
            guard let n = json.integerValue else { throw bad("a GPLong must be a whole number") }
            self = .long(n)
        case .double:
            guard let d = json.doubleValue, d.isFinite else { throw bad("a GPDouble must be a finite number") }
            self = .double(d)
        case .string:
            guard let s = json.stringValue else { throw bad("a GPString must be a string") }
            self = .string(s)
        case .date:
            guard let ms = json.integerValue else { throw bad("a GPDate must be milliseconds since 1970 (an integer)") }
            self = .date(milliseconds: ms)
        case .linearUnit:
            guard let distance = json["distance"]?.doubleValue, distance.isFinite else { throw bad("a GPLinearUnit needs a numeric \"distance\"") }
            guard let name = json["units"]?.stringValue, let units = LinearUnit(rawValue: name) else {
                throw bad("unknown linear unit \(json["units"]?.stringValue.map { "\"\($0)\"" } ?? "(none)"); use one of \(LinearUnit.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            self = .linearUnit(distance: distance, units: units)
        case .arealUnit:
            guard let area = json["area"]?.doubleValue, area.isFinite else { throw bad("a GPArealUnit needs a numeric \"area\"") }
            guard let name = json["units"]?.stringValue, let units = ArealUnit(rawValue: name) else {
                throw bad("unknown areal unit \(json["units"]?.stringValue.map { "\"\($0)\"" } ?? "(none)"); use one of \(ArealUnit.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            self = .arealUnit(area: area, units: units)
        case .featureRecordSetLayer:
            self = .featureSet(try Self.decodeSet(json, geometry: true, bad))
        case .recordSet:
            self = .recordSet(try Self.decodeSet(json, geometry: false, bad))
        case .dataFile, .rasterData, .rasterDataLayer:
            guard json.objectValue != nil else { throw bad("a \(type) must be an object with \"url\" or \"itemID\"") }
            let file = GPFileReference(url: json["url"]?.stringValue, itemID: json["itemID"]?.stringValue, format: json["format"]?.stringValue)
            guard file.url != nil || file.itemID != nil else { throw bad("a \(type) needs \"url\" or \"itemID\"") }
            self = type == .dataFile ? .dataFile(file) : type == .rasterData ? .rasterData(file) : .rasterDataLayer(file)
        case .multiValue(let element):
            guard let items = json.arrayValue else { throw bad("a \(type) must be a JSON array") }
            self = .multiValue(element, try items.map { try GPValue(json: $0, as: element, parameter: parameter) })
        }
    }

    /// Reads a parameter as an HTML form or query string carries it: a GPString as it is,
    /// booleans and numbers as their text, everything else as JSON.
    public init(formValue text: String, as type: GPDataType, parameter: String? = nil) throws {
        switch type {
        case .string:
            self = .string(text)
        case .boolean:
            switch text.lowercased() {
            case "true": self = .boolean(true)
            case "false": self = .boolean(false)
            default: throw GPValueError(parameter: parameter, "a GPBoolean must be true or false, not \"\(text)\"")
            }
        default:
            let json: JSONValue
            do { json = try JSONValue.parse(text) } catch { throw GPValueError(parameter: parameter, "not valid JSON for a \(type): \(error)") }
            try self.init(json: json, as: type, parameter: parameter)
        }
    }

    static func decodeSet(_ json: JSONValue, geometry: Bool, _ bad: (String) -> GPValueError) throws -> GPFeatureSet {
        guard json.objectValue != nil else { throw bad("a \(geometry ? "feature" : "record") set must be a JSON object") }
        if let url = json["url"]?.stringValue { return GPFeatureSet(url: url) }
        let fields = try (json["fields"]?.arrayValue ?? []).map { field -> GPField in
            guard let name = field["name"]?.stringValue, let type = field["type"]?.stringValue else { throw bad("every field needs a name and a type") }
            return GPField(name: name, type: type, alias: field["alias"]?.stringValue, length: field["length"]?.integerValue.map(Int.init))
        }
        guard let features = json["features"]?.arrayValue else { throw bad("a \(geometry ? "feature" : "record") set needs \"features\" (or \"url\")") }
        let sr = EsriJSON.decodeSpatialReference(json["spatialReference"])
        let decoded = try features.enumerated().map { index, feature -> GPFeatureSet.Feature in
            guard let attributes = (feature["attributes"] ?? .object([:])).objectValue else { throw bad("feature \(index): \"attributes\" must be an object") }
            var shape: Geometry?
            if geometry, let g = feature["geometry"], !g.isNull {
                do { shape = try EsriJSON.decodeGeometry(g) } catch { throw bad("feature \(index): \(error)") }
            }
            return GPFeatureSet.Feature(geometry: shape, attributes: attributes)
        }
        return GPFeatureSet(geometryType: geometry ? json["geometryType"]?.stringValue : nil, spatialReference: sr, fields: fields, features: decoded)
    }
}
