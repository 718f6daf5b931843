import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import OutpostCore

// What every request goes through, outermost first (``FeatureServerResponder`` chains them in
// this order in front of its routes): its id, its metrics and log line, its cache headers, the
// watch on its client, the ArcGIS error answer, and the drain.

/// Gives every request an id (and splits its path, once, for everything after it): the client's `X-Request-Id` when it is a plain token of at most 64
/// characters, else a new one; it is in the response and in every log line of the request.
struct RequestIDMiddleware: RouterMiddleware {
    typealias Context = OutpostRequestContext
    static let header = HTTPField.Name("X-Request-Id")!

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let id = request.headers[Self.header].flatMap { $0.count <= 64 && $0.allSatisfy { $0.isLetter || $0.isNumber || "-_.".contains($0) } ? $0 : nil }
            ?? UUID().uuidString.lowercased()
        var context = context
        context.logger[metadataKey: "request_id"] = .string(id)
        context.segments = FeatureServerResponder.segments(request)
        var response = try await next(request, context)
        response.headers[Self.header] = id
        return response
    }
}

/// Counts every request by route kind, method and status, with its duration and the requests in
/// flight (`/metrics`), and logs one line for it: the path, never the query (tokens travel there).
struct RequestMetricsMiddleware: RouterMiddleware {
    typealias Context = OutpostRequestContext
    let metrics: ServerMetrics

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let started = ContinuousClock.now
        let route = ServerMetrics.route(context.segments)
        metrics.inFlight(route: route, +1)
        defer { metrics.inFlight(route: route, -1) }
        let response = try await next(request, context)
        metrics.request(route: route, method: request.method.rawValue, status: Int(response.status.code), duration: ContinuousClock.now - started)
        context.logger.info(
            "request",
            metadata: [
                "method": .string(request.method.rawValue), "path": .string(request.uri.path), "status": .stringConvertible(response.status.code),
                "route": .string(route),
            ])
        return response
    }
}

/// What caches may keep. Answers change with every edit, so clients ask again (`no-cache`)
/// unless a route said otherwise (tiles, the directory's assets). On a server with tokens
/// nothing is stored (`private, no-store`): a client's disk cache (QGIS keeps one) must not hand
/// a token holder's answer to a later request without the token; tiles may stay in the client's
/// own cache only.
struct CacheControlMiddleware: RouterMiddleware {
    typealias Context = OutpostRequestContext
    let secured: Bool

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var response = try await next(request, context)
        let given = response.headers[.cacheControl]
        if secured, !context.segments.starts(with: ["arcgis", "rest", "static"]) {
            response.headers[.cacheControl] = given.map { $0.replacingOccurrences(of: "public", with: "private") } ?? "private, no-store"
        } else if given == nil {
            response.headers[.cacheControl] = "no-cache"
        }
        return response
    }
}

/// Lets long work stop when the request's client leaves (see ``ClientDeparture``).
struct ClientDepartureMiddleware: RouterMiddleware {
    typealias Context = OutpostRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        try await ClientDeparture.$channel.withValue(context.channel) { try await next(request, context) }
    }
}

/// Answers a failed request the ArcGIS way: the error JSON (`{"error": {"code", "message",
/// "details"}}`) with the status ``ServiceError/from(_:)`` gives, or the Services Directory's
/// error page for a browser under `/arcgis/rest`; a path no route serves is a 404 of that shape.
/// Server faults (5xx) are logged.
struct ArcGISErrorMiddleware: RouterMiddleware {
    typealias Context = OutpostRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch {
            let failure: ServiceError
            if let miss = error as? HTTPError, miss.status == .notFound {
                failure = .notFound(request.uri.path)
            } else {
                failure = ServiceError.from(error)
            }
            if failure.status >= 500 { context.logger.error("\(request.method) \(request.uri.path): \(error)") }
            let f = request.uri.queryParameters["f"].map { $0.lowercased() }
            let writing = ResponseWriting(request: request, pretty: f == "pjson")
            let segments = context.segments
            let status = HTTPResponse.Status(code: failure.status, reasonPhrase: "")
            var response: Response
            if f == "html" || f == nil && request.headers[.accept]?.lowercased().contains("text/html") == true, segments.starts(with: ["arcgis", "rest"]) {
                let view = DirectoryView(segments: Array(segments.dropFirst(2)), query: request.uri.query)
                response = writing.html(view.error(failure), status: status)
            } else {
                response = writing.json(FeatureServerResponder.errorJSON(failure), status: status)
            }
            if !failure.allowedMethods.isEmpty { response.headers[.allow] = failure.allowedMethods.joined(separator: ", ") }
            return response
        }
    }
}

/// Once the server drains, refuses new work with 503 and `Retry-After` (see ``DrainState``).
struct DrainMiddleware: RouterMiddleware {
    typealias Context = OutpostRequestContext
    let drain: DrainState

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard FeatureServerResponder.admittedByDrain(context.segments, method: request.method, drain: drain) else {
            var response = ResponseWriting(request: request).json(
                FeatureServerResponder.errorJSON(ServiceError(503, "the server is shutting down; try again")), status: .serviceUnavailable)
            response.headers[.retryAfter] = "5"
            return response
        }
        return try await next(request, context)
    }
}
