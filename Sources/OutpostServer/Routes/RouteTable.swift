import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import OutpostCore
import OutpostProtocol
import OutpostREST

/// Who may call a route, decided by ``AuthenticationMiddleware`` before its handler runs.
enum RouteAccess: Sendable {
    /// Anyone; neither the request's parameters nor a token are read (`/health`, the Services
    /// Directory's style sheet).
    case open
    /// Anyone; the parameters are read, no token is looked at (issuing tokens, `/arcgis/rest/info`).
    case parameters
    /// Anyone; a token, when one came, names the caller (the catalog lists what it may see).
    case anyone
    /// A caller with a valid token on a server with security (a map definition checks the rest).
    case signedIn
    /// A caller granted the permission on the service the path names (`:service`), or on the
    /// server where it names none.
    case granted(Permission)
    /// `query` to read (GET), `sync` to change anything else (the native sync API).
    case readOrSync
}

/// One routed request as its handler sees it: the request, its context (the parameters and the
/// caller the middleware found), and the path's values.
struct RoutedRequest: Sendable {
    let request: Request
    let context: OutpostRequestContext

    /// The query string and form fields (``RequestArgumentsMiddleware``).
    var parameters: RequestParameters { context.arguments }
    /// Who is calling (``AuthenticationMiddleware``); `.anyone` on a server without security.
    var caller: Caller { context.caller }

    /// The path's decoded segments.
    var segments: [String] { context.segments }

    /// A value the route's pattern names (`:service`), percent-decoded.
    func value(_ name: String) throws -> String { try context.parameters.decoded(name) }

    /// The service the path names.
    var service: String { get throws { try value("service") } }

    /// The path below the pattern's `**`, decoded.
    var rest: [String] {
        context.parameters.getCatchAll().map { $0.removingPercentEncoding ?? String($0) }
    }

    /// Writes answers: gzip when accepted, indented for `f=pjson`.
    var writing: ResponseWriting { ResponseWriting(request: request, pretty: (parameters["f"] ?? "").lowercased() == "pjson") }

    /// The Services Directory's view of this request, when a browser asked for the page.
    func directoryView(dropping prefix: Int = 2) -> DirectoryView? {
        DirectoryView.wanted(request, parameters) ? DirectoryView(segments: Array(segments.dropFirst(prefix)), query: request.uri.query) : nil
    }
}

/// One service type's routes: each path with the methods it answers, who may call it, and its
/// handler. ``collection(security:bodyLimit:)`` makes the Hummingbird ``RouteCollection`` the
/// server's router takes: a method a path does not answer is a 405 (the router alone would say
/// 404), and in front of every handler the request's parameters are read and its caller
/// authenticated (``RequestArgumentsMiddleware``, ``AuthenticationMiddleware``).
struct RouteTable {
    typealias Handler = @Sendable (RoutedRequest) async throws -> Response

    struct Entry {
        let path: RouterPath
        let methods: [HTTPRequest.Method]
        let access: RouteAccess
        /// The handler reads the body as it arrives (a native batch): it is not collected first.
        let streamsBody: Bool
        let handler: Handler
    }

    private(set) var entries: [Entry] = []
    /// The message of the 405 for a method a path does not answer (its `Allow` header lists the
    /// methods the path answers).
    var refusal: @Sendable (HTTPRequest.Method, _ allowed: [HTTPRequest.Method], _ pattern: String) -> String = { method, allowed, _ in
        "\(method) is not allowed; use \(allowed.map(\.rawValue).joined(separator: " or "))"
    }

    /// Every method a route may be asked with.
    static let allMethods: [HTTPRequest.Method] = [.get, .post, .put, .delete, .patch, .head, .options, .trace]

    /// Adds `path` (relative to where the table is mounted; `""` for the mount point itself),
    /// answering `methods` with `handler` for callers `access` lets through.
    mutating func on(
        _ path: RouterPath, _ methods: [HTTPRequest.Method] = [.get, .post], access: RouteAccess, streamsBody: Bool = false, handler: @escaping Handler
    ) {
        entries.append(Entry(path: path, methods: methods, access: access, streamsBody: streamsBody, handler: handler))
    }

    /// Adds `path`, for callers who may query the service the path names, answered by a value
    /// `make` builds for the request (it finds the service, or refuses the name) once `f` is
    /// known to be one the server writes.
    mutating func on<Answerer>(
        _ path: RouterPath, by make: @escaping @Sendable (RoutedRequest) throws -> Answerer,
        _ answer: @escaping @Sendable (Answerer, RoutedRequest) async throws -> Response
    ) {
        on(path, access: .granted(.query)) { call in
            let answerer = try make(call)
            _ = try call.parameters.format()
            return try await answer(answerer, call)
        }
    }

