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
import OutpostSQLiteService
import OutpostStorage
import OutpostSyncService
import OutpostTiles

/// Answers every request: the ArcGIS-REST-shaped catalog, FeatureServer and layer resources,
/// query, applyEdits and attachments, plus /health. What every request goes through is
/// middleware in front of the routes (`ServerMiddleware.swift`): its id, metrics and log line,
/// cache headers, the watch on its client, the ArcGIS error answer (every miss gets the ArcGIS
/// error JSON with the right status) and the drain.
public struct FeatureServerResponder: HTTPResponder {
    /// The request context the server's routes use.
    public typealias Context = OutpostRequestContext

    let services: ServiceDirectory
    let configuration: ServerConfiguration
    let sync: SyncServices
    let security: Security
    let metrics: ServerMetrics
    let drain: DrainState
    /// Checksums replicas asked for with their last upload batch (see ``ChecksumsAhead``).
    let checksumsAhead = ChecksumsAhead()
    /// Feed pages made while the page before them was answered (see ``PagesAhead``).
    let pagesAhead = PagesAhead()
    /// The middleware and the routes behind it, made once the responder is.
    private let chain = Chain()

    /// A responder for `services`, configured by `configuration`.
    public init(services: ServiceDirectory, configuration: ServerConfiguration) {
        self.init(services: services, configuration: configuration, drain: DrainState())
    }

    init(services: ServiceDirectory, configuration: ServerConfiguration, drain: DrainState) {
        self.services = services
        self.configuration = configuration
        self.drain = drain
        metrics = ServerMetrics()
        sync = SyncServices(configuration: configuration, metrics: metrics)
        security = Security(configuration: configuration)
        chain.responder = router().buildResponder()
    }

    /// Holds the built router (a class: it is made after the responder's other fields).
    private final class Chain: @unchecked Sendable {
        var responder: RouterResponder<Context>?
    }

    /// The server's router: the middleware, outermost first, then every path to ``dispatch``.
    private func router() -> Router<Context> {
        let router = Router(context: Context.self)
        router.add(middleware: RequestIDMiddleware())
        router.add(middleware: RequestMetricsMiddleware(metrics: metrics))
        router.add(middleware: CacheControlMiddleware(secured: security.isEnabled))
        router.add(middleware: ClientDepartureMiddleware())
        router.add(middleware: ArcGISErrorMiddleware())
        router.add(middleware: DrainMiddleware(drain: drain))
        let routes = Routes(responder: self)
        for method: HTTPRequest.Method in [.get, .post, .put, .delete, .patch, .head, .options] {
            router.on("**", method: method, responder: routes)
        }
        return router
    }

    /// The routes behind the middleware.
    private struct Routes: HTTPResponder {
        let responder: FeatureServerResponder

        func respond(to request: Request, context: Context) async throws -> Response {
            var request = request
            return try await responder.dispatch(&request, remote: context.remoteAddress)
        }
    }

    /// Every request, through the middleware to its route.
    public func respond(to request: Request, context: Context) async throws -> Response {
        try await chain.responder!.respond(to: request, context: context)
    }

    /// The request's path segments, percent-decoded.
    static func segments(_ request: Request) -> [String] {
        request.uri.path.split(separator: "/").map { $0.removingPercentEncoding ?? String($0) }
    }

