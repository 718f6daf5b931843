import Foundation
import Hummingbird
import OutpostCore
import OutpostGeoprocessing
import OutpostStorage

/// The forms of the operations a browser calls from the Services Directory.
enum DirectoryForms {
    static let trueFalse = ["true", "false"]
    static let falseTrue = ["false", "true"]
    static let geometryTypes = ["esriGeometryEnvelope", "esriGeometryPoint", "esriGeometryPolyline", "esriGeometryPolygon", "esriGeometryMultipoint"]

    static let query = DirectoryForm(
        fields: [
            .init(name: "where", label: "Where", value: "1=1", help: "SQL-92 where clause on the layer's fields"),
            .init(name: "objectIds", label: "Object IDs", help: "comma-separated"),
            .init(name: "geometry", label: "Geometry", help: "x,y or xmin,ymin,xmax,ymax or Esri JSON"),
            .init(name: "geometryType", label: "Geometry type", kind: .choice(geometryTypes)),
            .init(name: "inSR", label: "Input spatial reference", help: "WKID, e.g. 4326"),
            .init(
                name: "spatialRel", label: "Spatial relationship",
                kind: .choice(["esriSpatialRelIntersects", "esriSpatialRelContains", "esriSpatialRelWithin", "esriSpatialRelEnvelopeIntersects"])),
            .init(name: "outFields", label: "Out fields", value: "*", help: "comma-separated, or *"),
            .init(name: "returnGeometry", label: "Return geometry", kind: .choice(trueFalse)),
            .init(name: "outSR", label: "Output spatial reference", help: "WKID"),
            .init(name: "orderByFields", label: "Order by fields", help: "field [ASC|DESC], …"),
            .init(name: "resultOffset", label: "Result offset"),
            .init(name: "resultRecordCount", label: "Result record count", help: "at most 100 are shown here; f=json returns up to maxRecordCount"),
            .init(name: "returnIdsOnly", label: "Return IDs only", kind: .choice(falseTrue)),
            .init(name: "returnCountOnly", label: "Return count only", kind: .choice(falseTrue)),
        ],
        submit: "Query (GET)")

    static let applyEdits = DirectoryForm(
        method: "post",
        fields: [
            .init(name: "adds", label: "Adds", kind: .area, help: "a JSON array of features: [{\"attributes\": {…}, \"geometry\": {…}}]"),
            .init(name: "updates", label: "Updates", kind: .area, help: "features with their object id (or global id)"),
            .init(name: "deletes", label: "Deletes", help: "object ids, comma-separated (global ids with useGlobalIds)"),
            .init(name: "useGlobalIds", label: "Use global ids", kind: .choice(falseTrue)),
            .init(name: "rollbackOnFailure", label: "Roll back on failure", kind: .choice(trueFalse)),
        ],
        submit: "Apply Edits (POST)")

    /// An NAServer route layer's `solve`.
    static let solveRoute = DirectoryForm(
        method: "post",
        fields: [
            .init(name: "stops", label: "Stops", kind: .area, help: "x,y;x,y (longitude, latitude) or features JSON with Name attributes"),
            .init(name: "barriers", label: "Point barriers", kind: .area, help: "x,y;x,y or features JSON: each closes the street it stands on"),
            .init(name: "travelMode", label: "Travel mode", kind: .choice(["Driving Time", "Driving Distance", "Walking Time"])),
            .init(name: "findBestSequence", label: "Find best sequence", kind: .choice(falseTrue)),
            .init(name: "preserveFirstStop", label: "Preserve first stop", kind: .choice(trueFalse)),
            .init(name: "preserveLastStop", label: "Preserve last stop", kind: .choice(trueFalse)),
            .init(name: "returnDirections", label: "Return directions", kind: .choice(trueFalse)),
            .init(name: "returnStops", label: "Return stops", kind: .choice(trueFalse)),
            .init(name: "directionsLengthUnits", label: "Directions length units", kind: .choice(["esriNAUKilometers", "esriNAUMeters", "esriNAUMiles", "esriNAUFeet"])),
            .init(name: "startTime", label: "Start time", help: "milliseconds since 1970, or now"),
            .init(name: "outSR", label: "Output spatial reference", help: "WKID"),
        ],
        submit: "Solve Route (POST)")

    /// A geoprocessing task's inputs as a form (`execute` or `submitJob`): choice lists as
    /// choices, feature sets and other JSON values as text areas, defaults filled in.
    static func geoprocessing(_ task: GPTaskDefinition, operation: String) -> DirectoryForm {
        var fields: [DirectoryForm.Field] = task.inputs.map { p in
            let value: String = {
                switch p.defaultValue {
                case .string(let s)?: return s
                case let v?: return (try? v.json.jsonString) ?? ""
                case nil: return ""
                }
            }()
            let kind: DirectoryForm.Field.Kind
            switch p.dataType {
            case .string where !p.choiceList.isEmpty: kind = .choice(p.choiceList)
            case .boolean: kind = .choice(value == "true" ? trueFalse : falseTrue)
            case .featureRecordSetLayer, .recordSet, .multiValue: kind = .area
            default: kind = .line
            }
            let required = p.kind == .required ? "required" : "optional"
            return .init(name: p.name, label: p.displayName, kind: kind, value: value, help: "\(p.dataType) (\(required))")
        }
        fields.append(.init(name: "env:outSR", label: "Output spatial reference", help: "EPSG code"))
        fields.append(.init(name: "env:processSR", label: "Process spatial reference", help: "EPSG code"))
        return DirectoryForm(method: "post", fields: fields, submit: operation == "execute" ? "Execute Task (POST)" : "Submit Job (POST)")
    }