    /// The routes as a collection: first each path's refusals (nothing is read for them), then
    /// each handler behind its middleware.
    func collection(security: Security, bodyLimit: Int) -> RouteCollection<OutpostRequestContext> {
        let collection = RouteCollection(context: OutpostRequestContext.self)
        var answered: [String: (path: RouterPath, methods: [HTTPRequest.Method])] = [:]
        var order: [String] = []
        for entry in entries {
            let key = entry.path.description
            if answered[key] == nil { order.append(key) }
            answered[key, default: (entry.path, [])].methods += entry.methods
        }
        for key in order {
            let (path, methods) = answered[key]!
            for method in Self.allMethods where !methods.contains(method) {
                let failure = ServiceError.methodNotAllowed(refusal(method, methods, key), allowed: methods.map(\.rawValue))
                collection.on(path, method: method) { _, _ -> Response in throw failure }
            }
        }
        for entry in entries {
            let group = collection.group()
            if case .open = entry.access {} else {
                group.add(middleware: RequestArgumentsMiddleware(limit: bodyLimit, collectsBody: !entry.streamsBody))
            }
            group.add(middleware: AuthenticationMiddleware(security: security, access: entry.access))
            let handler = entry.handler
            for method in entry.methods {
                group.on(entry.path, method: method) { request, context in try await handler(RoutedRequest(request: request, context: context)) }
            }
        }
        return collection
    }
}

/// Reads the request's parameters (the query string merged with a form-encoded or multipart body;
/// a JSON, binary or multipart body is kept raw for its route) into the context. The body is
/// collected up to the server's limit (413 past it) unless the route streams it.
struct RequestArgumentsMiddleware: RouterMiddleware {
    typealias Context = OutpostRequestContext
    let limit: Int
    let collectsBody: Bool

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var request = request, context = context
        context.arguments = try await Self.read(&request, limit: limit, collectingBody: collectsBody)
        return try await next(request, context)
    }

    static func read(_ request: inout Request, limit: Int, collectingBody: Bool) async throws -> RequestParameters {
        var body: ByteBuffer?
        if collectingBody, request.method == .post || request.method == .put {
            do {
                body = try await request.collectBody(upTo: limit)
            } catch is NIOTooManyBytesError {
                throw ServiceError(413, "the request body is larger than the \(FeatureServerResponder.size(limit)) limit")
            }
        }
        // Lowercased for matching the type; a multipart boundary is read from the header as sent
        // (boundaries are case-sensitive).
        let contentType = request.headers[.contentType]?.lowercased() ?? ""
        var form: String?
        if let body, contentType.hasPrefix("application/x-www-form-urlencoded") || contentType.isEmpty {
            form = body.getString(at: body.readerIndex, length: body.readableBytes)
        }
        var parameters = RequestParameters(query: request.uri.query, formBody: form)
        if contentType.hasPrefix("application/json") || contentType.hasPrefix("application/octet-stream")
            || contentType.hasPrefix(UploadBatch.Encoding.binary.contentType)
        {
            parameters.rawBody = body
        }
        // A multipart form's text fields are parameters like a urlencoded form's; the form is
        // kept, read once, for the routes that take its files.
        if let body, let boundary = MultipartForm.boundary(contentType: request.headers[.contentType] ?? "") {
            parameters.add(multipart: try MultipartForm.read(body, boundary: boundary, parameter: "body"))
        }
        return parameters
    }
}

/// Finds who is calling (a token in the query, the form or an `Authorization` header) and
/// refuses a caller the route's ``RouteAccess`` does not let through: 499 without a token, 498
/// for a bad one, 403 without the permission.
struct AuthenticationMiddleware: RouterMiddleware {
    typealias Context = OutpostRequestContext
    let security: Security
    let access: RouteAccess

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        let service = context.parameters.get("service").map { $0.removingPercentEncoding ?? $0 }
        func caller(anonymousAllowed: Bool) async throws -> Caller {
            try await security.caller(request, context.arguments, remote: context.remoteAddress, anonymousAllowed: anonymousAllowed)
        }
        switch access {
        case .open, .parameters: break
        case .anyone: context.caller = try await caller(anonymousAllowed: true)
        case .signedIn: context.caller = try await caller(anonymousAllowed: false)
        case .granted(let permission):
            context.caller = try await caller(anonymousAllowed: false)
            try Security.require(permission, of: context.caller, on: service)
        case .readOrSync:
            context.caller = try await caller(anonymousAllowed: false)
            try Security.require(request.method == .get ? .query : .sync, of: context.caller, on: service)
        }
        return try await next(request, context)
    }
}

extension Parameters {
    /// A path value, percent-decoded (the router matches the path as it came).
    func decoded(_ name: String) throws -> String {
        let raw = try require(name)
        return raw.removingPercentEncoding ?? raw
    }
}
