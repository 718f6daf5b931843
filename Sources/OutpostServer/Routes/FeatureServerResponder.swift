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
import OutpostVectorTiles

/// Answers every request through Hummingbird's router: the middleware every request goes
/// through (`ServerMiddleware.swift`: its id, metrics and log line, cache headers, the watch on
/// its client, the ArcGIS error answer and the drain), then one route table per service type
/// (the server's own routes, the catalog, FeatureServer, MapServer, GPServer, GeocodeServer,
/// NAServer, the native sync API), whose routes read the request's parameters and authenticate
/// its caller in middleware of their own.
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
    /// The check of the site directory `/ready` makes.
    let siteProbe = SiteDirectoryProbe()
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
        // Another host's jobs of a site, run again here when their host stops.
        ReplicaRoutes.registerResumption(services: services, sync: sync)
        let tiles = self
        MapServerJobs.registerResumption(source: { try await tiles.tileSource(named: $0) }, sync: sync)
        drain.atEnd { [jobs = sync.jobs] deadline in await jobs.handBack(by: deadline) }
        let router = router()
        chain.router = router
        chain.responder = router.buildResponder()
    }

    /// Lets go of the routes once the server has stopped (no request is in flight): their
    /// handlers hold this responder, which holds them, and the jobs' ways of running again hold
    /// it too, so each server an app started and stopped would otherwise stay in memory with
    /// its services (about 0.5 MB of routes alone).
    func serverStopped() {
        chain.router = nil
        chain.responder = nil
        sync.jobs.close()
    }

    /// Holds the built router (a class: it is made after the responder's other fields).
    private final class Chain: @unchecked Sendable {
        var router: Router<Context>?
        var responder: RouterResponder<Context>?
    }

    /// Every route the server registers, with its method (a 405 refusal included).
    var routes: [(method: String, path: String)] {
        chain.router!.routes.map { ($0.method.rawValue, $0.path.description) }
    }

    /// Every path a handler answers, with the methods it answers (the 405 refusals left out):
    /// what `Schemas/openapi.json` describes. Paths as the router writes them (`{service}`, `**`).
    var answeredRoutes: [(path: String, methods: [String])] {
        routeTables().flatMap { mount, table in
            table.entries.map { entry in
                let segments = (mount.description + "/" + entry.path.description).split(separator: "/")
                return (path: "/" + segments.joined(separator: "/"), methods: entry.methods.map(\.rawValue))
            }
        }
    }

    /// Throws when a route can never be reached because another takes its paths.
    func validateRoutes() throws { try chain.router!.validate() }

    /// The server's router: the middleware every request goes through, outermost first, then
    /// each service type's routes (``RouteTable``), where the request's parameters are read and
    /// its caller authenticated.
    private func router() -> Router<Context> {
        let router = Router(context: Context.self)
        router.add(middleware: RequestIDMiddleware())
        router.add(middleware: RequestMetricsMiddleware(metrics: metrics))
        router.add(middleware: CacheControlMiddleware(secured: security.isEnabled))
        router.add(middleware: ClientDepartureMiddleware())
        router.add(middleware: ArcGISErrorMiddleware())
        router.add(middleware: DrainMiddleware(drain: drain))
        for (path, table) in routeTables() {
            router.addRoutes(table.collection(security: security, bodyLimit: configuration.maxBodyBytes), atPath: path)
        }
        return router
    }

    /// Each service type's routes and where they are mounted.
    private func routeTables() -> [(RouterPath, RouteTable)] {
        let services = "/arcgis/rest/services/:service"
        return [
            ("", serverTable()),
            ("/arcgis/rest/services", catalogTable()),
            (RouterPath("\(services)/FeatureServer"), featureServerTable()),
            (RouterPath("\(services)/MapServer"), mapServerTable()),
            (RouterPath("\(services)/VectorTileServer"), VectorTileServerRoutes.table(service: vectorTileService)),
            (RouterPath("\(services)/GPServer"), GPServerRoutes.table(service: geoprocessingService)),
            (RouterPath("\(services)/GeocodeServer"), GeocodeServerRoutes.table(locator: locator)),
            (RouterPath("\(services)/NAServer"), NAServerRoutes.table(network: network)),
            (RouterPath("/" + NativeSyncRoute.servicePrefix.joined(separator: "/") + "/:service"), NativeSyncRoutes.table(self)),
        ]
    }

    /// Every request, through the middleware to its route.
    public func respond(to request: Request, context: Context) async throws -> Response {
        guard let responder = chain.responder else { throw ServiceError(503, "the server has stopped") }
        return try await responder.respond(to: request, context: context)
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

    /// The server's own routes: health, readiness and metrics; the served locator and network
    /// files; tokens, the portal, `/arcgis/rest/info`, the Services Directory's assets and the
    /// map definitions.
    private func serverTable() -> RouteTable {
        var table = RouteTable()
        let all = RouteTable.allMethods
        table.on("/health", all, access: .open) { [services] call in
            ResponseWriting(request: call.request).json(["status": "ok", "services": .integer(Int64(services.names.count))])
        }
        // Open to load balancers' probes; which service failed, and why, only to an admin (or
        // on a server without tokens).
        table.on("/ready", all, access: .anyone) { call in try await ready(call) }
        // Request counts by route and status describe the server's use: an admin's, unless the
        // operator opened them to a scraper (`--public-metrics`).
        let metricsAccess: RouteAccess = security.isEnabled && !configuration.publicMetrics ? .granted(.admin) : .open
        table.on("/metrics", all, access: metricsAccess) { [metrics] call in
            var response = ResponseWriting(request: call.request).bytes(ByteBuffer(string: metrics.text()), contentType: "text/plain; version=0.0.4; charset=utf-8")
            response.headers[.cacheControl] = "no-store"
            return response
        }
        // A served locator's or network's file, for offline maps.
        for kind in ["locators", "networks"] {
            table.on(RouterPath("/outpost/v1/\(kind)/:service/file"), [.get], access: .granted(.query)) { [services] call in
                let name = try call.service
                let file = kind == "locators" ? services.locator(named: name)?.url : services.networkFile(named: name)
                guard let file else {
                    throw services.notServed(name, types: [kind == "locators" ? "GeocodeServer" : "NAServer"], described: "\(kind == "locators" ? "locator" : "network") \(name)")
                }
                return try ReplicaRoutes.streamFile(
                    file, contentType: "application/vnd.sqlite3", removeAfter: false, range: call.request.headers[.range], ifRange: call.request.headers[.ifRange])
            }
        }
        // Tokens where ArcGIS Server has them, where a portal does, and at the root, where
        // ArcGIS Online has them (geopy asks there).
        for path in ["/arcgis/tokens", "/arcgis/tokens/generateToken", "/arcgis/tokens/tokens", "/arcgis/sharing/rest/generateToken", "/sharing/generateToken", "/sharing/rest/generateToken"] {
            table.on(RouterPath(path), [.get, .post], access: .parameters) { call in try await tokens(call) }
        }
        for path in ["/arcgis/sharing/rest", "/arcgis/sharing/rest/**"] {
            table.on(RouterPath(path), [.get, .post], access: .anyone) { [security, configuration] call in
                _ = try call.parameters.format()
                let routes = PortalRoutes(
                    security: security, caller: call.caller, publicBase: PublicURL(call.request, configuration: configuration).base, writing: call.writing)
                guard let answer = try routes.respond(call.rest) else { throw ServiceError.notFound(call.request.uri.path) }
                return answer
            }
        }
        table.on("/arcgis/rest/info", [.get, .post], access: .parameters) { call in
            _ = try call.parameters.format()
            var writing = call.writing
            if DirectoryView.wanted(call.request, call.parameters) { writing.directory = (DirectoryView(segments: ["info"], query: call.request.uri.query), .resource) }
            return writing.json(info(call.request))
        }
        // The Services Directory's own style sheet and script (no token: a page's assets are
        // fetched without it).
        table.on("/arcgis/rest/static/:asset", [.get, .head], access: .open) { call in
            guard let asset = DirectoryAssets.named(try call.value("asset")) else { throw ServiceError.notFound(call.request.uri.path) }
            var response = ResponseWriting(request: call.request).bytes(ByteBuffer(string: asset.text), contentType: asset.contentType)
            response.headers[.cacheControl] = "public, max-age=3600"
            return response
        }
        // The list of maps answers without a token (listing what the caller may see); a map
        // and its areas need one.
        table.on("/arcgis/rest/maps", [.get], access: .anyone) { call in try mapDefinitions(call, []) }
        table.on("/arcgis/rest/maps/**", [.get], access: .signedIn) { call in try mapDefinitions(call, call.rest) }
        return table
    }

    /// `/ready`: 503 while draining, or while a service's store, a site's job store or its
    /// site directory does not answer; `degraded` when some services' files did not open.
    private func ready(_ call: RoutedRequest) async throws -> Response {
        let request = call.request
        // A draining server takes no new work: a load balancer sends it elsewhere.
        if drain.isDraining {
            var response = ResponseWriting(request: request).json(["status": "draining"], status: .serviceUnavailable)
            response.headers[.retryAfter] = "5"
            return response
        }
        let detailed = call.caller.permissions(on: nil).contains(.admin)
        func unavailable(_ what: (key: String, value: String), _ reason: String) -> Response {
            var answer: [String: JSONValue] = ["status": "unavailable"]
            if detailed { (answer[what.key], answer["reason"]) = (.string(what.value), .string(reason)) }
            return ResponseWriting(request: request).json(.object(answer), status: .serviceUnavailable)
        }
        // Ready when every service's store answers (a PostgreSQL server reachable, say).
        for name in services.names {
            guard let backend = services.backend(named: name) else { continue }
            do {
                _ = try await backend.generation()
            } catch {
                return unavailable(("service", name), ServiceError.from(error).message)
            }
        }
        // A host of a site also needs the site's job store and the directory the hosts share:
        // without them it would take jobs and syncs whose results no other host could hand out.
        if let jobs = configuration.jobStore, jobs.isShared {
            do {
                try await jobs.check()
            } catch {
                return unavailable(("check", "job store"), ServiceError.from(error).message)
            }
        }
        if let site = configuration.siteDirectory, let problem = await siteProbe.problem(with: site) {
            return unavailable(("check", "site directory"), problem)
        }
        // Services whose files did not open: the server still serves the others (ready to a
        // load balancer), and says which to an admin.
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

    /// `/arcgis/rest/services`: the catalog, answered without a token (clients such as the
    /// ArcGIS API for Python look at it before they sign in) and listing only what the caller
    /// may see; below it, a service of a type the server does not have.
    private func catalogTable() -> RouteTable {
        var table = RouteTable()
        table.on("", access: .anyone) { call in
            _ = try call.parameters.format()
            var writing = call.writing
            if let view = call.directoryView() { writing.directory = (view, .catalog) }
            return writing.json(catalog(for: call.caller))
        }
        for path: RouterPath in [":service", ":service/**"] {
            table.on(path, access: .granted(.query)) { call in
                // Below a type the server has, a route none of its routes takes.
                if let type = call.rest.first, ["FeatureServer", "MapServer", "VectorTileServer", "GPServer", "GeocodeServer", "NAServer"].contains(type) {
                    throw ServiceError.notFound(call.request.uri.path)
                }
                throw ServiceError.notFound("service \(try call.service)")
            }
        }
        return table
    }

    /// The geoprocessing service the path names; for a browser, the page of the resource.
    @Sendable private func geoprocessingService(_ call: RoutedRequest) throws -> GPServerRoutes {
        let name = try call.service
        guard let gp = services.geoprocessingService(named: name) else { throw services.notServed(name, types: ["GPServer"], described: "geoprocessing service \(name)") }
        let publicURL = PublicURL(call.request, configuration: configuration)
        return GPServerRoutes(
            service: gp, resolver: GPLayerResolver(services: services, publicBase: publicURL.base, limit: gp.definition.maximumRecords),
            parameters: call.parameters, writing: resourcePage(call), serviceURL: publicURL.service(gp.name, "GPServer"))
    }

    /// The vector tile service the path names: a vector tile file's, else a feature service's
    /// layers made into tiles on request (kept per generation beside the drawn map tiles).
    @Sendable private func vectorTileService(_ call: RoutedRequest) throws -> VectorTileServerRoutes {
        let name = try call.service
        let tiles: any VectorTileService
        if let archive = services.vectorTiles(named: name) {
            tiles = archive
        } else if let backend = services.backend(named: name) as? SQLiteServiceBackend {
            do {
                tiles = try sync.layerVectorTiles(backend)
            } catch let error as VectorTileError {
                // Not a fault of the server's: this service has no vector tiles to give.
                throw ServiceError(404, "service \(backend.name) has no vector tiles: \(error.message)")
            }
        } else {
            throw services.notServed(name, types: ["VectorTileServer", "FeatureServer"], described: "vector tile service \(name)")
        }
        let publicURL = PublicURL(call.request, configuration: configuration)
        // For a browser, the service's page has a preview the page's script draws from the tiles.
        var writing = call.writing
        if let view = call.directoryView() { writing.directory = (view, call.rest.isEmpty ? .mapServer : .resource) }
        return VectorTileServerRoutes(
            tiles: tiles, serviceURL: publicURL.service(tiles.name, "VectorTileServer"), parameters: call.parameters, writing: writing, metrics: metrics)
    }

    /// The locator the path names.
    @Sendable private func locator(_ call: RoutedRequest) throws -> GeocodeServerRoutes {
        let name = try call.service
        guard let locator = services.locator(named: name) else { throw services.notServed(name, types: ["GeocodeServer"], described: "locator \(name)") }
        return GeocodeServerRoutes(locator: locator, parameters: call.parameters, writing: resourcePage(call))
    }

    /// The network the path names.
    @Sendable private func network(_ call: RoutedRequest) throws -> NAServerRoutes {
        let name = try call.service
        guard let network = services.network(named: name) else { throw services.notServed(name, types: ["NAServer"], described: "network analysis service \(name)") }
        return NAServerRoutes(name: name, network: network, parameters: call.parameters, writing: resourcePage(call))
    }

    /// The native sync API's answerer for the service the path names.
    func nativeRoutes(_ call: RoutedRequest, streamedBody: Bool) throws -> NativeSyncRoutes {
        let name = try call.service
        guard let backend = services.backend(named: name) else { throw services.notServed(name, types: ["FeatureServer"], described: "service \(name)") }
        guard let syncBackend = backend as? any SyncBackend else { throw ServiceError(400, "service \(backend.name) does not support sync") }
        let request = call.request
        return NativeSyncRoutes(
            sync: syncBackend, parameters: call.parameters, writing: call.writing, range: request.headers[.range],
            binaryPages: request.headers[.accept]?.contains(ChangePage.binaryContentType) == true,
            storedPages: request.headers[.accept]?.contains(ChangePage.storedContentType) == true, metrics: metrics,
            ahead: (checksumsAhead, backend.name), pagesAhead: pagesAhead, batchBody: streamedBody ? (request.body, configuration.maxBodyBytes) : nil,
            // Only a caller that may sync records what it holds by reading the feed.
            callerMaySync: call.caller.permissions(on: backend.name).contains(.sync))
    }

    /// The request's writer; for a browser, the Services Directory's page of the resource.
    private func resourcePage(_ call: RoutedRequest) -> ResponseWriting {
        var writing = call.writing
        if let view = call.directoryView() { writing.directory = (view, .resource) }
        return writing
    }

    static func size(_ bytes: Int) -> String {
        bytes >= 1 << 20 ? "\(bytes >> 20) MB" : "\(bytes >> 10) KB"
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
                    + services.vectorTileServiceNames.filter(visible).map { ["name": .string($0), "type": "VectorTileServer"] }
                    + services.geoprocessingNames.filter(visible).map { ["name": .string($0), "type": "GPServer"] }
                    + services.locatorNames.filter(visible).map { ["name": .string($0), "type": "GeocodeServer"] }
                    + services.networkNames.filter(visible).map { ["name": .string($0), "type": "NAServer"] }
                    // Listed, marked: their files could not be opened when the server started.
                    + services.unavailable.filter { $0.type != "map" && visible($0.name) }.map {
                        ["name": .string($0.name), "type": .string($0.type), "status": "unavailable"]
                    }),
        ]
    }
}