    static let generateToken = DirectoryForm(
        method: "post",
        fields: [
            .init(name: "username", label: "User name"),
            .init(name: "password", label: "Password", kind: .password),
            .init(name: "client", label: "Bind the token to", kind: .choice(["requestip", "referer", "ip", "none"])),
            .init(name: "referer", label: "Referer", help: "with client=referer: the address of the pages that use it"),
            .init(name: "ip", label: "IP address", help: "with client=ip"),
            .init(name: "expiration", label: "Expiration (minutes)", value: "60"),
        ],
        submit: "Generate Token (POST)")

    static let createReplica = DirectoryForm(
        method: "post",
        fields: [
            .init(name: "replicaName", label: "Replica name", value: "replica"),
            .init(name: "layers", label: "Layers", help: "layer ids, comma-separated"),
            .init(name: "geometry", label: "Geometry", help: "xmin,ymin,xmax,ymax or Esri JSON"),
            .init(name: "geometryType", label: "Geometry type", kind: .choice(geometryTypes)),
            .init(name: "inSR", label: "Input spatial reference", help: "WKID, e.g. 4326"),
            .init(name: "layerQueries", label: "Layer queries", kind: .area, help: "{\"0\": {\"where\": \"…\"}}"),
            .init(name: "syncModel", label: "Sync model", kind: .choice(["perReplica", "perLayer", "none"])),
            .init(name: "returnAttachments", label: "Return attachments", kind: .choice(falseTrue)),
            .init(name: "attachmentsSyncDirection", label: "Attachments sync direction", kind: .choice(["none", "upload", "bidirectional"])),
            .init(name: "dataFormat", label: "Data format", kind: .choice(["json", "sqlite"])),
            .init(name: "async", label: "Asynchronous", kind: .choice(falseTrue)),
        ],
        submit: "Create Replica (POST)")
}

extension ServiceRoutes {
    /// `…/<layer>/query?f=html`: the query form, and once the request asks something (any
    /// parameter but `f`), the count, the ids, or up to 100 features as a table and as JSON.
    func queryPage(_ id: Int, view: DirectoryView) async throws -> Response {
        let schema = try await backend.schema()
        let layer = try layer(id, in: schema)
        let layerSR = layer.spatialReference ?? schema.spatialReference
        let asked = view.query.contains { $0.0.lowercased() != "f" }
        let title = "Query: \(layer.name) (\(id))"
        guard asked else { return writing.html(view.query(title: title, form: DirectoryForms.query, ran: false, count: nil, columns: [], rows: [], json: nil)) }
        let plan = try queryPlan(layer, schema: schema)
        var query = plan.query
        if try parameters.bool("returnCountOnly", default: false) {
            query.offset = 0
            let count = try await backend.count(layerID: id, query: query)
            return writing.html(
                view.query(title: title, form: DirectoryForms.query, ran: true, count: "\(count) features", columns: [], rows: [], json: ["count": .integer(Int64(count))]))
        }
        if try parameters.bool("returnIdsOnly", default: false) {
            let ids = try await backend.objectIDs(layerID: id, query: query)
            let json: JSONValue = ["objectIdFieldName": .string(layer.objectIDField), "objectIds": .array(ids.map { .integer($0) })]
            return writing.html(view.query(title: title, form: DirectoryForms.query, ran: true, count: "\(ids.count) object ids", columns: [], rows: [], json: json))
        }
        let shown = min(plan.limit, 100)
        query.limit = shown + 1
        var features = try await backend.features(layerID: id, query: query)
        let more = features.count > shown
        features = Array(features.prefix(shown))
        var columns = plan.fields.map(\.name)
        if query.returnGeometry { columns.append("geometry") }
        var rows: [[String]] = []
        var json: [JSONValue] = []
        for var feature in features {
            if let g = feature.geometry, plan.outSR != layerSR { feature.geometry = try WebMercator.convert(g, from: layerSR, to: plan.outSR) }
            var row = plan.fields.map { field in
                switch field.type {
                case .oid: feature.objectID.map(String.init) ?? ""
                case .globalID: feature.globalID ?? Self.cellText(feature.attributes[field.name])
                default: Self.cellText(feature.attributes[field.name])
                }
            }
            if query.returnGeometry { row.append(feature.geometry.map(Self.geometryText) ?? "") }
            rows.append(row)
            var text = ""
            try FeatureJSON.writeEsri(feature, fields: plan.fields, includeGeometry: query.returnGeometry, to: &text)
            json.append(try JSONValue.parse(text))
        }
        let count = "\(features.count) features" + (more ? " shown; more match (page with resultOffset, or ask for f=json)" : "")
        return writing.html(view.query(title: title, form: DirectoryForms.query, ran: true, count: count, columns: columns, rows: rows, json: ["features": .array(json)]))
    }

    static func cellText(_ value: FieldValue?) -> String {
        switch value {
        case .none, .null?: return ""
        case .string(let s)?: return s
        case .integer(let i)?: return String(i)
        case .double(let d)?: return String(d)
        case .date(let d)?: return GeoPackageDate.format(d)
        case .blob(let b)?: return "\(b.count) bytes"
        }
    }

    /// A short description of a geometry for a table cell: a point's coordinates, else its type
    /// and size.
    static func geometryText(_ geometry: Geometry) -> String {
        if case .point(let p) = geometry, let position = p.position { return "Point (\(position.x), \(position.y))" }
        return "\(geometry.type.geoJSONName)"
    }

    /// An operation called from a browser with no input yet: its form.
    func operationForm(_ form: DirectoryForm, title: String, description: String, view: DirectoryView) -> Response {
        writing.html(view.operation(title: title, description: description, form: form, result: nil))
    }
}
