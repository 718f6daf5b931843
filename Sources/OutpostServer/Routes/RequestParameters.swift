import Foundation
import Hummingbird
import NIOCore
import OutpostCore
import OutpostGeoprocessing
import OutpostREST

/// The parameters of an ArcGIS REST request: the query string merged with a form-encoded POST
/// body (clients use both), with typed accessors that fail as a 400 naming the parameter.
struct RequestParameters: Sendable {
    private var values: [String: String] = [:]
    /// A body kept as it came: JSON, binary upload batches and multipart forms.
    var rawBody: ByteBuffer?
    /// A `multipart/form-data` body, read once where the request came in: its text fields are
    /// among the parameters already, its files are read from here (addAttachment, GP uploads).
    var multipart: MultipartForm?

    /// Takes a `multipart/form-data` body (the ArcGIS API for Python posts every operation that
    /// way): its text fields become parameters, a field given twice keeping its last value as in a
    /// query, and the form is kept for the routes that read its files.
    mutating func add(multipart form: MultipartForm) {
        for (name, value) in form.fields { values[name] = value }
        multipart = form
    }

    /// The part named `name` of the request's multipart body, or a 400 naming it when the request
    /// was not multipart or has no such part.
    func filePart(named name: String) throws -> MultipartForm.Part {
        guard let multipart else {
            throw ServiceError.badParameter(name, "send the file as multipart/form-data in a part named \"\(name)\"")
        }
        guard let part = multipart.part(named: name) else {
            throw ServiceError.badParameter(name, "the body has no part named \"\(name)\"")
        }
        return part
    }

    init(query: String?, formBody: String?) {
        for source in [query, formBody] {
            guard let source, !source.isEmpty else { continue }
            for pair in source.split(separator: "&") {
                let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                let key = Self.decode(parts[0])
                values[key] = parts.count > 1 ? Self.decode(parts[1]) : ""
            }
        }
    }

    /// The parameters as a JSON object to keep in a job's record, so another host can run the
    /// job again: every text parameter but the caller's token (a credential is not stored).
    var recordable: JSONValue {
        .object(values.filter { $0.key.lowercased() != "token" }.mapValues { .string($0) })
    }

    /// Parameters as ``recordable`` kept them; nil when `recorded` is not such an object.
    init?(recorded: JSONValue?) {
        guard let object = recorded?.objectValue else { return nil }
        for (key, value) in object {
            guard let text = value.stringValue else { return nil }
            values[key] = text
        }
    }

    /// The names of every parameter given (empty values too).
    var names: [String] { Array(values.keys) }

    static func decode(_ s: Substring) -> String {
        String(s).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(s)
    }

    /// A parameter, case-insensitively (ArcGIS is lenient about `outfields` vs `outFields`); an
    /// empty value counts as absent.
    subscript(_ name: String) -> String? {
        let v = values[name] ?? values.first(where: { $0.key.lowercased() == name.lowercased() })?.value
        guard let v, !v.trimmingCharacters(in: .whitespaces).isEmpty else { return nil }
        return v
    }

    func bool(_ name: String, default value: Bool) throws -> Bool {
        guard let text = self[name] else { return value }
        switch text.lowercased() {
        case "true", "1", "yes": return true
        case "false", "0", "no": return false
        default: throw ServiceError.badParameter(name, "expected true or false, got \"\(text.prefix(40))\"")
        }
    }

    func int(_ name: String, range: ClosedRange<Int> = 0...Int.max) throws -> Int? {
        guard let text = self[name] else { return nil }
        guard let v = Int(text.trimmingCharacters(in: .whitespaces)), range.contains(v) else {
            throw ServiceError.badParameter(name, "expected a whole number in \(range.lowerBound)…\(range.upperBound == Int.max ? "" : String(range.upperBound)), got \"\(text.prefix(40))\"")
        }
        return v
    }

    func json(_ name: String) throws -> JSONValue? {
        guard let text = self[name] else { return nil }
        do {
            return try JSONValue.parse(text)
        } catch {
            throw ServiceError.badParameter(name, "not valid JSON")
        }
    }

    /// `4326`, `{"wkid": 102100}`, or absent.
    func spatialReference(_ name: String) throws -> SpatialReference? {
        guard let text = self[name] else { return nil }
        if let wkid = Int(text.trimmingCharacters(in: .whitespaces)) { return SpatialReference(wkid: wkid) }
        guard let json = try? JSONValue.parse(text), let sr = EsriJSON.decodeSpatialReference(json) else {
            throw ServiceError.badParameter(name, "expected a wkid or {\"wkid\": …}")
        }
        return sr
    }