    /// Whether the drain lets a request through, noting the syncs under way (see ``DrainState``):
    /// before it, everything; during it, `/health` and `/ready`, the requests of a sync that had
    /// begun (and the service's attachment and blob requests while one of its syncs is under
    /// way), and the status and results of jobs that were submitted before.
    static func admittedByDrain(_ segments: [String], method: HTTPRequest.Method, drain: DrainState) -> Bool {
        if segments == ["health"] || segments == ["ready"] { return true }
        if segments.count >= 5, segments.starts(with: NativeSyncRoute.servicePrefix) {
            let (service, route) = (segments[3], Array(segments.dropFirst(4)))
            if route.count >= 2, route[0] == "replicas" {
                let part = route.count >= 3 ? route[2] : ""
                let step: DrainState.SyncStep =
                    switch part {
                    case "batches" where method == .put: .uploads
                    case "changes", "snapshot": .downloads
                    case "checksums": .verifies
                    default: .continues
                    }
                return drain.admits(service: service, replica: route[1], step: step)
            }
            if ["attachments", "blobs", "schema"].contains(route[0]) { return drain.admits(service: service, replica: nil, step: .continues) }
        }
        guard drain.isDraining else { return true }
        // …/FeatureServer/jobs|replicafiles/… and …/GPServer/<task>/jobs/…: work begun before.
        if segments.count >= 6, segments.starts(with: ["arcgis", "rest", "services"]) {
            if segments[4] == "FeatureServer", ["jobs", "replicafiles"].contains(segments[5]) { return true }
            if segments[4] == "GPServer", segments.count >= 7, segments[6] == "jobs" { return true }
        }
        return false
    }

    static func errorJSON(_ e: ServiceError) -> JSONValue {
        ["error": ["code": .integer(Int64(e.code ?? e.status)), "message": .string(e.message), "details": .array(e.details.map { .string($0) })]]
    }

