import Foundation
import Hummingbird
import OutpostCore
import OutpostSQLiteService
import OutpostTiles
import OutpostVectorTiles

/// `…/<name>/MapServer/…`: a tile cache's map service, a feature service's layers drawn (tiles
/// kept per generation), or a vector tile file drawn by its style, with the dynamic operations
/// and tile export jobs all answer;
/// and a geoprocessing service's result maps (`…/MapServer/jobs/<job id>`).
extension FeatureServerResponder {
    /// The parts of one map service that answer a request.
    struct MapService {
        let jobs: MapServerJobs
        let operations: MapServerOperations
        let tiles: Tiles

        enum Tiles {
            case cache(MapServerRoutes)
            case drawn(RenderedMapServerRoutes)
            case vector(VectorMapServerRoutes)
        }
    }

    func mapServerTable() -> RouteTable {
        var table = RouteTable()
        let responder = self
        func on(_ path: RouterPath, _ answer: @escaping @Sendable (MapService, RoutedRequest) async throws -> Response) {
            table.on(path, access: .granted(.query)) { call in try await answer(try await responder.mapService(call), call) }
        }
        /// A job's route: a geoprocessing job's result map when the service is a geoprocessing
        /// service's and the id a job's, else the map service's tile export job.
        func onJob(_ path: RouterPath, result: @escaping @Sendable (GPResultMap, String, RoutedRequest) async throws -> Response,
                   export: @escaping @Sendable (MapServerJobs, String, RoutedRequest) async throws -> Response) {
            table.on(path, access: .granted(.query)) { call in
                let id = try call.value("job")
                if let map = try responder.resultMap(call, job: id) { return try await result(map, id, call) }
                return try await export(try await responder.mapService(call).jobs, id, call)
            }
        }
        on("") { map, _ in
            switch map.tiles {
            case .cache(let routes): try routes.info()
            case .drawn(let routes): try await routes.info()
            case .vector(let routes): try await routes.info()
            }
        }
        on("tile/:level/:row/:col") { map, call in
            let address = try ["level", "row", "col"].map { try call.value($0) }
            return switch map.tiles {
            case .cache(let routes): try routes.tile(address)
            case .drawn(let routes): try await routes.tile(address)
            case .vector(let routes): try await routes.tile(address)
            }
        }
        on("layers") { map, _ in try await map.operations.layerList() }
        on(":layer") { map, call in
            let text = try call.value("layer")
            guard let id = Int(text) else { throw ServiceError.notFound("MapServer/\(text)") }
            return try await map.operations.layer(id)
        }
        on("export") { map, _ in try await map.operations.export() }
        on("identify") { map, _ in try await map.operations.identify() }
        on("find") { map, _ in try await map.operations.find() }
        on("legend") { map, _ in try map.operations.legendAnswer() }
        on("exportfiles/:file") { map, call in try map.operations.exportFile(try call.value("file")) }
        on("exportTiles") { map, _ in try await map.jobs.exportTiles(estimateOnly: false) }
        on("estimateExportTilesSize") { map, _ in try await map.jobs.exportTiles(estimateOnly: true) }
        on("tilefiles/:file") { map, call in try map.jobs.tileFile(try call.value("file")) }
        onJob("jobs/:job", result: { map, id, _ in try await map.info(id) }, export: { jobs, id, _ in try await jobs.status(id) })
        onJob("jobs/:job/status", result: { map, id, call in try await map.notFound(id, ["status"]) }, export: { jobs, id, _ in try await jobs.status(id) })
        onJob("jobs/:job/cancel", result: { map, id, call in try await map.notFound(id, ["cancel"]) }, export: { jobs, id, _ in try await jobs.cancel(id) })
        onJob("jobs/:job/export", result: { map, id, _ in try await map.export(id) }, export: { _, _, call in try await responder.mapServiceMiss(call) })
        onJob("jobs/:job/layers", result: { map, id, _ in try await map.layerList(id) }, export: { _, _, call in try await responder.mapServiceMiss(call) })
        onJob("jobs/:job/**", result: { map, id, call in
            let rest = call.rest
            guard rest.count == 1, let index = Int(rest[0]) else { try await map.notFound(id, rest) }
            return try await map.layer(id, index)
        }, export: { _, _, call in try await responder.mapServiceMiss(call) })
        return table
    }

