import OutpostCore
import OutpostGeoprocessing
import OutpostProtocol
import OutpostStorage
import OutpostSyncService

/// A failed request as the client sees it: an HTTP status and the ArcGIS error JSON
/// `{"error": {"code": <status>, "message": …, "details": […]}}`.
public struct ServiceError: Error, Sendable, CustomStringConvertible {
    /// The HTTP status.
    public var status: Int
    /// The error JSON's `code` when it is not the HTTP status: ArcGIS's 498 (invalid token) and
    /// 499 (token required), which clients look for in the body.
    public var code: Int?
    /// What went wrong, for the client.
    public var message: String
    /// More lines about it (may be empty).
    public var details: [String]
    /// For a 405, the methods the path answers: the answer's `Allow` header (RFC 9110).
    public var allowedMethods: [String] = []

    /// An error of this status and message.
    public init(_ status: Int, _ message: String, code: Int? = nil, details: [String] = []) {
        self.status = status
        self.code = code
        self.message = message
        self.details = details
    }

    public var description: String { "HTTP \(status): \(message)" }

    /// The ArcGIS error JSON of the error.
    public var body: ArcGISErrorBody { ArcGISErrorBody(code: code ?? status, message: message, details: details) }

    /// 405 with the methods the path answers (its `Allow` header).
    public static func methodNotAllowed(_ message: String, allowed: [String]) -> ServiceError {
        var error = ServiceError(405, message)
        error.allowedMethods = allowed
        return error
    }

    /// 404: `what` is not there.
    public static func notFound(_ what: String) -> ServiceError { ServiceError(404, "\(what) not found") }

    /// 400 naming the parameter, as docs/cli.md promises.
    public static func badParameter(_ name: String, _ reason: String) -> ServiceError {
        ServiceError(400, "Invalid or missing input parameter '\(name)': \(reason)", details: ["'\(name)' parameter is invalid"])
    }

    /// A refused batch: 409 for the sequence (with `expectedSeq: N` in the details, which clients
    /// read), 400 for what the replica may not upload.
    init(refusal: BatchRefusal) {
        if let expected = refusal.expectedSeq {
            self.init(409, refusal.description, details: ["expectedSeq: \(expected)"])
        } else {
            self.init(400, refusal.description)
        }
    }

    /// A store's or the sync service's failure as HTTP: its code chooses the status.
    init(_ failure: SyncServiceError) {
        switch failure.code {
        case .invalidParameter: self = .badParameter(failure.parameter ?? "request", failure.message)
        case .invalidRequest: self.init(400, failure.message, details: failure.details)
        case .notFound: self.init(404, failure.message, details: failure.details)
        case .conflict: self.init(409, failure.message, details: failure.details)
        case .contentMismatch: self.init(422, failure.message, details: failure.details)
        case .unavailable: self.init(503, failure.message, details: failure.details)
        case .failed: self.init(500, failure.message, details: failure.details)
        }
    }

    /// Maps storage failures to HTTP: what the request got wrong is a 4xx; the rest is a 500 with
    /// no internals in the message.
    static func from(_ error: any Error, parameter: String? = nil) -> ServiceError {
        if let e = error as? ServiceError { return e }
        if let e = error as? SyncServiceError { return ServiceError(e) }
        if let e = error as? BatchRefusal { return ServiceError(refusal: e) }
        if let e = error as? StorageError {
            switch e.code {
            case .invalidWhereClause: return .badParameter(parameter ?? "where", e.message)
            case .invalidQuery: return .badParameter(parameter ?? (e.field ?? "query"), e.message)
            case .invalidEdit: return ServiceError(400, e.description)
            case .notFound: return ServiceError(404, e.description)
            case .readOnly: return ServiceError(403, "the service is read-only")
            default: return ServiceError(500, "the service could not complete the request (\(e.code))")
            }
        }
        if let e = error as? GeometryError { return .badParameter(parameter ?? "geometry", e.message) }
        if let e = error as? GPValueError { return e.parameter.map { .badParameter($0, e.reason) } ?? ServiceError(400, e.reason) }
        if error is CancellationError { return ServiceError(499, "the request was cancelled") }
        return ServiceError(500, "the service could not complete the request")
    }
}
