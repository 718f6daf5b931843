import Foundation
import HTTPTypes
import Hummingbird
import OutpostCore

/// Which Services Directory page a resource is shown as. A page is built from the same JSON the
/// resource answers with `f=json`, so the two never disagree.
enum DirectoryPage: Sendable {
    /// `/arcgis/rest/services`.
    case catalog
    /// `…/<service>/FeatureServer`; `drawn`: the service also has a drawn MapServer.
    case featureServer(drawn: Bool)
    /// `…/FeatureServer/<id>`.
    case layer
    /// `…/<service>/MapServer`.
    case mapServer
    /// An operation called from a browser (applyEdits, createReplica, …): its form, or the
    /// answer once it ran.
    case operation(description: String, form: DirectoryForm?)
    /// Any other resource: its JSON, readable.
    case resource
}

/// A form of an operation page: fields by name, submitted to the page itself with `f=html`.
struct DirectoryForm: Sendable {
    struct Field: Sendable {
        enum Kind: Sendable {
            case line
            case area
            case choice([String])
            /// Never prefilled from the request.
            case password
        }

        var name: String
        var label: String
        var kind: Kind = .line
        var value: String = ""
        var help: String?
    }

    var method = "get"
    var fields: [Field]
    var submit: String
}

/// Renders Services Directory pages for one request: `f=html`, or a browser's
/// `Accept: text/html` when `f` is absent.
struct DirectoryView: Sendable {
    /// The path below `/arcgis/rest/` (`services`, `<name>`, `FeatureServer`, …).
    let segments: [String]
    /// The request's query items, for the format links.
    let query: [(String, String)]

    static func wanted(_ request: Request, _ parameters: RequestParameters) -> Bool {
        if let f = parameters["f"] { return f.lowercased() == "html" }
        return request.headers[.accept]?.lowercased().contains("text/html") ?? false
    }