    private func dispatch(_ request: inout Request, remote: SocketAddress?) async throws -> Response {
        let path = request.uri.path
        let segments = path.split(separator: "/").map { $0.removingPercentEncoding ?? String($0) }
        if segments == ["health"] {
            return ResponseWriting(request: request).json(["status": "ok", "services": .integer(Int64(services.names.count))])
        }
        if segments == ["ready"] {
            // A draining server takes no new work: a load balancer sends it elsewhere.
            if drain.isDraining {
                var response = ResponseWriting(request: request).json(["status": "draining"], status: .serviceUnavailable)
                response.headers[.retryAfter] = "5"
                return response
            }
            // Open to load balancers' probes; which service failed, and why, only to an admin
            // (or on a server without tokens).
            let parameters = try await readParameters(&request)
            let caller = try security.caller(request, parameters, remote: remote, anonymousAllowed: true)
            let detailed = caller.permissions(on: nil).contains(.admin)
            // Ready when every service's store answers (a PostgreSQL server reachable, say).
            for name in services.names {
                guard let backend = services.backend(named: name) else { continue }
                do {
                    _ = try await backend.generation()
                } catch {
                    var answer: [String: JSONValue] = ["status": "unavailable"]
                    if detailed { (answer["service"], answer["reason"]) = (.string(name), .string(ServiceError.from(error).message)) }
                    return ResponseWriting(request: request).json(.object(answer), status: .serviceUnavailable)
                }
            }
            // Services whose files did not open: the server still serves the others (ready to
            // a load balancer), and says which to an admin.
            guard !services.unavailable.isEmpty else {
                return ResponseWriting(request: request).json(["status": "ready", "services": .integer(Int64(services.names.count))])
            }
            var answer: [String: JSONValue] = [
                "status": "degraded", "services": .integer(Int64(services.names.count)), "unavailable": .integer(Int64(services.unavailable.count)),
            ]
            if detailed {
                answer["unavailableServices"] = .array(services.unavailable.map {
                    ["name": .string($0.name), "type": .string($0.type), "file": .string($0.file), "reason": .string($0.reason)]
                })
            }
            return ResponseWriting(request: request).json(.object(answer))
        }
        if segments == ["metrics"] {
            // Request counts by route and status describe the server's use: an admin's, unless
            // the operator opened them to a scraper (`--public-metrics`).
            if security.isEnabled, !configuration.publicMetrics {
                let parameters = try await readParameters(&request)
                try Security.require(.admin, of: try security.caller(request, parameters, remote: remote), on: nil)
            }
            var response = ResponseWriting(request: request).bytes(ByteBuffer(string: metrics.text()), contentType: "text/plain; version=0.0.4; charset=utf-8")
            response.headers[.cacheControl] = "no-store"
            return response
        }
        // A served locator's or network's file, for offline maps: /outpost/v1/{locators|networks}/<name>/file.
        if segments.count == 5, segments[0] == "outpost", segments[1] == "v1", ["locators", "networks"].contains(segments[2]), segments[4] == "file" {
            guard request.method == .get else { throw ServiceError(405, "\(request.method) is not allowed; use GET") }
            let parameters = try await readParameters(&request)
            try Security.require(.query, of: try security.caller(request, parameters, remote: remote), on: segments[3])
            let file = segments[2] == "locators" ? services.locator(named: segments[3])?.url : services.networkFile(named: segments[3])
            guard let file else {
                throw services.notServed(
                    segments[3], types: [segments[2] == "locators" ? "GeocodeServer" : "NAServer"], described: "\(segments[2] == "locators" ? "locator" : "network") \(segments[3])")
            }
            return try ReplicaRoutes.streamFile(file, contentType: "application/vnd.sqlite3", removeAfter: false, range: request.headers[.range], ifRange: request.headers[.ifRange])
        }
        if segments.count >= 4, segments.starts(with: NativeSyncRoute.servicePrefix) {
            return try await native(&request, Array(segments.dropFirst(3)), remote: remote)
        }
        if segments.count >= 2, segments[0] == "arcgis", segments[1] == "tokens" || segments.count >= 4 && segments[1] == "sharing" && segments[3] == "generateToken" {
            return try await tokens(&request, Array(segments.dropFirst(2)), remote: remote)
        }
        // A portal's token service at the root, where ArcGIS Online has it (geopy asks there).
        if segments == ["sharing", "generateToken"] || segments == ["sharing", "rest", "generateToken"] {
            return try await tokens(&request, ["generateToken"], remote: remote)
        }
        if segments.starts(with: ["arcgis", "sharing", "rest"]) {
            let parameters = try await readParameters(&request)
            _ = try parameters.format()
            let caller = try security.caller(request, parameters, remote: remote, anonymousAllowed: true)
            let routes = PortalRoutes(
                security: security, caller: caller, publicBase: PublicURL(request, configuration: configuration).base,
                writing: ResponseWriting(request: request, pretty: (parameters["f"] ?? "").lowercased() == "pjson"))
            guard let answer = try routes.respond(Array(segments.dropFirst(3))) else { throw ServiceError.notFound(request.uri.path) }
            return answer
        }
        if segments == ["arcgis", "rest", "info"] {
            let parameters = try await readParameters(&request)
            _ = try parameters.format()
            var writing = ResponseWriting(request: request, pretty: (parameters["f"] ?? "").lowercased() == "pjson")
            if DirectoryView.wanted(request, parameters) { writing.directory = (DirectoryView(segments: ["info"], query: request.uri.query), .resource) }
            return writing.json(info(request))
        }
        // The Services Directory's own style sheet and script (no token: a page's assets are
        // fetched without it).
        if segments.count == 4, segments[0] == "arcgis", segments[1] == "rest", segments[2] == "static", let asset = DirectoryAssets.named(segments[3]) {
            var response = ResponseWriting(request: request).bytes(ByteBuffer(string: asset.text), contentType: asset.contentType)
            response.headers[.cacheControl] = "public, max-age=3600"
            return response
        }
        if segments.count >= 3, segments[0] == "arcgis", segments[1] == "rest", segments[2] == "maps" {
            return try await mapDefinitions(&request, Array(segments.dropFirst(3)), remote: remote)
        }
        guard segments.count >= 3, segments[0] == "arcgis", segments[1] == "rest", segments[2] == "services" else {
            throw ServiceError.notFound("\(path)")
        }
        guard request.method == .get || request.method == .post else {
            throw ServiceError(405, "\(request.method) is not allowed; use GET or POST")
        }
        let parameters = try await readParameters(&request)
        let rest = Array(segments.dropFirst(3))
        // The catalog answers without a token, listing only what the caller may see (clients
        // such as the ArcGIS API for Python look at it before they sign in).
        let caller = try security.caller(request, parameters, remote: remote, anonymousAllowed: rest.isEmpty)
        if !rest.isEmpty { try Security.require(Self.permission(rest), of: caller, on: rest.first) }
        var writing = ResponseWriting(request: request, pretty: (parameters["f"] ?? "").lowercased() == "pjson")
        // A browser's request: the page is built from the JSON the resource answers.
        let view = DirectoryView.wanted(request, parameters) ? DirectoryView(segments: Array(segments.dropFirst(2)), query: request.uri.query) : nil
        func page(_ page: DirectoryPage) { if let view { writing.directory = (view, page) } }
        if rest.isEmpty {
            _ = try parameters.format()
            page(.catalog)
            return writing.json(catalog(for: caller))
        }
        if rest.count >= 2, rest[1] == "MapServer" {
            let route = Array(rest.dropFirst(2))
            // A geoprocessing service's result map: …/<name>/MapServer/jobs/<job id>[/export].
            if route.count >= 2, route[0] == "jobs", route[1].hasPrefix("j"), let gp = services.geoprocessingService(named: rest[0]) {
                page(.resource)
                let map = GPResultMap(service: gp, parameters: parameters, writing: writing, mapURL: PublicURL(request, configuration: configuration).service(gp.name, "MapServer"))
                return try await map.respond(route[1], Array(route.dropFirst(2)))
            }
            page(route.isEmpty ? .mapServer : .resource)
            let mapServerURL = PublicURL(request, configuration: configuration).service(rest[0], "MapServer")
            if let cache = try await services.tileCache(named: rest[0]) {
                let jobs = MapServerJobs(source: TileCacheSource(cache: cache), services: sync, parameters: parameters, writing: writing, mapServerURL: mapServerURL)
                if let answer = try await jobs.respond(route) { return answer }
                let operations = MapServerOperations(
                    source: .cache(cache, name: rest[0]), parameters: parameters, writing: writing, files: sync.files, mapServerURL: mapServerURL)
                if let answer = try await operations.respond(route) { return answer }
                return try MapServerRoutes(cache: cache, name: rest[0], parameters: parameters, writing: writing, metrics: metrics,
                    layers: route.isEmpty ? try await operations.layers() : []  // the service's description only; not per tile
                ).respond(route)
            }
            // A feature service's layers, drawn as tiles on request (kept on disk per generation).
            guard let backend = services.backend(named: rest[0]) as? SQLiteServiceBackend else {
                // A tile cache's, or a feature service's drawn one.
                throw services.notServed(rest[0], types: ["MapServer", "FeatureServer"], described: "map service \(rest[0])")
            }
            let source = GeodatabaseRenderSource(geodatabase: backend.geodatabase, maxLevel: RenderedMapServerRoutes.maxLevel)
            let jobs = MapServerJobs(source: source, services: sync, parameters: parameters, writing: writing, mapServerURL: mapServerURL)
            if let answer = try await jobs.respond(route) { return answer }
            let operations = MapServerOperations(source: .drawn(backend), parameters: parameters, writing: writing, files: sync.files, mapServerURL: mapServerURL)
            if let answer = try await operations.respond(route) { return answer }
            return try await RenderedMapServerRoutes(
                backend: backend, directory: sync.renderedTiles, parameters: parameters, writing: writing, metrics: metrics,
                layers: route.isEmpty ? try await operations.layers() : []  // the service's description only; not per tile
            ).respond(route)
        }
        if rest.count >= 2, rest[1] == "GPServer" {
            guard let gp = services.geoprocessingService(named: rest[0]) else {
                throw services.notServed(rest[0], types: ["GPServer"], described: "geoprocessing service \(rest[0])")
            }
            let route = Array(rest.dropFirst(2))
            // A browser on execute/submitJob with no inputs gets the task's form; the answer
            // then shows as the operation's result.
            if let view, route.count == 2, ["execute", "submitJob"].contains(route[1]), let task = gp.definition.task(named: route[0]) {
                if task.inputs.allSatisfy({ parameters[$0.name] == nil }) {
                    return writing.html(
                        view.operation(
                            title: "\(route[1] == "execute" ? "Execute" : "Submit Job"): \(task.displayName)", description: task.summary,
                            form: DirectoryForms.geoprocessing(task, operation: route[1]), result: nil))
                }
                writing.directory = (view, .operation(description: route[1] == "execute" ? "The task ran:" : "The job was submitted; follow it at jobs/<jobId>.", form: nil))
            } else {
                page(.resource)
            }
            let publicURL = PublicURL(request, configuration: configuration)
            let resolver = GPLayerResolver(services: services, publicBase: publicURL.base, limit: gp.definition.maximumRecords)
            return try await GPServerRoutes(
                service: gp, resolver: resolver, parameters: parameters, writing: writing, serviceURL: publicURL.service(gp.name, "GPServer"),
                contentType: request.headers[.contentType]
            ).respond(route)
        }
        if rest.count >= 2, rest[1] == "GeocodeServer" {
            guard let locator = services.locator(named: rest[0]) else { throw services.notServed(rest[0], types: ["GeocodeServer"], described: "locator \(rest[0])") }
            page(.resource)
            return try await GeocodeServerRoutes(locator: locator, parameters: parameters, writing: writing).respond(Array(rest.dropFirst(2)))
        }
        if rest.count >= 2, rest[1] == "NAServer" {
            guard let network = services.network(named: rest[0]) else {
                throw services.notServed(rest[0], types: ["NAServer"], described: "network analysis service \(rest[0])")
            }
            // A browser on solve with no stops gets the form; the answer then shows as its result.
            if let view, Array(rest.dropFirst(2)) == [NAServerRoutes.layerName, "solve"] {
                if parameters["stops"] == nil {
                    return writing.html(view.operation(
                        title: "Solve Route: \(rest[0])", description: "Route through the stops on the \(rest[0]) street network.",
                        form: DirectoryForms.solveRoute, result: nil))
                }
                writing.directory = (view, .operation(description: "The route:", form: nil))
            } else {
                page(.resource)
            }
            return try await NAServerRoutes(name: rest[0], network: network, parameters: parameters, writing: writing).respond(Array(rest.dropFirst(2)))
        }
        guard rest.count >= 2, rest[1] == "FeatureServer" else { throw ServiceError.notFound("service \(rest[0])") }
        guard let backend = services.backend(named: rest[0]) else { throw services.notServed(rest[0], types: ["FeatureServer"], described: "service \(rest[0])") }
        let route = Array(rest.dropFirst(2))
        page(Self.directoryPage(route, drawn: backend is SQLiteServiceBackend))
        if let view, route == ["createReplica"], parameters["layers"] == nil {
            return ServiceRoutes(backend: backend, parameters: parameters, writing: writing, request: request, configuration: configuration).operationForm(
                DirectoryForms.createReplica, title: "Create Replica: \(backend.name)",
                description: "Take layers of this service offline as a replica (a JSON file or a GeoPackage).", view: view)
        }
        if let first = route.first, ["createReplica", "synchronizeReplica", "unRegisterReplica", "replicas", "jobs", "replicafiles"].contains(first) {
            guard let syncBackend = backend as? any SyncBackend else { throw ServiceError(400, "service \(backend.name) does not support sync") }
            let replicas = ReplicaRoutes(backend: backend, sync: syncBackend, parameters: parameters, writing: writing, request: request, services: sync)
            switch (route.count, first) {
            case (1, "createReplica"): return try await replicas.createReplica()
            case (1, "synchronizeReplica"): return try await replicas.synchronizeReplica()
            case (1, "unRegisterReplica"): return try await replicas.unregisterReplica()
            case (1, "replicas"): return try await replicas.replicas()
            case (2, "replicas"): return try await replicas.replica(route[1])
            case (2, "jobs"): return try await replicas.job(route[1])
            case (3, "jobs") where route[2] == "status": return try await replicas.job(route[1])
            case (3, "jobs") where route[2] == "cancel": return try await replicas.cancelJob(route[1])
            case (2, "replicafiles"): return try replicas.resultFile(route[1])
            default: throw ServiceError.notFound(path)
            }
        }
        let handler = ServiceRoutes(backend: backend, parameters: parameters, writing: writing, request: request, configuration: configuration, metrics: metrics)
        switch route.count {
        case 0:
            return try await handler.serviceInfo()
        case 1 where route[0] == "layers":
            return try await handler.allLayers()
        case 1:
            return try await handler.layerInfo(try layerID(route[0]))
        case 2 where route[1] == "query":
            if let view { return try await handler.queryPage(try layerID(route[0]), view: view) }
            return try await handler.query(try layerID(route[0]))
        case 2 where route[1] == "applyEdits":
            if let view, ["adds", "updates", "deletes"].allSatisfy({ parameters[$0] == nil }) {
                let layer = try handler.layer(try layerID(route[0]), in: try await backend.schema())
                return handler.operationForm(
                    DirectoryForms.applyEdits, title: "Apply Edits: \(layer.name) (\(layer.id))", description: "Add, update and delete features of this layer in one request.",
                    view: view)
            }
            return try await handler.applyEdits(try layerID(route[0]))
        case 3 where route[2] == "attachments":
            return try await handler.attachments(try layerID(route[0]), try objectID(route[1]))
        case 3 where route[2] == "addAttachment":
            return try await handler.addAttachment(try layerID(route[0]), try objectID(route[1]), body: parameters.rawBody, contentType: request.headers[.contentType])
        case 3 where route[2] == "deleteAttachments":
            return try await handler.deleteAttachments(try layerID(route[0]), try objectID(route[1]))
        case 4 where route[2] == "attachments":
            return try await handler.attachment(try layerID(route[0]), try objectID(route[1]), try objectID(route[3]))
        default:
            throw ServiceError.notFound(path)
        }
    }