    /// ``spatialReference(_:)``, checked to be one PROJ knows: an unknown wkid is a 400 naming
    /// the parameter, not a failure after the work.
    func knownSpatialReference(_ name: String) throws -> SpatialReference? {
        guard let sr = try spatialReference(name) else { return nil }
        do {
            _ = try CoordinateSystemInfo(sr)
        } catch {
            throw ServiceError.badParameter(name, "PROJ does not know the spatial reference \(sr.wkid)")
        }
        return sr
    }

    /// A comma-separated list of integers (`objectIds=1,2,3` or a JSON array).
    func integers(_ name: String, limit: Int = 100_000) throws -> [Int64]? {
        guard let text = self[name] else { return nil }
        var items = text.trimmingCharacters(in: .whitespaces)
        if items.hasPrefix("["), items.hasSuffix("]") { items = String(items.dropFirst().dropLast()) }
        let parts = items.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        guard parts.count <= limit else { throw ServiceError.badParameter(name, "more than \(limit) values") }
        return try parts.map { part in
            guard let v = Int64(part) else { throw ServiceError.badParameter(name, "\"\(part.prefix(40))\" is not an integer id") }
            return v
        }
    }

    /// `f`: json (default), pjson, or the formats an endpoint also allows.
    /// `f`: json (the default), pjson, html (a Services Directory page) or one of `extra`.
    func format(allowing extra: Set<String> = []) throws -> String {
        let f = (self["f"] ?? "json").lowercased()
        guard f == "json" || f == "pjson" || f == "html" || extra.contains(f) else {
            throw ServiceError.badParameter("f", "supported formats are json, pjson, html\(extra.isEmpty ? "" : ", " + extra.sorted().joined(separator: ", "))")
        }
        return f
    }

    /// `geometry` (Esri JSON, `x,y` or `xmin,ymin,xmax,ymax`) with `geometryType` and `inSR`,
    /// projected to `sr`; nil when absent.
    func filterGeometry(in sr: SpatialReference) throws -> Geometry? {
        guard let text = self["geometry"] else { return nil }
        let type = self["geometryType"] ?? "esriGeometryEnvelope"
        var geometry: Geometry
        var embeddedSR: SpatialReference?
        let numbers = text.split(separator: ",").compactMap { Double($0.trimmingCharacters(in: .whitespaces)) }
        do {
            if !text.contains("{"), numbers.count == 4, type == "esriGeometryEnvelope" {
                let e = Envelope(xmin: numbers[0], ymin: numbers[1], xmax: numbers[2], ymax: numbers[3])
                guard e.isValid else { throw ServiceError.badParameter("geometry", "xmin must not exceed xmax, nor ymin ymax") }
                geometry = .polygon(e.polygon)
            } else if !text.contains("{"), numbers.count == 2, type == "esriGeometryPoint" {
                geometry = .point(try Point(x: numbers[0], y: numbers[1]))
            } else {
                guard let json = try? JSONValue.parse(text) else { throw ServiceError.badParameter("geometry", "not valid JSON or x,y / xmin,ymin,xmax,ymax") }
                embeddedSR = EsriJSON.spatialReference(of: json)
                switch type {
                case "esriGeometryEnvelope": geometry = .polygon(try EsriJSON.decodeEnvelope(json).polygon)
                case "esriGeometryPoint", "esriGeometryMultipoint", "esriGeometryPolyline", "esriGeometryPolygon":
                    geometry = try EsriJSON.decodeGeometry(json)
                default: throw ServiceError.badParameter("geometryType", "\"\(type.prefix(40))\" is not supported")
                }
            }
        } catch let error as GeometryError {
            throw ServiceError.badParameter("geometry", error.message)
        }
        let given = try spatialReference("inSR")
        let inSR = given ?? embeddedSR ?? sr
        do {
            return try WebMercator.convert(geometry, from: inSR, to: sr)
        } catch {
            // The system at fault is inSR's, or else the one the geometry's JSON names.
            throw ServiceError.badParameter(given == nil ? "geometry" : "inSR", "cannot project from \(inSR) to \(sr)")
        }
    }
}

extension MultipartForm {
    /// A request's multipart body read, a body that cannot be read refused as a 400 naming
    /// `parameter`.
    static func read(_ body: ByteBuffer, boundary: String, parameter: String) throws -> MultipartForm {
        do {
            return try MultipartForm(parsing: body, boundary: boundary)
        } catch let error as MultipartFormError {
            throw ServiceError.badParameter(parameter, error.description)
        }
    }
}