    init(segments: [String], query: String?) {
        self.segments = segments
        self.query = (query ?? "").split(separator: "&").map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            return (RequestParameters.decode(parts[0]), parts.count > 1 ? RequestParameters.decode(parts[1]) : "")
        }
    }

    /// The relative path back to `/arcgis/rest/` from this page.
    var root: String { segments.count <= 1 ? "./" : String(repeating: "../", count: segments.count - 1) }

    /// A link to a resource below `/arcgis/rest/`, relative to this page.
    func href(_ path: [String], _ parameters: [(String, String)] = [("f", "html")]) -> String {
        root + path.map(Self.escapePath).joined(separator: "/") + Self.queryString(parameters)
    }

    static func escapePath(_ segment: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return segment.addingPercentEncoding(withAllowedCharacters: allowed) ?? segment
    }

    static func queryString(_ parameters: [(String, String)]) -> String {
        guard !parameters.isEmpty else { return "" }
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return "?" + parameters.map { "\($0.0)=\($0.1.addingPercentEncoding(withAllowedCharacters: allowed) ?? "")" }.joined(separator: "&")
    }

    var title: String {
        guard segments.count > 1 else { return "Services" }
        let last = segments[segments.count - 1]
        if ["FeatureServer", "MapServer", "VectorTileServer"].contains(last) { return "\(segments[segments.count - 2]) (\(last))" }
        return last
    }

    /// What every page has: title, crumbs, formats, the way home.
    func base(title: String? = nil, formats: Bool = true) -> [String: Any] {
        // Resources above this one; a service's name alone is no resource (no folders here).
        var crumbs: [[String: Any]] = []
        for i in 0..<max(segments.count - 1, 0) {
            let kinds = ["FeatureServer", "MapServer", "VectorTileServer"]
            if i + 1 < segments.count, kinds.contains(segments[i + 1]) { continue }
            let name = i == 0 ? "Services" : kinds.contains(segments[i]) ? "\(segments[i - 1]) (\(segments[i]))" : segments[i]
            crumbs.append(["name": name, "href": href(Array(segments[0...i]))])
        }
        var page: [String: Any] = ["title": title ?? self.title, "root": root, "crumbs": crumbs]
        if formats {
            let others = query.filter { $0.0.lowercased() != "f" }
            let last = segments.last.map(Self.escapePath) ?? "services"
            page["hasFormats"] = true
            page["formats"] = [
                ["name": "JSON", "href": last + Self.queryString(others + [("f", "json")])],
                ["name": "Pretty JSON", "href": last + Self.queryString(others + [("f", "pjson")])],
            ]
        }
        return page
    }

    func render(_ template: String, _ context: [String: Any]) -> String {
        DirectoryTemplates.library.render(context, withTemplate: template) ?? ""
    }

    /// The page of a resource from its JSON.
    func page(_ page: DirectoryPage, json: JSONValue) -> String {
        switch page {
        case .catalog: return catalog(json)
        case .featureServer(let drawn): return featureServer(json, drawn: drawn)
        case .layer: return layer(json)
        case .mapServer: return mapServer(json)
        case .operation(let description, _): return operation(description: description, form: nil, result: json)
        case .resource:
            var context = base()
            context["json"] = ResponseWriting.pretty(json)
            return render("resource", context)
        }
    }

    func error(_ failure: ServiceError) -> String {
        var context = base(title: "Error", formats: false)
        context["code"] = failure.status
        context["message"] = failure.message
        context["details"] = failure.details
        context["hasDetails"] = !failure.details.isEmpty
        return render("error", context)
    }

    private func catalog(_ json: JSONValue) -> String {
        var context = base()
        context["services"] = (json["services"]?.arrayValue ?? []).map { service -> [String: Any] in
            let name = service["name"]?.stringValue ?? "", type = service["type"]?.stringValue ?? ""
            return ["name": name, "type": type, "href": href(["services", name, type]), "unavailable": service["status"] == "unavailable"]
        }
        return render("catalog", context)
    }

    private static func text(_ value: JSONValue?) -> String {
        switch value {
        case .none, .null?: return ""
        case .string(let s)?: return s
        case let v?: return v.jsonString
        }
    }

    private static func extentText(_ e: JSONValue?) -> String {
        guard let e, let xmin = e["xmin"]?.doubleValue, let ymin = e["ymin"]?.doubleValue, let xmax = e["xmax"]?.doubleValue,
            let ymax = e["ymax"]?.doubleValue
        else { return "none" }
        return "\(xmin), \(ymin), \(xmax), \(ymax)"
    }

    private static func spatialReferenceText(_ sr: JSONValue?) -> String {
        guard let sr else { return "" }
        let latest = sr["latestWkid"]?.integerValue, wkid = sr["wkid"]?.integerValue
        return latest.map { "EPSG:\($0)" } ?? wkid.map { "EPSG:\($0)" } ?? sr.jsonString
    }

    private static func property(_ name: String, _ value: String, href: String? = nil) -> [String: Any] {
        var p: [String: Any] = ["name": name, "value": value]
        if let href { p["href"] = href }
        return p
    }

    private func featureServer(_ json: JSONValue, drawn: Bool) -> String {
        let service = Array(segments.dropLast())
        var context = base()
        context["properties"] = [
            Self.property("Description", Self.text(json["serviceDescription"])),
            Self.property("Capabilities", Self.text(json["capabilities"])),
            Self.property("Sync enabled", Self.text(json["syncEnabled"])),
            Self.property("Spatial reference", Self.spatialReferenceText(json["spatialReference"])),
            Self.property("Full extent", Self.extentText(json["fullExtent"])),
            Self.property("Max record count", Self.text(json["maxRecordCount"])),
            Self.property("Schema version", Self.text(json["schemaVersion"])),
        ]
        func entries(_ key: String) -> [[String: Any]] {
            (json[key]?.arrayValue ?? []).map { l in
                let id = l["id"]?.integerValue ?? 0
                return ["id": id, "name": Self.text(l["name"]), "kind": Self.text(l["geometryType"]), "href": href(segments + [String(id)])]
            }
        }
        context["layers"] = entries("layers")
        let tables = entries("tables")
        context["tables"] = tables
        context["hasTables"] = !tables.isEmpty
        var operations: [[String: Any]] = [["name": "All layers and tables", "href": href(segments + ["layers"])]]
        if json["syncEnabled"]?.boolValue == true {
            operations += [
                ["name": "Create Replica", "href": href(segments + ["createReplica"])],
                ["name": "Replicas", "href": href(segments + ["replicas"])],
            ]
        }
        if drawn { operations.append(["name": "Map service (drawn from these layers)", "href": href(service + ["MapServer"])]) }
        context["operations"] = operations
        return render("featureServer", context)
    }

    private func layer(_ json: JSONValue) -> String {
        var context = base(title: "\(Self.text(json["name"])) (\(segments.last ?? ""))")
        var properties = [
            Self.property("Type", Self.text(json["type"])),
            Self.property("Description", Self.text(json["description"])),
        ]
        if json["geometryType"] != nil {
            properties += [
                Self.property("Geometry type", Self.text(json["geometryType"])),
                Self.property("Spatial reference", Self.spatialReferenceText(json["spatialReference"])),
                Self.property("Extent", Self.extentText(json["extent"])),
                Self.property("Has Z / M", "\(Self.text(json["hasZ"])) / \(Self.text(json["hasM"]))"),
            ]
        }
        properties += [
            Self.property("Object id field", Self.text(json["objectIdField"])),
            Self.property("Global id field", Self.text(json["globalIdField"])),
            Self.property("Display field", Self.text(json["displayField"])),
            Self.property("Has attachments", Self.text(json["hasAttachments"])),
            Self.property("Capabilities", Self.text(json["capabilities"])),
            Self.property("Max record count", Self.text(json["maxRecordCount"])),
            Self.property("Supported query formats", Self.text(json["supportedQueryFormats"])),
        ]
        context["properties"] = properties
        var domains: [[String: Any]] = []
        context["fields"] = (json["fields"]?.arrayValue ?? []).map { f -> [String: Any] in
            let domain = f["domain"]
            if let domain, domain != .null {
                var d: [String: Any] = ["name": Self.text(domain["name"]), "type": Self.text(domain["type"])]
                let codes = (domain["codedValues"]?.arrayValue ?? []).map { ["code": Self.text($0["code"]), "name": Self.text($0["name"])] }
                d["codes"] = codes
                d["hasCodes"] = !codes.isEmpty
                if let range = domain["range"]?.arrayValue, range.count == 2 { d["range"] = "\(Self.text(range[0])) to \(Self.text(range[1]))" }
                if !domains.contains(where: { ($0["name"] as? String) == (d["name"] as? String) }) { domains.append(d) }
            }
            return [
                "name": Self.text(f["name"]), "type": Self.text(f["type"]), "alias": Self.text(f["alias"]), "length": Self.text(f["length"]),
                "nullable": Self.text(f["nullable"]), "editable": Self.text(f["editable"]), "defaultValue": Self.text(f["defaultValue"]),
                "domain": Self.text(domain?["name"]),
            ]
        }
        context["domains"] = domains
        context["hasDomains"] = !domains.isEmpty
        var operations: [[String: Any]] = [["name": "Query", "href": href(segments + ["query"])]]
        if Self.text(json["capabilities"]).split(separator: ",").contains(where: { ["Create", "Update", "Delete", "Editing"].contains(String($0)) }) {
            operations.append(["name": "Apply Edits", "href": href(segments + ["applyEdits"])])
        }
        context["operations"] = operations
        return render("layer", context)
    }

    private func mapServer(_ json: JSONValue) -> String {
        var context = base()
        let tileInfo = json["tileInfo"]
        let lods = tileInfo?["lods"]?.arrayValue ?? []
        context["properties"] = [
            Self.property("Map name", Self.text(json["mapName"] ?? json["name"])),
            Self.property("Capabilities", Self.text(json["capabilities"])),
            Self.property("Spatial reference", Self.spatialReferenceText(json["spatialReference"])),
            Self.property("Full extent", Self.extentText(json["fullExtent"])),
            Self.property("Tile format", Self.text(tileInfo?["format"])),
            Self.property("Tile size", "\(Self.text(tileInfo?["cols"])) × \(Self.text(tileInfo?["rows"]))"),
            Self.property("Levels", "\(Self.text(json["minLOD"]))–\(Self.text(json["maxLOD"]))"),
        ]
        let minLevel = json["minLOD"]?.integerValue ?? 0, maxLevel = json["maxLOD"]?.integerValue ?? 0
        context["lods"] = lods.filter { l in (l["level"]?.integerValue).map { (minLevel...max(minLevel, maxLevel)).contains($0) } ?? false }.map { l in
            ["level": Self.text(l["level"]), "resolution": Self.text(l["resolution"]), "scale": Self.text(l["scale"])]
        }
        context["tiles"] = "\(Self.escapePath(segments.last ?? "MapServer"))/tile"
        context["minLevel"] = minLevel
        context["maxLevel"] = maxLevel
        let extent = json["initialExtent"] ?? json["fullExtent"]
        if let e = extent, let a = e["xmin"]?.doubleValue, let b = e["ymin"]?.doubleValue, let c = e["xmax"]?.doubleValue, let d = e["ymax"]?.doubleValue {
            context["extent"] = "\(a),\(b),\(c),\(d)"
        } else {
            context["extent"] = ""
        }
        let origin = tileInfo?["origin"]
        context["origin"] = "\(origin?["x"]?.doubleValue ?? -20037508.342787),\(origin?["y"]?.doubleValue ?? 20037508.342787)"
        let level0 = lods.first { $0["level"]?.integerValue == 0 }
        context["resolution0"] = level0?["resolution"]?.doubleValue ?? 156543.03392804097
        context["tileSize"] = tileInfo?["rows"]?.integerValue ?? 256
        // A VectorTileServer's tiles are drawn by the page's script from the tiles themselves.
        context["vector"] = segments.last == "VectorTileServer" ? "1" : ""
        context["script"] = true
        return render("mapServer", context)
    }

    /// An operation's page: its form (prefilled from the request), or the answer it gave.
    func operation(title: String? = nil, description: String, form: DirectoryForm?, result: JSONValue?) -> String {
        var context = base(title: title, formats: result != nil)
        context["description"] = description
        if let form {
            context["form"] = true
            context.merge(formContext(form)) { _, new in new }
        }
        if let result { context["result"] = ResponseWriting.pretty(result) }
        return render("operation", context)
    }

    func formContext(_ form: DirectoryForm) -> [String: Any] {
        [
            // A GET form's fields replace the action's query; a POST keeps it, so its errors are pages too.
            "method": form.method, "action": Self.escapePath(segments.last ?? "") + (form.method == "post" ? "?f=html" : ""), "submit": form.submit,
            "fields": form.fields.map { field -> [String: Any] in
                var given = query.last { $0.0.lowercased() == field.name.lowercased() }?.1 ?? field.value
                if case .password = field.kind { given = "" }
                var f: [String: Any] = ["name": field.name, "label": field.label, "value": given]
                if let help = field.help { f["help"] = help }
                switch field.kind {
                case .line: f["line"] = true
                case .password: f["password"] = true
                case .area: f["area"] = true
                case .choice(let values):
                    f["select"] = true
                    f["choices"] = values.map { ["value": $0, "selected": $0 == given] as [String: Any] }
                }
                return f
            },
        ]
    }

    /// The query page: the form, and when the request asked something, the first features as a
    /// table and their JSON.
    func query(title: String, form: DirectoryForm, ran: Bool, count: String?, columns: [String], rows: [[String]], json: JSONValue?) -> String {
        var context = base(title: title, formats: ran)
        context.merge(formContext(form)) { _, new in new }
        if ran {
            context["ran"] = true
            if let count { context["count"] = count }
            context["columns"] = columns
            context["rows"] = rows.map { ["cells": $0] }
            context["hasRows"] = !rows.isEmpty
            context["json"] = json.map { ResponseWriting.pretty($0) } ?? ""
        }
        return render("query", context)
    }
}

extension ResponseWriting {
    /// The security headers of every directory page: nothing may load from elsewhere (the page's
    /// script fetches vector tiles from this server only), no inline script runs, no other site
    /// frames the page.
    static let directoryPolicy =
        "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

    func html(_ text: String, status: HTTPResponse.Status = .ok) -> Response {
        var response = bytes(ByteBuffer(string: text), status: status, contentType: "text/html; charset=utf-8")
        response.headers[HTTPField.Name("Content-Security-Policy")!] = Self.directoryPolicy
        response.headers[HTTPField.Name("X-Content-Type-Options")!] = "nosniff"
        response.headers[.cacheControl] = "no-store"
        return response
    }
}