    /// The directory page of a FeatureServer route.
    static func directoryPage(_ route: [String], drawn: Bool) -> DirectoryPage {
        switch route.count {
        case 0: return .featureServer(drawn: drawn)
        case 1 where Int(route[0]) != nil: return .layer
        case 1 where route[0] == "createReplica":
            return .operation(description: "The replica was created.", form: nil)
        case 2 where route[1] == "applyEdits":
            return .operation(description: "The edits were applied (see each result).", form: nil)
        default: return .resource
        }
    }

    static func size(_ bytes: Int) -> String {
        bytes >= 1 << 20 ? "\(bytes >> 20) MB" : "\(bytes >> 10) KB"
    }

    /// What a request below `/arcgis/rest/services/` needs: edits need `edit`, replica
    /// operations `sync`, everything else `query`.
    static func permission(_ rest: [String]) -> Permission {
        guard rest.count >= 2, rest[1] == "FeatureServer" else { return .query }
        let route = rest.dropFirst(2)
        if let last = route.last, ["applyEdits", "addAttachment", "deleteAttachments", "updateAttachment"].contains(last) { return .edit }
        if let first = route.first, ["createReplica", "synchronizeReplica", "unRegisterReplica", "replicas", "jobs", "replicafiles"].contains(first) {
            return .sync
        }
        return .query
    }