    /// A path below a map service that none of its routes takes: 404 (once the service is
    /// known to be served).
    func mapServiceMiss(_ call: RoutedRequest) async throws -> Response {
        _ = try await mapService(call)
        throw ServiceError.notFound("MapServer/\(call.segments.dropFirst(5).joined(separator: "/"))")
    }

    /// The result map of a geoprocessing service's job, when the path names one.
    func resultMap(_ call: RoutedRequest, job: String) throws -> GPResultMap? {
        guard job.hasPrefix("j"), let gp = services.geoprocessingService(named: try call.service) else { return nil }
        var writing = call.writing
        if let view = call.directoryView() { writing.directory = (view, .resource) }
        return GPResultMap(service: gp, parameters: call.parameters, writing: writing, mapURL: PublicURL(call.request, configuration: configuration).service(gp.name, "MapServer"))
    }

    /// The tiles of map service `name`, as ``mapService(_:)`` draws or reads them; nil when no
    /// such service is served (an export job run again here).
    func tileSource(named name: String) async throws -> (any TileSource)? {
        if let cache = try await services.tileCache(named: name) { return TileCacheSource(cache: cache) }
        if let archive = services.vectorTiles(named: name) { return try await sync.vectorDrawing(archive) }
        guard let backend = services.backend(named: name) as? SQLiteServiceBackend else { return nil }
        return GeodatabaseRenderSource(geodatabase: backend.geodatabase, maxLevel: RenderedMapServerRoutes.maxLevel)
    }

    /// The map service the path names: its tile cache's, a vector tile file's drawn, or its
    /// feature service's layers drawn.
    func mapService(_ call: RoutedRequest) async throws -> MapService {
        let name = try call.service
        let route = Array(call.segments.dropFirst(5))
        var writing = call.writing
        if let view = call.directoryView() { writing.directory = (view, route.isEmpty ? .mapServer : .resource) }
        let mapServerURL = PublicURL(call.request, configuration: configuration).service(name, "MapServer")
        let parameters = call.parameters
        if let cache = try await services.tileCache(named: name) {
            let operations = MapServerOperations(source: .cache(cache, name: name), parameters: parameters, writing: writing, files: sync.files, mapServerURL: mapServerURL)
            return MapService(
                jobs: MapServerJobs(source: TileCacheSource(cache: cache), services: sync, parameters: parameters, writing: writing, serviceName: name, mapServerURL: mapServerURL),
                operations: operations,
                tiles: .cache(MapServerRoutes(cache: cache, name: name, parameters: parameters, writing: writing, metrics: metrics,
                    layers: route.isEmpty ? try await operations.layers() : []  // the service's description only; not per tile
                )))
        }
        // A vector basemap, drawn by its style.
        if let archive = services.vectorTiles(named: name) {
            let source = try await sync.vectorDrawing(archive)
            let operations = MapServerOperations(source: .vector(source), parameters: parameters, writing: writing, files: sync.files, mapServerURL: mapServerURL)
            return MapService(
                jobs: MapServerJobs(source: source, services: sync, parameters: parameters, writing: writing, serviceName: name, mapServerURL: mapServerURL),
                operations: operations,
                tiles: .vector(VectorMapServerRoutes(source: source, parameters: parameters, writing: writing, metrics: metrics,
                    layers: route.isEmpty ? try await operations.layers() : [])))
        }
        // A feature service's layers, drawn as tiles on request (kept on disk per generation).
        guard let backend = services.backend(named: name) as? SQLiteServiceBackend else {
            throw services.notServed(name, types: ["MapServer", "FeatureServer"], described: "map service \(name)")
        }
        let source = GeodatabaseRenderSource(geodatabase: backend.geodatabase, maxLevel: RenderedMapServerRoutes.maxLevel)
        let operations = MapServerOperations(source: .drawn(backend), parameters: parameters, writing: writing, files: sync.files, mapServerURL: mapServerURL)
        return MapService(
            jobs: MapServerJobs(source: source, services: sync, parameters: parameters, writing: writing, serviceName: name, mapServerURL: mapServerURL),
            operations: operations,
            tiles: .drawn(RenderedMapServerRoutes(
                backend: backend, directory: sync.renderedTiles, parameters: parameters, writing: writing, metrics: metrics,
                layers: route.isEmpty ? try await operations.layers() : [])))
    }
}
