import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import OutpostCore
import OutpostLocator
import OutpostRouting
import OutpostGeoprocessing
import OutpostProtocol
import OutpostStorage
import OutpostTiles

/// Map definitions (`/arcgis/rest/maps`) and their preplanned map areas: who may read a map, and
/// the listing and packages of its areas.
extension FeatureServerResponder {
    /// `/arcgis/rest/maps` (the names) and `/arcgis/rest/maps/<name>.json` (a map definition
    /// with its service URLs made absolute for the address the caller used).
    func mapDefinitions(_ call: RoutedRequest, _ rest: [String]) throws -> Response {
        let (request, parameters, caller) = (call.request, call.parameters, call.caller)
        _ = try parameters.format()
        var writing = call.writing
        // In a browser, the Services Directory's page of the JSON.
        if DirectoryView.wanted(request, parameters) { writing.directory = (DirectoryView(segments: ["maps"] + rest, query: request.uri.query), .resource) }
        let base = PublicURL(request, configuration: configuration).base
        if rest.isEmpty {
            // As the catalog: what the caller may see (a map whose services it may all query).
            let visible = services.mapNames.filter { name in
                guard let file = services.mapFile(named: name), let map = try? Self.mapDefinition(file) else { return false }
                return Self.mayRead(map, caller)
            }
            return writing.json([
                "maps": .array(visible.map { ["name": .string($0), "url": .string("\(base)/arcgis/rest/maps/\($0).json")] })
            ])
        }
        if rest.count >= 2, rest[1] == "areas", let map = services.map(named: rest[0]) {
            return try preplannedAreas(map, Array(rest.dropFirst(2)), request: request, caller: caller, writing: writing, base: base)
        }
        guard rest.count == 1, rest[0].lowercased().hasSuffix(".json"), let file = services.mapFile(named: String(rest[0].dropLast(5))) else {
            throw services.notServed(String(rest[0].prefix { $0 != "." }), types: ["map"], described: "map \(rest.joined(separator: "/"))")
        }
        let map = try Self.mapDefinition(file)
        try Self.requireRead(map, caller)
        let resolved = map.resolvingURLs(against: "\(base)/arcgis/rest/services/")
        return writing.json(try JSONValue.parse(try resolved.encoded()))
    }

    /// `…/services/<name>/FeatureServer/<id>` (absolute or relative) → `<name>`.
    static func featureServiceName(_ url: String) -> String? {
        let parts = url.split(separator: "/").map(String.init)
        guard let i = parts.lastIndex(of: "FeatureServer"), i >= 1 else { return nil }
        return parts[i - 1]
    }

    /// Whether `caller` may read a map: it may query every feature service the map names.
    static func mayRead(_ map: MapDefinition, _ caller: Caller) -> Bool {
        (try? requireRead(map, caller)) != nil
    }

    /// Refuses a caller that may not query one of the map's feature services (403; 499 for no
    /// token at all).
    static func requireRead(_ map: MapDefinition, _ caller: Caller) throws {
        if case .anonymous = caller { throw Security.tokenRequired }
        for service in Set(map.operationalLayers.compactMap { featureServiceName($0.url) }).sorted() { try Security.require(.query, of: caller, on: service) }
    }

    static func mapDefinition(_ file: URL) throws -> MapDefinition {
        do {
            return try MapDefinition.decode(try Data(contentsOf: file))
        } catch {
            throw ServiceError(500, "the map definition \(file.lastPathComponent) cannot be read: \(error)")
        }
    }

    /// A map's preplanned areas (`…/maps/<name>/areas`), one area's package (`…/areas/<id>`: its
    /// files and sizes, once `outpost offline prepare` has made it in `<name>.preplanned/<id>/`
    /// beside the map definition, or a site published it with the map), and the package's files
    /// (`…/areas/<id>/files/<path>`, with Range so a broken download continues).
    func preplannedAreas(
        _ served: ServedMap, _ route: [String], request: Request, caller: Caller, writing: ResponseWriting, base: String
    ) throws -> Response {
        // A map, its areas and their packages (the data of the map's feature services) are for
        // callers who may query every one of them.
        let map = try Self.mapDefinition(served.file)
        try Self.requireRead(map, caller)
        let (name, packages) = (served.name, served.packages)
        func describe(_ area: MapDefinition.PreplannedArea, files: Bool) throws -> JSONValue {
            let listed = PreplannedPackage.files(in: packages.appendingPathComponent(area.id))
            var entry: [String: JSONValue] = [
                "id": .string(area.id), "title": .string(area.title), "extent": try JSONValue.parse(try JSONEncoder().encode(area.extent)),
                "ready": .bool(listed != nil), "url": .string("\(base)/arcgis/rest/maps/\(name)/areas/\(area.id)"),
                "size": .integer(listed?.reduce(0) { $0 + $1.size } ?? 0),
            ]
            if let minScale = area.minScale { entry["minScale"] = .number(minScale) }
            if let maxScale = area.maxScale { entry["maxScale"] = .number(maxScale) }
            if files { entry["files"] = .array((listed ?? []).map { ["path": .string($0.path), "size": .integer($0.size)] }) }
            return .object(entry)
        }
        let areas = map.preplannedAreas ?? []
        if route.isEmpty { return writing.json(["areas": .array(try areas.map { try describe($0, files: false) })]) }
        guard let area = areas.first(where: { $0.id == route[0] }) else { throw ServiceError.notFound("preplanned area \(route[0]) of map \(name)") }
        if route.count == 1 { return writing.json(try describe(area, files: true)) }
        let path = route.dropFirst(2).joined(separator: "/")
        let folder = packages.appendingPathComponent(area.id)
        guard route[1] == "files", let listed = PreplannedPackage.files(in: folder), listed.contains(where: { $0.path == path }) else {
            throw ServiceError.notFound("file \(path) of preplanned area \(area.id)")
        }
        return try ReplicaRoutes.streamFile(folder.appendingPathComponent(path), contentType: "application/octet-stream", removeAfter: false, range: request.headers[.range], ifRange: request.headers[.ifRange])
    }

}