    /// `/outpost/v1/services/{service}/…`: the native sync API.
    private func native(_ request: inout Request, _ rest: [String], remote: SocketAddress?) async throws -> Response {
        guard let backend = services.backend(named: rest[0]) else { throw services.notServed(rest[0], types: ["FeatureServer"], described: "service \(rest[0])") }
        guard let syncBackend = backend as? any SyncBackend else { throw ServiceError(400, "service \(backend.name) does not support sync") }
        let route = Array(rest.dropFirst())
        // A batch's body is read as it arrives (docs/sync.md, "Framed batches").
        let batchBody = request.method == .put && route.count == 4 && route[0] == "replicas" && route[2] == "batches" ? request.body : nil
        let parameters = try await readParameters(&request, collectingBody: batchBody == nil)
        // Reading a replica's state, feed or checksums reads data (query); changing it is sync.
        let needed: Permission = request.method == .get ? .query : .sync
        let caller = try security.caller(request, parameters, remote: remote)
        try Security.require(needed, of: caller, on: backend.name)
        let writing = ResponseWriting(request: request, pretty: (parameters["f"] ?? "").lowercased() == "pjson")
        return try await NativeSyncRoutes(
            sync: syncBackend, parameters: parameters, writing: writing, method: request.method, range: request.headers[.range],
            binaryPages: request.headers[.accept]?.contains(ChangePage.binaryContentType) == true, metrics: metrics,
            ahead: (checksumsAhead, backend.name), pagesAhead: pagesAhead, batchBody: batchBody.map { ($0, configuration.maxBodyBytes) },
            callerMaySync: caller.permissions(on: backend.name).contains(.sync)
        ).respond(route)
    }

    private func layerID(_ text: String) throws -> Int {
        guard let id = Int(text), id >= 0 else { throw ServiceError.notFound("layer \(text)") }
        return id
    }

    private func objectID(_ text: String) throws -> Int64 {
        guard let id = Int64(text) else { throw ServiceError.notFound("feature \(text)") }
        return id
    }

    /// The services this caller may query.
    private func catalog(for caller: Caller) -> JSONValue {
        let visible = { (name: String) in caller.permissions(on: name).contains(.query) }
        return [
            "currentVersion": ServiceInfo.currentVersion,
            "folders": [],
            "services": .array(
                services.names.filter(visible).map { ["name": .string($0), "type": "FeatureServer"] }
                    + services.mapServiceNames.filter(visible).map { ["name": .string($0), "type": "MapServer"] }
                    + services.geoprocessingNames.filter(visible).map { ["name": .string($0), "type": "GPServer"] }
                    + services.locatorNames.filter(visible).map { ["name": .string($0), "type": "GeocodeServer"] }
                    + services.networkNames.filter(visible).map { ["name": .string($0), "type": "NAServer"] }
                    // Listed, marked: their files could not be opened when the server started.
                    + services.unavailable.filter { $0.type != "map" && visible($0.name) }.map {
                        ["name": .string($0.name), "type": .string($0.type), "status": "unavailable"]
                    }),
        ]
    }

    /// `/arcgis/rest/maps` (the names) and `/arcgis/rest/maps/<name>.json` (a map definition
    /// with its service URLs made absolute for the address the caller used).
    func readParameters(_ request: inout Request, collectingBody: Bool = true) async throws -> RequestParameters {
        var body: ByteBuffer?
        if collectingBody, request.method == .post || request.method == .put {
            do {
                body = try await request.collectBody(upTo: configuration.maxBodyBytes)
            } catch is NIOTooManyBytesError {
                throw ServiceError(413, "the request body is larger than the \(Self.size(configuration.maxBodyBytes)) limit")
            }
        }
        let contentType = request.headers[.contentType]?.lowercased() ?? ""
        var form: String?
        if let body, contentType.hasPrefix("application/x-www-form-urlencoded") || contentType.isEmpty {
            form = body.getString(at: body.readerIndex, length: body.readableBytes)
        }
        var parameters = RequestParameters(query: request.uri.query, formBody: form)
        if contentType.hasPrefix("multipart/form-data") || contentType.hasPrefix("application/json") || contentType.hasPrefix("application/octet-stream")
            || contentType.hasPrefix(UploadBatch.Encoding.binary.contentType)
        {
            parameters.rawBody = body
        }
        // A multipart form's text fields are parameters like a urlencoded form's; its files stay
        // in the raw body (addAttachment reads them there).
        if let body, let boundary = ServiceRoutes.boundary(contentType) {
            parameters.add(fields: try ServiceRoutes.formFields(body, boundary: boundary))
        }
        return parameters
    }
}
